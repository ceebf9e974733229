"""Exact wiring models: a MILP (PuLP with CBC, or HiGHS) and a CP-SAT model (OR-Tools) of the same problem.

Decisions: y[s, (i, j)] circuits between accelerators i < j on switch s (integer, at most the ports both
have on s); each switch a (b-)matching: sum_j y[s, (i, j)] <= ports of i on s, and at most radix/2 circuits
on s; fixed circuits are lower bounds on y. Routing: flows aggregated by source on every directed pair,
conserved at every accelerator (direct policy: a flow may only go straight to its destination).

- MILP (exact, fractional routing): maximize the concurrent throughput lambda with every demand routed at
  lambda x its bytes and every directed circuit carrying at most B; the step's time is 1 / lambda. For the
  ``hops`` objective: minimize byte-hops with each circuit usable by any amount of flow.
- CP-SAT (the same constraints, integer routing): demands are integers in units of `unit` bytes (the
  largest unit that divides them all, else max / 100 with demands rounded up; `extra.unit_bytes` says
  which) and time is counted in ticks of unit / (B * L), L = lcm(1..max circuits per pair), so integer
  ticks are exact for integer flows: load <= ticks * circuits / L is linearized with binaries
  b[pair, m] = (circuits >= m) and z[arc, m] <= ticks, z <= big-M * b, where big-M = the total demand in
  units x L (no arc ever carries more). Integer routing is a restriction of the fractional one, so for the
  time objective with relays CP-SAT's optimum is not a proof: that model only supplies a first wiring
  (scored exactly; its valid bound is the dual bound less n_src units per circuit: any fractional routing
  rounds, source by source, to an integral one within one unit per arc, exact units only). The proofs come
  from the metric-inequality probes of solvers/benders.py: CP-SAT decides circuits, an LP routes, and the
  LP's duals return as rows (Japanese theorem), so an INFEASIBLE probe at T proves nothing reaches T. With
  the direct policy the flows are the demands and the tick model is exact.

Strengthening, valid for both: node-symmetry rows (solvers/symmetry.py) and cut-set rows on the demand's
clusters with Chvatal-Gomory rounding (`_cluster_rows`). The MILP's time objective runs as probes
(`solve_milp`): "a wiring at least as good as T?", with flows split by hop so that each pair's relayed bytes
meet the residual-capacity cut at T (`_layered_routing`).

Big-M and scaling come from the instance, never constants: demands are normalized by their maximum.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import partial, reduce

import numpy as np

from synth.errors import SolverUnavailable
from synth.formats import quiet_stdout as _quiet_stdout
from synth.model import Limit, SolveParams, SolveResult, SolveStatus, Wiring
from synth.problem import WiringProblem

from .bounds import ProblemCache, best_bound, final_bound, switches_bind
from .ctrl_c import CpsatCtrlC, HighsCtrlC

EXACT_MAX = 64   # accelerators; beyond this the exact models are not built
COLOUR_TIME_S = 10.0   # exact colouring of a relaxed answer the colouring heuristic gave up on
COLOUR_MIN_S = 0.2     # ... when the solve's clock has run out
SECOND_STAGE_MIN_S = 1.0   # left of the clock for the per-switch model after an uncolourable relaxed answer


@dataclass
class _Index:
    n: int
    pairs: list[tuple[int, int]]                  # undirected (i < j) that can hold a circuit
    on: dict[tuple[int, int], list[tuple[int, int]]]   # pair -> [(switch, max circuits on it)]
    arcs: list[tuple[int, int]]                   # directed arcs of those pairs
    srcs: np.ndarray                              # sources with demand
    cap: np.ndarray                               # ports of accelerator a on switch s
    fixed: dict[tuple[int, int, int], int]        # (s, i, j) -> fixed circuits
    max_x: dict[tuple[int, int], int]


def _index(problem: WiringProblem) -> _Index:
    lay = problem.layout
    cap = lay.capacity
    n = problem.accelerators
    on: dict[tuple[int, int], list[tuple[int, int]]] = {}
    for s in range(lay.switches):
        if lay.switch_radix[s] < 2:
            continue
        nodes = np.flatnonzero(cap[:, s] > 0)
        for a_pos, i in enumerate(nodes):
            for j in nodes[a_pos + 1:]:
                on.setdefault((int(i), int(j)), []).append((s, int(min(cap[i, s], cap[j, s]))))
    pairs = sorted(on)
    fixed: dict[tuple[int, int, int], int] = {}
    for c in problem.fixed_circuits:
        key = (c.switch, min(c.a, c.b), max(c.a, c.b))
        fixed[key] = fixed.get(key, 0) + 1
    if problem.policy == "direct":  # only pairs with demand (or a fixed circuit) hold circuits in a direct-only wiring
        t = problem.traffic.bytes_
        pinned = {(i, j) for _, i, j in fixed}
        pairs = [p for p in pairs if t[p] > 0 or t[p[::-1]] > 0 or p in pinned]
    arcs = [(i, j) for i, j in pairs] + [(j, i) for i, j in pairs]
    srcs = np.flatnonzero(problem.traffic.bytes_.sum(axis=1) > 0)
    max_x = {p: sum(m for _, m in on[p]) for p in pairs}
    return _Index(n, pairs, on, arcs, srcs, cap, fixed, max_x)


def _wiring_from(problem: WiringProblem, counts: dict[tuple[int, int, int], int], meta: dict) -> Wiring:
    """Circuits from per-switch pair counts: the k-th circuit of a on s takes a's k-th port on s."""
    from synth.realize import assign_ports
    keys = [k for k, cnt in sorted(counts.items()) for _ in range(int(cnt))]
    circuits = assign_ports(problem.layout, [(i, j) for _, i, j in keys], [s for s, _, _ in keys])
    return Wiring(problem.accelerators, problem.ports, circuits, problem.layout, **meta)


def _built(problem: WiringProblem) -> float:
    """The longest time a MILP of `problem` took to build and pass to the solver so far (0 before any)."""
    return _BUILD_S[problem] if problem in _BUILD_S else 0.0


def _symmetric_switches(problem: WiringProblem) -> bool:
    lay = problem.layout
    return lay.is_uniform() and len(set(lay.switch_radix)) == 1


def _finish(problem: WiringProblem, solver: str, version: str, params: SolveParams, t0: float,
            status: SolveStatus, limit: Limit, wiring: Wiring | None, model_bound: float | None,
            extra: dict) -> SolveResult:
    """Score the wiring with the canonical objective and attach the best valid bound. A model bound above the
    wiring's own objective (more than MODEL_SLACK) is a lower bound on every wiring that a wiring in hand
    beats, so the solve that gave it went wrong: it is left out (`model_inconsistent`), and it proves nothing."""
    bound, named, cut = final_bound(problem)
    ours = bound
    if model_bound is not None:
        named["model"] = model_bound
        bound = max(bound, model_bound)
    objective = None
    if wiring is not None:
        objective, routing, hit = problem.score_or_quick(wiring, "best",
                                                         max(1.0, params.time_limit_s - (time.perf_counter() - t0)))
        extra = {**extra, "routing": routing}
        if model_bound is not None and np.isfinite(objective) and model_bound > objective * (1 + MODEL_SLACK):
            # HiGHS's MIP on llama405b-tp8pp2-16's phases model: dual bound 0.00285509 s beside a start of
            # 0.00284729 s (claimed OPTIMAL), where a wiring of 0.00283022 s fits the same model (BENCHMARKS.md)
            named["model_inconsistent"] = named.pop("model")
            bound = ours
            status = SolveStatus.FEASIBLE if status == SolveStatus.OPTIMAL else status
            extra = {k: v for k, v in extra.items() if k != "proven_by"}
        if cut or hit:          # Ctrl-C while bounding or scoring: the answer stands, on the quick figures
            limit = Limit.INTERRUPT
            status = SolveStatus.FEASIBLE if status == SolveStatus.OPTIMAL else status
        if status == SolveStatus.OPTIMAL:
            bound = max(bound, min(objective, extra.get("model_objective", objective)))
        bound = min(bound, objective)
        if not np.isfinite(objective):       # a wiring that cannot route every demand proves nothing
            status = SolveStatus.FEASIBLE
        elif status == SolveStatus.FEASIBLE and objective - bound <= (params.rel_gap + TIE) * objective:
            status = SolveStatus.OPTIMAL          # a valid bound meets the objective: proven
            extra = {**extra, "proven_by": "bound"}
    limit = limit.settled(status)
    wall = time.perf_counter() - t0
    solve = {"status": status.value, "objective": objective, "bound": bound, "solver": solver, "seed": params.seed,
             "objective_kind": problem.objective, "limit": limit.value, "bounds": named}
    if wiring is not None:
        gap = 0.0 if not objective else 1.0 if not np.isfinite(objective) else max(0.0, (objective - bound) / objective)
        wiring = wiring.with_meta(solve={**solve, "gap": gap, "wall_s": round(wall, 3), **extra},
                                  instance=problem.instance)
    return SolveResult(status, objective, bound, wall, solver, version, params.seed, limit, wiring,
                       extra={"bounds": named, **extra})


def _incident(ix: _Index) -> dict[int, list[tuple[int, int]]]:
    inc: dict[int, list[tuple[int, int]]] = {}
    for p in ix.pairs:
        inc.setdefault(p[0], []).append(p)
        inc.setdefault(p[1], []).append(p)
    return inc


def _topology_vars(ix: _Index, per_switch: bool) -> dict:
    """Topology variables: key -> (name, lower, upper). Per switch: y[(s, i, j)]; else x[(i, j)]."""
    if per_switch:
        return {(s, *p): (f"y_{s}_{p[0]}_{p[1]}", ix.fixed.get((s, *p), 0), mx) for p in ix.pairs for s, mx in ix.on[p]}
    return {p: (f"x_{p[0]}_{p[1]}", 0, ix.max_x[p]) for p in ix.pairs}


