"""Deployment instances: hardware, fabric, model, parallelism and workload, from TOML files.

An instance file (format ``ocs-synth/instance``, version 1) has the tables ``[hardware]``, ``[fabric]``,
``[model]``, ``[parallelism]`` and ``[workload]``; ``preset = "..."`` in ``[hardware]`` or ``[model]`` fills
that table from :mod:`synth.presets` and the other keys override it. Every rule is checked here, once, and
errors name the file and the dotted field.
"""
from __future__ import annotations

import math
import os
import tomllib
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

import numpy as np

from . import presets
from .errors import InvalidInput, InvalidInstance, unknown_key_message
from .model import MAX_ACCELERATORS, Accelerator, FibreFit, OCSLayout
from .schema import field_names, from_mapping, spec, to_mapping, validate

FORMAT = "ocs-synth/instance"
VERSION = 1
FABRIC_KINDS = ("ocs", "eps", "torus3d", "fullmesh3d", "scaleup", "scaleout", "hybrid")
FIBRE_PLANS = ("spread", "fit")


@dataclass(frozen=True)
class ModelSpec:
    """A transformer (dense or MoE) as decode sees it. Byte widths: weights, KV cache, activations at
    TP all-reduce, EP dispatch (FP8 by default) and EP combine (BF16 by default)."""

    layers: int = spec(ge=1)
    hidden: int = spec(ge=1)
    heads: int = spec(ge=1, doc="query heads")
    name: str = spec("custom")
    dense_layers: int = spec(0, ge=0, doc="the first layers use a dense FFN")
    dense_ffn: int = spec(0, ge=0, doc="intermediate size of the dense FFN (SwiGLU)")
    experts: int = spec(0, ge=0, doc="routed experts per MoE layer (0 = dense model)")
    shared_experts: int = spec(0, ge=0)
    top_k: int = spec(0, ge=0)
    expert_ffn: int = spec(0, ge=0)
    attention: str = spec("gqa", choices=("mla", "gqa"))
    kv_heads: int = spec(0, ge=0, doc="GQA key/value heads")
    head_dim: int = spec(128, ge=1, doc="GQA head dimension")
    q_lora: int = spec(0, ge=0, doc="MLA query low-rank dimension (0 = full-rank query)")
    kv_lora: int = spec(0, ge=0, doc="MLA compressed KV dimension")
    rope_dim: int = spec(0, ge=0, doc="MLA decoupled RoPE key dimension")
    qk_nope_dim: int = spec(128, ge=1)
    v_head_dim: int = spec(128, ge=1)
    vocab: int = spec(0, ge=0)
    weight_bytes: float = spec(2.0, gt=0)
    kv_bytes: float = spec(2.0, gt=0)
    activation_bytes: float = spec(2.0, gt=0, doc="bytes per value in TP all-reduce and P2P")
    dispatch_bytes: float = spec(1.0, gt=0, doc="bytes per value in EP dispatch (FP8)")
    combine_bytes: float = spec(2.0, gt=0, doc="bytes per value in EP combine (BF16)")
    max_context_tokens: int = spec(131072, ge=1)

    def __post_init__(self) -> None:
        validate(self)
        if self.dense_layers > self.layers:
            raise InvalidInput(f"{self.dense_layers} exceeds layers ({self.layers})", field="dense_layers")
        if self.dense_layers > 0 and self.dense_ffn == 0:
            raise InvalidInput("must be > 0 when there are dense layers", field="dense_ffn")
        if self.moe_layers > 0:
            if self.experts == 0:
                raise InvalidInput("must be > 0 when some layers are MoE (dense_layers < layers)",
                                   field="experts")
            if not 1 <= self.top_k <= self.experts:
                raise InvalidInput(f"must be in 1..experts ({self.experts}), got {self.top_k}", field="top_k")
            if self.expert_ffn == 0:
                raise InvalidInput("must be > 0 for an MoE model", field="expert_ffn")
        if self.attention == "mla" and self.kv_lora == 0:
            raise InvalidInput("MLA attention needs kv_lora > 0", field="kv_lora")
        if self.attention == "gqa":
            if self.kv_heads == 0:
                raise InvalidInput("GQA attention needs kv_heads > 0", field="kv_heads")
            if self.heads % self.kv_heads:
                raise InvalidInput(f"heads ({self.heads}) must be a multiple of kv_heads", field="kv_heads")

    # ---- derived sizes -------------------------------------------------------------------------
    @property
    def moe_layers(self) -> int:
        return self.layers - self.dense_layers

    @property
    def kv_values_per_token_layer(self) -> int:
        """KV-cache values per token per layer: MLA kv_lora + rope_dim; GQA 2 * kv_heads * head_dim."""
        if self.attention == "mla":
            return self.kv_lora + self.rope_dim
        return 2 * self.kv_heads * self.head_dim

    @property
    def kv_bytes_per_token(self) -> float:
        """KV-cache bytes of one token over all layers."""
        return self.layers * self.kv_values_per_token_layer * self.kv_bytes

    @property
    def attention_out_values(self) -> int:
        """Values of one token's attention output before the output projection (heads x v dim)."""
        return self.heads * (self.v_head_dim if self.attention == "mla" else self.head_dim)

    @property
    def attention_params(self) -> int:
        """Weights of one attention layer (projections)."""
        h = self.hidden
        if self.attention == "mla":
            qk = self.qk_nope_dim + self.rope_dim
            q = h * self.heads * qk if self.q_lora == 0 else h * self.q_lora + self.q_lora * self.heads * qk
            kv = h * (self.kv_lora + self.rope_dim) + self.kv_lora * self.heads * (self.qk_nope_dim + self.v_head_dim)
            return q + kv + self.heads * self.v_head_dim * h
        return h * self.heads * self.head_dim * 2 + 2 * h * self.kv_heads * self.head_dim

    @property
    def expert_params(self) -> int:
        return 3 * self.hidden * self.expert_ffn

    @property
    def dense_ffn_params(self) -> int:
        return 3 * self.hidden * self.dense_ffn

    @property
    def embedding_params(self) -> int:
        return 2 * self.vocab * self.hidden

    @property
    def total_params(self) -> int:
        moe = self.moe_layers * ((self.experts + self.shared_experts) * self.expert_params
                                 + self.hidden * self.experts)
        return self.layers * self.attention_params + self.dense_layers * self.dense_ffn_params + moe + \
            self.embedding_params

    @property
    def active_params(self) -> int:
        moe = self.moe_layers * ((self.top_k + self.shared_experts) * self.expert_params + self.hidden * self.experts)
        return self.layers * self.attention_params + self.dense_layers * self.dense_ffn_params + moe + \
            self.embedding_params


