"""Coupled groups (a pipeline of tensor-parallel groups): a case split on the circuits between two of
them, and a net test for more, for proofs of the time objective.

Why. On such an instance the whole-instance MILP stalls at the relay count: its relaxation spreads the
groups' relays over many fractional circuits between the groups, and branching on circuits does not move
its dual bound (llama405b-tp8pp2-16: flat for 1800 s, 1.1% below the best wiring). What decides the
optimum is how many circuits join the groups and which accelerators hold them: each such circuit costs its
endpoints a port inside their group, and a byte relayed through the other group costs that group capacity
too, unless an accelerator there turns it around (it holds circuits to two accelerators of the sender).

Cases. Write c for the circuits between the groups and x_g(v) for how many of them accelerator v of group
g holds (its cross degree); every wiring falls in exactly one case (c, the multiset of x_A, that of x_B).

One group's model (`group_relays`), at time T, in units of B T bytes (one circuit direction's worth):
integer circuits y inside the group with degree + x <= ports; the group's own demand routed by source
over its circuits and through an outside node S (the other group) whose arcs from and to v carry at
most x(v) units each; the crossing demand (bytes each accelerator sends out of and receives from the
other group) over the same arcs; h units of the other group's relays entering at some v and leaving at
another accelerator (or at v itself when x(v) >= 2, a turnaround); and per source the relay-count row
(its bytes use at least demand + relayed units of circuits inside, less two for every unit that went
across instead). Minimize r - w h, r the own bytes sent across. Every wiring at least as good as T with
simple routing paths maps into it (flows with cycles cancel to simple ones), so its optimum rho_g(h)
(w = 0) bounds below what group g sends across while carrying h of the other's bytes; with h a variable
in [h_lo, h_hi], w = 1 gives min (rho_g(h) - h).

Coupling: the other group carries exactly what one sends across, r_A = h_B and r_B = h_A, and each
direction across carries r_A + r_B + the crossing bytes <= c. A case is closed at T when
- count: rho_A(0) + rho_B(0) + crossing > c (or a group's model is infeasible),
- net: (rho_A(h) - h) + (rho_B(h) - h) > 0 at the minimum over the feasible h of each (adding
  r_A >= rho_A(r_B) and r_B >= rho_B(r_A) gives 0 >= that sum),
- or after raising the lower bounds a few rounds (r_A >= rho_A(lower bound of r_B), and back) count does.
Cases none of these closes go to whole-instance probes at T (MILP or CP-SAT). First the labelled probe
on the instance with the groups apart (`symmetric_relaxation`: without the hand-off between the groups
every relabelling inside a group is an automorphism, so each accelerator's cross degree can be fixed,
the largest first; llama405b-tp8pp2-16's last open case closes in 22 s this way, where the probe below
stalled 1.1% short for 950 s); when the relaxation reaches T but its wiring does not on the instance, the
probe on the instance itself with rows for the case (binaries for each accelerator's cross degree over
the case's multisets; the rows are invariant under the automorphisms, so the node-symmetry rows stay
valid). Every c > C_MAX goes to one probe with at least C_MAX + 1 circuits across. If every case is
closed or proven infeasible, no wiring reaches T.

More groups (k >= 3, e.g. a four-stage pipeline): the net argument holds group by group. With r_g the
units of group g's own bytes that leave it and h_g the units of other groups' bytes it carries (enter and
leave), every byte that leaves its group passes through at least one other before it comes back, so
sum_g h_g >= sum_g r_g, while r_g >= rho_g(x_g, h_g) for g's cross degrees x_g: sum_g (rho_g(x_g, h_g) - h_g)
<= 0 for every wiring at T. One model per group with its cross degrees free (`group_relays` with x None)
and h free minimizes rho_g - h over every x_g and h at once; when the sum of the minima (or of their dual
bounds) is positive, no wiring reaches T (`net_test`), and `groups_bound` searches for the largest such T.
No cases are enumerated, so the test covers any number of circuits between the groups; it does not see
which groups the circuits join. On llama405b-tp8pp4-32 every group needs circuits across, each costs an
accelerator a port of its group's all-to-all, and relaying through the other groups costs them what it saves.
The exact back-ends run it first and then `solvers.rings` (whole-instance case probes on the graph of the
groups, which see it) in the time left, which can only raise its bound.

Applies when the demand is k >= 2 identical groups (`solvers.coupled.coupled_groups`) with uniform demand
inside, the same ports at every accelerator and the same crossing bytes out of (and into) every
accelerator of a group: then each group's model is symmetric under any relabelling and cases are
multisets (partitions of c). Anything else: `uniform_groups` returns None and nothing here runs.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, replace
import numpy as np

from synth.problem import WiringProblem

C_MAX = 8            # circuits between the groups enumerated case by case; more: one whole probe
RAISE_ROUNDS = 6     # rounds of r_A >= rho_A(r_B), r_B >= rho_B(r_A)
TOL = 1e-7           # in circuit units


@dataclass(frozen=True)
class UniformGroups:
    groups: tuple[tuple[int, ...], ...]
    d: float                        # bytes between every ordered pair inside a group
    ports: int                      # ports of every accelerator
    out_b: tuple[float, ...]        # bytes each accelerator of group g sends out of its group
    in_b: tuple[float, ...]         # bytes each accelerator of group g receives from outside it
    port_bytes_per_s: float

    @property
    def n(self) -> int:
        return len(self.groups[0])

    def kind(self, out_b: float, in_b: float) -> "UniformGroups":
        """One group of these with the given crossing bytes per accelerator (group 0 of the result), for
        `group_relays`: groups with the same crossing bytes have the same model."""
        return replace(self, groups=self.groups[:1], out_b=(out_b,), in_b=(in_b,))

    @property
    def least(self) -> tuple[float, float]:
        """The least crossing bytes out and in over the groups: a kind whose model bounds every group's."""
        return min(self.out_b), min(self.in_b)