def _topology_rows(problem: WiringProblem, ix: _Index, per_switch: bool):
    """The linear rows over the topology variables, for any modelling API: (terms, sense, rhs) with terms a
    list of (variable key, coefficient). Per switch: a b-matching per switch, radix / 2 circuits at most, and
    switches in decreasing order of use when they are interchangeable. Relaxed: the degree budget only."""
    lay = problem.layout
    if not per_switch:
        for a, inc in _incident(ix).items():
            yield [(p, 1) for p in inc], "<=", int(ix.cap[a].sum())
        yield [(p, 1) for p in ix.pairs], "<=", sum(r // 2 for r in lay.switch_radix)
        return
    by_s: dict[int, list] = {}
    for p in ix.pairs:
        for s, _ in ix.on[p]:
            by_s.setdefault(s, []).append((s, *p))
    for s, keys in sorted(by_s.items()):
        yield [(k, 1) for k in keys], "<=", lay.switch_radix[s] // 2
        for a in np.flatnonzero(ix.cap[:, s] > 0):
            inc = [(k, 1) for k in keys if a in k[1:]]
            if inc:
                yield inc, "<=", int(ix.cap[a, s])
    if _symmetric_switches(problem) and not ix.fixed:
        for s in range(lay.switches - 1):
            yield [(k, 1) for k in by_s.get(s, [])] + [(k, -1) for k in by_s.get(s + 1, [])], ">=", 0


_SYM_CACHE = ProblemCache()      # the probes rebuild the model: its rows took 11 s at 64 accelerators
_BUILD_S = ProblemCache()        # the longest MILP build (model and transfer) seen per problem, in seconds


def _symmetry_rows(problem: WiringProblem, ix: _Index, labels: list | None = None,
                   seconds: float | None = None) -> list[tuple[int, int, int]]:
    """Node-relabelling symmetry-breaking rows (r, a, b): x[r, a] >= x[r, b] (solvers/symmetry.py). Fixed
    circuits are part of each pair's kind (per switch), so only relabellings that keep them count; so are
    `labels` (one per accelerator, e.g. the cross degrees a labelled case fixes). `seconds`: the time limit
    of the first solve that asks, which sizes the search for them (kept for the later solves)."""
    memo = _SYM_CACHE.setdefault(problem, {})
    key_ = None if labels is None else tuple(labels)
    if key_ not in memo:
        memo[key_] = _symmetry_rows_of(problem, ix, labels, seconds)
    return list(memo[key_])


def _symmetry_rows_of(problem: WiringProblem, ix: _Index, labels: list | None,
                      seconds: float | None = None, pinned: dict | None = None) -> list[tuple[int, int, int]]:
    """`_symmetry_rows` uncached; `pinned` (circuits per pair a case fixes) joins each pair's kind, so the
    rows hold for the relabellings that keep the case (solvers/patterns.py)."""
    from .symmetry import row_orderings
    fixed_on: dict[tuple[int, int], list] = {}
    for (s, i, j), cnt in sorted(ix.fixed.items()):
        fixed_on.setdefault((i, j), []).append((s, cnt))
    pinned = pinned or {}
    pair_kind = {p: (tuple(ix.on[p]), tuple(fixed_on.get(p, ())), pinned.get(p)) for p in ix.pairs}
    rows = row_orderings(problem.demand_colours(), pair_kind,
                         [(tuple(ix.cap[a]), None if labels is None else labels[a]) for a in range(ix.n)],
                         seconds=seconds)
    key = lambda i, j: (min(i, j), max(i, j))
    return [(r, a, b) for r, a, b in rows if key(r, a) in pair_kind and key(r, b) in pair_kind]


def _labels(ix: _Index, case, labelled: bool) -> list | None:
    """The accelerators' fixed cross degrees of a labelled case (`solvers.stages.case_labels`), else None."""
    if case is None or not labelled:
        return None
    from .stages import case_labels
    return case_labels(case[0], case[1], ix.n)


def _cluster_rows(problem: WiringProblem, ix: _Index, need_of=None):
    """Cut-set rows on the accelerator sets the demand clusters into (weak components of the demand at or
    above each of its distinct values; e.g. the tensor-parallel groups): demand leaving or entering S needs
    circuits across the cut, `need_of(bytes)` of them (at least one), and the ports S keeps for itself then
    hold at most floor((ports of S - need) / 2) circuits inside S (a Chvatal-Gomory rounding the LP
    relaxation does not see), and at most what the switches' matchings hold inside S (`matching_cap`: less
    where S has an odd number of ports on a switch). Rows as in `_topology_rows`, over the pair keys."""
    from .bounds import demand_clusters, matching_cap
    ports = ix.cap.sum(axis=1)
    for inside, crossing in demand_clusters(problem.traffic.bytes_):
        S = set(np.flatnonzero(inside).tolist())
        need = max(1, need_of(crossing) if need_of else 1)
        yield [(p, 1) for p in ix.pairs if (p[0] in S) != (p[1] in S)], ">=", need
        yield [(p, 1) for p in ix.pairs if p[0] in S and p[1] in S], "<=", \
            min((int(ports[inside].sum()) - need) // 2, int(matching_cap(ix.cap[inside].sum(axis=0),
                                                                         problem.layout.switch_radix)))


def _flow_keys(problem: WiringProblem, ix: _Index):
    """Flow variables (source k, arc a -> b) of both models (direct policy: only arcs leaving k), and for
    each (k, node) the keys leaving and entering it."""
    keys = [(int(k), a, b) for k in ix.srcs for (a, b) in ix.arcs if problem.policy != "direct" or a == k]
    out: dict[tuple[int, int], list] = {}
    inn: dict[tuple[int, int], list] = {}
    for key in keys:
        out.setdefault((key[0], key[1]), []).append(key)
        inn.setdefault((key[0], key[2]), []).append(key)
    return keys, out, inn


def _counts(problem: WiringProblem, ix: _Index, values: dict, per_switch: bool, deadline: float | None = None):
    """Per-switch circuit counts: read from y, or by colouring the pair counts x onto the switches
    (None when they do not fit, or no colouring was found by `deadline`: see :func:`_counts_or_proof`)."""
    return _counts_or_proof(problem, values, per_switch, deadline)[0]


def _counts_or_proof(problem: WiringProblem, values: dict, per_switch: bool, deadline: float | None = None):
    """(counts, proven) for :func:`_counts`: `proven` says that a None means no colouring exists (CP-SAT's
    proof), not that none was found in time. `deadline` (a `time.perf_counter()` value): the colouring
    heuristic's restarts and the exact colouring stop there, the latter given at least COLOUR_MIN_S. A
    proof that excludes a wiring because it does not fit needs `proven` (a colouring cut off by the clock
    is no reason to exclude it)."""
    if per_switch:
        return {k: v for k, v in values.items() if v > 0}, False
    from synth.errors import Infeasible
    from synth.realize import realize
    pairs = [p for p, v in values.items() for _ in range(int(v))]
    try:
        circuits = realize(problem.layout, pairs, deadline=deadline)
    except Infeasible:                 # the heuristic gave up; an exact colouring may still exist
        from .colouring import colour_or_proof
        left = COLOUR_TIME_S if deadline is None else deadline - time.perf_counter()
        circuits, proven = colour_or_proof(problem.layout, pairs, min(COLOUR_TIME_S, max(COLOUR_MIN_S, left)))
        if circuits is None:
            return None, proven
    out: dict[tuple[int, int, int], int] = {}
    for c in circuits:
        key = (c.switch, min(c.a, c.b), max(c.a, c.b))
        out[key] = out.get(key, 0) + 1
    return out, False


def _per_switch(problem: WiringProblem) -> bool:
    """Whether the exact models need a circuit count per switch from the start: fixed circuits pin switches,
    and where the switches bind (`switches_bind`: split planes, explicit fibre plans) answers of the degree
    relaxation rarely fit on them."""
    return bool(problem.fixed_circuits) or switches_bind(problem.layout)


def _two_stage(problem: WiringProblem, params: SolveParams, solve) -> SolveResult:
    """Solve the degree relaxation (no switch variables, no switch symmetry) and colour its answer onto
    the switches: a relaxation's optimum that fits is optimal for the full problem. When it does not fit
    (or fixed circuits pin switches), solve the per-switch model with the time left; straight away where
    `_per_switch` says so."""
    from dataclasses import replace
    t0 = time.perf_counter()
    if problem.accelerators > EXACT_MAX:
        from synth.errors import InvalidInput
        raise InvalidInput(f"exact models are built for at most {EXACT_MAX} accelerators, this has "
                           f"{problem.accelerators} (use --solver lp-round or auto)", field="solver")
    if not _per_switch(problem):
        res = solve(problem, params, per_switch=False)
        if not res.extra.get("uncolourable") or res.limit == Limit.INTERRUPT:   # Ctrl-C: no second round
            return res
        left = params.time_limit_s - (time.perf_counter() - t0)
        if left < SECOND_STAGE_MIN_S:      # no time for the per-switch model: no wiring from this model
            return replace(res, limit=Limit.TIME)
    left = max(SECOND_STAGE_MIN_S, params.time_limit_s - (time.perf_counter() - t0))
    return solve(problem, replace(params, time_limit_s=left), per_switch=True)