@dataclass(frozen=True)
class FabricSpec:
    """How the accelerators' ports are joined. For OCS: `switches` (default: one per port index) and
    `switch_radix` (default: the accelerator count); port k goes to switch k mod `switches`, unless
    `switch_of_port` (accelerators x ports, -1 = not on an OCS) says otherwise. A switch (plane) with more
    fibres than `switch_radix` is split over several OCSes by `fibre_plan`: "spread" fixes the plan before
    the wiring (`OCSLayout.planes`); "fit" wires the whole planes and cables each onto its OCSes after
    (`OCSLayout.fitted_planes`, `solvers.fibre_plan`)."""

    kind: str = spec("ocs", choices=FABRIC_KINDS)
    switches: int | None = spec(None, ge=1)
    switch_radix: int | None = spec(None, ge=2)
    switch_of_port: tuple[tuple[int, ...], ...] | None = spec(None)
    ocs_ports: int | None = spec(None, ge=0, doc="hybrid: ports per accelerator on OCS, the rest on EPS")
    fibre_plan: str = spec("spread", choices=FIBRE_PLANS,
                           doc="where a plane outgrows switch_radix: spread (a fixed plan, every OCS reaching "
                               "many accelerators) or fit (the plan chosen for the wiring)")

    def __post_init__(self) -> None:
        validate(self)


DEFAULT_KVP_THRESHOLDS = ((131072, 1), (1048576, 8), (5242880, 72))