def uniform_groups(problem: WiringProblem) -> UniformGroups | None:
    """The instance as k >= 2 symmetric coupled groups (module doc), or None."""
    from .coupled import coupled_groups, group_labels
    if problem.objective != "time" or problem.policy == "direct" or problem.fixed_circuits:
        return None
    groups = coupled_groups(problem)
    if groups is None or len(groups) < 2:
        return None
    t = problem.traffic.bytes_.astype(np.float64)
    ports = problem.layout.capacity.sum(axis=1)
    if len(set(ports.tolist())) != 1:
        return None
    g0 = groups[0]
    inner = t[np.ix_(g0, g0)]
    off = ~np.eye(len(g0), dtype=bool)
    if len(np.unique(inner[off])) != 1 or inner[off][0] <= 0:
        return None
    lab = group_labels(groups, problem.accelerators)
    across = np.where(lab[:, None] == lab[None, :], 0.0, t)
    o, i = across.sum(axis=1), across.sum(axis=0)       # each accelerator's bytes out of / into its group
    if any(np.ptp(o[a]) > 0 or np.ptp(i[a]) > 0 for a in groups):
        return None
    out_b, in_b = [float(o[a[0]]) for a in groups], [float(i[a[0]]) for a in groups]
    return UniformGroups(tuple(tuple(map(int, g)) for g in groups), float(inner[off][0]), int(ports[0]),
                         tuple(out_b), tuple(in_b), problem.port_bytes_per_s)


def two_groups(problem: WiringProblem) -> UniformGroups | None:
    """The instance as two symmetric coupled groups (for the case split), or None."""
    ug = uniform_groups(problem)
    return ug if ug is not None and len(ug.groups) == 2 else None


def partitions(c: int, parts: int, largest: int | None = None):
    """Partitions of c into at most `parts` parts, each at most `largest`, largest part first."""
    largest = c if largest is None else largest
    if c == 0:
        yield ()
        return
    if parts == 0:
        return
    for k in range(min(c, largest), 0, -1):
        for rest in partitions(c - k, parts - 1, k):
            yield (k,) + rest


LEX_ROWS = True     # off only in the test that checks they keep every minimum


def lex_rows(H, P: int, x: list, y0: list, y1: list, fixed: bool = False) -> None:
    """Symmetry rows for interchangeable accelerators (a group's, up to their circuits across x): positions
    1, 2, ... in lexicographic order of (x, circuits to position 0, circuits to position 1), y0[v] and y1[v]
    (integers in [0, P]: one row per level, weights (P + 1)^k), or, with x `fixed` (numbers), within runs of
    equal x. Any wiring relabels into that order (0 a largest x, 1 the largest (x, y0) among the rest, the rest
    sorted), so a model's minimum stays and the solver searches one labelling of each: llama405b-tp8pp4-32's
    one-group model with x free at 12.27-12.29 ms took 30-112 s, now 8-10 s (BENCHMARKS, 26th session)."""
    n = len(x) if LEX_ROWS else 0
    for v in range(1, n - 1):
        if fixed and x[v] != x[v + 1]:
            continue
        dx = 0 if fixed else x[v] - x[v + 1]
        d0 = y0[v] - y0[v + 1]
        H.addConstr((P + 1) * dx + d0 >= 0)
        if v >= 2:
            H.addConstr((P + 1) ** 2 * dx + (P + 1) * d0 + y1[v] - y1[v + 1] >= 0)