def _plain(problem: WiringProblem, params: SolveParams, solve, start: Wiring | None) -> SolveResult:
    """The model alone (hops, phases, or the direct policy: no probes), on the clock less PLAIN_RESERVE_S, then,
    unless it proved its answer, the better of that answer and the baselines and `start`, with the model's
    bound: on 20 accelerators with random demand and 4 ports (hops, 15 s) both models' answers were 15-20%
    worse than greedy's; on 10 accelerators with two phases (3 s) the phases MILP found no wiring and
    answered the expander, 1.8x TopoOpt-style's."""
    from dataclasses import replace
    t0 = time.perf_counter()
    cands = _baseline_cands(problem, params, start)      # built first: on scattered layouts they take a second
    reserve = min(PLAIN_RESERVE_S, START_SHARE * params.time_limit_s)
    best = _two_stage(problem, replace(params, time_limit_s=max(1.0, params.time_limit_s - reserve
                                                                - (time.perf_counter() - t0))), solve)
    if best.status == SolveStatus.OPTIMAL or best.limit == Limit.INTERRUPT:
        return best
    return _baseline_start(problem, params, best, best.solver, start,
                           max(0.5, params.time_limit_s - (time.perf_counter() - t0)), cands)


def _phases_split(problem: WiringProblem, params: SolveParams, solve, start: Wiring | None, name: str,
                  prober_for=None, case_solve=None) -> SolveResult:
    """The phases objective: the model alone (`_plain`), or on two coupled groups with STAGES_MIN_S of the
    clock, the model's first round (at most STAGES_FIRST_S) and then the phases case split
    (solvers/phase_cases.py) at its answer, again at each better wiring a probe finds. `prober_for(pg,
    best)` gives the split's case prober on the group phase (default: the MILP's), `case_solve` the phases
    model it runs on a case whose group phase reaches its cut-off (default: the MILP's)."""
    from dataclasses import replace

    from .phase_cases import phase_groups, phases_case_bound, phases_model
    t0 = time.perf_counter()
    pg = phase_groups(problem, STAGES_MAX_GROUP) if params.time_limit_s >= STAGES_MIN_S else None
    if pg is None:
        return _plain(problem, params, solve, start)
    best = _plain(problem, replace(params, time_limit_s=_first_s(params, FIRST_SHARE, pg)), solve, start)
    if best.status != SolveStatus.FEASIBLE or best.limit == Limit.INTERRUPT or best.objective is None \
            or not np.isfinite(best.objective):
        return best
    say = params.progress or (lambda msg: None)
    say(f"{name} phases model: {best.objective:.6g} s, bound {best.bound:.6g} s")
    rounds = [_round(best, None)]
    prober = None if prober_for is None else prober_for(pg, lambda: best)

    def bounder(V, p, deadline, closed_at):
        return phases_case_bound(problem, pg, V, p, deadline, closed_at, prober,
                                 phases_model(problem, pg, p, case_solve))
    best, bound, interrupted = _case_split(problem, params, t0, None, best, best.bound or 0.0, rounds, name,
                                           bounder=bounder)
    return _combined(problem, params, t0, best, min(bound, best.objective), rounds, interrupted)


# --------------------------------------------------------------------------------------------------
def solve_milp(problem: WiringProblem, params: SolveParams = SolveParams(), start: Wiring | None = None) -> SolveResult:
    """Exact MILP through PuLP; `params.backend` is "cbc", "highs" or "auto" (HiGHS when available).

    The time objective (multi-hop) runs in probes after a first round of the plain model (FIRST_SHARE of the
    time). Each probe asks for a wiring at least as good as a given time (`_solve_milp` with `cutoff`), which
    admits the residual-capacity and cluster cuts at that time: first the best answer's time (better
    wirings), then a bisection between the bound and the answer. A probe proven infeasible raises the bound
    to its time, one that finds a wiring lowers the answer, one that runs out of its share (half the time
    left) moves the next probe towards the bound. Before the probes, coupled groups (solvers/stages.py) get
    the case split (two) or the net test (more) when the limit leaves them the time. Every probe's answer
    and bound are in `rounds`."""
    from dataclasses import replace
    if problem.objective == "phases":
        from .phased import solve_milp_phases
        return _phases_split(problem, params, partial(solve_milp_phases, start=start), start, "milp")
    if problem.objective != "time" or problem.policy == "direct":
        return _plain(problem, params, _solve_milp, start)
    t0 = time.perf_counter()
    tg = _uniform_groups(problem, params, t0)
    best = _two_stage(problem, replace(params, time_limit_s=_first_s(params, FIRST_SHARE, tg)), _solve_milp)
    rounds = [_round(best, None)]
    if best.limit == Limit.INTERRUPT:        # Ctrl-C in the first round: what it has, or the expander
        if best.objective is None or not np.isfinite(best.objective):
            raise KeyboardInterrupt
        return best
    say = params.progress or (lambda msg: None)
    say(f"milp first round: {best.status.value}" + (f", {best.objective:.6g} s, bound {best.bound:.6g} s"
                                                     if best.objective is not None and best.bound is not None else ""))
    interrupted = False
    if best.status == SolveStatus.FEASIBLE and not np.isfinite(best.objective or np.inf):
        # no usable answer yet: the plain model on the rest, less the starts' share
        left = (1 - START_SHARE) * (params.time_limit_s - (time.perf_counter() - t0))
        if left >= max(1.0, PROBE_MIN_BUILDS * _built(problem)):
            try:
                res = _two_stage(problem, replace(params, time_limit_s=left), _solve_milp)
                rounds.append(_round(res, None))
                interrupted = res.limit == Limit.INTERRUPT
                best = res if res.objective is not None else best
            except KeyboardInterrupt:   # Ctrl-C between solves: the baselines below answer
                interrupted = True
    if best.status == SolveStatus.OPTIMAL:
        return best
    best = _baseline_start(problem, params, best, best.solver, start,
                           START_SHARE * (params.time_limit_s - (time.perf_counter() - t0)))
    if best.status != SolveStatus.FEASIBLE or best.objective is None or not np.isfinite(best.objective):
        return best
    bound = best.bound or 0.0
    best, bound, interrupted = _coupled_proofs(problem, params, t0, tg, best, bound, rounds, "milp")
    step = 1.0          # the first probe looks for better wirings than the first round's, then bisection
    while not interrupted:
        left = params.time_limit_s - (time.perf_counter() - t0)
        inc = best.objective
        if left < 1.0 or inc - bound <= params.rel_gap * inc:
            break
        probe = bound + step * (inc - bound)
        share = left if step < 0.1 else max(1.0, left / 2)
        if share < PROBE_MIN_BUILDS * _built(problem):
            break                                # building the model would take most of the probe's time
        try:
            res = _two_stage(problem, replace(params, time_limit_s=share), partial(_solve_milp, cutoff=probe))
        except KeyboardInterrupt:     # Ctrl-C during a probe: the answer so far, marked as interrupted
            interrupted = True
            break
        rounds.append(_round(res, probe))
        if res.limit == Limit.INTERRUPT:      # HiGHS stopped on Ctrl-C: keep a better wiring if it has one
            interrupted = True
            if res.objective is not None and res.objective < best.objective:
                best = res
            break
        say(f"milp probe at {probe:.6g} s: " + {"INFEASIBLE": "nothing as good (bound raised)",
                                                "NO_SOLUTION": "not settled"}.get(res.status.value, res.status.value)
            + (f", found {res.objective:.6g} s" if res.objective else ""))
        if res.status == SolveStatus.INFEASIBLE:            # nothing at least as good as the probe
            bound = max(bound, probe * (1 - 1e-7))
            continue
        db = res.bound if res.objective is not None else res.extra.get("model_bound_s")
        if db is not None:
            bound = max(bound, min(probe, db))
        if res.objective is not None and res.objective <= inc:
            best = res
            if res.status == SolveStatus.OPTIMAL:          # optimal among all wirings as good as the probe
                bound = max(bound, res.objective)
        if step == 1.0:
            step = 0.5
        elif res.objective is None:
            step /= 2                                       # out of time: a probe nearer the bound
    return _combined(problem, params, t0, best, min(bound, best.objective), rounds, interrupted)


MODEL_SLACK = 1e-5  # relative: a model bound this far above a wiring's objective is inconsistent (`_finish`)
TIE = 1e-12        # relative: an objective this close to its bound is a float tie (an absolute 1e-15 s made
                   # every answer under 1e-13 s OPTIMAL)
FIRST_SHARE = 0.3   # of the time limit, for the plain time model before the probes
START_SHARE = 0.25  # of the time left after the first round, for scoring the starts (_baseline_start)
START_MIN_S = 0.25  # the least scoring clock of each start (exact up to EXACT_ROUTING_MAX accelerators regardless)
PLAIN_RESERVE_S = 2.0   # of the clock, at most START_SHARE of it, for the starts after a plain model (_plain)
PROBE_MIN_BUILDS = 2.0   # a probe needs at least this many times the model's build time
STAGES_MIN_S = 900.0   # time left at which coupled groups get the case split or net test (solvers/stages.py)
STAGES_MAX_GROUP = 10  # accelerators per group: its one-group models stay small
STAGES_SHARE = 0.8     # of the time left, for the case split and its probes
GROUPS_SHARE = 0.6     # of the time left, for the net test of three or more groups
NET_SETTLE = 0.1       # the net test stops refining a bound below its root this close to it when the rings follow
RINGS_SHARE = 0.7      # of the time left after it, for the ring-of-groups case probes (solvers/rings.py)
RINGS_LOG_SHARE = 0.95  # that share on a run with a proof log: it is there to prove, and the plain probes
                        # after the rings settle nothing on coupled groups (llama405b-tp8pp4-32)
STAGES_FIRST_S = 120.0  # the plain model's first round before the case split
QUICK_NET_MIN_S = 20.0  # left of the clock after the first round and the starts for the net test alone
QUICK_NET_FIRST = (0.3, 0.5)   # its first tests' places between the bound and the answer, one per thread
QUICK_NET_SHARE = 0.9  # of the time left, for it: the plain probes after it settle nothing on coupled groups
FLOW_SHARE = 0.5       # of a CP-SAT case probe's seconds, for its integer flows before its metric rows
CPSAT_FIRST_SHARE = 0.1   # CP-SAT's integer-routing round only supplies a first wiring; its probes do the rest
CPSAT_FIRST_MAX_FLOWS = 100_000   # flow variables above which that round is skipped when a start is given
                                  # (qwen3-235b-64: 258,000; building them took 9 s of its 1.5 s at 20 s)
