"""Exact models for the ``phases`` objective: the step's phases run one after another, each routed on its own,
so the step's communication takes sum_k w_k theta_k(x), theta_k the time of phase k alone on circuits x.

For fixed circuits each theta_k is 1 / lam_k, lam_k the concurrent throughput of phase k's demand (routing
lam_k D_k within B x: linear in x and lam_k), and 1 / lam is convex. So:

- MILP (PuLP: HiGHS or CBC): circuits x, per phase source-aggregated flows at rate lam_k, and s_k >= the
  tangents of 1 / lam at points l (s_k >= 2 / l - lam_k / l^2): an outer approximation of the objective from
  below, so the model's optimum (or HiGHS's dual bound) bounds every wiring. Tangents start on a geometric
  grid down from each phase's own lower bound; after each solve the wiring is timed exactly (the routing LP,
  phase by phase) and tangents at the model's lam_k and at the wiring's exact ones are added (Kelley's
  cutting planes), until the exact objective meets the bound or the time is up.
- CP-SAT: CP-SAT cannot route fractionally, so it decides circuits and an LP times each phase (as in
  solvers/benders.py). For any lengths l >= 0 on the arcs, theta_k(x) >= W_k(l) / (B L(x)) with
  L(x) = sum_a l_a x_a and W_k(l) = sum_st D_k,st dist_l(s, t) (Japanese theorem), so with integer lengths
  and s_k an integer count of units u (w_k theta_k <= s_k u), each row is the product s_k L(x) >=
  ceil(w_k W_k / (B u)). CP-SAT minimizes sum_k s_k over the rows found so far; each proposal's phases are
  timed by the LP, whose duals give new rows (Benders). Rounding each s_k up costs at most one unit per
  phase, so (CP-SAT's bound - phases) u bounds every wiring.

Both start from the per-phase bounds (solvers/bounds.py: each phase's own best bound) and take the node
symmetry of every phase at once (`WiringProblem.demand_colours`).
"""
from __future__ import annotations

import math
import time
from dataclasses import replace

import numpy as np

from synth.model import Limit, SolveParams, SolveResult, SolveStatus
from synth.problem import WiringProblem

from . import baselines
from .bounds import best_bound
from .exact import MODEL_SLACK

TANGENT_RATIO = 1.03   # the first tangents of 1 / lam: at 1 / lb, 1 / (lb x ratio), ...
TANGENTS = 40
LENGTHS = 10 ** 6      # CP-SAT rows: integer arc lengths, the longest gets this (less if int64 needs it)
UNITS = 10 ** 7        # CP-SAT: the objective's unit u = the first wiring's objective / UNITS
MAX_ROWS = 4096        # CP-SAT product rows at most (the sum of all domains must fit in int64)


def _parts(problem: WiringProblem):
    """(weight, phase problem, its lower bound) of every phase with bytes."""
    out = []
    for w, sub in problem.phase_problems():
        if sub.traffic.bytes_.sum() > 0:
            out.append((w, sub, best_bound(sub, lp=False)[0]))
    return out