def group_relays(tg: UniformGroups, g: int, x: tuple[int, ...] | None, T: float, h_lo: float = 0.0,
                 h_hi: float | None = None, w: float = 0.0, time_limit_s: float = 120.0,
                 threads: int = 1, live: Live | None = None, across: tuple[int, int | None] = (1, None)) -> float:
    """A lower bound on min (r - w h) over group g's model at time T (module doc); inf when it is
    infeasible. h is fixed at h_lo unless h_hi is given. x None leaves the cross degrees to the model
    (integers in decreasing order, the group being symmetric; at least one circuit across when the group
    has crossing bytes; a turnaround at v needs x(v) >= 2): its optimum is the least over every x, or over
    every x with `across` = (least, most or None) circuits across in all. A solve
    stopped by its time limit returns its dual bound (still a valid lower bound). The HiGHS object sits in
    `live` while it runs (so another thread can cancel it)."""
    import highspy
    n, P = tg.n, tg.ports
    unit = tg.port_bytes_per_s * T
    d = tg.d / unit
    po, pi = tg.out_b[g] / unit, tg.in_b[g] / unit
    free = x is None
    if not free:
        x = tuple(x) + (0,) * (n - len(x))
        if sum(x) == 0 and (po > 0 or pi > 0 or h_lo > 0):
            return math.inf
    H = highspy.Highs()
    H.setOptionValue("output_flag", False)
    H.setOptionValue("time_limit", float(time_limit_s))
    from .highs import threads as fit
    H.setOptionValue("threads", fit(threads))
    H.setOptionValue("mip_rel_gap", 1e-9)
    S = n
    pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
    y = {p: H.addIntegral(lb=0, ub=P) for p in pairs}
    if free:
        x = [H.addIntegral(lb=0, ub=P) for _ in range(n)]
        on = [H.addBinary() for _ in range(n)]          # on[v] = x(v) >= 1
        for v in range(n):
            H.addConstr(x[v] - on[v] >= 0)
            H.addConstr(x[v] - P * on[v] <= 0)
        for v in range(n - 1):
            H.addConstr(x[v] - x[v + 1] >= 0)
        least, most = across
        if po > 0 or pi > 0 or least > 1:
            H.addConstr(sum(x) >= max(1, least))
        if most is not None:
            H.addConstr(sum(x) <= most)
    for i in range(n):
        H.addConstr(sum(y[p] for p in pairs if i in p) + x[i] <= P)
    lex_rows(H, P, x, [y[(0, v)] if v else 0 for v in range(n)], [y[(1, v)] if v > 1 else 0 for v in range(n)],
             fixed=not free)
    cross = [v for v in range(n) if free or x[v]]
    inner = [(i, j) for i in range(n) for j in range(n) if i != j]
    outs = [(i, S) for i in cross]
    ins = [(S, j) for j in cross]
    arcs = inner + outs + ins
    load: dict[tuple[int, int], list] = {a: [] for a in arcs}

    def conserve(f: dict, supply) -> None:
        for v in range(n + 1):
            o = [f[a] for a in f if a[0] == v]
            i_ = [f[a] for a in f if a[1] == v]
            rhs = supply(v)
            if o or i_ or rhs:
                H.addConstr(sum(o) - sum(i_) == rhs)

    own_out = []
    k_ = math.floor(d)
    for s in range(n):
        f = {a: H.addVariable(lb=0) for a in arcs}
        conserve(f, lambda v, s=s: (n - 1) * d if v == s else 0.0 if v == S else -d)
        for a, var in f.items():
            load[a].append(var)
        rs = [f[a] for a in outs]
        own_out += rs
        over = []
        for j in range(n):
            if j == s:
                continue
            yy = y[(min(s, j), max(s, j))]
            o = H.addVariable(lb=0)
            H.addConstr(o + yy >= d)
            if d - k_ > 1e-6:          # (a smaller coefficient: HiGHS warns, and the row says nothing)
                H.addConstr(o + (d - k_) * yy >= (d - k_) * (k_ + 1))
            over.append(o)
        # relay count: own bytes use >= demand + relayed units inside, less 2 per unit sent across
        H.addConstr(sum(f[a] for a in inner) - sum(over) + 2 * sum(rs) >= (n - 1) * d)
    for amount, sign in ((po, 1.0), (pi, -1.0)):
        if amount <= 0:
            continue
        f = {a: H.addVariable(lb=0) for a in arcs}
        conserve(f, lambda v, amount=amount, sign=sign: sign * (amount if v < n else -n * amount))
        for a, var in f.items():
            load[a].append(var)
    entries = []
    for k in cross:
        ka = inner + [(S, k)] + [(v, S) for v in cross if v != k or free or x[k] >= 2]
        f = {a: H.addVariable(lb=0) for a in ka}
        conserve(f, lambda v: 0.0)
        for a, var in f.items():
            load[a].append(var)
        if free:                        # turning around at k takes two of its circuits
            H.addConstr(f[(k, S)] - P * x[k] + P * on[k] <= 0)
        entries.append(f[(S, k)])
    hv = None
    if entries:
        hv = H.addVariable(lb=h_lo, ub=h_lo if h_hi is None else max(h_lo, h_hi))
        H.addConstr(sum(entries) - hv >= 0)
    elif h_lo > 0:
        return math.inf
    for (i, j) in pairs:
        for a in ((i, j), (j, i)):
            if load[a]:
                H.addConstr(sum(load[a]) - y[(i, j)] <= 0)
    for v in cross:
        H.addConstr(sum(load[(v, S)]) - x[v] <= 0)
        H.addConstr(sum(load[(S, v)]) - x[v] <= 0)
    obj = sum(own_out) if own_out else 0.0
    if w and hv is not None:
        obj = obj - w * hv
    if live is not None:
        live.add(H)
    try:
        H.minimize(obj)
    finally:
        if live is not None:
            live.discard(H)
    status = H.getModelStatus()
    if status in (highspy.HighsModelStatus.kInfeasible,):
        return math.inf
    info = H.getInfo()
    if status == highspy.HighsModelStatus.kOptimal:
        return float(info.objective_function_value)
    bound = float(info.mip_dual_bound)
    return bound if np.isfinite(bound) else -math.inf