PATTERN_SHARE = 0.9  # of the time left, for the pattern split of small groups (solvers/patterns.py)
PATTERN_MIN_S = 40.0   # ... when at least this is left (groups12-radix4-fit: the split takes 25-35 s with two
                       # probes at a time; cut short it leaves the bound at 0.000302 s, the plain probes 0.00032)
TIGHT_GAP = 0.02     # below this gap a CP-SAT probe first tries to beat the best wiring at all


def _case_split(problem: WiringProblem, params: SolveParams, t0: float, tg, best: SolveResult, bound: float,
                rounds: list, name: str, prober=None, bounder=None) -> tuple[SolveResult, float, bool]:
    """The two-group case split (solvers/stages.py) at the best answer's time less half the gap, again at
    each better wiring a case probe finds (cases closed at a higher time stay closed), in STAGES_SHARE of the
    time left. `bounder(T, params, deadline, closed_at)` runs one split (default `stages.case_bound` with
    `prober`; the phases objective's is `phase_cases.phases_case_bound`). Returns (best, bound, interrupted)."""
    from .stages import case_bound
    if bounder is None:
        def bounder(T, p, d, ca):
            return case_bound(problem, tg, T, p, d, ca, prober)
    say = params.progress or (lambda msg: None)
    closed_at: dict = {}
    while best.objective - bound > params.rel_gap * best.objective:
        left = params.time_limit_s - (time.perf_counter() - t0)
        if left < STAGES_MIN_S / 10:
            break
        T = best.objective * (1 - params.rel_gap / 2)
        say(f"{name} case split on the circuits between the two groups at {T:.6g} s")
        try:
            b, found, info = bounder(T, params, time.perf_counter() + STAGES_SHARE * left, closed_at)
        except KeyboardInterrupt:
            rounds.append({"probe": T, "status": "case split", "verdict": "interrupted"})
            return best, bound, True
        rounds.append({"probe": T, "status": "case split", **info})
        say(f"{name} case split: {info.get('verdict')}" + (f", bound {b:.6g} s" if b else ""))
        if b is not None:
            bound = max(bound, min(b, best.objective))
        if found is None or found.objective >= best.objective:
            break
        best = found                 # a better wiring: ask again at its time
    return best, bound, False


def _coupled_proofs(problem: WiringProblem, params: SolveParams, t0: float, tg, best: SolveResult, bound: float,
                    rounds: list, name: str, prober=None) -> tuple[SolveResult, float, bool]:
    """The coupled groups' proofs before the plain probes, for both exact solvers. `tg` (`_uniform_groups`,
    a long clock): two groups get the case split (`_case_split`; `prober` asks its open cases, the MILP's by
    default), which proves the optimum once every case settles, and when a case stays unsettled (it then gives
    no bound: CP-SAT's probes on llama405b-tp8pp2-16's last case) the net test in what is left, so that a
    longer clock never reports a weaker bound than a short one; three or more the net test, then the rings.
    Without `tg`, on a clock with at least QUICK_NET_MIN_S left, the net test alone, from low
    (QUICK_NET_FIRST: near the answer a test takes minutes), where the plain probes prove nothing. Returns
    (best, bound, interrupted)."""
    gap_left = lambda: best.objective - bound > params.rel_gap * best.objective
    if tg is not None and len(tg.groups) > 2:
        bound, interrupted = _groups_net(params, t0, tg, best, bound, rounds, name, settle=_rings_follow(problem, tg))
        if not interrupted and gap_left():
            best, bound, interrupted = _groups_rings(problem, params, t0, tg, best, bound, rounds, name)
        return best, bound, interrupted
    if tg is not None:
        best, bound, interrupted = _case_split(problem, params, t0, tg, best, bound, rounds, name, prober)
        if interrupted or not gap_left():
            return best, bound, interrupted
    ug = _uniform_groups(problem, params, t0, QUICK_NET_MIN_S)
    if ug is None:
        return best, bound, False
    bound, interrupted = _groups_net(params, t0, ug, best, bound, rounds, name,
                                     QUICK_NET_FIRST[:max(1, params.threads)], QUICK_NET_SHARE)
    return best, bound, interrupted


def _uniform_groups(problem: WiringProblem, params: SolveParams, t0: float, min_s: float | None = None):
    """The coupled groups of `solvers.stages` when its proofs apply and `min_s` of the clock is left, else
    None: with STAGES_MIN_S (the default) two get the case split (`_case_split`), more the net test
    (`_groups_net`)."""
    from .stages import uniform_groups
    if params.time_limit_s - (time.perf_counter() - t0) < (STAGES_MIN_S if min_s is None else min_s):
        return None
    ug = uniform_groups(problem)
    return ug if ug is not None and ug.n <= STAGES_MAX_GROUP else None


def _groups_rings(problem: WiringProblem, params: SolveParams, t0: float, ug, best: SolveResult, bound: float,
                  rounds: list, name: str) -> tuple[SolveResult, float, bool]:
    """Three to RING_MAX_GROUPS coupled groups, after the net test (whose bound stands whatever these do):
    the ring-of-groups case probes (solvers/rings.py) at the best answer's time less half the gap, in
    RINGS_SHARE of the time left (RINGS_LOG_SHARE with a proof log); again at each better wiring a probe
    finds. Every case infeasible raises the bound to that time. Returns (best, bound, interrupted)."""
    from .rings import fingerprint, ring_bound
    say = params.progress or (lambda msg: None)
    share = RINGS_SHARE if params.proof_log is None else RINGS_LOG_SHARE
    end = time.perf_counter() + share * (params.time_limit_s - (time.perf_counter() - t0))
    while best.objective - bound > params.rel_gap * best.objective and end - time.perf_counter() > 1.0:
        T = best.objective * (1 - params.rel_gap / 2)
        if params.proof_log is not None:       # go on at the time the log's proof was started at, in the gap
            T = params.proof_log.resume_time(fingerprint(problem, ug), max(bound, best.objective * (
                1 - params.rel_gap)), T) or T
        try:
            verdict, circuits, info = ring_bound(problem, ug, T, end, params.threads, say, params.proof_log)
        except KeyboardInterrupt:
            rounds.append({"probe": T, "status": "rings", "verdict": "interrupted"})
            return best, bound, True
        rounds.append({"probe": T, "status": "rings", **info})
        if verdict == "closed":
            return best, max(bound, min(T, best.objective)), False
        if verdict != "found":
            break
        counts = _counts(problem, None, circuits, False, end)
        if counts is None:
            break
        found = _finish(problem, name, best.solver_version, params, time.perf_counter(), SolveStatus.FEASIBLE,
                        Limit.NONE, _wiring_from(problem, counts, {}), None,
                        {"model": "ring-of-groups case probe (relaxed hand-off), scored on the instance"})
        say(f"{name} rings: a probe's wiring scores {found.objective:.9g} s on the instance")
        if found.objective >= best.objective:
            break                   # the relaxation's wiring only: the case stays open
        best = found
    return best, bound, False


def _rings_follow(problem: WiringProblem, ug) -> float:
    """NET_SETTLE when the ring-of-groups probes (`_groups_rings`) apply to these groups, else 0 (the net
    test's bound is then the last proof: refine it to the end of its share)."""
    from .rings import ring_blocks
    return NET_SETTLE if ring_blocks(problem, ug) is not None else 0.0


def _groups_net(params: SolveParams, t0: float, ug, best: SolveResult, bound: float, rounds: list,
                name: str, first: tuple[float, ...] | None = None, share: float = GROUPS_SHARE,
                settle: float = 0.0) -> tuple[float, bool]:
    """Three or more coupled groups (or any number on a short clock, or after an unsettled case split:
    `_coupled_proofs`): the net test's bound (`solvers.stages.groups_bound`, its first tests at `first`)
    between the bound and the best answer, in `share` of the time left; `settle` as there. Returns (bound,
    interrupted)."""
    from .stages import closed_bound, groups_bound
    say = params.progress or (lambda msg: None)
    left = params.time_limit_s - (time.perf_counter() - t0)
    say(f"{name}: net test of the {len(ug.groups)} groups between {bound:.6g} s and {best.objective:.6g} s")
    tests: list = []
    try:
        b, tests = groups_bound(ug, bound, best.objective, time.perf_counter() + share * left,
                                params.threads, params.rel_gap, say, first, tests=tests, settle=settle)
    except KeyboardInterrupt:           # the tests that ended stand
        rounds.extend(tests)
        rounds.append({"status": "groups net", "verdict": "interrupted"})
        return closed_bound(tests, bound), True
    rounds.extend(tests)
    return max(bound, b), False


def _first_s(params: SolveParams, share: float, tg) -> float:
    """The first round's time: `share` of the limit, at most STAGES_FIRST_S when the case split follows
    (it proves more than the plain model's longer first round)."""
    first = params.time_limit_s * share
    return first if tg is None else min(first, STAGES_FIRST_S)


def _round(res: SolveResult, probe: float | None) -> dict:
    return {"probe": probe, "status": res.status.value, "objective": res.objective, "bound": res.bound,
            "wall_s": round(res.wall_s, 3)}


