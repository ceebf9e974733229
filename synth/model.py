"""Frozen, validated domain objects: accelerators, OCS layout, circuits, wirings, traffic, collectives,
schedules and solver results. Units are in the names (``_gbps`` = gigabits per second per direction,
``_us`` = microseconds, ``bytes_`` = bytes).

>>> from synth.model import Wiring, OCSLayout
>>> import networkx as nx
>>> w = Wiring.from_networkx(nx.cycle_graph(6), ports=2)
>>> len(w.circuits), int(w.adjacency().sum() // 2)
(6, 6)
"""
from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Mapping

import numpy as np

from .errors import InvalidInput
from .schema import spec, validate


# --------------------------------------------------------------------------------------------------
# Hardware
# --------------------------------------------------------------------------------------------------
MAX_PORTS = 1024           # fabric ports per accelerator (an H100 has 18, a TPU v4 6; beyond: a typo)
MAX_ACCELERATORS = 16384   # per instance: its traffic matrices are dense (16,384^2 x 8 B = 2.1 GB each)
MAX_LATENCY_US = 1e6       # a step or hop latency past a second is a typo (1e20 us broke the schedule MILPs)


@dataclass(frozen=True)
class Accelerator:
    """One accelerator: its ports to the fabric, compute, memory, power and price."""

    ports: int = spec(ge=1, le=MAX_PORTS, doc="fabric ports per accelerator")
    port_bandwidth_gbps: float = spec(gt=0, doc="bandwidth of one port, Gbit/s per direction")
    name: str = spec("custom")
    link_latency_us: float = spec(0.15, ge=0, le=MAX_LATENCY_US, doc="per-hop latency of a circuit incl. forwarding")
    step_latency_us: float = spec(0.6, ge=0, le=MAX_LATENCY_US, doc="fixed cost (alpha) of one collective step")
    bf16_pflops: float = spec(1.0, gt=0, doc="dense BF16 PFLOP/s (every precision falls back to it)")
    fp8_pflops: float = spec(2.0, ge=0, doc="dense FP8 PFLOP/s")
    fp4_pflops: float = spec(0.0, ge=0, doc="dense FP4 PFLOP/s (0 = not supported)")
    hbm_gb: float = spec(80.0, gt=0, doc="HBM capacity, GB (1e9 bytes)")
    hbm_tb_per_s: float = spec(3.35, gt=0, doc="HBM bandwidth, TB/s")
    power_w: float = spec(700.0, ge=0, doc="board power at load, W")
    idle_power_w: float = spec(0.0, ge=0, doc="board power when idle, W (0 = 30% of power_w)")
    price_usd: float = spec(30000.0, ge=0, doc="price of one accelerator incl. its share of the server")
    flops_efficiency: float = spec(1.0, gt=0, le=1, doc="achieved / peak FLOP/s in the roofline")
    hbm_efficiency: float = spec(1.0, gt=0, le=1, doc="achieved / peak HBM bandwidth in the roofline")

    def __post_init__(self) -> None:
        validate(self)

    @property
    def port_bytes_per_s(self) -> float:
        return self.port_bandwidth_gbps * 1e9 / 8.0

    def pflops(self, dtype_bytes: float) -> float:
        """Peak dense PFLOP/s for math in the given operand width (0.5 FP4, 1 FP8, 2 BF16)."""
        if dtype_bytes <= 0.5 and self.fp4_pflops > 0:
            return self.fp4_pflops
        if dtype_bytes <= 1 and self.fp8_pflops > 0:
            return self.fp8_pflops
        return self.bf16_pflops


# --------------------------------------------------------------------------------------------------
# OCS layout, circuits and wirings
# --------------------------------------------------------------------------------------------------
def plane_order(accelerators: int, port: int) -> np.ndarray:
    """`rank[a]`: accelerator a's place in port `port`'s order on a split OCS plane (`OCSLayout.planes`).
    Port 0: a itself. Any other port: the accelerators sorted by a SplitMix64 hash of (port, a), fixed for
    every run, machine and numpy version (a fibre plan is hardware: it must not move with a seed)."""
    a = np.arange(accelerators, dtype=np.uint64)
    if port == 0:
        return a.astype(np.int64)
    z = (np.uint64(port) << np.uint64(32)) | a
    z = z + np.uint64(0x9E3779B97F4A7C15)                  # SplitMix64's finalizer (Steele, Lea, Flood 2014)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    z = z ^ (z >> np.uint64(31))
    rank = np.empty(accelerators, dtype=np.int64)
    rank[np.argsort(z, kind="stable")] = np.arange(accelerators)
    return rank