@dataclass(frozen=True)
class ParallelismSpec:
    """Parallel degrees (per decode stage) and the placement of ranks on accelerators.

    Decode ranks are ordered (pipeline stage, attention-DP replica, KV-parallel shard, TP rank); EP groups
    are consecutive runs of `ep` ranks of a stage. `placement` maps rank r to accelerator: "contiguous"
    (r -> r), "strided" (round-robin over the 18-port-style racks of `tp`), "random" (seeded), or an
    explicit list."""

    tp: int = spec(1, ge=1, doc="tensor parallelism of attention and dense FFN")
    pp: int = spec(1, ge=1, doc="pipeline stages")
    ep: int = spec(1, ge=1, doc="expert parallelism of MoE layers")
    kvp: int | str = spec("auto", doc='KV parallelism, or "auto" from kvp_thresholds and the context')
    kvp_thresholds: tuple[tuple[int, int], ...] = spec(DEFAULT_KVP_THRESHOLDS)
    placement: str | tuple[int, ...] = spec("contiguous")
    allreduce_algorithm: str = spec("direct", choices=("direct", "ring"),
                                    doc="TP all-reduce demand pattern: direct RS+AG, or ring")
    dispatch_dedup: bool = spec(True, doc="send a token once to an EP rank that holds several of its experts")
    redundant_experts: int = spec(0, ge=0, doc="extra replicas of the hottest experts (EPLB), splitting their load")
    prefill_accelerators: int = spec(0, ge=0, doc="P/D disaggregation: accelerators 0..P-1 run prefill")
    prefill_group: int = spec(8, ge=1, doc="accelerators of one prefill instance")

    def __post_init__(self) -> None:
        validate(self)
        if isinstance(self.kvp, str) and self.kvp != "auto":
            raise InvalidInput(f'must be an integer >= 1 or "auto", got {self.kvp!r}', field="kvp")
        if isinstance(self.kvp, int) and self.kvp < 1:
            raise InvalidInput(f"must be >= 1, got {self.kvp}", field="kvp")
        if isinstance(self.placement, str) and self.placement not in ("contiguous", "strided", "random"):
            raise InvalidInput('must be "contiguous", "strided", "random" or a list of accelerators, got '
                               f"{self.placement!r}", field="placement")
        last = 0
        for i, (tokens, k) in enumerate(self.kvp_thresholds):
            if tokens <= last or k < 1:
                raise InvalidInput("must list (max_tokens, kvp) with increasing max_tokens and kvp >= 1",
                                   field=f"kvp_thresholds[{i}]")
            last = tokens


@dataclass(frozen=True)
class WorkloadSpec:
    """One decode step: one token per sequence at `context_tokens` of context."""

    context_tokens: int = spec(131072, ge=1)
    context_sweep: tuple[int, ...] = spec((), ge=1, doc="contexts that sweeps and benchmarks visit")
    batch_per_accelerator: int | str = spec("auto", doc='sequences per accelerator, or "auto" (fill HBM)')
    hbm_reserve_fraction: float = spec(0.1, ge=0, lt=1, doc="HBM kept free of weights and KV")
    expert_routing: str = spec("uniform", choices=("uniform", "zipf", "explicit"))
    zipf_s: float = spec(1.0, ge=0, doc="Zipf exponent of expert popularity")
    expert_load: tuple[float, ...] = spec((), ge=0, doc="explicit relative load of each routed expert")
    seed: int = spec(0, ge=0, doc="seed of every random choice (hot-expert order, random placement)")
    prompt_tokens: int = spec(0, ge=0, doc="P/D: prompt length whose KV moves to decode (0 = context)")
    output_tokens: int = spec(1024, ge=1, doc="P/D: tokens generated per request")
    dual_batch_overlap: bool = spec(False, doc="overlap communication of one micro-batch with compute of another")

    def __post_init__(self) -> None:
        validate(self)
        if isinstance(self.batch_per_accelerator, str) and self.batch_per_accelerator != "auto":
            raise InvalidInput(f'must be an integer >= 1 or "auto", got {self.batch_per_accelerator!r}',
                               field="batch_per_accelerator")
        if isinstance(self.batch_per_accelerator, int) and self.batch_per_accelerator < 1:
            raise InvalidInput(f"must be >= 1, got {self.batch_per_accelerator}", field="batch_per_accelerator")