def solve_milp_phases(problem: WiringProblem, params: SolveParams, per_switch: bool, start=None,
                      case=None) -> SolveResult:
    """The MILP of the module doc, with Kelley's tangents until the wiring's exact objective meets the bound;
    `start` (a wiring) is the first incumbent and gives the first tangents at its phases' times. `case` =
    (groups, case) restricts the circuits to one case of the two-group split (`stages.add_case_rows`; its
    bound then holds for that case's wirings: solvers/phase_cases.py)."""
    import pulp

    from synth.formats import quiet_stdout

    from .ctrl_c import HighsCtrlC
    from .exact import (_counts, _finish, _index, _source_routing, _symmetry_rows, _wiring_from, lam_unit,
                        milp_backend, pulp_solver, pulp_topology)
    t0 = time.perf_counter()
    backend = milp_backend(params)
    ix = _index(problem)
    parts = _parts(problem)
    ref = sum(w * lb for w, _, lb in parts) or 1.0            # seconds: keeps the model's objective near 1
    prob = pulp.LpProblem("phases", pulp.LpMinimize)
    sym = _symmetry_rows(problem, ix, seconds=params.time_limit_s)
    y, x, ncl = pulp_topology(prob, problem, ix, per_switch, sym)
    if case is not None:
        from .stages import add_case_rows
        add_case_rows(prob, ix.pairs, x, case[0], case[1])
    lam, s = [], []
    # lam_k is 1 / phase k's time in units of unit[k] seconds: the phase's own bound, so lam_k <= 1 and the
    # tangents' coefficients stay near 1. In seconds (`lam_unit`), a phase of microseconds had lam ~1e5-5e8
    # and tangent coefficients ~1e-8-1e-15, and HiGHS returned a wrong optimum: llama405b-tp8pp2-16 "OPTIMAL"
    # at 0.00284729 s (dual bound 0.00285509) where a wiring of 0.00283022 s fits the model (BENCHMARKS.md)
    unit = [lb if lb > 0 else lam_unit(lb) for _, _, lb in parts]
    for k, (w, sub, lb) in enumerate(parts):
        t = sub.traffic.bytes_
        scale = float(t.max())
        lam_k = prob.add_variable(f"lam_{k}", 0, unit[k] / lb if lb > 0 else None)
        loads, _ = _source_routing(prob, sub, ix, t / scale, lam_k, prefix=f"p{k}_")
        for (a, b) in ix.arcs:
            if loads[(a, b)]:
                prob += pulp.lpSum(loads[(a, b)]) <= problem.port_bytes_per_s / scale * unit[k] * \
                    x[(min(a, b), max(a, b))]
        lam.append(lam_k)
        s.append(prob.add_variable(f"s_{k}", lb / ref))
    points: list[set] = [set() for _ in parts]

    def tangent(k: int, at: float) -> bool:
        """Add the tangent of unit[k] / lam_k at lam_k = `at` (unless phase k has one there already); True when
        added."""
        key = float(f"{at:.12g}")
        if not (at > 0 and np.isfinite(at)) or key in points[k]:
            return False
        points[k].add(key)
        prob.addConstraint(s[k] >= unit[k] * (2.0 / at - lam[k] / at ** 2) / ref)
        return True

    for k, (_, _, lb) in enumerate(parts):
        top = unit[k] / lb if lb > 0 else None
        for j in range(TANGENTS if top else 0):
            tangent(k, top / TANGENT_RATIO ** j)
    prob += pulp.lpSum(w * s_k for (w, _, _), s_k in zip(parts, s))
    ctrl_c = HighsCtrlC()
    say = params.progress or (lambda msg: None)
    # solved to a tenth of the gap, so that the bound it proves can meet the gap
    fine = replace(params, rel_gap=params.rel_gap / 10)
    best = None                     # (objective, wiring)
    if start is not None and baselines.holds(start, problem.fixed_circuits):
        thetas = [sub.score(start, "best")[0] for _, sub, _ in parts]
        if all(np.isfinite(thetas)):
            best = (sum(w * th for (w, _, _), th in zip(parts, thetas)), start)
            for k, th in enumerate(thetas):
                tangent(k, unit[k] / th)
    bound = 0.0
    inconsistent = None        # a model bound left out: above a wiring in hand
    rounds = 0
    limit = Limit.NONE
    name, version = f"milp-{backend}", f"pulp {pulp.__version__}"
    while True:
        left = params.time_limit_s - (time.perf_counter() - t0)
        if left < 0.5:
            limit = Limit.TIME
            break
        with quiet_stdout(), ctrl_c:
            prob.solve(pulp_solver(backend, fine, ctrl_c, t0 + params.time_limit_s))
        rounds += 1
        if ctrl_c.hit:
            limit = Limit.INTERRUPT
            break
        if prob.status == pulp.LpStatusInfeasible:
            return SolveResult(SolveStatus.INFEASIBLE, None, None, time.perf_counter() - t0, name, version,
                               params.seed, limit, message="the MILP is infeasible")
        solved = prob.sol_status == pulp.LpSolutionOptimal
        before = bound
        if backend == "highs":      # a dual bound even when the time ran out before any wiring
            db = prob.solverModel.getInfo().mip_dual_bound
            if np.isfinite(db):
                bound = max(bound, float(db) * ref)
        if prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
            limit = Limit.TIME
            break
        if backend != "highs" and solved:
            bound = max(bound, float(pulp.value(prob.objective)) * ref * (1 - fine.rel_gap))
        counts = _counts(problem, ix, {k: int(round(v.value() or 0)) for k, v in y.items()} if per_switch else
                         {p: int(round(pulp.value(v) or 0)) for p, v in x.items()}, per_switch, t0 + params.time_limit_s)
        if counts is None:
            return SolveResult(SolveStatus.NO_SOLUTION, None, None, time.perf_counter() - t0, name, version,
                               params.seed, limit, message="relaxed optimum does not fit on the switches",
                               extra={"uncolourable": True})
        wiring = _wiring_from(problem, counts, {})
        thetas = [sub.score(wiring, "best")[0] for _, sub, _ in parts]
        objective = sum(w * th for (w, _, _), th in zip(parts, thetas))
        if best is None or objective < best[0]:
            best = (objective, wiring)
        if bound > best[0] * (1 + MODEL_SLACK):
            # a bound on every wiring above one in hand: this solve went wrong (HiGHS on llama405b-tp8pp2-16,
            # BENCHMARKS.md); it proves nothing, and the rounds go on with more tangents
            inconsistent, bound = bound, before
            say(f"phases milp round {rounds}: the model's bound {inconsistent:.6g} s is above a wiring of "
                f"{best[0]:.6g} s: left out")
        say(f"phases milp round {rounds}: {objective:.6g} s (best {best[0]:.6g}), bound {bound:.6g}")
        if best[0] - bound <= params.rel_gap * best[0]:
            break
        if not solved:
            limit = Limit.TIME
            break
        added = [tangent(k, float(lam[k].value() or 0.0)) | tangent(k, unit[k] / th) for k, th in enumerate(thetas)]
        if not any(added):          # nothing new to learn: the model is as tight as its tangents get
            break
    if best is None:
        if limit == Limit.INTERRUPT:
            raise KeyboardInterrupt
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, time.perf_counter() - t0, name, version,
                           params.seed, limit, message="the solver stopped without a wiring")
    extra = {"backend": backend, "symmetry_rows": len(sym), "cluster_rows": ncl, "kelley_rounds": rounds,
             "tangents": sum(len(p) for p in points),
             "model": "per-switch" if per_switch else "degree relaxation, coloured",
             **({"model_inconsistent": inconsistent} if inconsistent is not None else {})}
    return _finish(problem, name, version, params, t0, SolveStatus.FEASIBLE, limit, best[1], bound or None, extra)