def _combined(problem: WiringProblem, params: SolveParams, t0: float, best: SolveResult, bound: float,
              rounds: list[dict], interrupted: bool = False) -> SolveResult:
    """The rounds as one answer: the best wiring with the best bound any round proved."""
    status = SolveStatus.OPTIMAL if best.objective - bound <= (params.rel_gap + TIE) * best.objective \
        else SolveStatus.FEASIBLE
    wall = time.perf_counter() - t0
    limit = Limit.NONE if status == SolveStatus.OPTIMAL else Limit.INTERRUPT if interrupted else Limit.TIME
    sv = dict(best.artifact.solve)
    sv["bounds"] = {**sv.get("bounds", {}), "model": bound}
    sv.update(status=status.value, bound=bound, wall_s=round(wall, 3), rounds=rounds, limit=limit.value,
              gap=max(0.0, (best.objective - bound) / best.objective) if best.objective else 0.0)
    return SolveResult(status, best.objective, bound, wall, best.solver, best.solver_version, params.seed, limit,
                       best.artifact.with_meta(solve=sv), extra={**best.extra, "rounds": rounds})


def _source_routing(prob, problem: WiringProblem, ix: _Index, D: np.ndarray, lam, prefix: str = ""):
    """Flows aggregated by source, conserved at every accelerator (scaled by lam when timed). Returns the
    load terms of every arc and all flow variables (named with `prefix`, e.g. one per phase)."""
    import pulp
    keys, out_k, inn_k = _flow_keys(problem, ix)
    live = D.sum(axis=1) > 0               # sources with bytes (in this phase)
    keys = [key for key in keys if live[key[0]]]
    f = {key: prob.add_variable(prefix + "f_%d_%d_%d" % key, 0) for key in keys}
    out = {kv: [f[key] for key in ks if key in f] for kv, ks in out_k.items()}
    inn = {kv: [f[key] for key in ks if key in f] for kv, ks in inn_k.items()}
    for k in ix.srcs:
        if not live[k]:
            continue
        for v_ in range(ix.n):
            if problem.policy == "direct" and v_ != k and D[k, v_] == 0:
                continue
            rhs = D[k].sum() if v_ == k else -D[k, v_]
            expr = pulp.lpSum(out.get((k, v_), [])) - pulp.lpSum(inn.get((k, v_), []))
            prob += (expr == (lam * rhs if lam is not None else rhs))
    loads: dict[tuple[int, int], list] = {arc: [] for arc in ix.arcs}
    for (k, a, b), var in f.items():
        loads[(a, b)].append(var)
    return loads, list(f.values())


def layered_source(ix: _Index, k: int, dests: list[int], new_var, add, total, delivered: dict, loads: dict):
    """One source's flows of the layered routing (`_layered_routing`; CP-SAT's integer flows in
    `benders.flow_rows`): what goes straight to a destination (dr), the first hop of the rest (h, never
    delivered where it lands) and its later hops (q), conserved at every accelerator, each destination v
    getting delivered[v] of which dr[v] straight. `new_var(name, v)` makes a flow variable (v: the destination
    of a straight one, else None), `add` adds a row, `total` sums; the flows join `loads` (arc -> terms).
    Returns (dr, h, q, relayed: v -> delivered[v] - dr[v])."""
    arcs = set(ix.arcs)
    dr = {v: new_var(f"d_{k}_{v}", v) for v in dests if (k, v) in arcs}
    h = {v: new_var(f"h_{k}_{v}", None) for v in range(ix.n) if (k, v) in arcs}
    q = {(a, b): new_var(f"q_{k}_{a}_{b}", None) for (a, b) in ix.arcs if k not in (a, b)}
    relayed = {v: delivered[v] - dr.get(v, 0) for v in dests}
    for v, var in [*dr.items(), *h.items()]:
        loads[(k, v)].append(var)
    q_in: dict[int, list] = {}
    q_out: dict[int, list] = {}
    for (a, b), var in q.items():
        loads[(a, b)].append(var)
        q_out.setdefault(a, []).append(var)
        q_in.setdefault(b, []).append(var)
    add(total(h.values()) == total(relayed.values()))
    for v in range(ix.n):
        if v == k:
            continue
        into = total(q_in.get(v, []))
        add(h.get(v, 0) + into == total(q_out.get(v, [])) + relayed.get(v, 0))
        if v in relayed:
            add(into >= relayed[v])          # what is delivered after a relay arrived on a later hop
    return dr, h, q, relayed


def _layered_routing(prob, ix: _Index, D: np.ndarray, cap: float, lam, lam_lo: float, x):
    """Source-aggregated flows split by hop: what goes straight to its destination (dir), the first hop of
    the rest (h, never delivered where it lands) and its later hops (q, which deliver it). Every routing
    with simple paths fits this, so it is exact, and it exposes each pair's relayed bytes
    lam D - dir to the residual-capacity cut of network design: at lam >= lam_lo a pair whose demand is
    u = lam_lo D / cap circuits' worth relays at least cap (u - m)(m + 1 - x) over a pair with x circuits,
    m = floor(u) (the convex hull of max(0, u - x) on integer x, valid for every lam >= lam_lo)."""
    import pulp
    loads: dict[tuple[int, int], list] = {arc: [] for arc in ix.arcs}
    flows = []
    ncut = 0
    for k in (int(k) for k in ix.srcs):
        dests = [int(v) for v in np.flatnonzero(D[k] > 0)]
        dr, h, q, relayed = layered_source(ix, k, dests, lambda name, v: prob.add_variable(name, 0),
                                           prob.addConstraint, pulp.lpSum, {v: lam * D[k, v] for v in dests}, loads)
        for v, var in dr.items():
            prob += var <= lam * D[k, v]
        for v in dests:
            u = lam_lo * D[k, v] / cap
            m = math.floor(u)
            p = (min(k, v), max(k, v))
            if p in ix.max_x and u - m > 1e-9 and m + 1 <= ix.max_x[p]:
                prob += relayed[v] >= cap * (u - m) * (m + 1 - x[p])
                ncut += 1
        flows += [*dr.values(), *h.values(), *q.values()]
    return loads, flows, ncut


def milp_backend(params: SolveParams) -> str:
    """The PuLP back-end `params.backend` asks for: HiGHS unless CBC is asked or HiGHS is missing."""
    import pulp
    backend = params.backend if params.backend in ("cbc", "highs") else "highs"
    return "cbc" if backend == "highs" and not pulp.HiGHS().available() else backend


def pulp_topology(prob, problem: WiringProblem, ix: _Index, per_switch: bool, sym, need_of=None):
    """The circuit variables and rows of the MILPs: (y, x per pair, cluster rows added)."""
    import pulp
    y = {key: prob.add_variable(name, lo, hi, cat="Integer")
         for key, (name, lo, hi) in _topology_vars(ix, per_switch).items()}
    for terms, sense, rhs in _topology_rows(problem, ix, per_switch):
        expr = pulp.lpSum(c * y[k] for k, c in terms)
        prob += (expr <= rhs) if sense == "<=" else (expr >= rhs)
    x = {p: pulp.lpSum(y[(s, *p)] for s, _ in ix.on[p]) for p in ix.pairs} if per_switch else y
    for r, a, b in sym:
        prob += x[(min(r, a), max(r, a))] >= x[(min(r, b), max(r, b))]
    ncl = 0
    for terms, sense, rhs in _cluster_rows(problem, ix, need_of):
        expr = pulp.lpSum(c * x[k] for k, c in terms)
        prob += (expr <= rhs) if sense == "<=" else (expr >= rhs)
        ncl += 1
    return y, x, ncl


def pulp_solver(backend: str, params: SolveParams, ctrl_c: HighsCtrlC, deadline: float):
    """The PuLP solver object: HiGHS with Ctrl-C callbacks, its clock ending at `deadline` (a
    `time.perf_counter()` value; passing the model counts), or CBC with what is left now (at least 1 s)."""
    import pulp
    if backend == "highs":
        import highspy
        kinds = highspy.cb.HighsCallbackType
        from .highs import pulp_highs, threads
        return pulp_highs(deadline, msg=False, threads=threads(params.threads), gapRel=params.rel_gap,
                          random_seed=params.seed, callbackTuple=(ctrl_c.callback, None),
                          callbacksToActivate=[kinds.kCallbackMipInterrupt, kinds.kCallbackSimplexInterrupt,
                                               kinds.kCallbackIpmInterrupt])
    return pulp.PULP_CBC_CMD(msg=False, timeLimit=max(1.0, deadline - time.perf_counter()), threads=params.threads,
                             gapRel=params.rel_gap, options=[f"randomSeed {params.seed + 1}"])