class Live:
    """The solves that worker threads are running, so that Ctrl-C or a deadline stops them all: HiGHS models
    and CP-SAT solvers (`solvers.patterns`). highspy's cancelSolve only sets a flag that its interrupt
    callbacks read, and those are off unless HandleUserInterrupt is on: `add` turns them on. The stop is
    sticky: a model added after `cancel` (a worker still building it) is cancelled at once, and HiGHS reads
    the flag at its first callback. CP-SAT can lose a StopSearch that comes while Solve is still copying its
    model, so a caller waiting for CP-SAT workers calls `cancel` again until they return."""

    def __init__(self) -> None:
        self._models: set = set()
        self.stopped = False

    @staticmethod
    def _stop(H) -> None:
        if hasattr(H, "StopSearch"):          # a CP-SAT solver
            H.StopSearch()
        else:                                 # a HiGHS model
            H.cancelSolve()

    def add(self, H) -> None:
        if not hasattr(H, "StopSearch"):
            H.HandleUserInterrupt = True
        self._models.add(H)
        if self.stopped:
            self._stop(H)

    def discard(self, H) -> None:
        self._models.discard(H)

    def cancel(self) -> None:
        self.stopped = True
        for H in list(self._models):
            self._stop(H)


def parallel(fn, items: list, threads: int, live: Live) -> list:
    """fn over items, `threads` at a time (HiGHS releases the GIL; the caller waits in a lock, where Ctrl-C
    reaches it). On Ctrl-C or the first exception in any worker (e.g. TimeoutError) the models in `live` are
    cancelled, the items not started are dropped, and the exception passes on once the workers have
    returned."""
    from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
    with ThreadPoolExecutor(max(1, threads)) as pool:
        try:
            futures = [pool.submit(fn, item) for item in items]
            done, _ = wait(futures, return_when=FIRST_EXCEPTION)     # not in order: any failure ends it
            for f in done:
                if f.exception() is not None:
                    raise f.exception()
            return [f.result() for f in futures]
        except BaseException:
            pool.shutdown(cancel_futures=True, wait=False)
            live.cancel()
            raise


def net_term(tg: UniformGroups, x: tuple[int, ...] | None, T: float, time_limit_s: float, live: Live | None = None,
             across: tuple[int, int | None] = (1, None)) -> float:
    """The net test's term for group 0 of `tg`: a lower bound on min (r - h) over its model with the carried
    bytes h free (cross degrees x, or free with `across` circuits across); inf when it is infeasible."""
    return group_relays(tg, 0, x, T, 0.0, float(tg.n * tg.ports), 1.0, time_limit_s, live=live, across=across)


def net_test(ug: UniformGroups, T: float, deadline: float, model_time_s: float = 900.0,
             live: Live | None = None, least: bool = True) -> tuple[float, dict]:
    """The net test of k groups at T (module doc): the sum over the groups of a lower bound on
    min (r - h) over each one's model with its cross degrees free; a sum above TOL says no wiring reaches T.
    Groups with less crossing bytes need less, so the group with the least crossing each way bounds every
    group (one model, k times) and settles most tests; the groups' own kinds are solved only when it does
    not, or at once with `least` False (each kind's bound is at least the least one's, so the sum is never
    weaker: the caller skips the least kind where it already failed at a lower T). Returns (sum, {kind: its
    bound}); TimeoutError when the deadline has passed."""
    live = Live() if live is None else live
    k = len(ug.groups)

    def m(out_b: float, in_b: float) -> float:
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError
        return net_term(ug.kind(out_b, in_b), None, T, min(model_time_s, left), live)

    kinds = list(zip(ug.out_b, ug.in_b))
    several = len(set(kinds)) > 1
    values, total = {}, -math.inf
    if least or not several:
        values[ug.least] = m(*ug.least)
        total = k * values[ug.least]
    if several and (not values or total <= TOL and np.isfinite(total)):
        for kind in dict.fromkeys(kinds):
            if kind not in values:
                values[kind] = m(*kind)
        total = sum(values[kind] for kind in kinds)
    return total, values


