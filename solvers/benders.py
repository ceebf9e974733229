"""CP-SAT proofs for the time objective: metric-inequality decomposition (Benders for network design).

CP-SAT cannot route fractionally, and integer routing is a restriction (its optimum proves nothing about the
time objective). So CP-SAT decides the circuits only, and routing stays an LP outside it. The bridge is the
Japanese theorem (Iri 1971; Onaga & Kakusho 1971): demands D are routable at throughput lam (every demand
delivered within 1 / lam) on circuits x, each direction of a circuit carrying B bytes/s, if and only if for
every length function l >= 0 on the directed arcs

    B * sum_arcs l_a x_pair(a)  >=  lam * sum_st D_st dist_l(s, t).

With integer lengths the left side is an integer, so a probe at time T (lam = 1 / T) adds the row
sum_p w_p x_p >= ceil(lam W / B) with w_p = l_ij + l_ji and W = sum_st D_st dist_l(s, t) computed exactly
(a Chvatal-Gomory rounding on top). Every row is valid for every wiring at least as good as T, whatever
lengths produced it, so a probe CP-SAT proves INFEASIBLE is a proof that no wiring reaches T.

A probe asks CP-SAT (circuits, switch rows, symmetry and cluster rows, the metric rows so far) for a
proposal; the routing LP (`synth.network.optimal_routing`) times it. Fast enough: a wiring at least as good as
T. Too slow: the LP's capacity duals are a length function the proposal violates, rounded to integers and
added as a row (when rounding loses the violation, or the proposal does not fit on the switches, a no-good
row removes just that proposal). A proposal that cannot route some demand at all gets the cut-set row of
its component instead. Rows persist across probes (re-rounded at each probe's lam). Probes bisect between
the bound and the best wiring, as the MILP's do.

A probe can also carry routing itself (`flow_rows`): integer flows in fine units with an allowance for
rounding a basic fractional routing's paths down, a relaxation of fractional routing, so its INFEASIBLE is
still a proof. It gives CP-SAT's LP the flow polytope the metric rows only approach one proposal at a time;
the two-group case split's CP-SAT probes use it first (`solvers.exact._metric_probes`).
"""
from __future__ import annotations

import math
import time

import numpy as np

from synth.model import SolveParams
from synth.problem import WiringProblem

LENGTH_SCALE = 10 ** 9     # integer lengths: the longest arc of a cut gets this
SHADE = 1e-9               # lam = (1 - SHADE) / T keeps a wiring of exactly T inside the probe


class MetricCuts:
    """The metric rows found so far: (pair weights w, W = sum D dist_w in bytes x length)."""

    def __init__(self, problem: WiringProblem, ix) -> None:
        self.problem = problem
        self.ix = ix
        self.n = ix.n
        self.B = problem.port_bytes_per_s
        self.D = problem.traffic.bytes_.astype(np.float64)
        self.arc_i = np.array([a for a, _ in ix.arcs], dtype=np.int64)
        self.arc_j = np.array([b for _, b in ix.arcs], dtype=np.int64)
        self.rows: list[tuple[np.ndarray, float]] = []

    def _dist(self, length: np.ndarray) -> np.ndarray:
        """All-pairs shortest distances under integer arc lengths (Floyd-Warshall, exact in int64)."""
        big = np.int64(1) << 60
        d = np.full((self.n, self.n), big, dtype=np.int64)
        d[self.arc_i, self.arc_j] = length
        np.fill_diagonal(d, 0)
        for k in range(self.n):
            np.minimum(d, d[:, k, None] + d[None, k, :], out=d)
        return d

    def row(self, arc_length: np.ndarray, scale: int = LENGTH_SCALE) -> tuple[np.ndarray, float] | None:
        """The row of a length function on ix.arcs (any scale, >= 0): integer pair weights (ix.pairs order;
        the longest arc gets `scale`) and W. None when the lengths are all zero."""
        top = float(arc_length.max(initial=0.0))
        if top <= 0:
            return None
        w_arc = np.floor(arc_length / top * scale).astype(np.int64)
        d = self._dist(w_arc)
        mask = self.D > 0
        if (d[mask] >= np.int64(1) << 59).any():
            return None
        W = float((self.D[mask] * d[mask].astype(np.float64)).sum())
        half = len(self.ix.pairs)
        w = w_arc[:half] + w_arc[half:]      # ix.arcs lists every pair forward, then every pair backward
        return w, W

    def rhs(self, W: float, lam: float) -> int:
        return int(math.ceil(lam * W / self.B * (1 - 1e-12)))

    def cut_set(self, inside: np.ndarray) -> np.ndarray:
        """Lengths 1 on the arcs leaving a set of accelerators."""
        return (inside[self.arc_i] & ~inside[self.arc_j]).astype(np.float64)

    def lp_lengths(self, xhat: np.ndarray) -> tuple[float, np.ndarray]:
        """(time of the best routing on circuits xhat (ix.pairs order), its dual lengths on ix.arcs); inf and
        the cut-set lengths of a component when some demand has no path."""
        import scipy.sparse as sp
        from scipy.sparse.csgraph import connected_components

        from synth.network import Network, optimal_routing
        pairs = np.array(self.ix.pairs, dtype=np.int64).reshape(-1, 2)
        on = xhat > 0
        g = sp.csr_matrix((np.ones(int(on.sum())), (pairs[on, 0], pairs[on, 1])), shape=(self.n, self.n))
        _, lab = connected_components(g, directed=False)
        split = (self.D > 0) & (lab[:, None] != lab[None, :])
        if split.any():
            s, _ = np.argwhere(split)[0]
            return float("inf"), self.cut_set(lab == lab[s])
        net = Network.from_pairs("proposal", self.n, self.n, pairs, xhat * self.B, 0.0)
        out: list = []
        theta, _ = optimal_routing(net, self.D, crossover=False, lengths_out=out)
        length = np.zeros((self.n, self.n))
        length[net.src, net.dst] = out[0]
        return float(theta), length[self.arc_i, self.arc_j]