@dataclass(frozen=True)
class CostSpec:
    """Prices, power and latencies of network parts and of operation (PARAMETERS.md; marked ranges are
    assumptions to sweep). Optics prices and power are quoted per 800G port and scale linearly with the
    port rate. Network parts draw the same power idle or busy; accelerators draw `power_w` while computing
    and `idle_power_w` (default 30% of `power_w`) while waiting."""

    lifetime_years: float = spec(4.0, gt=0, doc="amortization period of all hardware")
    usd_per_kwh: float = spec(0.10, ge=0)
    pue: float = spec(1.2, ge=1, doc="facility power / IT power")
    optics_usd_per_800g: float = spec(1000.0, ge=0, doc="pluggable 800G module: $0.7k-1.4k")
    optics_w_per_800g: float = spec(17.0, ge=0, doc="800G pluggable: 16-18 W")
    fiber_usd_per_link: float = spec(50.0, ge=0)
    eps_switch_ports: int = spec(64, ge=2, doc="800G ports of one packet switch (51.2T class)")
    eps_switch_usd: float = spec(200000.0, ge=0, doc="64 x 800G switch: $150k-250k")
    eps_switch_w: float = spec(500.0, ge=0, doc="51.2T switch: ~450-500 W")
    eps_switch_latency_us: float = spec(0.3, ge=0, doc="port to port: ~150-330 ns")
    ocs_usd_per_port: float = spec(750.0, ge=0, doc="assumption: ~$100k per 136-port MEMS OCS")
    ocs_w_per_port: float = spec(0.3, ge=0, doc="a few tens of W per 136-port switch")
    ocs_latency_us: float = spec(0.0, ge=0, doc="passive optical path: no switching delay")
    scaleup_usd_per_port: float = spec(700.0, ge=0, doc="assumption: NVLink-switch port incl. tray share")
    scaleup_w_per_port: float = spec(4.0, ge=0, doc="assumption")
    scaleup_latency_us: float = spec(0.25, ge=0)
    scaleout_nic_gbps: float = spec(800.0, gt=0, doc="scale-out NIC bandwidth per accelerator, per direction")
    scaleout_nic_usd: float = spec(1500.0, ge=0)
    scaleout_nic_w: float = spec(25.0, ge=0)
    scaleout_latency_us: float = spec(1.5, ge=0, doc="NIC and host stack, per message")
    torus_dims: tuple[int, ...] = spec((), ge=1, doc="3D torus / full-mesh dimensions (default: near-cubic)")

    def __post_init__(self) -> None:
        validate(self)
        if self.torus_dims and len(self.torus_dims) != 3:
            raise InvalidInput("must list 3 dimensions", field="torus_dims")