def solve_cpsat_phases(problem: WiringProblem, params: SolveParams, per_switch: bool, start=None,
                       case=None) -> SolveResult:
    """The CP-SAT decomposition of the module doc; the first incumbent is the better of the expander and
    `start` (a wiring). `case`: as `solve_milp_phases` (`stages.add_case_rows_cpsat`)."""
    import ortools
    from ortools.sat.python import cp_model

    from .benders import MetricCuts, exclude
    from .ctrl_c import CpsatCtrlC
    from .exact import _counts_or_proof, _finish, _index, _symmetry_rows, _wiring_from, cpsat_topology
    t0 = time.perf_counter()
    ix = _index(problem)
    parts = _parts(problem)
    B = problem.port_bytes_per_s
    cuts = [MetricCuts(sub, ix) for _, sub, _ in parts]
    from . import baseline_wiring
    # in a case, no incumbent from outside it (its wirings' bound may lie above one: `exact._finish`)
    first = baseline_wiring(problem, "expander", params.seed) if case is None else None
    upper = problem.score(first, "best")[0] if first is not None else float("inf")
    if start is not None and baselines.holds(start, problem.fixed_circuits):
        alt = problem.score(start, "best")[0]
        if alt < upper:
            first, upper = start, alt
    if not np.isfinite(upper):
        upper = sum(w * lb for w, _, lb in parts) * 100 or 1.0
    u = upper / UNITS
    m = cp_model.CpModel()
    sym = _symmetry_rows(problem, ix, seconds=params.time_limit_s)
    y, x, _ = cpsat_topology(m, problem, ix, per_switch, None, sym)
    if case is not None:
        from .stages import add_case_rows_cpsat
        add_case_rows_cpsat(m, ix.pairs, x, case[0], case[1])
    xs = [x[p] for p in ix.pairs]
    scale_l = max(100, min(LENGTHS, (1 << 62) // ((2 * UNITS + len(parts)) * max(1, sum(ix.max_x.values()))
                                                  * (MAX_ROWS + 1))))
    top_l = scale_l * sum(ix.max_x.values())
    # a phase slower than twice the first wiring's whole step is no wiring worth proposing
    s = [m.NewIntVar(int(math.ceil(w * lb / u * (1 - 1e-9))), 2 * UNITS + len(parts), f"s_{k}")
         for k, (w, _, lb) in enumerate(parts)]
    m.Minimize(sum(s))
    nrows = 0

    def add_row(k: int, length: np.ndarray, at: np.ndarray | None = None) -> bool:
        """The product row of phase k for arc lengths on ix.arcs (any scale), and with `at` (circuits per
        pair) its tangent there; False when the row is empty."""
        nonlocal nrows
        row = cuts[k].row(length, scale_l) if nrows < MAX_ROWS else None
        if row is None:
            return False
        wp, W = row
        R = parts[k][0] * W / (B * u)
        rhs = int(math.ceil(R * (1 - 1e-12)))
        if rhs <= 0:
            return False
        if at is not None and float(wp @ at) > 0:
            # s >= R / L is convex in L, so above its tangent at the proposal's L0: s + sum c_i x_i >= 2 R / L0
            # with c = R wp / L0^2; scaled by M and rounded towards the weaker row (CP-SAT's LP sees it)
            L0 = float(wp @ at)
            c = R * wp / L0 ** 2
            M = int(min(1e9, max(1.0, 1e6 / float(c.max()))))
            nz = np.flatnonzero(wp)
            m.Add(M * s[k] + sum(int(math.ceil(M * c[i])) * xs[i] for i in nz) >= int(math.floor(M * 2 * R / L0)))
        L = m.NewIntVar(0, top_l, "")
        m.Add(L == sum(int(wp[i]) * xs[i] for i in np.flatnonzero(wp)))
        prod = m.NewIntVar(0, (2 * UNITS + len(parts)) * top_l, "")
        m.AddMultiplicationEquality(prod, [s[k], L])
        m.Add(prod >= rhs)
        nrows += 1
        return True

    for k in range(len(parts)):            # every accelerator's injection and ejection cut
        for a in range(ix.n):
            inside = np.zeros(ix.n, dtype=bool)
            inside[a] = True
            add_row(k, cuts[k].cut_set(inside))
            add_row(k, cuts[k].cut_set(~inside))
    best = None
    if first is not None and np.isfinite(upper):
        best = (upper, first)
        adj = first.adjacency()
        xf = np.array([adj[p] for p in ix.pairs], dtype=np.float64)
        for k in range(len(parts)):
            add_row(k, cuts[k].lp_lengths(xf)[1], xf)
    bound = 0.0
    proposals = 0
    sound = True      # every proposal excluded so far is no wiring or priced: the model's bounds hold
    limit = Limit.NONE
    version = f"ortools {ortools.__version__}"
    say = params.progress or (lambda msg: None)

    while True:
        left = params.time_limit_s - (time.perf_counter() - t0)
        if left < 0.5:
            limit = Limit.TIME
            break
        if best is not None:
            m.ClearHints()
            adj = best[1].adjacency()
            for v, p in zip(xs, ix.pairs):
                m.AddHint(v, int(adj[p]))
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = left
        solver.parameters.num_workers = params.threads
        solver.parameters.random_seed = params.seed
        solver.parameters.relative_gap_limit = params.rel_gap / 10
        ctrl_c = CpsatCtrlC(solver)
        st = ctrl_c.solve(m)
        if ctrl_c.hit:
            limit = Limit.INTERRUPT
            break
        if st in (cp_model.OPTIMAL, cp_model.FEASIBLE) and sound:
            bound = max(bound, (solver.BestObjectiveBound() - len(parts)) * u)
        if st == cp_model.INFEASIBLE:     # every wiring is excluded: the incumbent (if any) is optimal
            bound = best[0] if best is not None and sound else bound
            break
        if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            limit = Limit.TIME
            break
        proposals += 1
        xhat = np.array([solver.Value(v) for v in xs], dtype=np.int64)
        timed = [c.lp_lengths(xhat.astype(np.float64)) for c in cuts]
        objective = sum(w * th for (w, _, _), (th, _) in zip(parts, timed))
        counts, proven = _counts_or_proof(problem, {k: solver.Value(v) for k, v in y.items()} if per_switch else
                                          dict(zip(ix.pairs, xhat.tolist())), per_switch, t0 + params.time_limit_s)
        if counts is None:
            exclude(m, xs, xhat)
            sound &= proven           # a proposal excluded without a proof that it does not fit: no more bounds
            continue
        if np.isfinite(objective) and (best is None or objective < best[0]):
            best = (objective, _wiring_from(problem, counts, {}))
            say(f"phases cpsat: {objective:.6g} s after {proposals} proposals, bound {bound:.6g}")
        if best is not None and best[0] - bound <= params.rel_gap * best[0]:
            break
        if st != cp_model.OPTIMAL:
            limit = Limit.TIME
            break
        added = False
        for k, (th, length) in enumerate(timed):
            if parts[k][0] * th > solver.Value(s[k]) * u * (1 + 1e-9):
                added |= add_row(k, length, xhat.astype(np.float64))
        if not added:            # the rows already price this proposal: it is as good as the bound says
            exclude(m, xs, xhat)
    if best is None:
        if limit == Limit.INTERRUPT:
            raise KeyboardInterrupt
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, time.perf_counter() - t0, "cpsat", version,
                           params.seed, limit, message="CP-SAT stopped without a wiring")
    extra = {"proposals": proposals, "product_rows": nrows, "symmetry_rows": len(sym),
             "model": "per-phase product rows (Benders), circuits only"}
    return _finish(problem, "cpsat", version, params, t0, SolveStatus.FEASIBLE, limit, best[1], bound or None, extra)