def _solve_milp(problem: WiringProblem, params: SolveParams, per_switch: bool,
                cutoff: float | None = None, case=None, labelled: bool = False) -> SolveResult:
    """One MILP solve; with `cutoff` (the time of a known wiring) the model only admits wirings at least
    that good, which makes the cluster and residual-capacity cuts stronger. `case` = (groups, case of
    `solvers.stages.add_case_rows`) restricts it to one case of the two-group split, `labelled` to its
    labelled form (only on `solvers.stages.symmetric_relaxation`)."""
    import pulp

    t0 = time.perf_counter()
    backend = milp_backend(params)
    ix = _index(problem)
    t = problem.traffic.bytes_
    scale = float(t.max())
    D = t / scale
    lb, _ = best_bound(problem, lp=False)         # valid cuts: the model can stop once it meets them
    timed = problem.objective == "time"
    unit = lam_unit(lb) if timed else 1.0          # lam is 1 / the step's time in units of `unit` seconds
    cap = problem.port_bytes_per_s / scale * unit
    prob = pulp.LpProblem("wiring", pulp.LpMaximize if problem.objective == "time" else pulp.LpMinimize)
    sym = _symmetry_rows(problem, ix, _labels(ix, case, labelled), params.time_limit_s)
    # only wirings at least as good as the cutoff (shaved so the cutoff's own wiring stays inside)
    lam_lo = (1 - 1e-7) * unit / cutoff if (timed and cutoff) else 0.0
    # circuits a cut needs at lam >= lam_lo (each carries cap per unit of 1 / lam)
    need_of = (lambda b: math.ceil(lam_lo * b / scale / cap * (1 - 1e-9))) if lam_lo else None
    y, x, ncl = pulp_topology(prob, problem, ix, per_switch, sym, need_of)
    if case is not None:
        from .stages import add_case_rows
        add_case_rows(prob, ix.pairs, x, case[0], case[1], labelled)
    lam = prob.add_variable("lam", lam_lo) if timed else None
    if timed and lam_lo and problem.policy != "direct":
        loads, flows, ncut = _layered_routing(prob, ix, D, cap, lam, lam_lo, x)
    else:
        loads, flows = _source_routing(prob, problem, ix, D, lam)
        ncut = 0
    big = float(D.sum())
    for (a, b) in ix.arcs:
        prob += pulp.lpSum(loads[(a, b)]) <= (cap if timed else big) * x[(min(a, b), max(a, b))]
    if timed:
        prob += lam <= unit / lb if lb > 0 else lam >= 0
        prob += lam
    else:
        prob += pulp.lpSum(flows) >= lb / scale * (1 - 1e-9)
        prob += pulp.lpSum(flows)
    ctrl_c = HighsCtrlC()
    # the model took time to build (8 s for 64 accelerators): the solver gets what is left of the limit
    solver = pulp_solver(backend, params, ctrl_c, t0 + params.time_limit_s)
    built = time.perf_counter() - t0
    try:
        with _quiet_stdout(), ctrl_c:
            prob.solve(solver)
    except pulp.PulpSolverError as exc:
        raise SolverUnavailable(f"{backend}: {exc}") from None
    wall = time.perf_counter() - t0
    if backend == "highs":        # passing the model counts too: all but HiGHS's own run
        built = wall - prob.solverModel.getRunTime()
    _BUILD_S[problem] = max(built, _built(problem))
    name = f"milp-{backend}"
    version = f"pulp {pulp.__version__}"
    limit = Limit.INTERRUPT if ctrl_c.hit else Limit.TIME if wall >= params.time_limit_s * 0.98 else Limit.NONE
    if prob.status == pulp.LpStatusInfeasible:
        return SolveResult(SolveStatus.INFEASIBLE, None, None, wall, name, version, params.seed, limit,
                           message="the MILP is infeasible")
    if prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        extra = {}
        if backend == "highs" and problem.objective == "time":
            db = abs(prob.solverModel.getInfo().mip_dual_bound)
            if np.isfinite(db) and db > 0:
                extra["model_bound_s"] = unit / db
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, wall, name, version, params.seed, limit,
                           message=f"solver stopped without a solution ({pulp.LpStatus[prob.status]})",
                           extra=extra)
    status = SolveStatus.OPTIMAL if prob.sol_status == pulp.LpSolutionOptimal and limit == Limit.NONE \
        else SolveStatus.FEASIBLE
    counts = _counts(problem, ix, {k: int(round(v.value() or 0)) for k, v in y.items()} if per_switch else
                     {p: int(round(pulp.value(v) or 0)) for p, v in x.items()}, per_switch, t0 + params.time_limit_s)
    if counts is None:
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, wall, name, version, params.seed, limit,
                           message="relaxed optimum does not fit on the switches", extra={"uncolourable": True})
    model_bound = None
    extra: dict = {"backend": backend, "symmetry_rows": len(sym), "cluster_rows": ncl}
    if lam_lo:
        extra.update(cutoff=cutoff, residual_cuts=ncut)
    if problem.objective == "time":
        lam_v = lam.value()
        extra["model_objective"] = unit / lam_v if lam_v and lam_v > 0 else float("inf")
        if status == SolveStatus.FEASIBLE and backend == "highs":
            db = abs(prob.solverModel.getInfo().mip_dual_bound)
            if np.isfinite(db) and db > 0:
                model_bound = unit / db
        elif status == SolveStatus.OPTIMAL and np.isfinite(extra["model_objective"]):   # lam 0: no bound at all
            model_bound = extra["model_objective"] / (1 + params.rel_gap)
    else:
        extra["model_objective"] = float(pulp.value(prob.objective)) * scale
        if status == SolveStatus.OPTIMAL:
            model_bound = extra["model_objective"] * (1 - params.rel_gap)
        elif backend == "highs":
            db = prob.solverModel.getInfo().mip_dual_bound
            if np.isfinite(db):
                model_bound = float(db) * scale
    wiring = _wiring_from(problem, counts, {})
    extra["model"] = "per-switch" if per_switch else "degree relaxation, coloured"
    return _finish(problem, name, version, params, t0, status, limit, wiring, model_bound, extra)


LAM_UNIT_S = 1.0    # the MILPs' lam counts steps in seconds up to this bound, in units of (bound / this) beyond


def lam_unit(lb: float) -> float:
    """Seconds per unit of the MILPs' time (lam = 1 / the step's time in these units) for a step bounded below
    by `lb`: 1 s while lb <= LAM_UNIT_S, else lb / LAM_UNIT_S, so lam stays near 1 / LAM_UNIT_S or above (a
    matrix of 1e16-byte entries made lam ~1e-6 s^-1, inside HiGHS's tolerances: it read 0, and the model
    "proved" a wiring 28% off)."""
    return max(1.0, lb / LAM_UNIT_S)


# --------------------------------------------------------------------------------------------------
def integer_units(t: np.ndarray, max_units: int = 1000) -> tuple[float, np.ndarray]:
    """(unit bytes, demands in units): the largest unit dividing every demand if that keeps the largest
    at most `max_units`, else max / 100 with demands rounded up."""
    nz = t[t > 0]
    if nz.size and np.allclose(nz, np.round(nz)) and nz.max() < 2 ** 53:
        g = reduce(math.gcd, (int(round(v)) for v in nz))
        if nz.max() / g <= max_units:
            return float(g), np.round(t / g).astype(np.int64)
    unit = float(nz.max()) / 100 if nz.size else 1.0
    return unit, np.ceil(t / unit - 1e-9).astype(np.int64)


def solve_cpsat(problem: WiringProblem, params: SolveParams = SolveParams(), start: Wiring | None = None) -> SolveResult:
    """The same model in CP-SAT with integer routing (see the module doc). For the time objective with
    relays, a first round of that model (FIRST_SHARE of the time) gives a wiring; then probes of the
    metric-inequality decomposition (solvers/benders.py), where CP-SAT decides circuits and an LP routes,
    prove bounds and find better wirings, bisecting like the MILP's probes."""
    from dataclasses import replace
    if problem.objective == "phases":
        from .phased import solve_cpsat_phases
        return _phases_split(problem, params, partial(solve_cpsat_phases, start=start), start, "cpsat",
                             lambda pg, best: cpsat_case_prober(pg.sub, pg.tg, params, best), solve_cpsat_phases)
    if problem.objective != "time" or problem.policy == "direct":
        return _plain(problem, params, _solve_cpsat, start)
    t0 = time.perf_counter()
    tg = _uniform_groups(problem, params, t0)
    ix = _index(problem)
    from .patterns import pattern_split
    if start is not None and (len(ix.srcs) * len(ix.arcs) > CPSAT_FIRST_MAX_FLOWS or
                              pattern_split(problem, ix) is not None):
        # the round would only build its model in the time it has, or only offer a wiring beside the start
        # where the pattern split proves (and finds) what it would
        import ortools
        best = SolveResult(SolveStatus.NO_SOLUTION, None, None, 0.0, "cpsat", f"ortools {ortools.__version__}",
                           params.seed, Limit.NONE, message="integer-routing round skipped: the start is given")
    else:
        best = _two_stage(problem, replace(params, time_limit_s=_first_s(params, CPSAT_FIRST_SHARE, tg)),
                          _solve_cpsat)
    say = params.progress or (lambda msg: None)
    say(f"cpsat first round: {best.status.value}" + (f", {best.objective:.6g} s" if best.objective else ""))
    if best.limit == Limit.INTERRUPT and best.artifact is None:
        raise KeyboardInterrupt          # Ctrl-C before any wiring: wire() answers with the expander
    if best.status == SolveStatus.OPTIMAL or best.limit == Limit.INTERRUPT:
        return best
    rounds = [_round(best, None)] if best.objective is not None else []
    best = _baseline_start(problem, params, best, "cpsat", start,      # integer units can be coarse
                           START_SHARE * (params.time_limit_s - (time.perf_counter() - t0)))
    if best.objective is None or not np.isfinite(best.objective):
        return best
    return _metric_probes(problem, params, t0, best, rounds, tg)


def _baseline_cands(problem: WiringProblem, params: SolveParams, start: Wiring | None) -> list[tuple[str, Wiring]]:
    """(name, wiring) of every baseline, the heavy pairs where the switches bind (`structured.on_switches`) and
    `start`: the starts :func:`_baseline_start` scores."""
    from . import BASELINES, SWITCHES_SHARE, baseline_wiring
    from .structured import heavy_pairs
    cands = [(f"{k} baseline", baseline_wiring(problem, k, params.seed)) for k in BASELINES]
    if switches_bind(problem.layout):          # split planes: the relay count's allocation placed by a model
        heavy = heavy_pairs(problem, params.seed, 1, SWITCHES_SHARE * params.time_limit_s)
        cands += [("heavy pairs", heavy[0])] if heavy is not None else []
    return cands + ([("given start", start)] if start is not None else [])


