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
  units x L (no arc ever carries more). Where the fractional optimum routes whole units the two agree.

Big-M and scaling come from the instance, never constants: demands are normalized by their maximum.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from functools import reduce

import numpy as np

from synth.errors import SolverUnavailable
from synth.formats import quiet_stdout as _quiet_stdout
from synth.model import Circuit, Limit, SolveParams, SolveResult, SolveStatus, Wiring
from synth.problem import WiringProblem

from .bounds import best_bound

EXACT_MAX = 64   # accelerators; beyond this the exact models are not built


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
    if problem.policy == "direct":  # only pairs with demand are worth a circuit in a direct-only wiring
        t = problem.traffic.bytes_
        pairs = [p for p in pairs if t[p] > 0 or t[p[::-1]] > 0]
    arcs = [(i, j) for i, j in pairs] + [(j, i) for i, j in pairs]
    fixed: dict[tuple[int, int, int], int] = {}
    for c in problem.fixed_circuits:
        key = (c.switch, min(c.a, c.b), max(c.a, c.b))
        fixed[key] = fixed.get(key, 0) + 1
    srcs = np.flatnonzero(problem.traffic.bytes_.sum(axis=1) > 0)
    max_x = {p: sum(m for _, m in on[p]) for p in pairs}
    return _Index(n, pairs, on, arcs, srcs, cap, fixed, max_x)


def _wiring_from(problem: WiringProblem, counts: dict[tuple[int, int, int], int], meta: dict) -> Wiring:
    """Circuits from per-switch pair counts: the k-th circuit of a on s takes a's k-th port on s."""
    lay = problem.layout
    free: dict[tuple[int, int], list[int]] = {}
    for a, k in zip(*np.nonzero(lay.switch_of_port >= 0)):
        free.setdefault((int(a), int(lay.switch_of_port[a, k])), []).append(int(k))
    circuits = []
    for (s, i, j), cnt in sorted(counts.items()):
        for _ in range(int(cnt)):
            circuits.append(Circuit(s, i, free[(i, s)].pop(0), j, free[(j, s)].pop(0)))
    return Wiring(problem.accelerators, problem.ports, tuple(circuits), lay, **meta)


def _symmetric_switches(problem: WiringProblem) -> bool:
    lay = problem.layout
    return lay.is_uniform() and len(set(lay.switch_radix)) == 1


def _finish(problem: WiringProblem, solver: str, version: str, params: SolveParams, t0: float,
            status: SolveStatus, limit: Limit, wiring: Wiring | None, model_bound: float | None,
            extra: dict) -> SolveResult:
    """Score the wiring with the canonical objective and attach the best valid bound."""
    bound, named = best_bound(problem)
    if model_bound is not None:
        named["model"] = model_bound
        bound = max(bound, model_bound)
    objective = None
    if wiring is not None:
        objective, routing = problem.score(wiring)
        extra = {**extra, "routing": routing}
        if status == SolveStatus.OPTIMAL:
            bound = max(bound, min(objective, extra.get("model_objective", objective)))
        bound = min(bound, objective)
        if not np.isfinite(objective):       # a wiring that cannot route every demand proves nothing
            status = SolveStatus.FEASIBLE
        elif status == SolveStatus.FEASIBLE and objective - bound <= params.rel_gap * objective + 1e-15:
            status = SolveStatus.OPTIMAL          # a valid bound meets the objective: proven
            extra = {**extra, "proven_by": "bound"}
    wall = time.perf_counter() - t0
    solve = {"status": status.value, "objective": objective, "bound": bound, "solver": solver, "seed": params.seed,
             "objective_kind": problem.objective, "bounds": named}
    if wiring is not None:
        gap = 0.0 if not objective else max(0.0, (objective - bound) / objective)
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


def _symmetry_rows(problem: WiringProblem, ix: _Index) -> list[tuple[int, int, int]]:
    """Node-relabelling symmetry-breaking rows (r, a, b): x[r, a] >= x[r, b] (solvers/symmetry.py); none with
    fixed circuits (they pin nodes)."""
    if ix.fixed:
        return []
    from .symmetry import row_orderings
    pair_kind = {p: tuple(ix.on[p]) for p in ix.pairs}
    rows = row_orderings(problem.traffic.bytes_, pair_kind, [tuple(ix.cap[a]) for a in range(ix.n)])
    key = lambda i, j: (min(i, j), max(i, j))
    return [(r, a, b) for r, a, b in rows if key(r, a) in pair_kind and key(r, b) in pair_kind]


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