def groups_bound(ug: UniformGroups, lo: float, hi: float, deadline: float, threads: int = 1,
                 rel_gap: float = 1e-6, say=None, first: tuple[float, ...] | None = None,
                 live: Live | None = None, tests: list | None = None,
                 settle: float = 0.0) -> tuple[float, list[dict]]:
    """The largest time the net test closes in [lo, hi) (hi: the best wiring's time, lo: a bound), with
    `threads` tests at a time, each at its own time, until the deadline or the two ends meet within rel_gap.
    The sum falls steadily with T, so once a closed and an open test have sums, the next tests sit just below
    the root of the line through them (the secant); before that, near hi (instance bounds such as the relay
    count are usually the weak side), and evenly spread when a sum is missing. Returns (bound >= lo, one entry
    per test for the solve's rounds). `first`: the first tests' fractions of the way from lo to hi instead (a
    short clock starts low: near the best wiring a test takes minutes). `live.cancel()` from another thread
    stops the test running and the search. `tests`: a list the tests are appended to as they end, which a caller
    whose run ended in an exception (Ctrl-C) still holds (`closed_bound`). `settle` > 0: once a test stayed open
    below hi (1 - rel_gap), so no bound from this test closes the gap, stop when the closed and the open test are
    within `settle` times what is left above the open one (a caller with a stronger proof to run next, the
    rings: refining the bound further buys less than that proof's clock)."""
    say = say or (lambda msg: None)
    live = Live() if live is None else live
    bound, top, tests = lo, hi, ([] if tests is None else tests)
    closed_at = open_at = None          # (T, sum) of the highest closed and the lowest open test with a sum
    k = max(1, threads)
    fractions = list(first) if first else [1 - 0.1 / 2 ** i for i in range(k)]

    least_failed = [math.inf]     # the lowest T where the least kind alone did not close: above it, skip it

    def run(T: float):
        t0 = time.perf_counter()
        try:
            total, values = net_test(ug, T, deadline, live=live, least=T < least_failed[0])
        except TimeoutError:
            return T, None, {}, time.perf_counter() - t0
        if ug.least in values and len(ug.groups) * values[ug.least] <= TOL:
            least_failed[0] = min(least_failed[0], T)
        return T, total, values, time.perf_counter() - t0

    while top - bound > rel_gap * top and deadline - time.perf_counter() > 1.0 and not live.stopped:
        if settle > 0 and top < hi * (1 - rel_gap) and top - bound <= settle * (hi - top):
            break
        points = [bound + f * (top - bound) for f in fractions]
        if closed_at and open_at and np.isfinite(open_at[1]):
            (ta, sa), (tb, sb) = closed_at, open_at
            root = ta + sa * (tb - ta) / (sa - sb)
            if bound < root < top:
                points = [root - f * (root - bound) for f in (0.01, 0.1, 0.3)[:k]]
        for T, total, values, wall in parallel(run, points, threads, live):
            if total is None:
                continue
            closed = total > TOL
            tests.append({"probe": T, "status": "groups net", "closed": closed, "sum_units": total,
                          "kinds": {f"{o:g}/{i:g} B": v for (o, i), v in values.items()}, "wall_s": round(wall, 1)})
            say(f"groups net test at {T:.6g} s: " + ("no wiring reaches it" if closed else "not closed")
                + f" (sum {total:.4g} circuit units, {wall:.0f} s)")
            if closed and T > bound:
                bound, closed_at = T, (T, total)
            elif not closed and T < top:
                top, open_at = T, (T, total)
        if top <= bound:        # a test below a closed one did not close (out of time): nothing more to try
            break
        fractions = [(i + 1) / (k + 1) for i in range(k)]
    return bound, tests


def closed_bound(tests: list[dict], lo: float) -> float:
    """The bound `groups_bound`'s tests so far prove: the highest time a test closed (no wiring reaches it), or lo."""
    return max([lo] + [t["probe"] for t in tests if t.get("closed")])


@dataclass
class CaseSplit:
    """The cases at one T: which closed and how, which are left for whole-instance probes."""
    T: float
    closed: dict          # (c, x_A, x_B) -> reason
    open: list            # [(c, x_A, x_B)]
    models: int           # one-group models solved
    wall_s: float


