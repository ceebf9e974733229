"""Three or more coupled groups: a proof of the time objective by whole-instance case probes on the ring
of groups (llama405b-tp8pp4-32: four TP groups of 8 joined by the pipeline's hand-off).

Why. The net test (solvers/stages.py) prices each group alone and stops short when some groups can carry
others' bytes for less than what a group saves by sending them (llama405b-tp8pp4-32: 0.038% below the
best wiring, at any length): it does not see which groups the circuits join. A whole-instance probe does,
but the instance's own probes stall on placing the circuits across.

Relaxation. Replace each block of bytes from group g to group h (llama: position i of stage g to position
i of stage g + 1) by any nonnegative matrix with the same row and column sums (a transportation
polytope; the instance's block is one point of it), routed per source. When every block has equal row
sums and equal column sums, every relabelling inside any one group maps the relaxed problem onto itself
(the demand inside a group is uniform, every accelerator has the same ports), so the accelerators that
hold the circuits across can be fixed at the first positions of each group, and in decreasing order of
their cross degree. Switch layouts are dropped too (degree model): a relaxation, whose infeasibility at T
says no wiring of the instance reaches T.

Cases, each group's cross pattern x_g (its accelerators' circuits across, sorted). First each kind of
group (its crossing bytes) gets the one-group model (`stages.group_relays`) at T with x = (1), (2), (1, 1)
and with c = 3, ..., RHO_C circuits across and more: rho(pattern), the least of the group's own bytes it
must send across; inf when the model is infeasible.
- Every group (1, 1) (when that is feasible for every kind): the groups' graph is 2-regular. Every 2-regular
  multigraph on the groups (a set of cycles) whose components the demand does not cross gets one probe with
  its circuits fixed: on a cycle, group g's position 0 faces the group before it, position 1 the one after
  (up to relabelling inside g that is every wiring of the case), the rest sorted by their circuits to
  positions 0 and 1.
- The rest, one probe: free circuits across, each group's cross degrees sorted, its total c_g one-hot with
  the patterns the group model rules out excluded, not every group (1, 1), and the group's own bytes that
  leave it at least rho(c_g).
Net rows in the rest probe (the net test of solvers/stages.py, by cross total): m_g(c) = min (r - h) over
group g's model with c circuits across (r its own bytes sent out, h others' bytes it carries). Every wiring
at T has r_g - h_g >= m_g(c_g) for each group, with h_g read off the probe's flows (what enters g from the
others and is not delivered there), and sum_g m_g(c_g) <= 0 (sum h >= sum r). A total c with m_g(c) plus the
other groups' least m above 0 is ruled out; when that rules out every total above RHO_C, each total left gets
its patterns' own rho and m, and the probe picks one pattern per group among those the same test leaves
(llama405b-tp8pp4-32 at its best wiring less 5e-7: (1, 1), (2, 1, 1), (2, 2), (2, 2, 1, 1); so no
accelerator holds more than two circuits across and at most four per stage hold any).
Symmetry: a relabelling of the groups that maps the instance onto itself or onto its reverse
(`group_symmetries`; llama405b-tp8pp4-32: stage g onto stage 3 - g, every demand turned round) maps each
case onto one with the same verdict, so the split probes one case per orbit (`case_orbits`), and drops an
orbit the tables rule out one member of (llama405b-tp8pp4-32: 254 cases, 134 probes).
Levels of the split: a pattern case gets a short probe (SPLIT_S); left unsettled, it is split by the
circuits between each pair of groups (`group_graphs`: every multigraph on the groups with those degrees that
joins every pair with bytes between them; each a probe with those totals fixed), and one of those left
unsettled by where its circuits sit on the accelerators (`structures`: each group's accelerators across in
decreasing degree order, every placing up to swapping accelerators of equal degree; each a ("fixed", ...)
probe, llama405b-tp8pp4-32's in about 0.5 s), first grouped by where one group's circuits sit
(`partials`: each group of placings one ("partial", ...) probe with the other groups' circuits free,
0.5-1.2 s; refuted, it refutes every placing it holds). Below a group-level case its partial cases and
placings first meet its `Screen`: one LP for all of them, each a change of bounds on the circuits across,
warm-started, with Farkas certificates kept from earlier solves refuting later cases without a solve.
Fixing the structure settles what the free circuits
across do not: llama405b-tp8pp4-32's ((2,2), (2,1,1), (2,1,1), (2,2)) is unsettled after 900 s as one
probe; its 12 group-level cases: 8 infeasible in 1-50 s, the rest's placings (16 and 100 tried) each
infeasible in < 1 s.
Across runs (`ring_bound`'s `log`, `ocs-synth wire --proof-log`): a verdict is a fact about the instance
at T, so a case infeasible at T stays infeasible below it (a wiring that reaches a time reaches every time
above it); the log keys each case by a hash of what the probes read (`fingerprint`) and `case_key`, and
keeps the pattern tables' values at T too (`pattern_bounds`: 175 s of llama405b-tp8pp4-32's resumed runs).
No wiring reaches T when every probe is infeasible. The rest runs first (with every thread; split by
patterns: `pattern_cases`, each one's short probe `threads` at a time, one thread each; then the
pair-of-groups cases of every pattern case those leave, all in one queue, `threads` at a time, each depth
first below it: `by_groups`), the cycles after it only when it is infeasible, two at a time. A probe that
finds a wiring gives its circuits to the caller, which scores them on the instance.

Measured (BENCHMARKS.md, "The ring of groups as whole-instance probes"): llama405b-tp8pp4-32 at the best
wiring less 5e-7, HiGHS: all three cycles infeasible (713-957 s each, two at a time; 163, 233 and 0.7 s with
the known-pattern rows), the rest as one probe not settled in 3,446 s, split (with a proof log across runs):
all 134 pattern cases infeasible (the last on 2026-12-04), so no wiring reaches the best less 5.1e-7 and the
exact back-ends, run on that log, report the best wiring OPTIMAL; they run these after the net test, whose
bound they can only raise.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import threading
import time

import networkx as nx
import numpy as np
from networkx.utils import UnionFind

from synth.problem import WiringProblem

from .stages import Live, UniformGroups, group_relays, lex_rows, net_term, parallel, partitions

RING_MAX_GROUPS = 5    # 2-regular graphs to enumerate: 3 on four groups, 12 Hamiltonian cycles on five
RHO_C = 8              # cross totals with their own rho; more: one model for all of them
SLACK = 1e-7           # circuit units off every rho (they are MILP optima)
MAX_PLACINGS = 20000   # a group-level case with more placings of its circuits on accelerators is not split
# each probe's clock at each level. A pair-of-groups probe that settles does so in 1.2-2.2 s (llama405b-tp8pp4-32:
# the 12 of 36 that did on four pattern cases, 0.5 s of it building the model); one that does not burns its
# whole clock: 2.5 s in place of 4 took 7% off those cases' thread-seconds, same verdicts (BENCHMARKS.md)
SPLIT_S = {"patterns": 4.0, "groups": 2.5, "partial": 4.0, "fixed": 60.0}
SCREEN_S = 10.0        # the most a `Screen` LP gets before its case goes to its probe
RETRY = 4.0            # a placing a proof log has unsettled at T is probed again with this many times its clock


def blocks(problem: WiringProblem, ug: UniformGroups) -> dict[tuple[int, int], float] | None:
    """Bytes per accelerator from group g to group h, for every pair with any, when every such block has
    equal row sums and equal column sums (then the relaxation keeps each group's relabellings); else None."""
    t = problem.traffic.bytes_.astype(np.float64)
    out: dict[tuple[int, int], float] = {}
    for g, a in enumerate(ug.groups):
        for h, b in enumerate(ug.groups):
            if g == h:
                continue
            m = t[np.ix_(a, b)]
            if not m.any():
                continue
            rows, cols = m.sum(axis=1), m.sum(axis=0)
            if np.ptp(rows) > 1e-9 * rows.max() or np.ptp(cols) > 1e-9 * cols.max():
                return None
            out[(g, h)] = float(rows[0])
    return out


def ring_blocks(problem: WiringProblem, ug: UniformGroups) -> dict[tuple[int, int], float] | None:
    """`blocks` when the ring-of-groups probes apply (3 to RING_MAX_GROUPS groups, blocks of equal line
    sums), else None."""
    return blocks(problem, ug) if 3 <= len(ug.groups) <= RING_MAX_GROUPS else None


def two_factors(k: int) -> list[tuple[tuple[int, ...], ...]]:
    """Every 2-regular loopless multigraph on range(k), as its cycles (a 2-cycle is a double edge), each
    cycle starting at its least vertex and, longer than two, going to the smaller of its two neighbours first."""
    def cycles_through(rest: tuple[int, ...]):
        if not rest:
            yield ()
            return
        first, others = rest[0], rest[1:]
        for size in range(1, len(others) + 1):
            for chosen in itertools.combinations(others, size):
                left = tuple(v for v in others if v not in chosen)
                for perm in itertools.permutations(chosen):
                    if size > 1 and perm[0] > perm[-1]:
                        continue            # one direction of each cycle
                    for tail in cycles_through(left):
                        yield ((first,) + perm,) + tail

    return list(cycles_through(tuple(range(k))))


def _connected(factor, pairs: set[tuple[int, int]]) -> bool:
    """True when no pair of groups with bytes between them sits in two different cycles of the factor."""
    where = {g: i for i, cyc in enumerate(factor) for g in cyc}
    return all(where[g] == where[h] for g, h in pairs)


def pattern_bounds(ug: UniformGroups, T: float, deadline: float, threads: int = 1,
                   live: Live | None = None, log=None, fp: str = "") -> dict[tuple[float, float], dict]:
    """Per kind of group (bytes out, bytes in per accelerator): rho of x = (1), (2), (1, 1), of every cross
    total 3..RHO_C and of more ("more"), from the one-group model at T (inf: infeasible; a model stopped by
    the deadline gives its dual bound). TimeoutError when the deadline passes first. With a proof `log`
    (and the instance's `fingerprint` `fp`) each model's value is read from it when it holds one at exactly
    T, and added to it when the model ran to its end (a value cut short is valid but weaker: not kept)."""
    live = Live() if live is None else live
    lock = threading.Lock()
    kinds = list(dict.fromkeys(zip(ug.out_b, ug.in_b)))
    totals = list(range(1, RHO_C + 1)) + ["more"]
    span = {c: (RHO_C + 1, None) if c == "more" else (c, c) for c in totals}
    jobs, keys = [], []                 # job: (kind, "rho" or "net", x or None, circuits across)
    for kind in kinds:
        for key, x in (("1", (1,)), ("2", (2,)), ("11", (1, 1))):
            jobs.append((kind, "rho", x, (1, None)))
            keys.append(key)
        for c in totals[2:]:
            jobs.append((kind, "rho", None, span[c]))
            keys.append(c)
        for c in totals:                # the net test's term, min (r - h), over the patterns with c across
            jobs.append((kind, "net", None, span[c]))
            keys.append(("net", c))

    def run(job):
        kind, what, x, across = job
        # (keyed by T too: a run at another T adds its own tables and leaves these for a run back at T)
        key = json.dumps(["table", list(kind), what, None if x is None else list(x), list(across), T])
        if log is not None:
            with lock:
                e = log.get(fp, key)
            if e is not None and e["verdict"] == "bound":      # (its key holds T)
                return e["value"]
        left = deadline - time.perf_counter()
        if left <= 0:
            raise TimeoutError
        one = ug.kind(*kind)
        t1 = time.perf_counter()
        if what == "net":
            v = net_term(one, x, T, left, live, across)
        else:
            v = group_relays(one, 0, x, T, time_limit_s=left, live=live, across=across)
        took = time.perf_counter() - t1
        if log is not None and not live.stopped and took < left - 1.0:     # ran to its end
            with lock:
                log.add(fp, key, {"verdict": "bound", "T": T, "clock_s": round(took, 3), "value": float(v)})
        return v

    out: dict = {kind: {} for kind in kinds}
    for (kind, *_), key, v in zip(jobs, keys, parallel(run, jobs, threads, live)):
        out[kind][key] = v
    # the cross totals the net test leaves (module doc): with none above RHO_C, each one's patterns get their
    # own rho and net term, and the rest probe chooses a pattern per group among those the net test leaves
    k = len(ug.groups)
    lowest = {kind: min([r[("net", c)] for c in totals] + ([0.0] if kind == (0, 0) else [])) for kind, r in out.items()}
    if any(v == -math.inf for v in lowest.values()):
        return out
    others = {kind: sum(lowest[kn] for kn in zip(ug.out_b, ug.in_b)) - lowest[kind] for kind in kinds}
    left_c = {kind: [c for c in totals if out[kind][("net", c)] + others[kind] <= k * SLACK]
              + ([0] if kind == (0, 0) and others[kind] <= k * SLACK else []) for kind in kinds}
    if any("more" in cs for cs in left_c.values()):
        return out
    pjobs = [(kind, what, x, (1, None)) for kind in kinds for c in left_c[kind] for x in partitions(c, ug.n)
             for what in ("rho", "net")]
    for kind in kinds:
        out[kind]["patterns"] = {}
    for (kind, what, x, _), v in zip(pjobs, parallel(run, pjobs, threads, live)):
        out[kind]["patterns"].setdefault(x, {})[what] = v
    for kind in kinds:                  # drop what the net test or the group model rules out
        out[kind]["patterns"] = {x: v for x, v in out[kind]["patterns"].items()
                                 if v["rho"] < math.inf and v["net"] + others[kind] <= k * SLACK}
    return out


def probe(problem: WiringProblem, ug: UniformGroups, bl: dict, T: float, case, rho: dict | None,
          time_limit_s: float, threads: int = 1, live: Live | None = None):
    """One case at T (module doc): case ("factor", cycles), ("rest",), ("rest", one pattern per group) or
    ("rest", patterns, {(g, h): circuits between groups g < h}) (with `rho`, `pattern_bounds`' answer), or
    ("fixed", {(u, v): circuits across}) (model nodes g n + i; a structure to refute: llama405b-tp8pp4-32's
    took 0.4-28 s). A cycle's or placing's groups have known patterns: with pattern tables in `rho`, each
    group gets that pattern's rho and net rows as constants. Returns ("infeasible", None),
    ("found", {(u, v): circuits}) or ("unsettled", None)."""
    import highspy

    built = _model(problem, ug, bl, T, case, rho, time_limit_s, threads)
    if built is None:                   # its fixed circuits alone break the pattern
        return "infeasible", None
    H, y, cross = built
    live = Live() if live is None else live
    live.add(H)
    try:
        H.run()
    finally:
        live.discard(H)
    status = H.getModelStatus()
    if status == highspy.HighsModelStatus.kInfeasible:
        return "infeasible", None
    if status == highspy.HighsModelStatus.kOptimal:
        sol = H.getSolution().col_value
        n = ug.n
        acc = [a for grp in ug.groups for a in grp]      # the model's node g n + i is group g's i-th accelerator
        circuits: dict[tuple[int, int], int] = {}
        pairs = [((g * n + i, g * n + j), var) for (g, i, j), var in y.items()] + list(cross.items())
        for (u, v), var in pairs:
            c = var if isinstance(var, int) else int(round(sol[var.index]))
            if c:
                a, b = acc[u], acc[v]
                circuits[(min(a, b), max(a, b))] = c
        return "found", circuits
    return "unsettled", None


def _model(problem: WiringProblem, ug: UniformGroups, bl: dict, T: float, case, rho: dict | None,
           time_limit_s: float, threads: int = 1, cuts: bool = False):
    """`probe`'s model of `case`, not run: (H, {(g, i, j): circuits inside group g}, {(u, v): circuits
    across, a variable or a constant}), or None when the case's fixed circuits alone break its pattern.
    `cuts`: with each group's rounded cut rows (`_cut_rows`; the `Screen`'s LP)."""
    import highspy

    from .highs import threads as fit
    k, n, P = len(ug.groups), ug.n, ug.ports
    N = k * n
    unit = ug.port_bytes_per_s * T
    d = ug.d / unit
    H = highspy.Highs()
    H.setOptionValue("output_flag", False)
    H.setOptionValue("time_limit", float(max(0.1, time_limit_s)))
    H.setOptionValue("threads", fit(threads))
    node = lambda g, i: g * n + i
    y = {(g, i, j): H.addIntegral(lb=0, ub=P) for g in range(k) for i in range(n) for j in range(i + 1, n)}
    Y = lambda g, i, j: y[(g, min(i, j), max(i, j))]
    cross: dict[tuple[int, int], object] = {}         # (u, v), u < v in different groups -> circuits
    if case[0] == "factor":
        for cyc in case[1]:
            for a, b in zip(cyc, cyc[1:] + cyc[:1]):
                u, v = node(a, 1), node(b, 0)
                key = (min(u, v), max(u, v))
                cross[key] = cross.get(key, 0) + 1
    elif case[0] == "fixed":
        cross = dict(case[1])
    elif case[0] == "partial":         # ("partial", patterns, between, {(u, v): circuits}, pairs of groups fixed)
        pats, done = case[1], {tuple(sorted(gh)) for gh in case[4]}
        for g in range(k):
            for h in range(g + 1, k):
                for i in range(len(pats[g])):
                    for j in range(len(pats[h])):
                        u, v = node(g, i), node(h, j)
                        if (g, h) in done:
                            if case[3].get((u, v)):
                                cross[(u, v)] = case[3][(u, v)]
                        elif (g, h) in case[2]:
                            cross[(u, v)] = H.addIntegral(lb=0, ub=min(pats[g][i], pats[h][j]))
    else:
        cross = {(u, v): H.addIntegral(lb=0, ub=P) for u in range(N) for v in range(u + 1, N) if u // n != v // n}
    xs = {v: sum(z for (a, b), z in cross.items() if v in (a, b)) for v in range(N)}
    if case[0] == "partial":
        for g in range(k):
            for i, x in enumerate(case[1][g]):
                e = xs[node(g, i)]
                if not isinstance(e, (int, float)):
                    H.addConstr(e == x)
                elif e != x:            # its fixed circuits alone break the pattern
                    return None
        for (g, h), c in case[2].items():
            if (g, h) not in done:
                H.addConstr(sum(z for (u, v), z in cross.items() if (u // n, v // n) == (g, h)) == c)
    for g in range(k):
        for i in range(n):
            H.addConstr(sum(Y(g, i, j) for j in range(n) if j != i) + xs[node(g, i)] <= P)
    if cuts:
        _cut_rows(H, ug, T, Y, xs, node)
    # each group's accelerators in order of (circuits across, to position 0, to position 1); on a cycle, where
    # positions 0 and 1 hold the circuits across, that sorts positions >= 2 by their circuits to 0 and 1
    for g in range(k):
        # fixed circuits across: only the accelerators without any are interchangeable
        lab = [(-1 - i if xs[node(g, i)] else 0) if case[0] == "fixed" else
               (-1 - i if i < len(case[1][g]) else 0) if case[0] == "partial" else xs[node(g, i)] for i in range(n)]
        lex_rows(H, P, lab, [Y(g, 0, v) if v else 0 for v in range(n)],
                 [Y(g, 1, v) if v > 1 else 0 for v in range(n)], fixed=case[0] != "rest")
    rho_terms, net_terms = ({}, {}) if case[0] != "rest" else _rest_rows(H, ug, xs, rho, node, case[1:2])
    if case[0] != "rest" and rho is not None and all("patterns" in r for r in rho.values()):
        known = case[1] if case[0] == "partial" else [
            tuple(sorted((xs[node(g, i)] for i in range(n) if xs[node(g, i)]), reverse=True)) for g in range(k)]
        rho_terms, net_terms = _known_pattern_terms(ug, known, rho)
    if case[0] == "rest" and len(case) > 2:           # circuits between each pair of groups fixed too
        for (g, h), c in case[2].items():
            H.addConstr(sum(z for (u, v), z in cross.items() if {u // n, v // n} == {g, h}) == c)
    arcs = [(node(g, i), node(g, j)) for g in range(k) for i in range(n) for j in range(n) if i != j]
    arcs += [a for u, v in cross for a in ((u, v), (v, u))]
    outa: dict[int, list[int]] = {v: [] for v in range(N)}
    ina: dict[int, list[int]] = {v: [] for v in range(N)}
    for e, (u, v) in enumerate(arcs):
        outa[u].append(e)
        ina[v].append(e)
    load: list[list] = [[] for _ in arcs]
    share = {}                                          # (g, h) -> n x n doubly stochastic shares
    for (g, h), a in bl.items():
        M = [[H.addVariable(lb=0, ub=1) for _ in range(n)] for _ in range(n)]
        for i in range(n):
            H.addConstr(sum(M[i]) == 1)
            H.addConstr(sum(M[r][i] for r in range(n)) == 1)
        share[(g, h)] = (a / unit, M)
    leaving = {g: [e for e, (u, v) in enumerate(arcs) if u // n == g and v // n != g] for g in range(k)}
    own_out: dict[int, list] = {g: [] for g in range(k)}
    into = {g: [e for e, (u, v) in enumerate(arcs) if v // n == g and u // n != g] for g in range(k)}
    through: dict[int, list] = {g: [] for g in range(k)}   # other groups' flows into g
    out_total: dict[int, float] = {}                   # units each accelerator of g sends to other groups
    k_ = math.floor(d)
    for g in range(k):
        sent = {h: share[(g, h)] for h in range(k) if (g, h) in share}
        out_total[g] = sum(a for a, _ in sent.values())
        for s in range(n):
            src = node(g, s)
            f = [H.addVariable(lb=0, ub=P) for _ in arcs]     # (a flow fits its arc: < P circuits)
            for e in range(len(arcs)):
                load[e].append(f[e])
            own_out[g] += [f[e] for e in leaving[g]]
            for g2 in range(k):
                if g2 != g:
                    through[g2] += [f[e] for e in into[g2]]
            for v in range(N):
                expr = sum(f[e] for e in outa[v]) - sum(f[e] for e in ina[v])
                gv, iv = divmod(v, n)
                rhs = (n - 1) * d + out_total[g] if v == src else -d if gv == g else 0.0
                if gv in sent:
                    a, M = sent[gv]
                    H.addConstr(expr + a * M[s][iv] == rhs)
                else:
                    H.addConstr(expr == rhs)
            overs = []                      # relay count: what a pair's circuits do not carry takes two hops
            for j in range(n):
                if j == s:
                    continue
                o = H.addVariable(lb=0, ub=d)       # (more than d is never needed: Screen's finite box)
                H.addConstr(o + Y(g, s, j) >= d)
                if d - k_ > 1e-6:
                    H.addConstr(o + (d - k_) * Y(g, s, j) >= (d - k_) * (k_ + 1))
                overs.append(o)
            H.addConstr(sum(f) - sum(overs) >= (n - 1) * d + out_total[g])
    if rho_terms:                       # own bytes out of g >= rho(its pattern), beside its crossing bytes
        for g in range(k):
            H.addConstr(sum(own_out[g]) - sum(c * v for c, v in rho_terms[g]) >= n * out_total[g])
            # and r - h >= m(c): h what enters g from the others and is not delivered there
            landed = n * sum(share[(g2, g)][0] for g2 in range(k) if (g2, g) in share)
            H.addConstr(sum(own_out[g]) - sum(through[g]) - sum(m * v for m, v in net_terms[g])
                        >= n * out_total[g] - landed - SLACK)
    ka = {a: e for e, a in enumerate(arcs)}
    for (g, i, j), var in y.items():
        for a in ((node(g, i), node(g, j)), (node(g, j), node(g, i))):
            H.addConstr(sum(load[ka[a]]) - var <= 0)
    for (u, v), z in cross.items():
        for a in ((u, v), (v, u)):
            H.addConstr(sum(load[ka[a]]) - z <= 0)
    return H, y, cross


def _cut_rows(H, ug: UniformGroups, T: float, Y, xs: dict, node) -> int:
    """Cut rows inside each group, rounded up: for S a set of group g's accelerators (one row per cut,
    S holding position 0) and S' the rest, g's own bytes from S to S' (d |S| |S'| circuits' worth at T)
    cross either on a circuit of the cut or on a way out of the group that leaves it at S and comes back at
    S', so y(S, S') + X(S) >= d |S| |S'| and y(S, S') + X(S') >= d |S| |S'| (X: circuits across at those
    accelerators, each carrying one circuit's worth each way in T); both sides are whole circuits, so the
    right side rounds up. Valid for every case; used in the `Screen`'s LP, where they carry a little of the
    circuits' integrality (the MIP probes' own cuts find as much: with these rows a small case's probes took
    2.5 -> 3.6-4.5 s, so they stay out). Returns the rows added."""
    k, n = len(ug.groups), ug.n
    d = ug.d / (ug.port_bytes_per_s * T)
    rows = 0
    for g in range(k):
        for size in range(1, n):
            for S in itertools.combinations(range(1, n), size - 1):
                S = (0, *S)
                rest = [j for j in range(n) if j not in S]
                need = math.ceil(d * len(S) * len(rest) * (1 - 1e-12))
                cut = sum(Y(g, i, j) for i in S for j in rest)
                for side in (S, rest):
                    H.addConstr(cut + sum(xs[node(g, i)] for i in side) >= need)
                    rows += 1
    return rows


class Screen:
    """One group-level case's placings and partial cases (`structures`, `partials`) as bound changes on one
    LP: the case's ("partial", patterns, between, {}, ()) model with every variable continuous (a
    relaxation of each one's probe, whose circuits across it fixes by their bounds), solved by warm-started
    dual simplex, presolve off. Its infeasibility refutes the case; so does a Farkas certificate kept from
    an earlier solve (`_certifies`), without solving. llama405b-tp8pp4-32: 14 of one group-level case's 17
    placings refuted by three earlier solves' certificates; 1.3 s for all 17 (their probes: about 12 s).
    A case it does not refute (its LP feasible, or not solved in `clock` s) goes to its probe."""

    def __init__(self, problem: WiringProblem, ug: UniformGroups, bl: dict, T: float, patterns: tuple,
                 between: dict, rho: dict | None, live: Live | None = None) -> None:
        self.args = (problem, ug, bl, T, ("partial", patterns, between, {}, ()), rho)
        self.live = Live() if live is None else live
        self.H = None
        self.built = False
        self.rays: list[tuple[np.ndarray, np.ndarray, float, float]] = []   # (z, |A|^T|y|, y's least, scale)
        self.stats = {"solved": 0, "by certificate": 0}

    def _build(self) -> None:
        import highspy
        import scipy.sparse as sp

        self.built = True
        made = _model(*self.args, 60.0, cuts=True)
        if made is None:
            return
        H, _, cross = made
        H.setOptionValue("presolve", "off")          # so each solve starts from the last one's basis
        nc = H.getNumCol()
        H.changeColsIntegrality(nc, np.arange(nc, dtype=np.int32), np.zeros(nc, dtype=np.uint8))
        lp = H.getLp()
        a = lp.a_matrix_
        kind = sp.csc_matrix if a.format_ == highspy.MatrixFormat.kColwise else sp.csr_matrix
        self.A = kind((np.asarray(a.value_), np.asarray(a.index_), np.asarray(a.start_)),
                      shape=(lp.num_row_, lp.num_col_)).tocsc()
        self.absAT = abs(self.A).T.tocsr()
        self.L, self.U = np.asarray(lp.row_lower_), np.asarray(lp.row_upper_)
        self.lo, self.hi = np.asarray(lp.col_lower_, dtype=float), np.asarray(lp.col_upper_, dtype=float)
        self.keys = list(cross)
        self.where = {uv: e for e, uv in enumerate(self.keys)}
        self.idx = np.array([cross[uv].index for uv in self.keys], dtype=np.int32)
        self.finite = bool(np.isfinite(self.lo).all() and np.isfinite(self.hi).all())
        self.H = H

    def _box(self, case) -> tuple[np.ndarray, np.ndarray] | None:
        """The cross variables' bounds for `case`, or None when it is not one of this case's."""
        lo, hi = self.lo[self.idx].copy(), self.hi[self.idx].copy()
        if case[0] == "fixed":
            fixed, pairs = case[1], None
        else:
            fixed, pairs = case[3], {tuple(sorted(gh)) for gh in case[4]}
        n = self.args[1].n
        for uv, c in fixed.items():
            if uv not in self.where:
                return None
        for e, (u, v) in enumerate(self.keys):
            if pairs is None or (u // n, v // n) in pairs:
                lo[e] = hi[e] = fixed.get((u, v), 0)
        return lo, hi

    def _certifies(self, y: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> tuple | None:
        """A Farkas certificate from row multipliers y (either sign): with wrong-signed entries on rows open
        on that side set to 0, every x in the box [lo, hi] has y'A x <= max_box(z x) (z = A^T y'), below
        y's least over the rows' ranges, by more than a rounding margin. (z, |A|^T|y'|, least, margin's
        row part), or None."""
        for sign in (1.0, -1.0):
            w = sign * y
            w = np.where((w > 0) & ~np.isfinite(self.L) | (w < 0) & ~np.isfinite(self.U), 0.0, w)
            with np.errstate(invalid="ignore"):       # (w is 0 wherever the bound it meets is infinite)
                terms = np.where(w > 0, w * self.L, np.where(w < 0, w * self.U, 0.0))
            least, rows = float(terms.sum()), float(np.abs(terms).sum())
            z = self.A.T @ w
            absz = self.absAT @ np.abs(w)
            if self._holds(z, absz, least, rows, lo, hi):
                return z, absz, least, rows
        return None

    @staticmethod
    def _holds(z, absz, least, rows, lo, hi) -> bool:
        most = float(np.where(z > 0, z * hi, z * lo).sum())
        margin = 1e-9 * (float((absz * np.maximum(np.abs(lo), np.abs(hi))).sum()) + rows) + 1e-9
        return most < least - margin

    def refutes(self, case, clock: float) -> bool:
        """Is `case` (a "partial" case or a "fixed" placing of this group-level case) infeasible at T by
        a kept certificate or by its LP?"""
        import highspy

        if not self.built:
            self._build()
        if self.H is None:
            return False
        box = self._box(case)
        if box is None:
            return False
        lo, hi = self.lo.copy(), self.hi.copy()
        lo[self.idx], hi[self.idx] = box
        if self.finite:
            for z, absz, least, rows in self.rays:
                if self._holds(z, absz, least, rows, lo, hi):
                    self.stats["by certificate"] += 1
                    return True
        H = self.H
        H.changeColsBounds(len(self.idx), self.idx, box[0], box[1])
        # (HiGHS's clock runs on across solves of one model)
        H.setOptionValue("time_limit", H.getRunTime() + float(max(0.1, clock)))
        self.live.add(H)
        try:
            H.run()
        finally:
            self.live.discard(H)
        if H.getModelStatus() != highspy.HighsModelStatus.kInfeasible:
            return False
        self.stats["solved"] += 1
        if self.finite:
            _, has, ray = H.getDualRay()
            if has:
                kept = self._certifies(np.asarray(ray, dtype=float), lo, hi)
                if kept is not None:
                    self.rays.append(kept)
        return True


def _rest_rows(H, ug: UniformGroups, xs: dict, rho: dict, node, only: tuple = ()) -> tuple[dict, dict]:
    """The rest probe's rows: each group's cross degrees sorted, its cross total one-hot (c = 0 .. RHO_C and
    "more"), c = 2 split into (1, 1) and (2), the patterns with rho inf excluded, not every group (1, 1).
    Returns each group's rho terms [(coefficient, binary)]: its own bytes out are at least their sum."""
    k, n, P = len(ug.groups), ug.n, ug.ports
    if all("patterns" in r for r in rho.values()):
        return _pattern_rows(H, ug, xs, rho, node, only[0] if only else None)
    rho_terms: dict[int, list] = {}
    ones, net_terms = [], {}
    for g in range(k):
        r = rho[(ug.out_b[g], ug.in_b[g])]
        xg = [xs[node(g, i)] for i in range(n)]
        for a, b in zip(xg, xg[1:]):
            H.addConstr(a - b >= 0)
        keys = list(range(RHO_C + 1)) + ["more"]
        w = {c: H.addBinary() for c in keys}
        H.addConstr(sum(w.values()) == 1)
        total = sum(xg)
        H.addConstr(total - sum(c * w[c] for c in keys if c != "more") - (RHO_C + 1) * w["more"] >= 0)
        H.addConstr(total - sum(c * w[c] for c in keys if c != "more") - n * P * w["more"] <= 0)
        q = H.addBinary()                   # the pattern is (1, 1)
        H.addConstr(q - w[2] <= 0)
        H.addConstr(xg[0] + (P - 1) * q <= P)                    # (1, 1): no accelerator holds two
        H.addConstr(xg[0] - 2 * w[2] + 2 * q >= 0)               # c = 2 and not (1, 1): (2)
        crossing = ug.out_b[g] > 0 or ug.in_b[g] > 0
        terms = []
        for c, var in w.items():
            v = 0.0 if c in (0, 2) else r["1"] if c == 1 else r[c]
            if (c == 0 and crossing) or v == math.inf:        # (-inf: a model without a bound in its time)
                H.addConstr(var <= 0)
            elif SLACK < v < math.inf:
                terms.append((v - SLACK, var))
        r11, r2 = r["11"], r["2"]
        if r11 == math.inf:
            H.addConstr(q <= 0)
        elif SLACK < r11 < math.inf:
            terms.append((r11 - SLACK, q))
        if r2 == math.inf:
            H.addConstr(w[2] - q <= 0)
        elif SLACK < r2 < math.inf:
            terms.append((r2 - SLACK, w[2]))
            terms.append((-(r2 - SLACK), q))
        rho_terms[g] = terms
        ones.append(q)
        net = [(0.0 if c == 0 else r[("net", c)], var) for c, var in w.items()]   # the net test by cross total
        for m, var in net:
            if m == math.inf:
                H.addConstr(var <= 0)
        net_terms[g] = _net_terms(net, n * P)
    H.addConstr(sum(ones) <= k - 1)
    _net_sum_row(H, net_terms)
    return rho_terms, net_terms


def _net_terms(pairs, most: float) -> list:
    """A group's net terms [(m, binary)], the finite ones (-inf, no bound in time, as -most: h <= n P),
    without those HiGHS would drop as tiny (within SLACK)."""
    return [(max(m, -float(most)), var) for m, var in pairs if m < math.inf and abs(m) > SLACK]


def _net_sum_row(H, net_terms: dict) -> None:
    """Every byte that leaves its group passes through another before it is back: sum h >= sum r, so the
    groups' net terms sum to at most 0."""
    H.addConstr(sum(m * var for terms in net_terms.values() for m, var in terms) <= len(net_terms) * SLACK)


def group_symmetries(problem: WiringProblem, ug: UniformGroups) -> list[tuple[tuple[int, ...], bool]]:
    """The relabellings of the groups the instance keeps: (sigma, rev) when some map pi of the accelerators,
    group g onto group sigma[g], has t[pi u, pi v] = t[u, v] (rev False) or t[v, u] (rev True: every demand
    turned round, which any wiring serves in the same time, each route run backwards). A wiring at T whose
    group g has cross pattern x_g then has an image at T whose group sigma[g] has x_g. pi is found by VF2 on
    the bytes across groups (the bytes inside are uniform) and checked on the whole matrix. The identity
    first (llama405b-tp8pp4-32: it and the pipeline's reversal, stage g onto stage 3 - g)."""
    from networkx.algorithms.isomorphism import DiGraphMatcher

    from .bounds import group_sums
    from .coupled import group_labels
    t = problem.traffic.bytes_.astype(np.float64)
    k = len(ug.groups)
    lab = group_labels(ug.groups, problem.accelerators)

    def across(m: np.ndarray, colour) -> nx.DiGraph:
        G = nx.DiGraph()
        G.add_nodes_from((v, {"c": int(colour[v])}) for v in range(len(lab)))
        u, v = np.nonzero((lab[:, None] != lab[None, :]) & (m > 0))
        G.add_edges_from((a, b, {"w": m[a, b]}) for a, b in zip(u.tolist(), v.tolist()))
        return G

    target = across(t, lab)
    sums = group_sums(t, lab)                         # bytes from group to group: a quick first test
    out = []
    for sigma in itertools.permutations(range(k)):
        for rev in (False, True):
            m = t.T if rev else t
            if not np.allclose(sums[np.ix_(sigma, sigma)], sums.T if rev else sums, rtol=1e-9, atol=0):
                continue
            match = DiGraphMatcher(across(m, np.asarray(sigma)[lab]), target,
                                   node_match=lambda a, b: a["c"] == b["c"],
                                   edge_match=lambda a, b: a["w"] == b["w"])
            pi = next(match.isomorphisms_iter(), None)
            if pi is None:
                continue
            pi = np.array([pi[v] for v in range(len(lab))])
            if np.array_equal(t[np.ix_(pi, pi)], m):
                out.append((sigma, rev))
    return out


def case_orbits(cases: list[tuple], symmetries) -> tuple[list[tuple], int]:
    """The split's cases up to the group symmetries (`group_symmetries`): one case per orbit, the first in
    `cases`' order, and how many cases an orbit with a member outside `cases` (ruled out by the tables, so
    every member is) drops. A case's image under sigma gives group sigma[g] the pattern of group g."""
    listed = set(cases)
    seen: set = set()
    reps, dropped = [], 0
    for case in cases:
        if case in seen:
            continue
        orbit = set()
        for sigma, _ in symmetries:
            image = [None] * len(case)
            for g, x in enumerate(case):
                image[sigma[g]] = x
            orbit.add(tuple(image))
        seen |= orbit
        if orbit <= listed:
            reps.append(case)
        else:
            dropped += len(orbit & listed)
    return reps, dropped


def pattern_cases(ug: UniformGroups, rho: dict) -> list[tuple] | None:
    """The rest split by patterns (when `pattern_bounds` gave every kind its patterns, else None): one
    pattern per group, not every group (1, 1), the net test's terms summing to at most 0; the cases with the
    largest sum first (the likelier infeasible)."""
    if not all("patterns" in r for r in rho.values()):
        return None
    k = len(ug.groups)
    per = [list(rho[(ug.out_b[g], ug.in_b[g])]["patterns"].items()) for g in range(k)]
    cases = []
    for pick in itertools.product(*per):
        total = sum(v["net"] for _, v in pick)
        if total <= k * SLACK and not all(x == (1, 1) for x, _ in pick):
            cases.append((-total, tuple(x for x, _ in pick)))
    return [c for _, c in sorted(cases)]


def group_graphs(patterns: tuple, pairs: set[tuple[int, int]]) -> list[dict[tuple[int, int], int]]:
    """One case of the split by patterns, split again by the circuits between each pair of groups: every
    loopless multigraph on the groups with group g of degree sum(patterns[g]) and every pair of groups with
    bytes between them (`pairs`) joined (else those bytes have no way). Keys (g, h), g < h."""
    k = len(patterns)
    links = list(itertools.combinations(range(k), 2))
    left = [sum(x) for x in patterns]
    out: list[dict] = []

    def joined(cur: dict) -> bool:
        parts = UnionFind(range(k))
        for (g, h), c in cur.items():
            if c:
                parts.union(g, h)
        return all(parts[g] == parts[h] for g, h in pairs)

    def rec(i: int, cur: dict) -> None:
        if i == len(links):
            if not any(left) and joined(cur):
                out.append({key: c for key, c in cur.items() if c})
            return
        g, h = links[i]
        later = [j for j in range(i + 1, len(links)) if g in links[j]]
        for c in range(min(left[g], left[h]) + 1):
            if not later and c != left[g]:
                continue                    # g's last link takes what g has left
            left[g] -= c
            left[h] -= c
            cur[(g, h)] = c
            rec(i + 1, cur)
            left[g] += c
            left[h] += c
        cur.pop((g, h), None)

    rec(0, {})
    return out


def structures(patterns: tuple, between: dict[tuple[int, int], int], n: int, most: int = MAX_PLACINGS,
               only: int | None = None, fixed: dict[tuple[int, int], int] | None = None
               ) -> list[dict[tuple[int, int], int]] | None:
    """The circuits across of one group-level case (`group_graphs`) placed on accelerators: group g's
    accelerator i (model node g n + i) holds patterns[g][i] circuits across, every such multigraph up to
    swapping accelerators of equal degree inside a group (so each is one ("fixed", ...) probe). The search
    tries only the first of the accelerators of one degree in one group that hold no circuit yet (the rest
    are interchangeable at that point), then keys each placing by `canon`. None when it meets more than
    `most` placings (too many probes to split into). llama405b-tp8pp4-32's ((2,2), (2,2,1,1), (2,2,1,1),
    (2,2)): 14 group-level cases, 5,975 placings in 2.7 s (without the first-of-a-class rule: 6 of the 14
    over 20,000, minutes). With `only`: the placings of group `only`'s circuits alone (the other groups'
    accelerators take what they can); with `fixed` ({(u, v): circuits}, model nodes): every placing that
    holds those circuits (a partial case's, `partials`)."""
    k = len(patterns)
    nodes = [(g, i) for g in range(k) for i in range(len(patterns[g]))]
    deg = [patterns[g][i] for g, i in nodes]
    full = list(deg)
    left_pair = dict(between)
    start_edges = []
    for (u, v), c in (fixed or {}).items():
        a, b = divmod(u, n), divmod(v, n)
        for _ in range(c):
            start_edges.append((a, b))
            deg[nodes.index(a)] -= 1
            deg[nodes.index(b)] -= 1
            left_pair[(a[0], b[0])] -= 1
    if min(deg, default=0) < 0 or min(left_pair.values(), default=0) < 0:
        return []
    swaps = []                               # per group, the permutations of its equal-degree positions
    for x in patterns:
        runs = [[i for i in range(len(x)) if x[i] == v] for v in dict.fromkeys(x)]
        per = []
        for combo in itertools.product(*(itertools.permutations(r) for r in runs)):
            m = {}
            for r, pr in zip(runs, combo):
                m.update(zip(r, pr))
            per.append(m)
        swaps.append(per)
    seen: set = set()
    out: list[dict] = []

    def canon(edges):
        """An image of `edges` (so equal keys are equal up to the swaps): each group's least swap in turn,
        until none lowers it (cheaper than the least over every product of swaps; a few equal structures
        may keep different keys, which costs probes, never a case)."""
        best = tuple(sorted(edges))
        moved = True
        while moved:
            moved = False
            for g, per in enumerate(swaps):
                for m in per:
                    def f(a):
                        return (g, m[a[1]]) if a[0] == g else a
                    e = tuple(sorted(tuple(sorted((f(a), f(b)))) for a, b in best))
                    if e < best:
                        best, moved = e, True
        return best

    placed = [0]

    def rec(edges: list, start: int) -> None:
        u = next((j for j in range(len(nodes)) if deg[j] and (only is None or nodes[j][0] == only)), None)
        if u is None:
            placed[0] += 1
            if placed[0] > most:
                raise OverflowError
            key = canon(edges)
            if key not in seen:
                seen.add(key)
                circuits: dict = {}
                for a, b in key:
                    uv = (a[0] * n + a[1], b[0] * n + b[1])
                    circuits[uv] = circuits.get(uv, 0) + 1
                out.append(circuits)
            return
        fresh: set = set()       # untouched accelerators of one degree in one group are interchangeable here:
        lo = start if only is not None else max(start, u + 1)      # (one group's alone: partners anywhere)
        for v in range(lo, len(nodes)):                  # try the first of each such class only
            g, h = nodes[u][0], nodes[v][0]
            gh = (min(g, h), max(g, h))
            if g == h or not deg[v] or not left_pair.get(gh, 0):
                continue
            if deg[v] == full[v]:
                if (h, full[v]) in fresh:
                    continue
                fresh.add((h, full[v]))
            deg[u] -= 1
            deg[v] -= 1
            left_pair[gh] -= 1
            edges.append((nodes[u], nodes[v]) if g < h else (nodes[v], nodes[u]))
            rec(edges, v if deg[u] else 0)
            edges.pop()
            deg[u] += 1
            deg[v] += 1
            left_pair[gh] += 1

    try:
        rec(list(start_edges), 0)
    except OverflowError:
        return None
    return out


def partials(patterns: tuple, between: dict[tuple[int, int], int], placed: list[dict] | None, n: int
             ) -> list[tuple[tuple, list[dict] | None]] | None:
    """The placings of one group-level case (`structures`) by where one group's circuits across sit (the
    group whose circuits take the fewest different placings, at least two): [(("partial", patterns,
    between, {(u, v): circuits}, that group's pairs of groups), the placings with those circuits)], or None
    when no group's circuits split them. A partial case refuted refutes all its placings: llama405b-tp8pp4-32's
    ((2,2), (2,2,1,1), (2,2,1,1), (2,2)) with {(0,1): 2, (0,2): 1, (0,3): 1, (1,2): 3, (1,3): 1, (2,3): 2}:
    1,225 placings, 22 partial cases by group 0's circuits, 12 of them (753 placings) infeasible in 0.5-1.2 s
    each. With `placed` None (too many placings to list): the placings of each group's circuits alone
    (`structures(..., only=g)`), each partial case's own placings (None) listed when it is split."""
    best = None
    for g in range(len(patterns)):
        pairs = tuple(sorted(gh for gh in between if g in gh))
        if placed is None:
            mine = structures(patterns, between, n, only=g)
            if mine is not None and len(mine) >= 2 and (best is None or len(mine) < len(best[1])):
                best = (pairs, {tuple(sorted(m.items())): None for m in mine})
            continue
        by: dict[tuple, list[dict]] = {}
        for s in placed:
            by.setdefault(tuple(sorted((uv, c) for uv, c in s.items() if (uv[0] // n, uv[1] // n) in pairs)),
                          []).append(s)
        if len(by) >= 2 and (best is None or len(by) < len(best[1])):
            best = (pairs, by)
    if best is None:
        return None
    pairs, by = best
    # in the order of their circuits, so that the screen's next LP starts near its last one's case and a kept
    # certificate refutes more (the heaviest case's first 500: 642 LP solves, not 759; 1.94 M iterations, not 2.41 M)
    return [(("partial", patterns, between, dict(key), pairs), held) for key, held in sorted(by.items())]


def _pattern_rows(H, ug: UniformGroups, xs: dict, rho: dict, node, only=None) -> tuple[dict, dict]:
    """The rest probe's rows when the net test leaves each group a few cross patterns (`pattern_bounds`):
    one of them per group (its accelerators' cross degrees are the pattern's, largest first), not every
    group (1, 1), and each pattern's rho and net term. Returns (rho terms, net terms) like `_rest_rows`."""
    k, n, P = len(ug.groups), ug.n, ug.ports
    rho_terms: dict[int, list] = {}
    net_terms: dict[int, list] = {}
    ones = []
    for g in range(k):
        pats = rho[(ug.out_b[g], ug.in_b[g])]["patterns"]
        b = {x: H.addBinary() for x in pats}
        H.addConstr(sum(b.values()) == 1)
        if only is not None:            # one case of the split by patterns
            for x, var in b.items():
                H.addConstr(var == (1 if x == only[g] else 0))
        for i in range(n):
            H.addConstr(xs[node(g, i)] - sum((x[i] if i < len(x) else 0) * var for x, var in b.items()) == 0)
        rho_terms[g] = [(v["rho"] - SLACK, b[x]) for x, v in pats.items() if SLACK < v["rho"] < math.inf]
        net_terms[g] = _net_terms([(v["net"], b[x]) for x, v in pats.items()], n * P)
        if (1, 1) in b:
            ones.append(b[(1, 1)])
    if len(ones) == k:
        H.addConstr(sum(ones) <= k - 1)
    _net_sum_row(H, net_terms)
    return rho_terms, net_terms


def _known_pattern_terms(ug: UniformGroups, patterns, rho: dict) -> tuple[dict, dict]:
    """The rho and net terms of groups whose patterns are known (a placing's, a cycle's: constant terms,
    coefficient times 1), as `_pattern_rows` gives the rest probe; a pattern without a table entry gets none."""
    k, n, P = len(ug.groups), ug.n, ug.ports
    rho_terms: dict[int, list] = {}
    net_terms: dict[int, list] = {}
    for g, x in enumerate(patterns):
        v = rho[(ug.out_b[g], ug.in_b[g])]["patterns"].get(x)
        rho_terms[g] = [(v["rho"] - SLACK, 1.0)] if v is not None and SLACK < v["rho"] < math.inf else []
        net_terms[g] = _net_terms([(v["net"], 1.0)], n * P) if v is not None else []
    return rho_terms, net_terms


def fingerprint(problem: WiringProblem, ug: UniformGroups) -> str:
    """What every probe of the instance reads (its groups, bytes and ports), hashed: the proof log's key
    for the instance, so a case settled on one instance is never taken for another's."""
    h = hashlib.sha256(b"ocs-synth rings 1")
    h.update(json.dumps([ug.groups, ug.ports, repr(ug.port_bytes_per_s), repr(ug.d)]).encode())
    h.update(np.ascontiguousarray(problem.traffic.bytes_, dtype=np.float64).tobytes())
    return h.hexdigest()[:32]


def case_key(case) -> str:
    """A case as a string, the same across runs (the proof log's key)."""
    kind, parts = case[0], []
    if kind == "fixed":
        parts = [sorted([u, v, c] for (u, v), c in case[1].items())]
    elif kind == "partial":
        parts = [[list(x) for x in case[1]], sorted([g, h, c] for (g, h), c in case[2].items()),
                 sorted([u, v, c] for (u, v), c in case[3].items()), sorted(list(gh) for gh in case[4])]
    elif kind == "factor":
        parts = [[list(c) for c in case[1]]]
    elif len(case) > 1:
        parts = [[list(x) for x in case[1]]] + ([sorted([g, h, c] for (g, h), c in case[2].items())]
                                                 if len(case) > 2 else [])
    return json.dumps([kind, *parts], separators=(",", ":"))


def ring_bound(problem: WiringProblem, ug: UniformGroups, T: float, deadline: float, threads: int = 1,
               say=None, log=None) -> tuple[str, dict | None, dict]:
    """Every case at T (module doc), `threads` probes at a time. Returns (verdict, circuits, info): verdict
    "closed" (no wiring reaches T), "found" (a probe's circuits, for the caller to score on the instance),
    "open" (a probe without a verdict, or out of time) or "not applicable".
    `log` (a `synth.model.ProofLog`, or None) carries verdicts between runs: a case it holds as infeasible
    at T or above is not probed again (a wiring that reaches T reaches every time above it); a case it
    holds as unsettled at T is split again without its probe, and a placing is probed with RETRY times the
    clock it had; every probe's infeasible or unsettled verdict is added to it."""
    say = say or (lambda msg: None)
    t0 = time.perf_counter()
    info: dict = {"T": T}
    k = len(ug.groups)
    bl = ring_blocks(problem, ug)
    if bl is None:
        return "not applicable", None, {**info, "verdict": "not applicable"}
    live = Live()
    fp = fingerprint(problem, ug) if log is not None else ""
    try:
        rho = pattern_bounds(ug, T, deadline, threads, live, log=log, fp=fp)
    except TimeoutError:
        return "open", None, {**info, "verdict": "out of time in the group models"}
    info["rho"] = {f"{o:g}/{i:g} B": _table(r) for (o, i), r in rho.items()}
    demand_pairs = {(min(g, h), max(g, h)) for g, h in bl}
    split = pattern_cases(ug, rho)
    if split is not None:               # one case per orbit of the instance's group symmetries
        every = len(split)
        split, dropped = case_orbits(split, group_symmetries(problem, ug))
    rest: list = [("rest", c) for c in split] if split is not None else [("rest",)]
    cycles: list = []
    if all(r["11"] < math.inf for r in rho.values()):
        cycles = [("factor", f) for f in two_factors(k) if _connected(f, demand_pairs)]
    say(f"rings: {len(rest) + len(cycles)} whole-instance case probes at {T:.9g} s")
    results: dict = {}
    levels = {level: dict.fromkeys(("infeasible", "found", "unsettled", "open", "from the log", "screened",
                                    "split unprobed"), 0)
              for level in (*SPLIT_S, "whole")}
    lock, settled = threading.Lock(), [0]
    added = log.added if log is not None else 0

    def ask(case, level: str, clock: float, n_threads: int, screen: Screen | None = None):
        """One probe, or its verdict from the log, or `screen`'s refutation; the verdict goes to the log."""
        key = case_key(case) if log is not None else ""
        prior = log.get(fp, key) if log is not None else None
        again = prior is not None and prior["verdict"] == "unsettled" and math.isclose(prior["T"], T, rel_tol=1e-12)
        if prior is not None and prior["verdict"] == "infeasible" and prior["T"] >= T:
            with lock:
                levels[level]["from the log"] += 1
            return "infeasible", None
        if again and level != "fixed" and prior["clock_s"] >= clock:
            with lock:
                levels[level]["from the log"] += 1
            return "unsettled", None
        if again:
            clock = max(clock, RETRY * prior["clock_s"])
        clock = min(clock, deadline - time.perf_counter())
        if screen is not None and screen.refutes(case, min(clock, SCREEN_S)):
            with lock:
                levels[level]["screened"] += 1
                if log is not None:
                    log.add(fp, key, {"verdict": "infeasible", "T": T, "clock_s": round(clock, 3)})
            return "infeasible", None
        if live.stopped:                # Ctrl-C or a failure elsewhere: the screen's LP was cancelled
            return "open", None
        if screen is not None and level == "partial" and screen.H is not None:
            # its LP feasible, its short probe all but never settles it (llama405b-tp8pp4-32: 0 of 53 in 4 s,
            # 3.7 s each): split it at once (its placings meet the screen too), no verdict to log
            with lock:
                levels[level]["split unprobed"] += 1
            return "unsettled", None
        verdict, circuits = probe(problem, ug, bl, T, case, rho, clock, n_threads, live)
        if live.stopped and verdict == "unsettled":     # cancelled, not tried: nothing to log
            return "open", None
        with lock:
            levels[level][verdict] += 1
            if log is not None and verdict in ("infeasible", "unsettled"):
                log.add(fp, key, {"verdict": verdict, "T": T,
                                  "clock_s": round(max(clock, prior["clock_s"] if again else 0.0), 3)})
        return verdict, circuits

    def run(case):
        """A whole case; or a pattern case of the split, its short probe only (`by_groups` splits it)."""
        left = deadline - time.perf_counter()
        if left < 1.0 or live.stopped:
            return case, "open", None, 0.0
        t1 = time.perf_counter()
        if split is not None and case[0] == "rest":
            verdict, circuits = ask(case, "patterns", SPLIT_S["patterns"], 1)
        else:
            verdict, circuits = ask(case, "whole", left, threads if case[0] == "rest" else 1)
        return case, verdict, circuits, time.perf_counter() - t1

    def split_closed(case, level: str) -> None:
        """`case` is infeasible because every case it splits into is: logged, so the next run needs none."""
        if log is not None:
            with lock:
                log.add(fp, case_key(case), {"verdict": "infeasible", "T": T, "clock_s": SPLIT_S[level]})

    def tell(case, verdict: str, wall: float) -> None:
        """Progress on a run of hours: one line per pattern case of the split as it settles."""
        with lock:
            settled[0] += 1
            say(f"rings: {settled[0]}/{len(rest)} {_name(case)}: {verdict} ({wall:.0f} s)")

    def by_groups(done: list) -> list:
        """The pattern cases their short probes leave unsettled, split by the circuits between groups: every
        pair-of-groups case of all of them, `threads` at a time, each depth first below it (`settle`), so the
        last and heaviest pattern cases do not hold one thread while the others idle (llama405b-tp8pp4-32's
        (2,2,1,1) x 4: 25 such cases, hours on one thread). A pattern case is infeasible once all its cases
        are, found when one is. Returns `done` with each pattern case's verdict and thread-seconds."""
        for case, verdict, _, wall in done:
            if verdict != "unsettled":
                tell(case, verdict, wall)
        # per pattern case: [its cases' worst verdict so far, a found wiring, thread-seconds, cases left]
        parents = {case: ["infeasible", None, wall, 0] for case, verdict, _, wall in done if verdict == "unsettled"}
        kids = [(case, ("rest", case[1], b)) for case in parents for b in group_graphs(case[1], demand_pairs)]
        for case, _ in kids:
            parents[case][3] += 1
        rank = {"infeasible": 0, "unsettled": 1, "open": 2, "found": 3}

        def close(parent) -> None:
            """The last case of `parent` has its verdict (or it had none to split into)."""
            entry = parents[parent]
            if entry[0] == "infeasible":
                split_closed(parent, "patterns")
            tell(parent, entry[0], entry[2])

        for parent, entry in parents.items():
            if entry[3] == 0:               # no circuits between the groups fit the patterns
                close(parent)

        def one(item):
            parent, kid = item
            with lock:
                skip = parents[parent][0] == "found"
            t1 = time.perf_counter()
            verdict, circuits = ("open", None) if skip else settle(kid, "groups")
            with lock:
                entry = parents[parent]
                entry[2] += time.perf_counter() - t1
                entry[3] -= 1
                if rank[verdict] > rank[entry[0]]:
                    entry[0] = verdict
                    entry[1] = circuits if verdict == "found" else entry[1]
                last = entry[3] == 0
            if last:
                close(parent)
            return item

        parallel(one, kids, threads if len(kids) > 1 else 1, live)
        return [(case, verdict, circuits, wall) if case not in parents else
                (case, "open" if parents[case][3] else parents[case][0], parents[case][1], parents[case][2])
                for case, verdict, circuits, wall in done]

    def settle(case, level: str, members: list | None = None, screen: Screen | None = None):
        """One case of the split below a pattern case (`by_groups`): a short probe, and when that leaves it
        unsettled, its cases one level down (circuits between groups -> one group's circuits on accelerators
        -> all circuits on accelerators: `members`, the placings a partial case holds), depth first; "found"
        ends it. Below a group-level case, its `Screen` goes first. Out of time or stopped (`live`: Ctrl-C,
        or a failure in another worker), "open" at once: the cases left are not asked, so none is logged as
        tried."""
        left = deadline - time.perf_counter()
        if left < 1.0 or live.stopped:
            return "open", None
        verdict, circuits = ask(case, level, SPLIT_S[level], 1, screen)
        if verdict != "unsettled" or level == "fixed":
            return verdict, circuits
        if level == "groups":
            screen = Screen(problem, ug, bl, T, case[1], case[2], rho, live)
            placed = structures(case[1], case[2], ug.n, MAX_PLACINGS)
            parts = partials(case[1], case[2], placed, ug.n)
            if parts is None and placed is None:
                return verdict, None
            kids = ([(("fixed", s), "fixed", None) for s in placed] if parts is None else
                    [(part, "partial", held) for part, held in parts])
        else:
            members = structures(case[1], case[2], ug.n, fixed=case[3]) if members is None else members
            if members is None:
                return verdict, None
            kids = [(("fixed", s), "fixed", None) for s in members]
        worst = "infeasible"
        for kid, lower, held in kids:
            v, circuits = settle(kid, lower, held, screen)
            if v == "found":
                return v, circuits
            if v != "infeasible":
                worst = v
            if v == "open":
                break
        if worst == "infeasible":
            split_closed(case, level)
        return worst, None

    found = None
    # the rest first, on its own: the cycles prove nothing unless it closes too (llama405b-tp8pp4-32: each
    # cycle 0.2-0.4 h, the rest unsettled after 1 h), and its wirings are the likelier better ones; split by
    # patterns, its cases' short probes `threads` at a time (in workers: Ctrl-C reaches the waiting main
    # thread), then the pair-of-groups cases of those left
    done = parallel(run, rest, threads if len(rest) > 1 else 1, live)
    if split is not None:
        done = by_groups(done)
    if all(verdict == "infeasible" for _, verdict, _, _ in done):
        done += parallel(run, cycles, threads, live)
    for case, verdict, circuits, wall in done:
        if case[0] != "rest" or split is None:
            say(f"rings: case {_name(case)}: {verdict} ({wall:.0f} s)")
        if case[0] != "rest" or split is None or verdict != "infeasible":     # (the split's: their tally)
            results[_name(case)] = {"verdict": verdict, "wall_s": round(wall, 1)}
        if verdict == "found" and found is None:
            found = circuits
    if split is not None:
        tally = {v: sum(1 for c, vv, _, _ in done if c[0] == "rest" and vv == v)
                 for v in ("infeasible", "found", "unsettled", "open")}
        say(f"rings: the rest by patterns, {every} cases, {len(rest)} up to symmetry ({dropped} more ruled out by "
            "it): " + ", ".join(f"{n} {v}" for v, n in tally.items() if n))
        info["rest by patterns"] = {"cases": every, "probes": len(rest), "ruled out by symmetry": dropped, **tally,
                                    "probes by level": {lv: {v: n for v, n in c.items() if n}
                                                        for lv, c in levels.items() if lv != "whole"}}
    info.update(cases=results, wall_s=round(time.perf_counter() - t0, 1))
    if log is not None:
        info["proof log"] = {"verdicts": len(log), "added": log.added - added}
    if found is not None:
        info["verdict"] = "found"
        return "found", found, info
    if all(r["verdict"] == "infeasible" for r in results.values()):
        info["verdict"] = "closed"
        return "closed", None, info
    info["verdict"] = "open"
    return "open", None, info


def _table(r: dict) -> dict:
    """One kind's `pattern_bounds` for the solve block (JSON: strings for keys, None for no bound)."""
    def val(v):
        return "infeasible" if v == math.inf else None if v == -math.inf else round(v, 9)
    out = {}
    for key, v in r.items():
        if key == "patterns":
            out[key] = {"-".join(map(str, x)): {w: val(u) for w, u in vals.items()} for x, vals in v.items()}
        else:
            out[f"net {key[1]}" if isinstance(key, tuple) else str(key)] = val(v)
    return out


def _name(case) -> str:
    if case[0] == "rest" and len(case) > 1:
        return "patterns " + " / ".join("-".join(map(str, x)) for x in case[1])
    if case[0] == "rest":
        return "not every group (1, 1)"
    return "cycles " + " ".join("-".join(map(str, c)) for c in case[1])