RELAY_UNITS = 10 ** 6       # relay-count rows count bytes in units of (one circuit's bytes in T) / this


def _lower_hull(table: np.ndarray) -> list[tuple[int, int]]:
    """The points (k, table[k]) on the lower convex hull, left to right: its edges are rows every point
    satisfies (the relays' convex envelope, which CP-SAT's LP does not get from an element constraint;
    without them it cannot see that 9 circuits across llama405b-tp8pp2-16's stages cost too much)."""
    hull: list[tuple[int, int]] = []
    for k, t in enumerate(table.tolist()):
        while len(hull) >= 2 and (hull[-1][1] - hull[-2][1]) * (k - hull[-1][0]) >= \
                (t - hull[-1][1]) * (hull[-1][0] - hull[-2][0]):
            hull.pop()
        hull.append((k, t))
    return hull


def relay_count_rows(m, problem: WiringProblem, ix, x: dict, T: float) -> int:
    """The relay-count rows (solvers/bounds.py) at time T, exact in the integer circuits: for the whole
    fabric and for each demand cluster S, S's internal bytes plus the bytes its pairs cannot send straight
    (max(0, bytes - x B T) each way, looked up by x) fit in two directions of S's internal and crossing
    circuits; the whole fabric's row also counts `node_excess` (relay capacity the accelerators that receive
    more than they send cannot lend). Each pair's table also gives the edges of its lower convex hull as rows
    (`_lower_hull`). Bytes are counted in whole units rounded down, so the rows stay valid. Returns how many."""
    from .bounds import demand_clusters, node_excess
    t = problem.traffic.bytes_
    bt = problem.port_bytes_per_s * T
    unit = bt / RELAY_UNITS
    relay: dict[tuple[int, int], object] = {}
    for p in ix.pairs:
        d1, d2 = float(t[p]), float(t[p[::-1]])
        if d1 <= 0 and d2 <= 0:
            continue
        ks = np.arange(ix.max_x[p] + 1)
        table = np.floor((np.maximum(0.0, d1 - ks * bt) + np.maximum(0.0, d2 - ks * bt)) / unit).astype(np.int64)
        r = m.NewIntVar(0, int(table[0]), f"relay_{p[0]}_{p[1]}")
        m.AddElement(x[p], table.tolist(), r)
        hull = _lower_hull(table)
        for (k1, t1), (k2, t2) in zip(hull, hull[1:]):
            if t1 > 0:
                m.Add((k2 - k1) * r >= (k2 - k1) * t1 + (t2 - t1) * (x[p] - k1))
        relay[p] = r
    sets = [(np.ones(ix.n, dtype=bool), 0.0)] + list(demand_clusters(t))
    for k, (inside, _) in enumerate(sets):
        inner = [p for p in ix.pairs if inside[p[0]] and inside[p[1]]]
        crossing = [p for p in ix.pairs if inside[p[0]] != inside[p[1]]]
        own = int(math.floor(t[np.ix_(inside, inside)].sum() / unit)) + \
            (int(math.floor(node_excess(t) / unit)) if k == 0 else 0)
        m.Add(own + sum(relay[p] for p in inner if p in relay)
              <= 2 * RELAY_UNITS * (sum(x[p] for p in inner) + sum(x[p] for p in crossing)))
    return len(sets)