def split_cases(tg: UniformGroups, T: float, deadline: float, c_max: int = C_MAX, threads: int = 1,
                model_time_s: float = 120.0, closed_at: dict | None = None, c_min: int = 1) -> CaseSplit | None:
    """Run the tests of the module doc on every case with c_min <= c <= c_max; None when the deadline passes
    first (then nothing is claimed). A case in `closed_at` closed at a time >= T stays closed (no wiring
    in it reaches that time, so none reaches T) and is not looked at again. The one-group models run
    `threads` at a time (HiGHS releases the GIL): first rho(0) of every partition on both sides, then one
    net model per partition over the h any partner allows, then, case by case, the partner's own range and
    the raising rounds for what is left."""
    t0 = time.perf_counter()
    unit = tg.port_bytes_per_s * T
    cross = max(tg.out_b[0], tg.out_b[1]) * tg.n / unit      # the busier direction's crossing bytes
    memo: dict = {}
    live = Live()

    def solve(key):
        if key not in memo:
            left = deadline - time.perf_counter()
            if left <= 0:
                raise TimeoutError
            g, x, h_lo, h_hi, w = key
            memo[key] = group_relays(tg, g, x, T, h_lo, h_hi, w, min(model_time_s, left), live=live)
        return memo[key]

    def batch(keys) -> None:
        parallel(solve, [k for k in dict.fromkeys(keys) if k not in memo], threads, live)

    closed_at = {} if closed_at is None else closed_at
    done = {case for case, at in closed_at.items() if at >= T}
    xs = {c: list(partitions(c, tg.n, tg.ports)) for c in range(c_min, c_max + 1)}
    todo = {c: [(xa, xb) for xa in xs[c] for xb in xs[c] if (c, xa, xb) not in done] for c in xs}
    xs = {c: sorted({x for pair in todo[c] for x in pair}, reverse=True) for c in xs}
    closed: dict = {}
    left_open: list = []
    try:
        batch([(g, x, 0.0, None, 0.0) for c in xs for x in xs[c] for g in (0, 1)])
        R = {(g, x): memo[(g, x, 0.0, None, 0.0)] for c in xs for x in xs[c] for g in (0, 1)}
        shared = {}
        for c in xs:
            least = [min((R[(g, x)] for x in xs[c]), default=math.inf) for g in (0, 1)]
            for g in (0, 1):
                for x in xs[c]:
                    lo = least[1 - g]
                    if np.isfinite(R[(g, x)]) and np.isfinite(lo) and R[(g, x)] + lo + cross <= c + TOL:
                        shared[(g, x)] = (g, x, _lo(lo), _hi(max(lo, c - cross - R[(g, x)])), 1.0)
        batch(shared.values())
        for c in xs:
            for xa, xb in todo[c]:
                why = _close(solve, R, shared, memo, c, xa, xb, cross)
                if why:
                    closed[(c, xa, xb)] = why
                    closed_at[(c, xa, xb)] = T
                else:
                    left_open.append((c, xa, xb))
    except TimeoutError:
        return None
    return CaseSplit(T, closed, left_open, len(memo), time.perf_counter() - t0)


def _close(solve, R: dict, shared: dict, memo: dict, c: int, xa: tuple, xb: tuple, cross: float) -> str | None:
    la, lb = R[(0, xa)], R[(1, xb)]
    if la + lb + cross > c + TOL:
        return "count"
    if (0, xa) in shared and (1, xb) in shared and memo[shared[(0, xa)]] + memo[shared[(1, xb)]] > TOL:
        return "net"
    for it in range(RAISE_ROUNDS + 1):
        if la + lb + cross > c + TOL:
            return f"count (round {it})"
        ha, hb = c - cross - lb, c - cross - la        # the most each could send across
        ma = solve((0, xa, _lo(lb), _hi(max(lb, hb)), 1.0))
        mb = solve((1, xb, _lo(la), _hi(max(la, ha)), 1.0))
        if ma + mb > TOL:
            return f"net (round {it})"
        if it == RAISE_ROUNDS:
            break
        na, nb = solve((0, xa, _lo(lb), None, 0.0)), solve((1, xb, _lo(la), None, 0.0))
        if na <= la + 1e-4 and nb <= lb + 1e-4:
            break
        la, lb = max(la, na), max(lb, nb)
    return None


def _lo(v: float) -> float:
    """A lower bound rounded down (still a lower bound; repeated values share a cached model)."""
    return math.floor(v * 1e7) / 1e7


def _hi(v: float) -> float:
    return math.ceil(v * 1e7) / 1e7