def _baseline_start(problem: WiringProblem, params: SolveParams, best: SolveResult, solver: str,
                    start: Wiring | None, seconds: float,
                    cands: list[tuple[str, Wiring]] | None = None) -> SolveResult:
    """The better of `best`, the baselines (greedy, TopoOpt-style, the expander, the torus) and `start` (a
    wiring the caller built: coupled groups, or the search's answer on larger instances), scored exactly
    (within `seconds` together) and keeping `best`'s bound, as the first wiring of the probes: on
    40 accelerators a short first round of either exact model is often worse than greedy and TopoOpt-style,
    and on 16 accelerators in groups on 6 ports (5 s) worse than the expander. All keep the fixed circuits
    (:func:`solvers.baseline_wiring`). `cands`: those starts, when the caller built them
    (:func:`_baseline_cands`). A start chosen carries its scoring time as its wall time; `solvers.wire`
    reports the whole call's."""
    from dataclasses import replace
    if best.status not in (SolveStatus.FEASIBLE, SolveStatus.NO_SOLUTION):
        return best
    cands = _baseline_cands(problem, params, start) if cands is None else cands
    each = replace(params, time_limit_s=max(START_MIN_S, seconds / max(1, len(cands))))
    # in the order of their floors (no routing beats a wiring's byte-hops over its capacity); one whose floor is
    # no better than the time in hand is not scored, and none after the clock once a wiring is in hand
    floors = [problem.time_floor(w) for _, w in cands]
    end = time.perf_counter() + seconds
    for k in np.argsort(floors, kind="stable"):
        name, w = cands[k]
        if best.objective is not None and np.isfinite(best.objective) and \
                (floors[k] >= best.objective or time.perf_counter() > end):
            continue
        res = _finish(problem, solver, best.solver_version, each, time.perf_counter(), SolveStatus.FEASIBLE,
                      Limit.NONE, w, best.bound, {"model": f"start: {name}"})
        if np.isfinite(res.objective) and (best.objective is None or res.objective < best.objective):
            best = res
    return best


def _injection_cuts(cuts):
    """`cuts` with the metric rows of every accelerator's injection and ejection cut."""
    for a in range(cuts.n):
        inside = np.zeros(cuts.n, dtype=bool)
        inside[a] = True
        for lengths in (cuts.cut_set(inside), cuts.cut_set(~inside)):
            row = cuts.row(lengths)
            if row is not None:
                cuts.rows.append(row)
    return cuts


def cpsat_case_prober(problem: WiringProblem, tg, params: SolveParams, best, ix=None, cuts=None, sym=None,
                      per_switch=None):
    """CP-SAT's probes of one case of the two-group split (solvers/stages.py) on `problem`, as
    `stages.milp_prober`: the metric-inequality probe on the instance with the case's rows, and first, where
    the groups apart have the symmetry for it (`stages.symmetric_relaxation`), the labelled probe there: its
    integer flows (proofs) in FLOW_SHARE of the seconds, then its metric rows (wirings). `best()` gives the
    best answer so far (its wiring is each probe's hint, its solver version the answer's); `ix`, `cuts`,
    `sym` and `per_switch` are the caller's (built here when not given). Returns (verdict, result, bound)."""
    from .benders import MetricCuts, probe
    from .stages import relaxed_first, symmetric_relaxation
    ix = _index(problem) if ix is None else ix
    cuts = _injection_cuts(MetricCuts(problem, ix)) if cuts is None else cuts
    sym = sym if sym is not None else _symmetry_rows(problem, ix, seconds=params.time_limit_s)
    per_switch = _per_switch(problem) if per_switch is None else per_switch

    def case_probe(case, T: float, seconds: float, on=problem, cuts=cuts, labelled=False, flows=False):
        adj = best().artifact.adjacency()
        rows = _symmetry_rows(on, ix, _labels(ix, (tg.groups, case), True)) if labelled else sym
        verdict, found, _ = probe(on, ix, cuts, T, time.perf_counter() + seconds, params, rows, per_switch,
                                  np.array([adj[p] for p in ix.pairs]), case=(tg.groups, case), labelled=labelled,
                                  flows=flows)
        if verdict != "found":
            return verdict, None, None
        kind = "integer-flow" if flows else "metric-inequality"
        return "found", _finish(problem, "cpsat", best().solver_version, params, time.perf_counter(),
                                SolveStatus.FEASIBLE, Limit.NONE, _wiring_from(problem, found[0], {}), None,
                                {"model": f"{kind} probe, one case of the two-group split"}), None

    def flows_first(case, T: float, seconds: float, **kw):
        """The case with CP-SAT's integer flows (proofs) in FLOW_SHARE of the seconds, then the metric probe
        (wirings) in the rest."""
        end = time.perf_counter() + seconds
        verdict, res, b = case_probe(case, T, FLOW_SHARE * seconds, flows=True, **kw)
        left = end - time.perf_counter()
        return (verdict, res, b) if verdict != "unknown" or left < 1.0 else case_probe(case, T, left, **kw)
    relaxed = symmetric_relaxation(problem, tg)
    if relaxed is None:
        return case_probe
    return relaxed_first(partial(flows_first, on=relaxed, cuts=_injection_cuts(MetricCuts(relaxed, ix)),
                                 labelled=True), case_probe)


def _metric_probes(problem: WiringProblem, params: SolveParams, t0: float, best: SolveResult,
                   rounds: list[dict], tg=None) -> SolveResult:
    """Bisect between the bound and the best wiring with metric-inequality probes (solvers/benders.py): the
    first asks for anything better than the best wiring by more than the gap (which settles most small
    instances), then halfway, moving towards the bound when a probe runs out of its share. `tg`: coupled
    groups, which get the case split (two) or the net test (more) first."""
    from .benders import MetricCuts, probe
    say = params.progress or (lambda msg: None)
    ix = _index(problem)
    sym = _symmetry_rows(problem, ix, seconds=params.time_limit_s)
    per_switch = _per_switch(problem)
    cuts = _injection_cuts(MetricCuts(problem, ix))
    adj = best.artifact.adjacency()
    xbest = np.array([adj[p] for p in ix.pairs], dtype=np.float64)
    row = cuts.row(cuts.lp_lengths(xbest)[1])
    if row is not None:
        cuts.rows.append(row)
    bound = best.bound or 0.0
    step = 0.5
    tried = None                 # the best wiring's time when a probe last tried to beat it
    interrupted = False

    prober = None
    if tg is not None and len(tg.groups) == 2:
        prober = cpsat_case_prober(problem, tg, params, lambda: best, ix, cuts, sym, per_switch)
    best, bound, interrupted = _pattern_proofs(problem, params, t0, ix, cuts, per_switch, best, bound, rounds)
    if not interrupted and best.objective - bound > params.rel_gap * best.objective:
        best, bound, interrupted = _coupled_proofs(problem, params, t0, tg, best, bound, rounds, "cpsat", prober)
    while not interrupted:
        now = time.perf_counter()
        left = params.time_limit_s - (now - t0)
        inc = best.objective
        if left < 1.0 or inc - bound <= params.rel_gap * inc:
            break
        # a new best wiring: ask for anything better at all (proves it optimal) once the gap is small; while it
        # is large, halfway first (a proposal found there moves the answer further)
        tight = tried != inc and inc - bound <= TIGHT_GAP * inc
        T = inc * (1 - params.rel_gap / 2) if tight else bound + step * (inc - bound)
        tried = inc if tight else tried
        share = left / 2 if tight or step >= 0.1 else left
        try:
            adj = best.artifact.adjacency()
            verdict, found, stats = probe(problem, ix, cuts, T, now + share, params, sym, per_switch,
                                          np.array([adj[p] for p in ix.pairs]))
        except KeyboardInterrupt:
            interrupted = True
            break
        entry = {"probe": T, "status": {"infeasible": "INFEASIBLE", "found": "FEASIBLE",
                                        "unknown": "NO_SOLUTION"}[verdict],
                 "objective": found[1] if found else None, "wall_s": round(time.perf_counter() - now, 3),
                 "metric_rows": len(cuts.rows), **stats}
        said = f"found {found[1]:.6g} s" if found else {"infeasible": "nothing as good (bound raised)",
                                                        "unknown": "not settled"}[verdict]
        say(f"cpsat probe at {T:.6g} s: {said} ({stats['proposals']} proposals, {len(cuts.rows)} metric rows)")
        if verdict == "infeasible":
            bound = max(bound, T)
        elif verdict == "found":
            res = _finish(problem, "cpsat", best.solver_version, params, now, SolveStatus.FEASIBLE, Limit.NONE,
                          _wiring_from(problem, found[0], {}), None, {"model": "metric-inequality probe"})
            if res.objective <= inc:
                best = res
        entry["bound"] = bound
        rounds.append(entry)
        if verdict == "unknown" and not tight:
            step /= 2
    return _combined(problem, params, t0, best, min(bound, best.objective), rounds, interrupted)


def pattern_split_runs(problem: WiringProblem, params: SolveParams) -> bool:
    """Does CP-SAT's case split on small identical groups (`solvers.patterns`) apply here and have its clock:
    the time objective with relays, a split (`pattern_split`) and at least PATTERN_MIN_S. `auto` then takes
    CP-SAT over the MILP: on groups12 at 60 s it proves the optimum in 29 s, where the MILP ends 5.6% short."""
    from .patterns import pattern_split
    if problem.objective != "time" or problem.policy == "direct" or problem.accelerators > EXACT_MAX \
            or params.time_limit_s < PATTERN_MIN_S:
        return False
    return pattern_split(problem, _index(problem)) is not None