@dataclass(frozen=True, eq=False)
class Instance:
    """A deployment: `accelerators` copies of `hardware`, joined by `fabric`, serving `model`."""

    accelerators: int
    hardware: Accelerator
    model: ModelSpec
    fabric: FabricSpec = field(default_factory=FabricSpec)
    parallelism: ParallelismSpec = field(default_factory=ParallelismSpec)
    workload: WorkloadSpec = field(default_factory=WorkloadSpec)
    costs: CostSpec = field(default_factory=CostSpec)
    name: str = ""
    description: str = ""
    source: str = ""
    path: str | None = None

    def __post_init__(self) -> None:
        n, par, mdl, wl = self.accelerators, self.parallelism, self.model, self.workload
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InvalidInstance(f"must be an integer >= 1, got {n!r}", field="hardware.accelerators")
        if n > MAX_ACCELERATORS:
            raise InvalidInstance(f"{n} is more than the {MAX_ACCELERATORS} an instance may have (its traffic "
                                  "matrices are dense)", field="hardware.accelerators")
        if par.prefill_accelerators >= n:
            raise InvalidInstance(f"{par.prefill_accelerators} leaves no decode accelerators out of {n}",
                                  field="parallelism.prefill_accelerators")
        if par.prefill_accelerators % par.prefill_group:
            raise InvalidInstance(f"{par.prefill_accelerators} is not a multiple of prefill_group "
                                  f"({par.prefill_group})", field="parallelism.prefill_accelerators")
        decode = n - par.prefill_accelerators
        if decode % par.pp:
            raise InvalidInstance(f"pp = {par.pp} does not divide the {decode} decode accelerators",
                                  field="parallelism.pp")
        if par.pp > mdl.layers:
            raise InvalidInstance(f"pp = {par.pp} exceeds the model's {mdl.layers} layers", field="parallelism.pp")
        stage = decode // par.pp
        if wl.context_tokens > mdl.max_context_tokens:
            raise InvalidInstance(f"{wl.context_tokens} tokens exceed the model's limit of "
                                  f"{mdl.max_context_tokens}", field="workload.context_tokens")
        if stage % par.tp:         # named here, not on the first context whose kvp it would also fail
            raise InvalidInstance(f"tp = {par.tp} does not divide the {stage} accelerators of a decode stage",
                                  field="parallelism.tp")
        self._check_kvp(self.kvp, stage, "parallelism.kvp")
        for i, c in enumerate(wl.context_sweep):
            if c > mdl.max_context_tokens:
                raise InvalidInstance(f"{c} tokens exceed the model's limit of {mdl.max_context_tokens}",
                                      field=f"workload.context_sweep[{i}]")
            self._check_kvp(self.kvp_for(c), stage, f"workload.context_sweep[{i}]")
        if mdl.moe_layers:
            slots = mdl.experts + par.redundant_experts
            if par.ep > mdl.experts:
                raise InvalidInstance(f"ep = {par.ep} exceeds the {mdl.experts} experts", field="parallelism.ep")
            if par.redundant_experts > mdl.experts:
                raise InvalidInstance(f"{par.redundant_experts} exceeds the {mdl.experts} experts",
                                      field="parallelism.redundant_experts")
            if slots % par.ep:
                raise InvalidInstance(f"ep = {par.ep} does not divide the {mdl.experts} experts + "
                                      f"{par.redundant_experts} redundant (set parallelism.redundant_experts)",
                                      field="parallelism.ep")
            if stage % par.ep:
                raise InvalidInstance(f"ep = {par.ep} does not divide the {stage} accelerators of a stage",
                                      field="parallelism.ep")
        elif par.ep != 1 or par.redundant_experts:
            raise InvalidInstance("a dense model has no experts to parallelize (set ep = 1)",
                                  field="parallelism.ep")
        if isinstance(par.placement, tuple):
            if len(par.placement) != n:
                raise InvalidInstance(f"lists {len(par.placement)} accelerators, the instance has {n}",
                                      field="parallelism.placement")
            seen: dict[int, int] = {}
            for i, a in enumerate(par.placement):
                if not 0 <= a < n:
                    raise InvalidInstance(f"accelerator {a} is outside 0..{n - 1}", field=f"parallelism.placement[{i}]")
                if a in seen:
                    raise InvalidInstance(f"names accelerator {a} twice (ranks {seen[a]} and {i})",
                                          field="parallelism.placement")
                seen[a] = i
        if wl.expert_routing == "explicit":
            if len(wl.expert_load) != mdl.experts:
                raise InvalidInstance(f"has {len(wl.expert_load)} entries, the model has {mdl.experts} experts",
                                      field="workload.expert_load")
            if sum(wl.expert_load) <= 0:
                raise InvalidInstance("must have a positive entry", field="workload.expert_load")
        fab = self.fabric
        if fab.switch_of_port is not None:
            shape = (len(fab.switch_of_port), len({len(r) for r in fab.switch_of_port}) == 1 and
                     len(fab.switch_of_port[0]))
            if shape != (n, self.hardware.ports):
                raise InvalidInstance(f"must be {n} rows of {self.hardware.ports} switches",
                                      field="fabric.switch_of_port")
        if self.costs.torus_dims and math.prod(self.costs.torus_dims) != n:
            raise InvalidInstance(f"{' x '.join(map(str, self.costs.torus_dims))} is not {n} accelerators",
                                  field="costs.torus_dims")
        n_ports = n * self.hardware.ports
        if fab.switches is not None and fab.switches > n_ports:
            raise InvalidInstance(f"{fab.switches} switches are more than the {n_ports} ports could reach",
                                  field="fabric.switches")
        if fab.ocs_ports is not None and fab.ocs_ports > self.hardware.ports:
            raise InvalidInstance(f"{fab.ocs_ports} exceeds the {self.hardware.ports} ports",
                                  field="fabric.ocs_ports")
        if fab.fibre_plan == "fit" and fab.switch_of_port is not None:
            raise InvalidInstance("fit chooses the fibre plan; switch_of_port gives one (leave one of them out)",
                                  field="fabric.fibre_plan")
        try:
            self.ocs_layout()
        except InvalidInput as exc:
            raise InvalidInstance(exc.rule, field=f"fabric.{exc.field}") from None

    def _check_kvp(self, kvp: int, stage: int, where: str) -> None:
        unit = self.parallelism.tp * kvp
        if stage % unit:
            raise InvalidInstance(f"tp x kvp = {self.parallelism.tp} x {kvp} does not divide the {stage} "
                                  "accelerators of a decode stage", field=where)

    # ---- derived --------------------------------------------------------------------------------
    def kvp_for(self, context_tokens: int) -> int:
        kvp = self.parallelism.kvp
        if isinstance(kvp, int):
            return kvp
        for max_tokens, k in self.parallelism.kvp_thresholds:
            if context_tokens <= max_tokens:
                return k
        return self.parallelism.kvp_thresholds[-1][1]

    @property
    def kvp(self) -> int:
        return self.kvp_for(self.workload.context_tokens)

    @property
    def decode_accelerators(self) -> int:
        return self.accelerators - self.parallelism.prefill_accelerators

    def ocs_layout(self) -> OCSLayout:
        """The OCS layout of this instance (ports beyond `fabric.ocs_ports` are not on an OCS)."""
        fab = self.fabric
        if fab.switch_of_port is None:     # planes by port, each split over switches where it outgrows the radix
            return self._planes()[0]
        sop = np.array(fab.switch_of_port, dtype=np.int64)
        switches = fab.switches or int(sop.max()) + 1
        if fab.ocs_ports is not None:
            sop[:, fab.ocs_ports:] = -1
        on = sop[(sop >= 0) & (sop < switches)]           # ports per switch, counted (not a switches x n x p mask)
        radix = fab.switch_radix or int(max(1, np.bincount(on, minlength=switches).max()))
        return OCSLayout(sop, (radix,) * switches)

    def fibre_fit(self) -> FibreFit | None:
        """The OCSes the planes of `ocs_layout()` are cabled onto after the wiring (`fibre_plan = "fit"` where a
        plane outgrows the radix), or None: the layout is the OCSes themselves."""
        return None if self.fabric.switch_of_port is not None else self._planes()[1]

    def _planes(self) -> tuple[OCSLayout, FibreFit | None]:
        """Without `switch_of_port`: the layout of the OCS planes (the envelope with `fibre_plan = "fit"`), ports
        beyond `ocs_ports` on none, and the OCSes a fitted plan cables it onto (None: the layout is the OCSes)."""
        n, p, fab = self.accelerators, self.hardware.ports, self.fabric
        on = p if fab.ocs_ports is None else min(fab.ocs_ports, p)
        if on == 0:
            return OCSLayout(np.full((n, p), -1, dtype=np.int64), (fab.switch_radix or 1,) * (fab.switches or p)), None
        lay, split = OCSLayout.fitted_planes(n, on, fab.switch_radix, fab.switches) if fab.fibre_plan == "fit" \
            else (OCSLayout.planes(n, on, fab.switch_radix, fab.switches), None)
        return OCSLayout(np.pad(lay.switch_of_port, ((0, 0), (0, p - on)), constant_values=-1), lay.switch_radix), split

    def with_context(self, context_tokens: int) -> "Instance":
        return replace(self, workload=replace(self.workload, context_tokens=int(context_tokens)))

    def summary(self) -> dict[str, Any]:
        """The instance block written into wiring files."""
        return {"name": self.name, "path": self.path, "accelerators": self.accelerators,
                "ports": self.hardware.ports, "port_bandwidth_gbps": self.hardware.port_bandwidth_gbps,
                "link_latency_us": self.hardware.link_latency_us,
                "step_latency_us": self.hardware.step_latency_us,
                "context_tokens": self.workload.context_tokens}