def _counts(problem: WiringProblem, ix: _Index, values: dict, per_switch: bool):
    """Per-switch circuit counts: read from y, or by colouring the pair counts x onto the switches
    (None when they do not fit)."""
    if per_switch:
        return {k: v for k, v in values.items() if v > 0}
    from synth.errors import Infeasible
    from synth.realize import realize
    pairs = [p for p, v in values.items() for _ in range(int(v))]
    try:
        circuits = realize(problem.layout, pairs)
    except Infeasible:
        return None
    out: dict[tuple[int, int, int], int] = {}
    for c in circuits:
        key = (c.switch, min(c.a, c.b), max(c.a, c.b))
        out[key] = out.get(key, 0) + 1
    return out


def _two_stage(problem: WiringProblem, params: SolveParams, solve) -> SolveResult:
    """Solve the degree relaxation (no switch variables, no switch symmetry) and colour its answer onto
    the switches: a relaxation's optimum that fits is optimal for the full problem. When it does not fit
    (or fixed circuits pin switches), solve the per-switch model with the time left."""
    from dataclasses import replace
    t0 = time.perf_counter()
    if problem.accelerators > EXACT_MAX:
        from synth.errors import InvalidInput
        raise InvalidInput(f"exact models are built for at most {EXACT_MAX} accelerators, this has "
                           f"{problem.accelerators} (use --solver lp-round or auto)", field="solver")
    if not problem.fixed_circuits:
        res = solve(problem, params, per_switch=False)
        if not res.extra.get("uncolourable"):
            return res
    left = max(1.0, params.time_limit_s - (time.perf_counter() - t0))
    return solve(problem, replace(params, time_limit_s=left), per_switch=True)


# --------------------------------------------------------------------------------------------------
def solve_milp(problem: WiringProblem, params: SolveParams = SolveParams()) -> SolveResult:
    """Exact MILP through PuLP; `params.backend` is "cbc", "highs" or "auto" (HiGHS when available)."""
    return _two_stage(problem, params, _solve_milp)


def _solve_milp(problem: WiringProblem, params: SolveParams, per_switch: bool) -> SolveResult:
    import pulp

    t0 = time.perf_counter()
    backend = params.backend if params.backend in ("cbc", "highs") else "highs"
    if backend == "highs" and not pulp.HiGHS().available():
        backend = "cbc"
    ix = _index(problem)
    t = problem.traffic.bytes_
    scale = float(t.max())
    D = t / scale
    cap = problem.port_bytes_per_s / scale
    prob = pulp.LpProblem("wiring", pulp.LpMaximize if problem.objective == "time" else pulp.LpMinimize)
    y = {key: prob.add_variable(name, lo, hi, cat="Integer")
         for key, (name, lo, hi) in _topology_vars(ix, per_switch).items()}
    for terms, sense, rhs in _topology_rows(problem, ix, per_switch):
        expr = pulp.lpSum(c * y[k] for k, c in terms)
        prob += (expr <= rhs) if sense == "<=" else (expr >= rhs)
    x = {p: pulp.lpSum(y[(s, *p)] for s, _ in ix.on[p]) for p in ix.pairs} if per_switch else y
    sym = _symmetry_rows(problem, ix)
    for r, a, b in sym:
        prob += x[(min(r, a), max(r, a))] >= x[(min(r, b), max(r, b))]
    keys, out_k, inn_k = _flow_keys(problem, ix)
    f = {key: prob.add_variable("f_%d_%d_%d" % key, 0) for key in keys}
    lam = prob.add_variable("lam", 0) if problem.objective == "time" else None
    out = {kv: [f[key] for key in ks] for kv, ks in out_k.items()}
    inn = {kv: [f[key] for key in ks] for kv, ks in inn_k.items()}
    for k in ix.srcs:
        for v_ in range(ix.n):
            if problem.policy == "direct" and v_ != k and D[k, v_] == 0:
                continue
            rhs = D[k].sum() if v_ == k else -D[k, v_]
            expr = pulp.lpSum(out.get((k, v_), [])) - pulp.lpSum(inn.get((k, v_), []))
            prob += (expr == (lam * rhs if lam is not None else rhs))
    big = float(D.sum())
    for (a, b) in ix.arcs:
        p = (min(a, b), max(a, b))
        load = pulp.lpSum(f[(k, a, b)] for k in ix.srcs if (k, a, b) in f)
        if problem.objective == "time":
            prob += load <= cap * x[p]
        else:
            prob += load <= big * x[p]
    lb, _ = best_bound(problem, lp=False)         # valid cuts: the model can stop once it meets them
    if problem.objective == "time":
        prob += lam <= 1.0 / lb if lb > 0 else lam >= 0
        prob += lam
    else:
        prob += pulp.lpSum(f.values()) >= lb / scale * (1 - 1e-9)
        prob += pulp.lpSum(f.values())
    if backend == "highs":
        solver = pulp.HiGHS(msg=False, timeLimit=params.time_limit_s, threads=params.threads,
                            gapRel=params.rel_gap, random_seed=params.seed)
    else:
        solver = pulp.PULP_CBC_CMD(msg=False, timeLimit=params.time_limit_s, threads=params.threads,
                                   gapRel=params.rel_gap, options=[f"randomSeed {params.seed + 1}"])
    try:
        with _quiet_stdout():
            prob.solve(solver)
    except pulp.PulpSolverError as exc:
        raise SolverUnavailable(f"{backend}: {exc}") from None
    wall = time.perf_counter() - t0
    name = f"milp-{backend}"
    version = f"pulp {pulp.__version__}"
    limit = Limit.TIME if wall >= params.time_limit_s * 0.98 else Limit.NONE
    if prob.status == pulp.LpStatusInfeasible:
        return SolveResult(SolveStatus.INFEASIBLE, None, None, wall, name, version, params.seed, limit,
                           message="the MILP is infeasible")
    if prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, wall, name, version, params.seed, limit,
                           message=f"solver stopped without a solution ({pulp.LpStatus[prob.status]})")
    status = SolveStatus.OPTIMAL if prob.sol_status == pulp.LpSolutionOptimal and limit == Limit.NONE \
        else SolveStatus.FEASIBLE
    counts = _counts(problem, ix, {k: int(round(v.value() or 0)) for k, v in y.items()} if per_switch else
                     {p: int(round(pulp.value(v) or 0)) for p, v in x.items()}, per_switch)
    if counts is None:
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, wall, name, version, params.seed, limit,
                           message="relaxed optimum does not fit on the switches", extra={"uncolourable": True})
    model_bound = None
    extra: dict = {"backend": backend, "symmetry_rows": len(sym)}
    if problem.objective == "time":
        lam_v = lam.value()
        extra["model_objective"] = 1.0 / lam_v if lam_v else float("inf")
        if status == SolveStatus.FEASIBLE and backend == "highs":
            db = abs(prob.solverModel.getInfo().mip_dual_bound)
            if np.isfinite(db) and db > 0:
                model_bound = 1.0 / db
        elif status == SolveStatus.OPTIMAL:
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