def case_bound(problem: WiringProblem, tg: UniformGroups, T: float, params, deadline: float,
               closed_at: dict | None = None, prober=None):
    """A lower bound on every wiring's time from the case split at T: the split closes most cases (no wiring
    in them reaches T); each case it leaves open, and more than C_MAX circuits across, gets a
    whole-instance probe at T restricted to it (`prober(case, T, seconds)`; default `milp_prober`), with an
    even share of the time left: "infeasible" closes it, otherwise its dual bound b (when it has one) says
    the case's wirings take at least min(T, b); a case with neither is passed over (the next ones may still
    find a wiring). A probe that finds a wiring at least as good as T ends it (the caller asks again at the
    new wiring's time). Returns (bound, result, info): bound = min(T, every open case's), or None (out of
    time, a case without a dual bound, or a wiring found); result = that wiring, or None. `closed_at`
    (case -> the time it was closed at) carries closed cases from one call to the next (lower T)."""
    prober = prober or milp_prober(problem, tg, params)
    t0 = time.perf_counter()
    info: dict = {"T": T}
    closed_at = {} if closed_at is None else closed_at
    split = split_cases(tg, T, deadline, threads=params.threads, closed_at=closed_at)
    if split is None:
        info["verdict"] = "case split out of time"
        return None, None, info
    info.update(cases=len(split.closed) + len(split.open), closed_by_split=len(split.closed),
                group_models=split.models, split_s=round(split.wall_s, 1))
    bound = T
    todo = [case for case in [("at least", C_MAX + 1)] + split.open if closed_at.get(case, 0.0) < T]
    cases: dict = {}
    unsettled: list = []
    for k, case in enumerate(todo):
        left = deadline - time.perf_counter()
        if left < 1.0:
            info["verdict"] = f"out of time before case {case}"
            return None, None, info
        verdict, res, b = prober(case, T, left / (len(todo) - k))
        if verdict == "infeasible":
            cases[str(case)] = "infeasible"
            closed_at[case] = T
            continue
        if verdict == "found":
            info.update(verdict=f"case {case}: found {res.objective:.9g} s", cases_probed=cases)
            return None, res, info
        cases[str(case)] = verdict if b is None else round(b, 12)
        if b is None:
            unsettled.append(case)          # no bound from the split; a later case may still find a wiring
        else:
            bound = min(bound, b)
    return probed(info, cases, unsettled, bound, t0)


def probed(info: dict, cases: dict, unsettled: list, bound: float, t0: float):
    """The end of a case split once every open case was probed: (bound, None, info), bound None when a
    case stayed unsettled (no verdict and no dual bound)."""
    info.update(cases_probed=cases, wall_s=round(time.perf_counter() - t0, 1))
    if unsettled:
        info["verdict"] = f"not settled, no bound: {', '.join(map(str, unsettled))}"
        return None, None, info
    info.update(verdict="bound", bound=bound)
    return bound, None, info


def relaxed_first(labelled, plain):
    """A case prober (`case_bound`) that asks `labelled` (the labelled probe on `symmetric_relaxation`, its
    wiring scored on the instance) first and passes on what it cannot settle: when the relaxation has a
    wiring at T that the instance's routing does not, `plain` (the multiset probe on the instance) gets the
    time left. "infeasible" and a dual bound from the relaxation hold for the instance. More than C_MAX
    circuits across ("at least", or a range of them: "between") goes to `plain`."""
    def run(case, T: float, seconds: float):
        if case[0] in ("at least", "between"):
            return plain(case, T, seconds)
        end = time.perf_counter() + seconds
        verdict, res, b = labelled(case, T, seconds)
        if verdict == "found" and res.objective > T * (1 + 1e-6):      # the relaxation's wiring only
            left = end - time.perf_counter()
            return plain(case, T, left) if left >= 1.0 else ("unknown", None, None)
        return verdict, res, b
    return run


def milp_prober(problem: WiringProblem, tg: UniformGroups, params):
    """Case probes by the MILP (`params.backend`): the degree model at T restricted to the case, then the
    per-switch one when its answer does not fit on the switches; the labelled probe on the symmetric
    relaxation first when there is one (`relaxed_first`). Returns (verdict, result, dual bound)."""
    from functools import partial

    from synth.model import SolveStatus

    from .exact import _finish, _solve_milp, _two_stage

    def run(case, T: float, seconds: float, on: WiringProblem = problem, labelled: bool = False):
        res = _two_stage(on, replace(params, time_limit_s=seconds),
                         partial(_solve_milp, cutoff=T, case=(tg.groups, case), labelled=labelled))
        if res.status == SolveStatus.INFEASIBLE:
            return "infeasible", None, None
        if res.objective is not None and res.objective <= T * (1 + 1e-6):
            if on is not problem:          # scored on the relaxation: score it on the instance
                res = _finish(problem, res.solver, res.solver_version, params, time.perf_counter(),
                              SolveStatus.FEASIBLE, res.limit, res.artifact, None,
                              {"model": "labelled case probe, groups apart"})
            return "found", res, None
        return res.status.value, None, res.bound if res.objective is not None else res.extra.get("model_bound_s")

    relaxed = symmetric_relaxation(problem, tg)
    return run if relaxed is None else relaxed_first(partial(run, on=relaxed, labelled=True), run)