FLOW_ALLOWANCE = 1e-3       # integer flows: the rounding allowance at most this share of the smallest source's bytes
FLOW_UNITS_MAX = 10 ** 6    # units per circuit at most (CP-SAT's coefficients)


def flow_units(problem: WiringProblem, ix, T: float) -> tuple[int, int]:
    """(C, allowance) of `flow_rows` at time T: C units per circuit direction (its B T bytes), as many as keep
    the allowance K + A units (demand pairs and arcs, the most paths a basic routing uses) within
    FLOW_ALLOWANCE of the smallest source's bytes."""
    t = problem.traffic.bytes_
    rows = t.sum(axis=1)
    least = float(rows[rows > 0].min()) / (problem.port_bytes_per_s * T)      # in circuits' worth
    ports = int(problem.layout.capacity.sum())
    allowance = int((t > 0).sum()) + min(len(ix.arcs), 2 * (ports // 2))
    return int(min(FLOW_UNITS_MAX, max(100, math.ceil(allowance / (FLOW_ALLOWANCE * least))))), allowance


def flow_rows(m, problem: WiringProblem, ix, x: dict, T: float) -> int:
    """Routing inside CP-SAT, as a relaxation that stays valid for fractional routing: integer flows in units
    of u = B T / C bytes (C from `flow_units`), split by hop as in the MILP's layered routing (straight to
    the destination, the first hop of a relayed byte, its later hops; each pair's relayed bytes meet the
    residual-capacity row on its circuits), each demand pair delivering g <= ceil(D / u) units, and all
    pairs together short of ceil(D / u) by at most K + A units. Why that holds for every wiring with time
    <= T: its routing is a path flow meeting K demand rows and A capacity rows, so a basic one uses at most
    K + A paths (Caratheodory); rounding each path's flow down to whole units keeps every capacity and the
    layering and loses less than a unit per path. So INFEASIBLE proves no wiring reaches T. Unlike the
    metric rows, which CP-SAT learns one proposal at a time, these put the whole flow polytope into CP-SAT's
    LP, where its cuts and branching work on it as HiGHS does on the MILP's (llama405b-tp8pp2-16's last case
    of the split: INFEASIBLE in 21-104 s here, unsettled for hours by metric probes). Finding integer flows
    is harder for CP-SAT than proposing circuits, so these serve proofs. Returns the flow variables' count."""
    from .exact import layered_source
    D = problem.traffic.bytes_.astype(np.float64)
    C, allowance = flow_units(problem, ix, T)
    u = problem.port_bytes_per_s * T / C
    d = np.ceil(D / u - 1e-9).astype(np.int64)
    loads: dict[tuple[int, int], list] = {a: [] for a in ix.arcs}
    short = []
    for k in (int(k) for k in ix.srcs):
        dests = [int(v) for v in np.flatnonzero(d[k] > 0)]
        top = int(d[k].sum())
        g = {v: m.NewIntVar(0, int(d[k, v]), f"g_{k}_{v}") for v in dests}
        _, _, _, relayed = layered_source(ix, k, dests, lambda name, v: m.NewIntVar(0, top if v is None else
                                                                                      int(d[k, v]), name),
                                          m.Add, sum, g, loads)
        for v in dests:
            dv = int(d[k, v])
            short.append(dv - g[v])
            p = (min(k, v), max(k, v))
            mm = dv // C
            if p in ix.max_x and mm + 1 <= ix.max_x[p] and dv > C * mm:
                # relayed >= (d - C x)+ on the convex hull over integer x, less what goes undelivered (d - g)
                m.Add(relayed[v] + dv - g[v] >= (dv - C * mm) * (mm + 1 - x[p]))
    for (a, b), terms in loads.items():
        if terms:
            m.Add(sum(terms) <= C * x[(min(a, b), max(a, b))])
    m.Add(sum(short) <= allowance)
    return sum(len(t) for t in loads.values())


def exclude(m, xs: list, vals: np.ndarray) -> None:
    """A no-good row: CP-SAT variables `xs` take some value other than `vals`."""
    lits = []
    for i, v in enumerate(vals):
        b = m.NewBoolVar("")
        m.Add(xs[i] != int(v)).OnlyEnforceIf(b)
        lits.append(b)
    m.AddBoolOr(lits)


def probe(problem: WiringProblem, ix, cuts: MetricCuts, T: float, deadline: float, params: SolveParams,
          sym, per_switch: bool, hint: np.ndarray | None = None, case=None, labelled: bool = False,
          flows: bool = False, rows=None, live=None):
    """Is there a wiring with time <= T? Returns ("infeasible", None, stats), ("found", (counts, time),
    stats) or ("unknown", None, stats) when the deadline came first. `hint` (circuits per pair, e.g. the
    best wiring's) steers CP-SAT's proposals towards its neighbourhood; `case` = (groups, case) restricts
    it to one case of the two-group split (`solvers.stages.add_case_rows_cpsat`), `labelled` to its labelled
    form (only on `solvers.stages.symmetric_relaxation`, with `sym` from the case's labels). `flows` adds
    the integer-flow relaxation (`flow_rows`): stronger proofs, slower proposals. `rows(model, x)` adds
    rows of the caller's (a case of `solvers.patterns`). `live` (`solvers.stages.Live`): a probe in a worker
    thread, whose CP-SAT search the caller stops on Ctrl-C (CP-SAT's own Ctrl-C reaches the main thread only);
    once it is stopped the probe answers "unknown"."""
    from ortools.sat.python import cp_model

    from .ctrl_c import CpsatCtrlC
    from .exact import _counts_or_proof, cpsat_topology
    lam = (1 - SHADE) / T
    B = cuts.B
    m = cp_model.CpModel()
    need_of = lambda b: math.ceil(lam * b / B * (1 - 1e-9))
    y, x, _ = cpsat_topology(m, problem, ix, per_switch, need_of, sym)
    relay_count_rows(m, problem, ix, x, T / (1 - SHADE))
    if flows:
        flow_rows(m, problem, ix, x, T / (1 - SHADE))
    if case is not None:
        from .stages import add_case_rows_cpsat
        add_case_rows_cpsat(m, ix.pairs, x, case[0], case[1], labelled)
    if rows is not None:
        rows(m, x)
    xs = [x[p] for p in ix.pairs]

    def add_row(w: np.ndarray, W: float) -> None:
        nz = np.flatnonzero(w)
        m.Add(sum(int(w[i]) * xs[i] for i in nz) >= cuts.rhs(W, lam))

    def no_good(vals: np.ndarray) -> None:
        exclude(m, xs, vals)

    for w, W in cuts.rows:
        add_row(w, W)
    if hint is not None:
        for v, h in zip(xs, hint):
            m.AddHint(v, int(h))
    stats = {"proposals": 0, "rows_added": 0, "no_goods": 0}
    while True:
        left = deadline - time.perf_counter()
        if left < 0.2:
            return "unknown", None, stats
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = left
        solver.parameters.num_workers = params.threads
        solver.parameters.random_seed = params.seed
        if live is not None:
            if live.stopped:
                return "unknown", None, stats
            live.add(solver)
        ctrl_c = CpsatCtrlC(solver)
        try:
            st = ctrl_c.solve(m)
        finally:
            if live is not None:
                live.discard(solver)
        if ctrl_c.hit:
            raise KeyboardInterrupt           # Ctrl-C, which CP-SAT caught: the caller returns what it has
        if st == cp_model.INFEASIBLE:
            return "infeasible", None, stats
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return "unknown", None, stats
        stats["proposals"] += 1
        xhat = np.array([solver.Value(v) for v in xs], dtype=np.int64)
        theta, length = cuts.lp_lengths(xhat.astype(np.float64))
        if theta <= T:
            counts, proven = _counts_or_proof(problem, {k: solver.Value(v) for k, v in y.items()} if per_switch
                                              else dict(zip(ix.pairs, xhat.tolist())), per_switch, deadline)
            if counts is not None:
                return "found", (counts, theta), stats
            if not proven:                    # no colouring found in time: excluding it would prove nothing
                return "unknown", None, stats
            no_good(xhat)                     # fast enough but does not fit on the switches
            stats["no_goods"] += 1
            continue
        row = cuts.row(length)
        if row is not None and int(row[0] @ xhat) < cuts.rhs(row[1], lam):
            cuts.rows.append(row)
            add_row(*row)
            stats["rows_added"] += 1
        else:                                 # rounding lost the violation: exclude just this proposal
            no_good(xhat)
            stats["no_goods"] += 1