def _plane_switches(n: int, per: np.ndarray, radix: int) -> np.ndarray:
    """OCSes of `radix` ports each plane is split over: as few as hold its n accelerators' `per` fibres each
    with each port's fibres in near-equal blocks (at most radix // per of a port's on one OCS)."""
    return np.where(per > 0, -(-n // (radix // np.maximum(per, 1))), 1)


@dataclass(frozen=True)
class FibreFit:
    """A fibre plan the tool chooses: envelope switch j (a whole plane) is cabled onto `switches[j]` OCSes of
    `radix` ports each, after the wiring (`OCSLayout.fitted_planes`, `solvers.fibre_plan.fit`)."""

    radix: int
    switches: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.radix < 2 or any(s < 1 for s in self.switches):
            raise InvalidInput("needs a radix >= 2 and >= 1 OCS per plane", field="switch_radix")


@dataclass(frozen=True, eq=False)
class OCSLayout:
    """Which OCS switch each accelerator port is attached to, and each switch's radix.

    `switch_of_port[a, k]` is the switch of port k of accelerator a, or -1 when that port is not
    attached to any OCS (e.g. it goes to a packet switch in a hybrid fabric).
    """

    switch_of_port: np.ndarray
    switch_radix: tuple[int, ...]

    def __post_init__(self) -> None:
        sop = np.asarray(self.switch_of_port)
        if sop.ndim != 2 or not np.issubdtype(sop.dtype, np.integer):
            raise InvalidInput("must be an integer matrix (accelerators x ports)", field="switch_of_port")
        radix = tuple(int(r) for r in self.switch_radix)
        if len(radix) == 0:
            raise InvalidInput("at least one switch is needed", field="switch_radix")
        if any(r < 0 for r in radix):
            raise InvalidInput("must be >= 0 for every switch", field="switch_radix")
        if sop.size and (sop.max() >= len(radix) or sop.min() < -1):
            raise InvalidInput(f"names a switch outside 0..{len(radix) - 1}", field="switch_of_port")
        sop = sop.astype(np.int64)
        sop.setflags(write=False)
        object.__setattr__(self, "switch_of_port", sop)
        object.__setattr__(self, "switch_radix", radix)

    @classmethod
    def uniform(cls, accelerators: int, ports: int, switch_radix: int | None = None) -> "OCSLayout":
        """Port k of every accelerator on switch k (one switch per port index); radix defaults to N."""
        if accelerators < 1 or ports < 1:
            raise InvalidInput("accelerators and ports must be >= 1", field="ports")
        if ports > MAX_PORTS:
            raise InvalidInput(f"must be <= {MAX_PORTS}, got {ports}", field="ports")
        sop = np.tile(np.arange(ports, dtype=np.int64), (accelerators, 1))
        radix = accelerators if switch_radix is None else int(switch_radix)
        return cls(sop, (radix,) * ports)

    @classmethod
    def planes(cls, accelerators: int, ports: int, switch_radix: int | None = None,
               planes: int | None = None) -> "OCSLayout":
        """Port k of every accelerator on OCS plane k mod `planes` (default: one plane per port index), each
        plane one switch of `switch_radix` ports (default: as many as it has fibres) when the radix holds all
        its fibres. A plane with more fibres than the radix is split over as few switches as hold them, in
        blocks of near-equal size: port k takes the accelerators in plane order k, in blocks, block b on the
        plane's switch b. Port 0's order is 0, 1, 2, ... (consecutive accelerators, e.g. a TP group, share
        a switch unless a block boundary falls inside them); every other port's is a fixed pseudo-random one (`plane_order`), so the blocks of all the
        ports together join every accelerator to many others, as a union of random partitions would: on
        moe5t-576 with switches of 64 ports, the wiring's step is 3.4% above the bound, against 56% when each
        port's blocks are consecutive accelerators shifted from port to port (BENCHMARKS.md)."""
        if accelerators < 1 or ports < 1:
            raise InvalidInput("accelerators and ports must be >= 1", field="ports")
        if ports > MAX_PORTS:
            raise InvalidInput(f"must be <= {MAX_PORTS}, got {ports}", field="ports")
        n, planes = accelerators, ports if planes is None else int(planes)
        if planes < 1:
            raise InvalidInput(f"must be >= 1, got {planes}", field="switches")
        plane = np.arange(ports) % planes
        per = np.bincount(plane, minlength=planes)                 # ports of an accelerator on each plane
        if switch_radix is None or int(switch_radix) >= n * int(per.max()):
            radix = n * int(per.max()) if switch_radix is None else int(switch_radix)
            return cls(np.tile(plane.astype(np.int64), (n, 1)), (radix,) * planes)
        radix = int(switch_radix)
        if radix < 2 or radix < per.max():
            raise InvalidInput(f"a switch of radix {radix} cannot take the {int(per.max())} ports each accelerator "
                               "has on one plane" if radix >= 2 else f"a switch of radix {radix} cannot host a "
                               "circuit (needs >= 2)", field="switch_radix")
        blocks = _plane_switches(n, per, radix)
        first = np.concatenate(([0], np.cumsum(blocks)[:-1]))
        sop = np.empty((n, ports), dtype=np.int64)
        for k in range(ports):                                    # one column per port: p <= MAX_PORTS
            j = plane[k]
            sop[:, k] = first[j] + (plane_order(n, k) * blocks[j]) // n
        return cls(sop, (radix,) * int(blocks.sum()))

    @classmethod
    def fitted_planes(cls, accelerators: int, ports: int, switch_radix: int | None = None,
                      planes: int | None = None) -> tuple["OCSLayout", "FibreFit | None"]:
        """The planes of :meth:`planes` with the fibre plan left to choose: (the envelope, the split). Where a
        plane outgrows the radix, the envelope takes it whole, as one switch that holds as many circuits as
        its OCSes would together (each a matching of at most radix / 2): every wiring on any fibre plan of
        those OCSes is a wiring on the envelope, so a bound there holds for them all, and every wiring on
        the envelope has a fibre plan that hosts it (each plane's circuits are a matching: its pairs of
        fibres pack onto the OCSes whole; `solvers.fibre_plan.fit`). The split is None where no plane is
        split: then the envelope is `planes`' layout itself."""
        lay = cls.planes(accelerators, ports, switch_radix, planes)
        n, planes = accelerators, ports if planes is None else int(planes)
        if lay.switches == planes:
            return lay, None
        radix = int(switch_radix)
        per = np.bincount(np.arange(ports) % planes, minlength=planes)
        blocks = _plane_switches(n, per, radix)
        envelope = np.minimum(n * per, blocks * 2 * (radix // 2))
        sop = np.tile((np.arange(ports) % planes).astype(np.int64), (n, 1))
        return cls(sop, tuple(int(r) for r in envelope)), FibreFit(radix, tuple(int(b) for b in blocks))

    def with_spare(self, k: int) -> "OCSLayout":
        """The layout with each accelerator's last `k` OCS-attached ports left dark: spares held for
        failover or for another mode's circuits (on a one-switch-per-port layout, k whole OCS planes)."""
        if k < 0:
            raise InvalidInput(f"must be >= 0, got {k}", field="spare_ports")
        attached = self.switch_of_port >= 0
        from_right = np.cumsum(attached[:, ::-1], axis=1)[:, ::-1]   # attached ports at or after each one
        short = np.flatnonzero(attached.sum(axis=1) <= k)
        if k and short.size:
            a = int(short[0])
            raise InvalidInput(f"accelerator {a} has {int(attached[a].sum())} OCS ports; {k} spare would leave "
                               "none", field="spare_ports")
        sop = np.where(attached & (from_right <= k), -1, self.switch_of_port)
        return OCSLayout(sop, self.switch_radix)

    @property
    def accelerators(self) -> int:
        return int(self.switch_of_port.shape[0])

    @property
    def ports(self) -> int:
        return int(self.switch_of_port.shape[1])

    @property
    def switches(self) -> int:
        return len(self.switch_radix)

    @cached_property
    def ocs_port(self) -> np.ndarray:
        """`ocs_port[a, k]`: the port number on its OCS of accelerator a's port k (row-major order)."""
        flat = self.switch_of_port.ravel()
        out = np.full(flat.shape, -1, dtype=np.int64)
        attached = flat >= 0
        order = np.argsort(flat[attached], kind="stable")
        sw_sorted = flat[attached][order]
        starts = np.searchsorted(sw_sorted, sw_sorted, side="left")
        idx = np.flatnonzero(attached)[order]
        out[idx] = np.arange(len(order)) - starts
        return out.reshape(self.switch_of_port.shape)

    @cached_property
    def capacity(self) -> np.ndarray:
        """`capacity[a, s]`: how many ports accelerator a has on switch s."""
        cap = np.zeros((self.accelerators, self.switches), dtype=np.int64)
        a, k = np.nonzero(self.switch_of_port >= 0)
        np.add.at(cap, (a, self.switch_of_port[a, k]), 1)
        return cap

    def shared_ports(self) -> np.ndarray:
        """(N, N) int: the most circuits between accelerators a and b, the sum over the switches that can host
        one (radix >= 2) of min(a's ports there, b's): as the sum over v >= 1 of the products of the
        indicators capacity >= v (one matrix product per level, usually one), not pairs x switches (4,608
        accelerators on 18 planes: 9 s and 3 GB for the pairs' rows, 0.1 s this way)."""
        cap = self.capacity[:, np.array(self.switch_radix) >= 2]
        out = np.zeros((cap.shape[0], cap.shape[0]))
        for v in range(1, int(cap.max(initial=0)) + 1):
            at = (cap >= v).astype(np.float64)
            out += at @ at.T
        return np.rint(out).astype(np.int64)

    def shares_switch(self) -> np.ndarray:
        """(N, N) bool: accelerators a and b both have a port on some switch that can host a circuit
        (radix >= 2), i.e. a circuit between them is possible."""
        return self.shared_ports() > 0

    def is_uniform(self) -> bool:
        return bool(np.all(self.switch_of_port == np.arange(self.ports)[None, :])) and \
            self.switches == self.ports

    def to_dict(self) -> dict[str, Any]:
        if self.is_uniform() and len(set(self.switch_radix)) == 1:
            return {"kind": "by-port", "switch_radix": self.switch_radix[0]}
        return {"kind": "explicit", "switch_of_port": self.switch_of_port.tolist(),
                "switch_radix": list(self.switch_radix)}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OCSLayout) and self.switch_radix == other.switch_radix and \
            np.array_equal(self.switch_of_port, other.switch_of_port)

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, order=True)
class Circuit:
    """A duplex circuit on OCS `switch` between port `a_port` of accelerator `a` and `b_port` of `b`."""

    switch: int
    a: int
    a_port: int
    b: int
    b_port: int

    def __post_init__(self) -> None:
        for name in ("switch", "a", "a_port", "b", "b_port"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
                raise InvalidInput(f"must be an integer >= 0, got {v!r}", field=name)
            object.__setattr__(self, name, int(v))
        if (self.b, self.b_port) < (self.a, self.a_port):  # canonical orientation
            a, ap = self.a, self.a_port
            object.__setattr__(self, "a", self.b)
            object.__setattr__(self, "a_port", self.b_port)
            object.__setattr__(self, "b", a)
            object.__setattr__(self, "b_port", ap)


def circuit_adjacency(n: int, arr: np.ndarray) -> np.ndarray:
    """Symmetric (n, n) matrix of circuit counts between accelerator pairs of the circuit rows `arr` (switch,
    a, a_port, b, b_port), as `Wiring.circuit_array` gives them."""
    adj = np.zeros((n, n), dtype=np.int64)
    np.add.at(adj, (arr[:, 1], arr[:, 3]), 1)
    np.add.at(adj, (arr[:, 3], arr[:, 1]), 1)
    np.fill_diagonal(adj, np.diagonal(adj) // 2)
    return adj


@dataclass(frozen=True, eq=False)
class Wiring:
    """A set of circuits on an OCS layout. Structure is checked here; rules (ports in one circuit at most,
    same-switch ends, radix) are checked by :func:`synth.verify.wiring_violations`, so that an invalid
    wiring file can be loaded and reported on."""

    accelerators: int
    ports_per_accelerator: int
    circuits: tuple[Circuit, ...]
    layout: OCSLayout
    solve: Mapping[str, Any] | None = None
    instance: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.accelerators, bool) or not isinstance(self.accelerators, (int, np.integer)) \
                or self.accelerators < 1:
            raise InvalidInput(f"must be an integer >= 1, got {self.accelerators!r}", field="accelerators")
        if isinstance(self.ports_per_accelerator, bool) or \
                not isinstance(self.ports_per_accelerator, (int, np.integer)) or self.ports_per_accelerator < 1:
            raise InvalidInput(f"must be an integer >= 1, got {self.ports_per_accelerator!r}",
                               field="ports_per_accelerator")
        if self.layout.accelerators != self.accelerators or self.layout.ports != self.ports_per_accelerator:
            raise InvalidInput(
                f"layout is {self.layout.accelerators} x {self.layout.ports}, wiring is "
                f"{self.accelerators} x {self.ports_per_accelerator}", field="layout")
        object.__setattr__(self, "circuits", tuple(sorted(self.circuits)))
        for i, c in enumerate(self.circuits):
            if c.a >= self.accelerators or c.b >= self.accelerators:
                raise InvalidInput(f"accelerator outside 0..{self.accelerators - 1}", field=f"circuits[{i}]")

    @cached_property
    def circuit_array(self) -> np.ndarray:
        """(C, 5) int array: switch, a, a_port, b, b_port."""
        if not self.circuits:
            return np.zeros((0, 5), dtype=np.int64)
        return np.array([(c.switch, c.a, c.a_port, c.b, c.b_port) for c in self.circuits], dtype=np.int64)

    def adjacency(self) -> np.ndarray:
        """Symmetric (N, N) matrix of circuit counts between accelerator pairs."""
        return circuit_adjacency(self.accelerators, self.circuit_array)

    def degree(self) -> np.ndarray:
        arr = self.circuit_array
        return np.bincount(np.concatenate([arr[:, 1], arr[:, 3]]), minlength=self.accelerators)

    def to_networkx(self):
        """A networkx MultiGraph: one edge per circuit, with `switch`, `a_port`, `b_port` attributes."""
        import networkx as nx
        g = nx.MultiGraph()
        g.add_nodes_from(range(self.accelerators))
        for c in self.circuits:
            g.add_edge(c.a, c.b, switch=c.switch, a_port=c.a_port, b_port=c.b_port)
        return g

    @classmethod
    def from_pairs(cls, accelerators: int, ports: int, pairs, layout: OCSLayout | None = None,
                   *, seed: int = 0, **meta: Any) -> "Wiring":
        """Realize a multigraph given as (a, b) pairs on the switches (edge colouring); raises
        :class:`~synth.errors.Infeasible` when it cannot be realized."""
        from .realize import realize
        layout = layout or OCSLayout.uniform(accelerators, ports)
        return cls(accelerators, ports, realize(layout, pairs, seed=seed), layout, **meta)

    @classmethod
    def from_networkx(cls, graph, ports: int, layout: OCSLayout | None = None, *, seed: int = 0,
                      **meta: Any) -> "Wiring":
        """Build from a networkx (multi)graph whose nodes are 0..N-1; edge attributes `switch`,
        `a_port`, `b_port` are kept when every edge has them, otherwise circuits are assigned to
        switches by edge colouring."""
        n = graph.number_of_nodes()
        if sorted(graph.nodes) != list(range(n)):
            raise InvalidInput("graph nodes must be the integers 0..N-1", field="graph")
        edges = list(graph.edges(data=True))
        if edges and all({"switch", "a_port", "b_port"} <= set(d) for _, _, d in edges):
            layout = layout or OCSLayout.uniform(n, ports)
            circuits = tuple(Circuit(d["switch"], u, d["a_port"], v, d["b_port"]) for u, v, d in edges)
            return cls(n, ports, circuits, layout, **meta)
        return cls.from_pairs(n, ports, [(u, v) for u, v, _ in edges], layout, seed=seed, **meta)

    def with_meta(self, **meta: Any) -> "Wiring":
        return Wiring(self.accelerators, self.ports_per_accelerator, self.circuits, self.layout,
                      **{"solve": self.solve, "instance": self.instance, **meta})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Wiring) and self.accelerators == other.accelerators and \
            self.ports_per_accelerator == other.ports_per_accelerator and \
            self.circuits == other.circuits and self.layout == other.layout

    __hash__ = None  # type: ignore[assignment]


# --------------------------------------------------------------------------------------------------
# Traffic
# --------------------------------------------------------------------------------------------------
def _check_matrix(m: Any, field_name: str) -> np.ndarray:
    try:
        import scipy.sparse as sp
        if sp.issparse(m):
            m = m.toarray()
    except ImportError:  # pragma: no cover - scipy is a dependency
        pass
    try:
        arr = np.asarray(m, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput("must be a numeric matrix", field=field_name) from None
    if arr.ndim != 2 or arr.shape[0] != arr.shape[1]:
        raise InvalidInput(f"must be a square matrix, got shape {arr.shape}", field=field_name)
    if arr.shape[0] < 1:
        raise InvalidInput("must have at least one row", field=field_name)
    bad = ~np.isfinite(arr)
    if bad.any():
        i, j = np.argwhere(bad)[0]
        raise InvalidInput(f"entry ({i}, {j}) is {arr[i, j]}, must be finite", field=field_name)
    if (arr < 0).any():
        i, j = np.argwhere(arr < 0)[0]
        raise InvalidInput(f"entry ({i}, {j}) is {arr[i, j]:g}, must be >= 0", field=field_name)
    diag = np.flatnonzero(np.diagonal(arr))
    if diag.size:
        raise InvalidInput(f"diagonal entry ({diag[0]}, {diag[0]}) is {arr[diag[0], diag[0]]:g}, must be 0"
                           " (an accelerator does not send to itself over the fabric)", field=field_name)
    arr = arr.copy()
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class TrafficMatrix:
    """Bytes sent from accelerator i to accelerator j in one step (N x N, zero diagonal), optionally
    split by traffic kind (e.g. ``ep_dispatch``, ``tp_allreduce``); the kinds sum to the total."""

    bytes_: np.ndarray
    by_kind: Mapping[str, np.ndarray] = field(default_factory=dict)
    name: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "bytes_", _check_matrix(self.bytes_, "traffic"))
        kinds = {k: _check_matrix(v, f"traffic[{k}]") for k, v in dict(self.by_kind).items()}
        for k, v in kinds.items():
            if v.shape != self.bytes_.shape:
                raise InvalidInput(f"shape {v.shape} differs from the total {self.bytes_.shape}",
                                   field=f"traffic[{k}]")
        if kinds:
            total = sum(kinds.values())
            if not np.allclose(total, self.bytes_, rtol=1e-9, atol=1e-6):
                raise InvalidInput("kinds do not sum to the total matrix", field="traffic")
        object.__setattr__(self, "by_kind", kinds)

    @classmethod
    def from_kinds(cls, by_kind: Mapping[str, np.ndarray], name: str = "") -> "TrafficMatrix":
        kinds = {k: v for k, v in by_kind.items()}
        if not kinds:
            raise InvalidInput("no traffic kinds given", field="traffic")
        return cls(sum(kinds.values()), kinds, name)

    @property
    def accelerators(self) -> int:
        return int(self.bytes_.shape[0])

    @property
    def total_bytes(self) -> float:
        return float(self.bytes_.sum())

    def row_nonzeros(self) -> np.ndarray:
        """Distinct peers each accelerator talks to (sends to or receives from)."""
        nz = (self.bytes_ > 0) | (self.bytes_.T > 0)
        return nz.sum(axis=1)

    def largest(self, k: int = 10) -> list[tuple[int, int, float]]:
        flat = self.bytes_.ravel()
        k = min(k, int(np.count_nonzero(flat)))
        if k == 0:
            return []
        idx = np.argsort(-flat, kind="stable")[:k]  # ties: lowest (src, dst) first
        n = self.accelerators
        return [(int(i // n), int(i % n), float(flat[i])) for i in idx]

    def kind_totals(self) -> dict[str, float]:
        return {k: float(v.sum()) for k, v in self.by_kind.items()}


@dataclass(frozen=True, eq=False)
class TrafficPhase:
    """One phase of a step's communication: the bytes each accelerator sends each other in one execution
    (N x N, zero diagonal), run `weight` times per step. A step's phases run one after another (the TP
    all-reduce, then the EP dispatch, ...), so each gets the whole fabric to itself while it runs."""

    name: str
    bytes_: np.ndarray
    weight: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "bytes_", _check_matrix(self.bytes_, f"phase[{self.name}]"))
        if not (isinstance(self.weight, (int, float)) and math.isfinite(self.weight) and self.weight > 0):
            raise InvalidInput(f"must be a number > 0, got {self.weight!r}", field=f"phase[{self.name}].weight")


def phases_traffic(phases: tuple[TrafficPhase, ...], name: str = "") -> TrafficMatrix:
    """The step's total traffic of a set of phases: sum of weight x bytes, split by phase name."""
    if not phases:
        raise InvalidInput("no phases given", field="phases")
    shapes = {p.bytes_.shape for p in phases}
    if len(shapes) > 1:
        raise InvalidInput(f"phases have different shapes {sorted(shapes)}", field="phases")
    kinds: dict[str, np.ndarray] = {}
    for p in phases:
        kinds[p.name] = kinds.get(p.name, 0) + p.weight * p.bytes_
    return TrafficMatrix.from_kinds(kinds, name)


# --------------------------------------------------------------------------------------------------
# Collectives and schedules
# --------------------------------------------------------------------------------------------------
class CollectiveKind(str, enum.Enum):
    """Collective operations. Message size `bytes_` means: the buffer of each rank (all-reduce,
    broadcast); the full output (all-gather) or full input (reduce-scatter) of each rank; what each rank
    sends in all (all-to-all, all-to-all-v, split evenly or per `pattern`); the message (p2p)."""

    ALLREDUCE = "allreduce"
    ALLGATHER = "allgather"
    REDUCESCATTER = "reducescatter"
    ALLTOALL = "alltoall"
    ALLTOALLV = "alltoallv"
    BROADCAST = "broadcast"
    P2P = "p2p"


@dataclass(frozen=True)
class Collective:
    kind: CollectiveKind
    ranks: tuple[int, ...]
    bytes_: float
    root: int | None = None

    def __post_init__(self) -> None:
        try:
            object.__setattr__(self, "kind", CollectiveKind(self.kind))
        except ValueError:
            raise InvalidInput(f"unknown collective {self.kind!r}; valid: "
                               + ", ".join(k.value for k in CollectiveKind), field="collective") from None
        ranks = tuple(int(r) for r in self.ranks)
        if len(ranks) < 2:
            raise InvalidInput("a collective needs at least 2 ranks", field="ranks")
        if len(set(ranks)) != len(ranks):
            raise InvalidInput("names an accelerator twice", field="ranks")
        if min(ranks) < 0:
            raise InvalidInput("accelerator ids must be >= 0", field="ranks")
        object.__setattr__(self, "ranks", ranks)
        if not (isinstance(self.bytes_, (int, float)) and math.isfinite(self.bytes_) and self.bytes_ > 0):
            raise InvalidInput(f"must be a finite number > 0, got {self.bytes_!r}", field="bytes")
        if self.root is not None and self.root not in ranks:
            raise InvalidInput(f"root {self.root} is not one of the ranks", field="root")


@dataclass(frozen=True)
class Transfer:
    """Chunk `chunk` moves from `src` to `dst` (`bytes_` bytes), copied or reduced into the destination;
    `path` lists intermediate accelerators when it is forwarded (empty = a direct circuit)."""

    src: int
    dst: int
    chunk: int
    bytes_: float
    reduce: bool = False
    path: tuple[int, ...] = ()


@dataclass(frozen=True)
class Schedule:
    """Steps of transfers; all transfers of a step run concurrently, steps are separated by a barrier."""

    collective: Collective
    chunks: int
    steps: tuple[tuple[Transfer, ...], ...]
    algorithm: str = ""

    def __post_init__(self) -> None:
        if self.chunks < 1:
            raise InvalidInput(f"must be >= 1, got {self.chunks}", field="chunks")


# --------------------------------------------------------------------------------------------------
# Solver parameters and results
# --------------------------------------------------------------------------------------------------
class SolveStatus(str, enum.Enum):
    OPTIMAL = "OPTIMAL"          # proven within the requested relative gap
    FEASIBLE = "FEASIBLE"        # a solution, not proven optimal (e.g. stopped by a limit)
    INFEASIBLE = "INFEASIBLE"    # proven to have no solution
    NO_SOLUTION = "NO_SOLUTION"  # stopped before any solution was found; nothing proven
    ERROR = "ERROR"


class Limit(str, enum.Enum):
    NONE = "none"
    TIME = "time"
    INTERRUPT = "interrupt"
    ITERATIONS = "iterations"

    def settled(self, status: "SolveStatus") -> "Limit":
        """The limit an answer reports: a proven one says none, whatever the clock or move budget cut."""
        return Limit.NONE if status == SolveStatus.OPTIMAL and self in (Limit.TIME, Limit.ITERATIONS) else self


class ProofLog:
    """Verdicts of a long proof's cases (solvers/rings.py's split), kept between runs: entries keyed by the
    instance's fingerprint and the case, each {"verdict", "T", "clock_s"}; verdict "bound" (the rings'
    pattern tables: a lower bound at exactly T from a model that ran to its end) adds its "value". `sink`
    (when set) receives every entry added, e.g. to append it to a file (`synth.formats.open_proof_log`).
    Thread-safe for one writer at a time (the solver adds under its own lock)."""

    VERDICTS = ("infeasible", "unsettled", "bound")

    def __init__(self, entries: Mapping[tuple[str, str], dict] | None = None,
                 sink: Callable[[str, str, dict], None] | None = None):
        self.entries: dict[tuple[str, str], dict] = dict(entries or {})
        self.sink = sink
        self.added = 0

    def get(self, problem: str, case: str) -> dict | None:
        return self.entries.get((problem, case))

    def add(self, problem: str, case: str, entry: dict) -> None:
        """Keep the entry that proves most: an infeasible verdict at the highest T over any unsettled one."""
        old = self.entries.get((problem, case))
        if old is not None and old["verdict"] == "infeasible" and (
                entry["verdict"] != "infeasible" or entry["T"] <= old["T"]):
            return
        self.entries[(problem, case)] = dict(entry)
        self.added += 1
        if self.sink is not None:
            self.sink(problem, case, entry)

    def resume_time(self, problem: str, lo: float, hi: float) -> float | None:
        """The time in (lo, hi] at which this log holds the most infeasible verdicts for `problem` (the
        latest such time on a tie), or None: a proof goes on at the time it was started at, as long as that
        still meets the gap (the best wiring's time, and so the planned T, can move a little between runs)."""
        count: dict[float, int] = {}
        for (p, _), e in self.entries.items():
            if p == problem and e["verdict"] == "infeasible" and lo < e["T"] <= hi:
                count[e["T"]] = count.get(e["T"], 0) + 1
        return max(count, key=lambda t: (count[t], t)) if count else None

    def __len__(self) -> int:
        return len(self.entries)


@dataclass(frozen=True)
class SolveParams:
    """What every solver accepts. `rel_gap` is the gap at which a solve counts as OPTIMAL."""

    time_limit_s: float = spec(60.0, gt=0)
    rel_gap: float = spec(1e-6, ge=0, lt=1)
    # a work limit for the local search (moves tried) instead of the clock: the same seed then gives the same
    # wiring on any machine, as long as the time limit does not stop it first
    max_moves: int | None = spec(None, ge=1)
    threads: int = spec(2, ge=1)
    seed: int = spec(0, ge=0)
    backend: str = spec("auto")
    progress: Callable[[str], None] | None = field(default=None, compare=False)
    # verdicts of long proofs' cases kept between runs (`ocs-synth wire --proof-log`); None: not kept
    proof_log: ProofLog | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        validate(self)


@dataclass(frozen=True)
class SolveResult:
    """One result type for every solver: status, limit that stopped it, objective (minimized), proven
    lower bound, gap, wall time, solver and version, seed, and the artifact (or None)."""

    status: SolveStatus
    objective: float | None
    bound: float | None
    wall_s: float
    solver: str
    solver_version: str = ""
    seed: int = 0
    limit: Limit = Limit.NONE
    artifact: Any = None
    message: str = ""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", SolveStatus(self.status))
        object.__setattr__(self, "limit", Limit(self.limit))
        if self.status in (SolveStatus.OPTIMAL, SolveStatus.FEASIBLE) and self.objective is None:
            raise InvalidInput(f"status {self.status.value} needs an objective", field="objective")
        if self.objective is not None and self.bound is not None and \
                self.bound > self.objective * (1 + 1e-7) + 1e-12:
            raise InvalidInput(f"bound {self.bound:g} exceeds objective {self.objective:g} (minimization)",
                               field="bound")

    @property
    def gap(self) -> float | None:
        """(objective - bound) / objective; None when either is unknown."""
        if self.objective is None or self.bound is None:
            return None
        if self.objective <= 0:
            return 0.0
        if not math.isfinite(self.objective):      # a wiring that never finishes: as far from the bound as can be
            return 1.0
        return max(0.0, (self.objective - self.bound) / self.objective)

    def to_dict(self) -> dict[str, Any]:
        return {"status": self.status.value, "objective": self.objective, "bound": self.bound,
                "gap": self.gap, "wall_s": round(self.wall_s, 6), "solver": self.solver,
                "solver_version": self.solver_version, "seed": self.seed, "limit": self.limit.value,
                **({"message": self.message} if self.message else {}), **dict(self.extra)}