def _across(pairs, groups):
    side = {v: g for g, grp in enumerate(groups) for v in grp}
    return [p for p in pairs if side.get(p[0]) != side.get(p[1])]


def case_labels(groups, case, n: int) -> list[int]:
    """Each accelerator's cross degree in the labelled form of a case (c, x_A, x_B): group g's accelerators,
    in the group's order, take x_g's degrees in decreasing order (then 0)."""
    labels = [0] * n
    for grp, xs in zip(groups, case[1:]):
        for v, k in zip(grp, xs):
            labels[v] = int(k)
    return labels


def symmetric_relaxation(problem: WiringProblem, tg: UniformGroups) -> WiringProblem | None:
    """The instance without its demand between the two groups, for labelled case probes. Every relabelling
    inside either group is then an automorphism (the groups' demand is uniform and, required here, every
    accelerator sits on the same switches), so each wiring of a case (c, x_A, x_B) has a relabelled copy of
    the same time whose cross degrees follow `case_labels`: one probe with each accelerator's cross degree
    fixed (and the symmetry rows of what still permutes, the accelerators of equal degree) covers the case,
    where the instance's own model has to place the multisets itself (binaries, which its relaxation
    spreads). Less demand, so a lower bound for the relaxation is one for the instance; a wiring it finds
    is scored on the instance. The cost is the groups' hand-off (the pipeline's bytes, a few tenths of a
    percent of a circuit per accelerator on the decode instances). None when the switch layouts differ."""

    from synth.model import TrafficMatrix
    cap = problem.layout.capacity
    if np.ptp(cap, axis=0).max() > 0:
        return None
    t = problem.traffic.bytes_.copy()
    a, b = (list(g) for g in tg.groups)
    t[np.ix_(a, b)] = 0
    t[np.ix_(b, a)] = 0
    return replace(problem, traffic=TrafficMatrix(t, name=problem.traffic.name), name=f"{problem.name} (groups apart)")


def _case_rows(pairs: list[tuple[int, int]], x: dict, groups, case, boolean, labelled: bool = False):
    """The rows of one case as (terms [(coefficient, variable)], "==", ">=" or "<=", rhs): ("at least", C)
    circuits across, ("between", lo, hi) of them (solvers/phase_cases.py), or (c, x_A, x_B): c circuits
    across and the cross degrees of group g's accelerators are the multiset x_g (binaries e[v, k] =
    `boolean(name)` choose each accelerator's degree k), or with `labelled` the degrees `case_labels` gives
    (valid only on `symmetric_relaxation`)."""
    across = _across(pairs, groups)
    if case[0] in ("at least", "between"):
        yield [(1, x[p]) for p in across], ">=", case[1]
        if case[0] == "between":
            yield [(1, x[p]) for p in across], "<=", case[2]
        return
    c, *xs = case
    yield [(1, x[p]) for p in across], "==", c
    if labelled:
        labels = case_labels(groups, case, max(max(g) for g in groups) + 1)
        for v in (v for grp in groups for v in grp):
            yield [(1, x[p]) for p in across if v in p], "==", labels[v]
        return
    for g, grp in enumerate(groups):
        degs = list(xs[g]) + [0] * (len(grp) - len(xs[g]))
        values = sorted(set(degs))
        e = {(v, k): boolean(f"case_{g}_{v}_{k}") for v in grp for k in values}
        for v in grp:
            yield [(1, e[(v, k)]) for k in values], "==", 1
            yield [(1, x[p]) for p in across if v in p] + [(-k, e[(v, k)]) for k in values], "==", 0
        for k in values:
            yield [(1, e[(v, k)]) for v in grp], "==", degs.count(k)


def add_case_rows(prob, pairs: list[tuple[int, int]], x: dict, groups, case, labelled: bool = False) -> None:
    """Restrict a PuLP wiring model (circuit counts x over `pairs`) to one case (`_case_rows`)."""
    import pulp
    for terms, sense, rhs in _case_rows(pairs, x, groups, case,
                                        lambda name: prob.add_variable(name, 0, 1, cat="Binary"), labelled):
        expr = pulp.lpSum(c * v for c, v in terms)
        prob += (expr == rhs) if sense == "==" else (expr >= rhs) if sense == ">=" else (expr <= rhs)


def add_case_rows_cpsat(m, pairs: list[tuple[int, int]], x: dict, groups, case, labelled: bool = False) -> None:
    """`add_case_rows` for a CP-SAT model."""
    for terms, sense, rhs in _case_rows(pairs, x, groups, case, m.NewBoolVar, labelled):
        expr = sum(c * v for c, v in terms)
        m.Add(expr == rhs) if sense == "==" else m.Add(expr >= rhs) if sense == ">=" else m.Add(expr <= rhs)