_TOP_KEYS = ("format", "version", "name", "description", "source", "hardware", "fabric", "model",
             "parallelism", "workload", "costs")


def _set_dotted(doc: dict[str, Any], key: str, value: Any) -> None:
    parts = key.split(".")
    cur = doc
    for p in parts[:-1]:
        cur = cur.setdefault(p, {})
        if not isinstance(cur, dict):
            raise InvalidInput(f"cannot set {key}: {p} is not a table", field=key)
    cur[parts[-1]] = value


def parse_override(text: str) -> tuple[str, Any]:
    """'workload.context_tokens=1048576' -> ('workload.context_tokens', 1048576) (values parse as TOML)."""
    if "=" not in text:
        raise InvalidInput(f"expected KEY=VALUE, got {text!r}", field="--set")
    key, raw = (s.strip() for s in text.split("=", 1))
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    return key, value


def instance_from_dict(doc: Mapping[str, Any], *, source: str | None = None) -> Instance:
    """Build an :class:`Instance` from a parsed instance document."""
    for key in doc:
        if key not in _TOP_KEYS:
            raise InvalidInput(unknown_key_message(key, _TOP_KEYS), source=source)
    if doc.get("format", FORMAT) != FORMAT:
        raise InvalidInput(f'must be "{FORMAT}", got {doc.get("format")!r}', field="format", source=source)
    if doc.get("version", VERSION) != VERSION:
        raise InvalidInput(f"unsupported version {doc.get('version')!r} (this build reads {VERSION})",
                           field="version", source=source)
    for key in ("hardware", "model", "fabric", "parallelism", "workload", "costs"):
        if key in doc and not isinstance(doc[key], Mapping):
            raise InvalidInput(f"must be a table, got {doc[key]!r}", field=key, source=source)
    hw = dict(doc.get("hardware") or {})
    if "hardware" not in doc:
        raise InvalidInput("missing required table", field="hardware", source=source)
    if "model" not in doc:
        raise InvalidInput("missing required table", field="model", source=source)
    hw_preset = _preset(hw, presets.HARDWARE, "hardware", source)
    if "accelerators" not in hw:
        raise InvalidInput("missing required key", field="hardware.accelerators", source=source)
    n = hw.pop("accelerators")
    hardware = from_mapping(Accelerator, hw, prefix="hardware", source=source, **hw_preset)
    mdl = dict(doc["model"])
    model = from_mapping(ModelSpec, mdl, prefix="model", source=source,
                         **_preset(mdl, presets.MODELS, "model", source))
    fabric = from_mapping(FabricSpec, doc.get("fabric", {}), prefix="fabric", source=source)
    par = from_mapping(ParallelismSpec, doc.get("parallelism", {}), prefix="parallelism", source=source)
    wl = from_mapping(WorkloadSpec, doc.get("workload", {}), prefix="workload", source=source)
    costs = from_mapping(CostSpec, doc.get("costs", {}), prefix="costs", source=source)
    for key in ("name", "description", "source"):
        if key in doc and not isinstance(doc[key], str):
            raise InvalidInput(f"must be a string, got {doc[key]!r}", field=key, source=source)
    try:
        return Instance(n, hardware, model, fabric, par, wl, costs, name=doc.get("name", ""),
                        description=doc.get("description", ""), source=doc.get("source", ""), path=source)
    except InvalidInput as exc:
        raise exc.located(source) from None


