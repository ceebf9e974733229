"""The decode workload model: one decode step of a deployment as a DAG of compute and communication
operations, and the traffic matrix those operations induce.

Rank layout. The first ``prefill_accelerators`` logical ranks run prefill (instances of ``prefill_group``);
decode rank ``r`` of stage ``s`` is ``((s * U + u) * kvp + v) * tp + x`` (attention unit ``u`` of ``tp * kvp``
accelerators, KV shard ``v``, TP rank ``x``); EP groups are runs of ``ep`` consecutive ranks of a stage.
``placement`` maps logical ranks to accelerators.

Batch. Each accelerator of an attention unit holds a KV shard of the unit's ``b`` sequences
(``b = batch_per_accelerator``; "auto" fills HBM: ``b = floor((HBM * (1 - reserve) - weights) / KV of one
sequence on one accelerator)``, where the KV of a sequence is split over ``kvp`` (tokens), over ``pp``
(layers) and, for GQA, over ``min(tp, kv_heads)``; MLA's latent cache is replicated over TP). A step
gives every sequence one token. With ``pp`` stages the sequences form ``pp`` micro-batches; the DAG is
the path of one micro-batch through all layers, executed ``micro_batches`` times per step.

Per layer (one micro-batch): ``kvp_allgather`` of the projected queries to the KV shards, ``attention``
(roofline of projections, core attention over the local KV shard, weight and KV reads), ``kvp_combine``
(all-to-all of partial outputs + softmax statistics back to the owners), TP ``tp_allreduce`` (dense
layers) or ``tp_reducescatter`` / ``tp_allgather`` around the MoE (the attention-TP to EP hand-off),
``router``, ``ep_dispatch`` (all-to-all-v, FP8), ``experts`` and, in parallel, ``shared_expert``,
``ep_combine`` (BF16); ``pp_p2p`` between stages; ``pd_kv`` (prompt KV from prefill to decode, in the
background) once per step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InvalidInstance
from .collectives import _shift, _uniform
from .instance import Instance
from .model import CollectiveKind, TrafficMatrix, TrafficPhase

SOFTMAX_STAT_BYTES = 8  # running max and sum per head, FP32


@dataclass(frozen=True, eq=False)
class CommOp:
    """A collective on disjoint groups of accelerators (one row of `groups` per group). `pattern[i, j]` is
    the bytes rank i sends rank j of a group in one execution; `message_bytes` is its size in the
    :class:`~synth.model.CollectiveKind` convention (for the analytical model)."""

    name: str
    kind: str
    collective: CollectiveKind
    groups: np.ndarray
    pattern: np.ndarray
    message_bytes: float
    count: int = 1
    background: bool = False

    @property
    def group_size(self) -> int:
        return int(self.groups.shape[1])

    @property
    def bytes_per_execution(self) -> float:
        return float(self.pattern.sum()) * self.groups.shape[0]

    @property
    def total_bytes(self) -> float:
        return self.bytes_per_execution * self.count


@dataclass(frozen=True)
class ComputeOp:
    """Work on every accelerator of a stage: FLOPs and HBM bytes per accelerator; time from the roofline."""

    name: str
    flops: float
    hbm_bytes: float
    dtype_bytes: float
    time_s: float
    count: int = 1


@dataclass(frozen=True, eq=False)
class Workload:
    """One decode step of an instance: the operations, their DAG, and the traffic matrix."""

    instance: Instance
    ops: tuple[Any, ...]              # distinct operations, each with its count per step
    graph: Any                        # networkx DiGraph of one micro-batch through all layers
    traffic: TrafficMatrix
    rank_to_accelerator: np.ndarray
    batch_per_accelerator: int        # sequences whose KV shard each accelerator holds
    sequences: int                    # tokens produced per step
    micro_batches: int
    tokens_per_accelerator: float     # tokens per accelerator per micro-batch at the FFN
    kvp: int
    weights_bytes_per_accelerator: float
    kv_bytes_per_accelerator: float
    notes: dict[str, Any] = field(default_factory=dict)

    def comm_ops(self) -> list[CommOp]:
        return [o for o in self.ops if isinstance(o, CommOp)]

    def compute_ops(self) -> list[ComputeOp]:
        return [o for o in self.ops if isinstance(o, ComputeOp)]

    def summary(self, top: int = 10) -> dict[str, Any]:
        tm = self.traffic
        nz = tm.row_nonzeros()
        return {"instance": self.instance.name, "accelerators": tm.accelerators,
                "total_bytes": tm.total_bytes, "bytes_by_kind": tm.kind_totals(),
                "max_row_nonzeros": int(nz.max()), "mean_row_nonzeros": float(nz.mean()),
                "max_row_bytes": float(tm.bytes_.sum(axis=1).max()),
                "largest": [{"src": i, "dst": j, "bytes": b} for i, j, b in tm.largest(top)],
                "context_tokens": self.instance.workload.context_tokens, "kvp": self.kvp,
                "batch_per_accelerator": self.batch_per_accelerator, "sequences_per_step": self.sequences,
                "micro_batches": self.micro_batches, "tokens_per_accelerator": self.tokens_per_accelerator,
                "weights_gb_per_accelerator": self.weights_bytes_per_accelerator / 1e9,
                "kv_gb_per_accelerator": self.kv_bytes_per_accelerator / 1e9}


# --------------------------------------------------------------------------------------------------
def placement(inst: Instance) -> np.ndarray:
    """Accelerator of each logical rank."""
    n, par = inst.accelerators, inst.parallelism
    if isinstance(par.placement, tuple):
        return np.array(par.placement, dtype=np.int64)
    if par.placement == "contiguous":
        return np.arange(n, dtype=np.int64)
    if par.placement == "random":
        return np.random.default_rng(inst.workload.seed).permutation(n).astype(np.int64)
    # strided: members of an attention unit land k apart, k = decode accelerators / unit size
    p0, d = par.prefill_accelerators, inst.decode_accelerators
    unit = par.tp * inst.kvp
    r = np.arange(d)
    k = d // unit
    return np.concatenate([np.arange(p0), p0 + (r % unit) * k + r // unit]).astype(np.int64)


def expert_probabilities(inst: Instance) -> np.ndarray:
    """Probability that a token picks each routed expert (sums to top_k, each at most 1).

    Uniform: k / E. Zipf(s): proportional to 1 / rank^s with ranks shuffled by the seed (hot experts land
    on random EP ranks). Explicit: proportional to `expert_load`. Mass above 1 is redistributed.
    """
    m, wl = inst.model, inst.workload
    e, k = m.experts, m.top_k
    if wl.expert_routing == "uniform":
        return np.full(e, k / e)
    if wl.expert_routing == "zipf":
        ranks = np.random.default_rng(wl.seed).permutation(e) + 1
        w = ranks.astype(np.float64) ** -wl.zipf_s
    else:
        w = np.array(wl.expert_load, dtype=np.float64)
    p = w / w.sum() * k
    for _ in range(e):  # water-fill: cap at 1, spread the excess over the rest
        over = p > 1
        if not over.any():
            break
        free = ~over & (p < 1)
        excess = (p[over] - 1).sum()
        p[over] = 1.0
        if not free.any():
            break
        p[free] += excess * p[free] / p[free].sum()
    return p


def slot_probabilities(inst: Instance) -> np.ndarray:
    """Per expert slot (experts, then `redundant_experts` replicas): the expected number of times one token
    is routed there. The hottest experts (ties: lowest index) get the replicas, one each, and their load is
    split evenly over their copies."""
    p = expert_probabilities(inst)
    r = inst.parallelism.redundant_experts
    if r == 0:
        return p
    hot = np.argsort(-p, kind="stable")[:r]
    out = np.concatenate([p, p[hot] / 2])
    out[hot] /= 2
    return out


def ep_receive_probability(inst: Instance) -> np.ndarray:
    """Per EP rank: expected times one token is sent there (with dedup: the probability that it is)."""
    m, par = inst.model, inst.parallelism
    ep = par.ep
    slots = slot_probabilities(inst).reshape(ep, -1)
    per = slots.shape[1]
    if not par.dispatch_dedup or per == 1:
        return slots.sum(axis=1)
    if inst.workload.expert_routing == "uniform" and par.redundant_experts == 0:
        miss = math.comb(m.experts - per, m.top_k) / math.comb(m.experts, m.top_k)  # exact, no replacement
        return np.full(ep, 1.0 - miss)
    return 1.0 - np.prod(1.0 - np.minimum(slots, 1.0), axis=1)  # independence approximation


def _roofline(inst: Instance, name: str, flops: float, hbm_bytes: float, dtype_bytes: float,
              count: int) -> ComputeOp:
    hw = inst.hardware
    t_math = flops / (hw.pflops(dtype_bytes) * 1e15 * hw.flops_efficiency)
    t_mem = hbm_bytes / (hw.hbm_tb_per_s * 1e12 * hw.hbm_efficiency)
    return ComputeOp(name, flops, hbm_bytes, dtype_bytes, max(t_math, t_mem), count)


def _allreduce_pattern(n: int, message: float, algorithm: str) -> np.ndarray:
    """Demand of an all-reduce of `message` bytes per rank: 2(n-1)/n * message sent by each rank, to
    every other rank (direct reduce-scatter + all-gather) or to the ring successor."""
    if algorithm == "ring":
        return _shift(n, 2 * (n - 1) / n * message)
    return _uniform(n, 2 * message / n)


# --------------------------------------------------------------------------------------------------
def build_workload(inst: Instance) -> Workload:
    """The decode step of `inst`: operations, DAG and traffic matrix.

    >>> from synth.instance import load_instance
    >>> w = build_workload(load_instance("instances/decode/moe5t-576.toml"))
    >>> w.traffic.accelerators, sorted(w.traffic.by_kind)
    (576, ['ep_combine', 'ep_dispatch'])
    """
    import networkx as nx

    m, par, wl, hw = inst.model, inst.parallelism, inst.workload, inst.hardware
    n, pp, tp, ep = inst.accelerators, par.pp, par.tp, par.ep
    kvp = inst.kvp
    p0, d = par.prefill_accelerators, inst.decode_accelerators
    stage = d // pp
    unit = tp * kvp
    units = stage // unit
    place = placement(inst)
    ab, wb = m.activation_bytes, m.weight_bytes

    # ---- memory and batch --------------------------------------------------------------------------
    moe_ranks = ep if m.moe_layers else 1
    weights = wb * (m.layers * m.attention_params / tp + m.dense_layers * m.dense_ffn_params / tp
                    + m.moe_layers * ((m.experts + par.redundant_experts) // moe_ranks * m.expert_params
                                      + m.shared_experts * m.expert_params + m.hidden * m.experts)
                    + m.embedding_params / tp) / pp
    usable = hw.hbm_gb * 1e9 * (1 - wl.hbm_reserve_fraction) - weights
    if usable <= 0:
        raise InvalidInstance(f"weights need {weights / 1e9:.1f} GB per accelerator, HBM leaves "
                              f"{hw.hbm_gb * (1 - wl.hbm_reserve_fraction):.1f} GB", field="hardware.hbm_gb",
                              source=inst.path)
    tp_kv_split = 1 if m.attention == "mla" else min(tp, m.kv_heads)
    kv_seq_acc = m.kv_bytes_per_token * wl.context_tokens / (pp * kvp * tp_kv_split)
    if wl.batch_per_accelerator == "auto":
        b = int(usable // kv_seq_acc)
        if b < 1:
            raise InvalidInstance(f"the KV cache of one sequence needs {kv_seq_acc / 1e9:.1f} GB per "
                                  f"accelerator, {usable / 1e9:.1f} GB are left after weights (raise kvp or "
                                  "lower the context)", field="workload.context_tokens", source=inst.path)
    else:
        b = int(wl.batch_per_accelerator)
        if b * kv_seq_acc > usable:
            raise InvalidInstance(f"{b} sequences need {b * kv_seq_acc / 1e9:.1f} GB of KV per accelerator, "
                                  f"{usable / 1e9:.1f} GB are left after weights",
                                  field="workload.batch_per_accelerator", source=inst.path)
    micro = pp
    sequences = units * pp * b                      # per step (all micro-batches, all stages' units)
    mb_unit = b / micro                             # sequences of a unit in one micro-batch
    t_acc = mb_unit / unit                          # tokens per accelerator at the FFN
    t_tpg = mb_unit / kvp                           # tokens of one TP group (a KV-shard slice)

    # ---- groups (logical ranks -> accelerators) --------------------------------------------------
    ranks = p0 + np.arange(d).reshape(pp, units, kvp, tp)
    acc = place[ranks]                              # (pp, units, kvp, tp)
    tp_groups = acc.reshape(-1, tp)
    kvp_groups = acc.transpose(0, 1, 3, 2).reshape(-1, kvp)
    ep_groups = place[p0 + np.arange(d).reshape(-1, ep)] if m.moe_layers else None

    ops: list[Any] = []
    layer_ops: dict[str, list[Any]] = {"dense": [], "moe": []}

    def add(op: Any, layer_kinds: tuple[str, ...]) -> None:
        ops.append(op)
        for k in layer_kinds:
            layer_ops[k].append(op)

    layers_per_kind = {"dense": m.dense_layers, "moe": m.moe_layers}
    both = tuple(k for k in ("dense", "moe") if layers_per_kind[k])

    def count(kinds: tuple[str, ...]) -> int:
        return micro * sum(layers_per_kind[k] for k in kinds)

    # ---- attention ---------------------------------------------------------------------------------
    heads_tp = m.heads / tp
    if m.attention == "mla":
        q_values = heads_tp * (m.kv_lora + m.rope_dim)     # absorbed query per token
        core_flops_per_kv = heads_tp * (2 * (m.kv_lora + m.rope_dim) + 2 * m.kv_lora)
    else:
        q_values = heads_tp * m.head_dim
        core_flops_per_kv = heads_tp * 4 * m.head_dim
    if kvp > 1:
        q_bytes = t_tpg / kvp * q_values * ab  # each shard owns 1/kvp of the slice's sequences
        add(CommOp("kvp_allgather", "kvp_allgather", CollectiveKind.ALLGATHER, kvp_groups,
                   _uniform(kvp, q_bytes), q_bytes * kvp, count(both)), both)
    kv_tokens = wl.context_tokens / kvp
    attn_flops = 2 * m.attention_params / tp * t_tpg / kvp + mb_unit * kv_tokens * core_flops_per_kv
    attn_bytes = m.attention_params / tp * wb + mb_unit * kv_tokens * m.kv_values_per_token_layer * \
        m.kv_bytes / tp_kv_split
    add(_roofline(inst, "attention", attn_flops, attn_bytes, m.kv_bytes, count(both)), both)
    if kvp > 1:
        partial = heads_tp * ((m.v_head_dim if m.attention == "mla" else m.head_dim) * ab + SOFTMAX_STAT_BYTES)
        per_pair = mb_unit / kvp * partial
        add(CommOp("kvp_combine", "kvp_combine", CollectiveKind.ALLTOALL, kvp_groups,
                   _uniform(kvp, per_pair), per_pair * (kvp - 1), count(both)), both)

    # ---- FFN ---------------------------------------------------------------------------------------
    tp_msg = t_tpg * m.hidden * ab
    if m.dense_layers:
        add(_roofline(inst, "dense_ffn", 2 * m.dense_ffn_params / tp * t_tpg,
                      m.dense_ffn_params / tp * wb, wb, count(("dense",))), ("dense",))
    if tp > 1:
        if m.dense_layers:  # attention output and dense FFN output: one all-reduce each
            add(CommOp("tp_allreduce", "tp_allreduce", CollectiveKind.ALLREDUCE, tp_groups,
                       _allreduce_pattern(tp, tp_msg, par.allreduce_algorithm), tp_msg,
                       2 * count(("dense",))), ("dense",))
        if m.moe_layers:
            add(CommOp("tp_reducescatter", "tp_reducescatter", CollectiveKind.REDUCESCATTER, tp_groups,
                       _uniform(tp, tp_msg / tp), tp_msg, count(("moe",))), ("moe",))
    if m.moe_layers:
        q = ep_receive_probability(inst)                 # (ep,)
        disp = np.tile(q * t_acc * m.hidden * m.dispatch_bytes, (ep, 1))
        np.fill_diagonal(disp, 0.0)                      # tokens for a local expert stay local
        add(_roofline(inst, "router", 2 * m.hidden * m.experts * t_acc, m.hidden * m.experts * wb, 2,
                      count(("moe",))), ("moe",))
        add(CommOp("ep_dispatch", "ep_dispatch", CollectiveKind.ALLTOALLV, ep_groups, disp,
                   float(disp.sum(axis=1).max()), count(("moe",))), ("moe",))
        slots = slot_probabilities(inst).reshape(ep, -1)
        arrivals = t_acc * ep * slots.sum(axis=1).max()   # token-expert pairs at the busiest EP rank
        per = slots.shape[1]
        add(_roofline(inst, "experts", 2 * m.expert_params * arrivals, per * m.expert_params * wb, wb,
                      count(("moe",))), ("moe",))
        if m.shared_experts:
            add(_roofline(inst, "shared_expert", 2 * m.shared_experts * m.expert_params * t_acc,
                          m.shared_experts * m.expert_params * wb, wb, count(("moe",))), ("moe",))
        comb = disp.T * (m.combine_bytes / m.dispatch_bytes)
        add(CommOp("ep_combine", "ep_combine", CollectiveKind.ALLTOALLV, ep_groups, comb,
                   float(comb.sum(axis=1).max()), count(("moe",))), ("moe",))
        if tp > 1:
            add(CommOp("tp_allgather", "tp_allgather", CollectiveKind.ALLGATHER, tp_groups,
                       _uniform(tp, tp_msg / tp), tp_msg, count(("moe",))), ("moe",))

    # ---- pipeline and disaggregation ---------------------------------------------------------------
    if pp > 1:
        flat = acc.reshape(pp, -1)
        pairs = np.concatenate([np.stack([flat[s], flat[s + 1]], axis=1) for s in range(pp - 1)])
        hid = t_acc * m.hidden * ab
        add(CommOp("pp_p2p", "pp_p2p", CollectiveKind.P2P, pairs, np.array([[0.0, hid], [0.0, 0.0]]), hid,
                   micro), ())
        back = np.stack([flat[-1], flat[0]], axis=1)
        ids = t_acc * 4.0
        add(CommOp("pp_token_ids", "pp_p2p", CollectiveKind.P2P, back, np.array([[0.0, ids], [0.0, 0.0]]),
                   ids, micro), ())
    if p0:
        n_pref = p0 // par.prefill_group
        prompt = wl.prompt_tokens or wl.context_tokens
        new_per_unit = pp * b / wl.output_tokens         # sequences entering one unit per step
        unit_accs = acc.transpose(1, 0, 2, 3).reshape(units, -1)   # a unit's accelerators, all stages
        sources = place[np.arange(p0).reshape(n_pref, par.prefill_group)][np.arange(units) % n_pref]
        groups = np.concatenate([sources, unit_accs], axis=1)
        g1, g2 = sources.shape[1], unit_accs.shape[1]
        pat = np.zeros((g1 + g2, g1 + g2))
        pat[:g1, g1:] = new_per_unit * prompt * m.kv_bytes_per_token / (g1 * g2)
        add(CommOp("pd_kv", "pd_kv", CollectiveKind.ALLTOALLV, groups, pat, float(pat.sum(axis=1).max()), 1,
                   background=True), ())
        if n_pref > units:
            raise InvalidInstance(f"{n_pref} prefill instances but only {units} decode units to pair them "
                                  "with", field="parallelism.prefill_accelerators", source=inst.path)

    # ---- traffic matrix ----------------------------------------------------------------------------
    by_kind: dict[str, np.ndarray] = {}
    for op in ops:
        if not isinstance(op, CommOp):
            continue
        mat = by_kind.setdefault(op.kind, np.zeros((n, n)))
        g = op.groups
        mat[g[:, :, None], g[:, None, :]] += op.pattern * op.count
    if not by_kind:
        by_kind["none"] = np.zeros((n, n))
    traffic = TrafficMatrix.from_kinds(by_kind, name=inst.name)

    # ---- DAG of one micro-batch --------------------------------------------------------------------
    graph = nx.DiGraph()
    prev: list[str] = []
    layer_kind = ["dense"] * m.dense_layers + ["moe"] * m.moe_layers
    stage_of_layer = np.minimum(np.arange(m.layers) * pp // m.layers, pp - 1)
    pp_op = next((o for o in ops if getattr(o, "name", "") == "pp_p2p"), None)
    for layer, kind in enumerate(layer_kind):
        if layer and pp_op is not None and stage_of_layer[layer] != stage_of_layer[layer - 1]:
            node = f"L{layer}.pp_p2p"
            graph.add_node(node, op=pp_op, layer=layer)
            graph.add_edges_from((p, node) for p in prev)
            prev = [node]
        chain = layer_ops[kind]
        for op in chain:
            node = f"L{layer}.{op.name}"
            graph.add_node(node, op=op, layer=layer)
            if op.name == "shared_expert":   # runs beside dispatch / experts / combine
                graph.add_edges_from((p, node) for p in graph.predecessors(f"L{layer}.ep_dispatch"))
                continue
            graph.add_edges_from((p, node) for p in prev)
            prev = [node]
        if f"L{layer}.shared_expert" in graph:
            prev = prev + [f"L{layer}.shared_expert"]
    for op in ops:
        if getattr(op, "background", False):
            graph.add_node(op.name, op=op, layer=-1)

    notes = {"tp_kv_split": tp_kv_split, "kv_bytes_per_sequence_per_accelerator": kv_seq_acc,
             "hbm_usable_bytes": usable}
    return Workload(inst, tuple(ops), graph, traffic, place, b, sequences, micro, t_acc, kvp, weights,
                    b * kv_seq_acc, notes)


def scatter(n: int, groups: np.ndarray, pattern: np.ndarray) -> np.ndarray:
    """The n x n matrix of a per-group pattern run by every group (one row of `groups` each) at once."""
    mat = np.zeros((n, n))
    mat[groups[:, :, None], groups[:, None, :]] += pattern
    return mat


def step_phases(wl: Workload) -> tuple[TrafficPhase, ...]:
    """The decode step's communication as phases (:class:`~synth.model.TrafficPhase`): one per collective op,
    its bytes in one execution (every group at once) run `count` times per step; ops whose executions move
    the same bytes (e.g. the attention and FFN all-reduces of TP) are one phase with their counts added.
    Background transfers (P/D KV) are a phase too, so the phases add up to the step's traffic matrix."""
    n = wl.instance.accelerators
    phases: list[list] = []             # [name, matrix, weight]
    for op in wl.comm_ops():
        mat = scatter(n, op.groups, op.pattern)
        if not (mat > 0).any():
            continue
        same = next((p for p in phases if np.array_equal(p[1], mat)), None)
        if same is None:
            phases.append([op.name, mat, float(op.count)])
        else:
            same[0] += "+" + op.name
            same[2] += float(op.count)
    return tuple(TrafficPhase(name, mat, w) for name, mat, w in phases)