def solve_cpsat(problem: WiringProblem, params: SolveParams = SolveParams()) -> SolveResult:
    """The same model in CP-SAT with integer routing (see the module doc)."""
    return _two_stage(problem, params, _solve_cpsat)


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
    y = {key: m.NewIntVar(lo, hi, name) for key, (name, lo, hi) in _topology_vars(ix, per_switch).items()}
    for terms, sense, rhs in _topology_rows(problem, ix, per_switch):
        expr = sum(c * y[k] for k, c in terms)
        m.Add(expr <= rhs) if sense == "<=" else m.Add(expr >= rhs)
    x = {}
    for p in ix.pairs:
        x[p] = m.NewIntVar(0, ix.max_x[p], f"x_{p[0]}_{p[1]}")
        m.Add(x[p] == (sum(y[(s, *p)] for s, _ in ix.on[p]) if per_switch else y[p]))
    sym = _symmetry_rows(problem, ix)
    for r, a, b in sym:
        m.Add(x[(min(r, a), max(r, a))] >= x[(min(r, b), max(r, b))])
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
        m.Minimize(sum(f.values()))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = params.time_limit_s
    solver.parameters.num_workers = params.threads
    solver.parameters.random_seed = params.seed
    solver.parameters.relative_gap_limit = params.rel_gap
    st = solver.Solve(m)
    wall = time.perf_counter() - t0
    version = f"ortools {ortools.__version__}"
    limit = Limit.TIME if wall >= params.time_limit_s * 0.98 else Limit.NONE
    if st == cp_model.INFEASIBLE:
        return SolveResult(SolveStatus.INFEASIBLE, None, None, wall, "cpsat", version, params.seed, limit,
                           message="the CP-SAT model is infeasible")
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, wall, "cpsat", version, params.seed, limit,
                           message=f"CP-SAT stopped without a solution ({solver.StatusName(st)})")
    status = SolveStatus.OPTIMAL if st == cp_model.OPTIMAL else SolveStatus.FEASIBLE
    counts = _counts(problem, ix, {k: solver.Value(v) for k, v in y.items()} if per_switch else
                     {p: solver.Value(v) for p, v in x.items()}, per_switch)
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
    exact_units = bool(np.allclose(D * unit, problem.traffic.bytes_))
    extra = {"unit_bytes": unit, "units_exact": exact_units, "model_objective": model_obj, "symmetry_rows": len(sym),
             "model_bound": model_bound, "model": "per-switch" if per_switch else "degree relaxation, coloured"}
    wiring = _wiring_from(problem, counts, {})
    # CP-SAT's bound holds for integer routing in exact units; it bounds the fractional problem only for the
    # hop objective (shortest paths are integral) — elsewhere the reported bound is the best valid one.
    valid = model_bound if (problem.objective == "hops" and exact_units) else None
    res = _finish(problem, "cpsat", version, params, t0, status, limit, wiring, valid, extra)
    return res