def _pattern_proofs(problem: WiringProblem, params: SolveParams, t0: float, ix: _Index, cuts, per_switch: bool,
                    best: SolveResult, bound: float, rounds: list) -> tuple[SolveResult, float, bool]:
    """Small identical groups joined by uniform traffic (`solvers.patterns.pattern_split`): the case split on
    their internal circuits at the best answer's time less half the gap, in PATTERN_SHARE of the time left,
    again at each better wiring a case probe finds (cases closed stay closed). Every case infeasible raises
    the bound to that time; a split cut short proves nothing, so with less than PATTERN_MIN_S left the plain
    probes get the clock. Returns (best, bound, interrupted)."""
    from .patterns import pattern_split, split_bound
    split = pattern_split(problem, ix)
    if split is None or params.time_limit_s - (time.perf_counter() - t0) < PATTERN_MIN_S:
        return best, bound, False
    say = params.progress or (lambda msg: None)
    end = time.perf_counter() + PATTERN_SHARE * (params.time_limit_s - (time.perf_counter() - t0))
    closed: set = set()
    while best.objective - bound > params.rel_gap * best.objective and end - time.perf_counter() > 1.0:
        T = best.objective * (1 - params.rel_gap / 2)
        say(f"cpsat: case split on the circuits inside the {len(split.groups)} groups at {T:.6g} s "
            f"({len(split.patterns)} patterns)")
        try:
            verdict, found, info = split_bound(problem, ix, split, cuts, T, end, params, per_switch, closed, say)
        except KeyboardInterrupt:
            rounds.append({"probe": T, "status": "pattern split", "verdict": "interrupted"})
            return best, bound, True
        rounds.append({"probe": T, "status": "pattern split", "verdict": verdict, **info})
        if verdict == "closed":
            return best, max(bound, min(T, best.objective)), False
        if verdict != "found":
            break
        res = _finish(problem, "cpsat", best.solver_version, params, time.perf_counter(), SolveStatus.FEASIBLE,
                      Limit.NONE, _wiring_from(problem, found[0], {}), None,
                      {"model": "metric-inequality probe, one case of the pattern split"})
        if res.objective >= best.objective:
            break
        best = res
    return best, bound, False


def cpsat_topology(m, problem: WiringProblem, ix: _Index, per_switch: bool, need_of=None, sym=None):
    """The circuit variables and rows of the CP-SAT models: (y, x per pair, symmetry rows)."""
    y = {key: m.NewIntVar(lo, hi, name) for key, (name, lo, hi) in _topology_vars(ix, per_switch).items()}
    for terms, sense, rhs in _topology_rows(problem, ix, per_switch):
        expr = sum(c * y[k] for k, c in terms)
        m.Add(expr <= rhs) if sense == "<=" else m.Add(expr >= rhs)
    x = {}
    for p in ix.pairs:
        x[p] = m.NewIntVar(0, ix.max_x[p], f"x_{p[0]}_{p[1]}")
        m.Add(x[p] == (sum(y[(s, *p)] for s, _ in ix.on[p]) if per_switch else y[p]))
    sym = _symmetry_rows(problem, ix) if sym is None else sym
    for r, a, b in sym:
        m.Add(x[(min(r, a), max(r, a))] >= x[(min(r, b), max(r, b))])
    for terms, sense, rhs in _cluster_rows(problem, ix, need_of):
        expr = sum(c * x[k] for k, c in terms)
        m.Add(expr <= rhs) if sense == "<=" else m.Add(expr >= rhs)
    return y, x, sym


def _solve_cpsat(problem: WiringProblem, params: SolveParams, per_switch: bool) -> SolveResult:
    try:
        from ortools.sat.python import cp_model
        import ortools
    except ImportError:  # pragma: no cover - ortools is a dependency
        raise SolverUnavailable("ortools is not installed") from None
    t0 = time.perf_counter()
    ix = _index(problem)
    unit, D = integer_units(problem.traffic.bytes_)
    m = cp_model.CpModel()
    y, x, sym = cpsat_topology(m, problem, ix, per_switch, None,
                               _symmetry_rows(problem, ix, seconds=params.time_limit_s))
    total = int(D.sum())
    exact_units_ok = bool(np.allclose(D * unit, problem.traffic.bytes_))
    keys, out_k, inn_k = _flow_keys(problem, ix)
    f = {key: m.NewIntVar(0, int(D[key[0]].sum()), "f_%d_%d_%d" % key) for key in keys}
    out = {kv: [f[key] for key in ks] for kv, ks in out_k.items()}
    inn = {kv: [f[key] for key in ks] for kv, ks in inn_k.items()}
    for k in ix.srcs:
        for v_ in range(ix.n):
            rhs = int(D[k].sum()) if v_ == k else -int(D[k, v_])
            m.Add(sum(out.get((k, v_), [])) - sum(inn.get((k, v_), [])) == rhs)
    L = reduce(lambda a, b: a * b // math.gcd(a, b), range(1, max(ix.max_x.values(), default=1) + 1), 1)
    loads = {}
    for (a, b) in ix.arcs:
        loads[(a, b)] = sum(f[(k, a, b)] for k in ix.srcs if (k, a, b) in f)
    if problem.objective == "time":
        big = total * L
        ticks = m.NewIntVar(0, big, "ticks")
        for (a, b), load in loads.items():
            p = (min(a, b), max(a, b))
            bs = [m.NewBoolVar(f"b_{a}_{b}_{q}") for q in range(1, ix.max_x[p] + 1)]
            m.Add(x[p] == sum(bs))
            for q in range(len(bs) - 1):
                m.AddImplication(bs[q + 1], bs[q])
            zs = []
            for q, bq in enumerate(bs):
                z = m.NewIntVar(0, big, f"z_{a}_{b}_{q}")
                m.Add(z <= ticks)
                m.Add(z <= big * bq)
                zs.append(z)
            m.Add(load * L <= sum(zs))
        lb, _ = best_bound(problem, lp=False)
        m.Add(ticks >= int(math.floor(lb * problem.port_bytes_per_s * L / unit * (1 - 1e-9))))
        m.Minimize(ticks)
    else:
        lb, _ = best_bound(problem, lp=False)
        if exact_units_ok:
            m.Add(sum(f.values()) >= int(math.ceil(lb / unit * (1 - 1e-9))))
        for (a, b), load in loads.items():
            p = (min(a, b), max(a, b))
            m.Add(load <= total * x[p])
        for (k, a, b), var in f.items():      # each source's flow on an arc: at most its bytes x the circuits
            m.Add(var <= int(D[k].sum()) * x[(min(a, b), max(a, b))])
        m.Minimize(sum(f.values()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(1.0, params.time_limit_s - (time.perf_counter() - t0))
    solver.parameters.num_workers = params.threads
    solver.parameters.random_seed = params.seed
    solver.parameters.relative_gap_limit = params.rel_gap
    if problem.objective == "hops" and problem.policy != "direct":
        # one worker with every constraint in its LP: random instances of 8-10 accelerators (hops, 20 s) that
        # HiGHS proves in under a second, CP-SAT's default two workers left 0.3-1.1% open at the clock, and
        # one worker at linearization 2 proves in 0.1-4 s; it is also repeatable, as two workers are not
        solver.parameters.num_workers = 1
        solver.parameters.linearization_level = 2
    ctrl_c = CpsatCtrlC(solver)
    st = ctrl_c.solve(m)
    wall = time.perf_counter() - t0
    version = f"ortools {ortools.__version__}"
    limit = Limit.INTERRUPT if ctrl_c.hit else \
        Limit.TIME if wall >= params.time_limit_s * 0.98 else Limit.NONE
    if st == cp_model.INFEASIBLE:
        return SolveResult(SolveStatus.INFEASIBLE, None, None, wall, "cpsat", version, params.seed, limit,
                           message="the CP-SAT model is infeasible")
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, wall, "cpsat", version, params.seed, limit,
                           message=f"CP-SAT stopped without a solution ({solver.StatusName(st)})")
    status = SolveStatus.OPTIMAL if st == cp_model.OPTIMAL else SolveStatus.FEASIBLE
    counts = _counts(problem, ix, {k: solver.Value(v) for k, v in y.items()} if per_switch else
                     {p: solver.Value(v) for p, v in x.items()}, per_switch, t0 + params.time_limit_s)
    if counts is None:
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, wall, "cpsat", version, params.seed, limit,
                           message="relaxed optimum does not fit on the switches", extra={"uncolourable": True})
    tick_s = unit / (problem.port_bytes_per_s * L)
    if problem.objective == "time":
        model_obj = solver.ObjectiveValue() * tick_s
        model_bound = solver.BestObjectiveBound() * tick_s
    else:
        model_obj = solver.ObjectiveValue() * unit
        model_bound = solver.BestObjectiveBound() * unit
    exact_units = exact_units_ok
    extra = {"unit_bytes": unit, "units_exact": exact_units, "model_objective": model_obj, "symmetry_rows": len(sym),
             "model_bound": model_bound, "model": "per-switch" if per_switch else "degree relaxation, coloured"}
    wiring = _wiring_from(problem, counts, {})
    # CP-SAT's bound holds for integer routing in exact units. For hops it bounds the fractional problem too
    # (shortest paths are integral); for time only after the rounding slack (module doc), and its OPTIMAL
    # proves nothing about fractional routing.
    valid = None
    if exact_units and (problem.objective == "hops" or problem.policy == "direct"):
        valid = model_bound       # direct flows are the demands: loads x L / circuits are whole ticks, exact
    else:
        if exact_units:
            valid = max(0.0, model_bound - tick_s - len(ix.srcs) * unit / problem.port_bytes_per_s)   # ticks round up
        if valid is None:         # demands rounded up to whole units: the model's bound is no bound
            extra.pop("model_bound")
        else:
            extra["model_bound"] = valid
        # its OPTIMAL is integer routing's (of rounded demands, where the units are not exact), no proof: a
        # pipeline of two groups of 3 on 4 ports (300 MB hand-off) ended OPTIMAL at its first round on this
        # alone, its bound set to the answer, before the probes or the case split ran
        if status == SolveStatus.OPTIMAL:
            status = SolveStatus.FEASIBLE
            extra["integer_routing_optimal"] = True
    if problem.objective == "time":
        extra.pop("model_objective", None)        # an integer-routing value, not a bound
    res = _finish(problem, "cpsat", version, params, t0, status, limit, wiring, valid, extra)
    return res