def _preset(table: dict[str, Any], known: Mapping[str, Mapping[str, Any]], where: str,
            source: str | None) -> dict[str, Any]:
    name = table.pop("preset", None)
    if name is None:
        return {}
    if not isinstance(name, str):
        raise InvalidInput(f"must be a preset name (one of {', '.join(known)}), got {name!r}",
                           field=f"{where}.preset", source=source)
    if name not in known:
        raise InvalidInput(unknown_key_message(str(name), known).replace("unknown key", "unknown preset"),
                           field=f"{where}.preset", source=source)
    return dict(known[name])


def load_instance(path: str | os.PathLike, overrides: Mapping[str, Any] | None = None) -> Instance:
    """Read and validate an instance TOML file; `overrides` maps dotted keys to values.

    >>> inst = load_instance("instances/decode/moe5t-576.toml")
    >>> inst.accelerators, inst.model.experts, inst.kvp
    (576, 576, 1)
    """
    from .formats import read_text
    source = os.fspath(path)
    text = read_text(source)
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"malformed TOML: {exc}", source=source) from None
    for key, value in (overrides or {}).items():
        _set_dotted(doc, key, value)
    return instance_from_dict(doc, source=source)


def instance_to_dict(inst: Instance) -> dict[str, Any]:
    """The instance as a TOML-ready document (presets expanded); `instance_from_dict` reads it back."""
    hw = to_mapping(inst.hardware)
    hw["accelerators"] = inst.accelerators
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "name": inst.name,
                           "description": inst.description, "source": inst.source, "hardware": hw,
                           "model": to_mapping(inst.model)}
    for key, obj in (("fabric", inst.fabric), ("parallelism", inst.parallelism), ("workload", inst.workload),
                     ("costs", inst.costs)):
        doc[key] = {k: v for k, v in to_mapping(obj).items() if v is not None}
    return doc


__all__ = ["Instance", "CostSpec", "ModelSpec", "FabricSpec", "ParallelismSpec", "WorkloadSpec", "load_instance",
           "instance_from_dict", "instance_to_dict", "parse_override", "FABRIC_KINDS", "field_names"]
