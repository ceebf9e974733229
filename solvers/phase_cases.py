"""The ``phases`` objective's case split on two groups: proofs for a pipeline of two tensor-parallel groups
whose phases run one after another (llama405b-tp8pp2-16: the TP all-reduce x 504, the PP hand-off x 2 and
the token ids x 2).

Why. The phases MILP (solvers/phased.py) bounds 1 / lam by tangents, and its relaxation spreads the
groups' relays over fractional circuits between the groups as the time model's does (solvers/stages.py):
on llama405b-tp8pp2-16 its bound stays 2% under the best wiring after 900 s. What decides the optimum is
again how many circuits join the groups, c, and which accelerators hold them.

The split. Let phase g be the group phase (`bounds.group_phase`: its bytes all inside two groups, uniform)
with weight w_g. Its demand has no bytes between the groups, so on a wiring with c circuits between them
it is a wiring of phase g alone in case (c, x_A, x_B) of `stages.split_cases`. Every other phase k carries
its bytes between the groups over those c circuits: it takes at least max(b_k, Q_k / c), b_k its own best
bound and Q_k its time on one circuit between the groups (`bounds.group_quotient_time`). So a wiring with
c circuits across takes at least w_g theta_g + R(c), R(c) = sum_k w_k max(b_k, Q_k / c), and none in a
case with c across reaches V unless phase g alone reaches T_c = (V - R(c)) / w_g on it. Each c <= C_MAX
goes through `split_cases` at its own T_c, and the cases it leaves open through whole probes of phase g
alone at T_c restricted to the case (`stages.milp_prober`: labelled, since phase g's demand is symmetric
under any relabelling inside a group). More than C_MAX across: a probe of a range lo <= c <= hi at T_hi
(R falls in c, so T_c >= T_hi in it), first C_MAX + 1 .. c_top (the most circuits the groups' ports
allow), each range halved while its probe finds a wiring of phase g whose whole objective is above V.
A probe's dual bound b on phase g in a case (range) bounds its wirings at w_g b + R(c) (R(hi)).

A probe that finds a wiring of phase g at T_c has its spare ports paired (more circuits never slow a
phase) and is scored on the whole objective: at or below V it is a better answer (the caller asks again at
its time); above V (the other phases slower than R(c) on it) a case of one c stays unsettled and gives no
bound.
Cases closed at a T_c stay closed at every lower V (T_c falls with V).
"""
from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass

import numpy as np

from synth.problem import WiringProblem

from .stages import C_MAX, UniformGroups, milp_prober, probed, split_cases


@dataclass(frozen=True)
class PhaseGroups:
    """The group phase of a phases problem on two groups, and what the other phases take at c across."""
    which: int                      # index of the group phase among problem.phase_problems()
    weight: float                   # its weight w_g
    sub: WiringProblem              # the group phase alone (time objective)
    tg: UniformGroups               # its two groups, no bytes between them
    rest: tuple[tuple[float, float, float], ...]   # (w_k, b_k, Q_k) of every other phase with bytes
    c_top: int                      # the most circuits between the groups

    def others(self, c: float) -> float:
        """R(c): the least the other phases take together on a wiring with c circuits between the groups."""
        return float(sum(w * max(b, q / c if q > 0 else 0.0) for w, b, q in self.rest))

    def cutoff(self, V: float, c: int) -> float:
        """T_c: the group phase's time a wiring with c circuits across needs to reach V."""
        return (V - self.others(c)) / self.weight

    def case_bound(self, c: int, b: float) -> float:
        """The objective's bound on the wirings of a case with c across whose group phase takes >= b."""
        return self.weight * b + self.others(c)


def phase_groups(problem: WiringProblem, max_group: int) -> PhaseGroups | None:
    """The problem's `PhaseGroups` when the split applies: the phases objective, a group phase of two groups
    of at most `max_group` accelerators, the same ports at every accelerator, the same switches at each (the
    labelled probes), another phase with bytes between the groups (so every wiring has c >= 1), no fixed
    circuits and multi-hop routing. None otherwise."""
    from .bounds import best_bound, group_phase, group_quotient_time
    if problem.objective != "phases" or problem.policy == "direct" or problem.fixed_circuits:
        return None
    found = group_phase(problem)
    if found is None:
        return None
    which, label = found
    if label.max() != 1 or int((label == 0).sum()) > max_group:
        return None
    cap = problem.layout.capacity
    if np.ptp(cap, axis=0).max() > 0:
        return None
    ports = int(cap[0].sum())
    parts = problem.phase_problems()
    w_g, sub = parts[which]
    t = sub.traffic.bytes_
    groups = tuple(tuple(int(v) for v in np.flatnonzero(label == g)) for g in (0, 1))
    d = float(t[groups[0][0], groups[0][1]])
    tg = UniformGroups(groups, d, ports, (0.0, 0.0), (0.0, 0.0), problem.port_bytes_per_s)
    B = problem.port_bytes_per_s
    rest = tuple((float(w), float(best_bound(s, lp=False)[0]), float(group_quotient_time(s.traffic.bytes_, label, B)))
                 for i, (w, s) in enumerate(parts) if i != which and s.traffic.bytes_.sum() > 0)
    if not any(q > 0 for _, _, q in rest):      # no bytes between the groups: c = 0 is a case too
        return None
    return PhaseGroups(which, float(w_g), sub, tg, rest, len(groups[0]) * ports)


def phases_case_bound(problem: WiringProblem, pg: PhaseGroups, V: float, params, deadline: float,
                      closed_at: dict | None = None, prober=None, whole=None):
    """A lower bound on every wiring's phases objective from the split of the module doc at V, as
    `stages.case_bound` for the time objective: (bound, result, info), bound = min(V, every open case's
    bound) or None (out of time, a case unsettled, or a better wiring found: then result is that wiring,
    scored on `problem`). `closed_at` (case -> the T_c it was closed at) carries closed cases from one call
    to the next (lower V); `prober(case, T, seconds)` asks phase g alone (default `stages.milp_prober`),
    `whole(case, seconds)` the whole objective in a case of one c (default `phases_model`)."""
    from synth.model import Limit, SolveStatus

    from .baselines import fill_spare_ports
    from .exact import _finish
    say = params.progress or (lambda msg: None)
    prober = prober or milp_prober(pg.sub, pg.tg, params)
    whole = whole or phases_model(problem, pg, params)
    t0 = time.perf_counter()
    closed_at = {} if closed_at is None else closed_at
    info: dict = {"V": V}
    todo: list = []
    split_closed, models = 0, 0
    for c in range(1, C_MAX + 1):
        T = pg.cutoff(V, c)
        if T <= 0:                                        # the other phases alone take V
            continue
        split = split_cases(pg.tg, T, deadline, c_min=c, c_max=c, threads=params.threads, closed_at=closed_at)
        if split is None:
            info["verdict"] = f"case split out of time at c = {c}"
            return None, None, info
        split_closed += len(split.closed)
        models += split.models
        todo += [(case, T) for case in split.open]
        say(f"phases split, {c} across, the group phase at {T:.6g} s: {len(split.closed)} cases closed, "
            f"{len(split.open)} open ({split.wall_s:.0f} s)")
    top = ("between", C_MAX + 1, pg.c_top)
    if pg.c_top > C_MAX and pg.cutoff(V, pg.c_top) > 0:
        todo.insert(0, (top, pg.cutoff(V, pg.c_top)))
    info.update(closed_by_split=split_closed, group_models=models, split_s=round(time.perf_counter() - t0, 1))
    todo = deque((case, T) for case, T in todo if closed_at.get(case, 0.0) < T)
    bound = V
    cases: dict = {}
    unsettled: list = []
    while todo:
        case, T = todo.popleft()
        left = deadline - time.perf_counter()
        if left < 1.0:
            info["verdict"] = f"out of time before case {case}"
            return None, None, info
        verdict, res, b = prober(case, T, left / (len(todo) + 1))
        say(f"phases split: case {case} at {T:.6g} s: {verdict}")
        c_hi = case[2] if case[0] == "between" else case[0]
        if verdict == "infeasible":
            cases[str(case)] = "infeasible"
            closed_at[case] = T
            continue
        if verdict == "found":
            w = fill_spare_ports(res.artifact, params.seed)
            found = _finish(problem, res.solver, res.solver_version, params, time.perf_counter(),
                            SolveStatus.FEASIBLE, Limit.NONE, w, None,
                            {"model": f"case probe of the group phase alone, case {case}"})
            if found.objective is not None and found.objective <= V * (1 + 1e-9):
                info.update(verdict=f"case {case}: found {found.objective:.9g} s", cases_probed=cases)
                return None, found, info
            said = f"group phase at {res.objective:.9g} s, the whole {found.objective:.9g} s"
            if case[0] == "between" and case[1] < case[2]:       # T was its top's: halve the range
                cases[str(case)] = said
                mid = (case[1] + case[2]) // 2
                for lo, hi in ((case[1], mid), (mid + 1, case[2])):
                    if pg.cutoff(V, hi) > 0:
                        todo.append((("between", lo, hi), pg.cutoff(V, hi)))
                continue
            # one c: the phases model on the case itself (its bound holds for the case's wirings)
            res = whole(case, max(1.0, (deadline - time.perf_counter()) / (len(todo) + 1)))
            if res.status == SolveStatus.INFEASIBLE:
                cases[str(case)] = said + "; phases model: infeasible"
                closed_at[case] = T
                continue
            if res.objective is not None and res.objective <= V * (1 + 1e-9):
                info.update(verdict=f"case {case}: found {res.objective:.9g} s", cases_probed=cases)
                return None, res, info
            b = res.bound
            cases[str(case)] = said + (f"; phases model: bound {b:.9g} s" if b is not None else "; phases model: none")
            if b is None:
                unsettled.append(case)
            elif b >= V:
                closed_at[case] = T
            else:
                bound = min(bound, b)
            continue
        cases[str(case)] = verdict if b is None else round(b, 12)
        if b is None:
            unsettled.append(case)
        else:
            bound = min(bound, pg.case_bound(c_hi, min(b, T)))
    return probed(info, cases, unsettled, bound, t0)


def phases_model(problem: WiringProblem, pg: PhaseGroups, params, solve=None):
    """`whole(case, seconds)` for `phases_case_bound`: the phases model (`phased.solve_milp_phases`, or
    `solve`) restricted to the case, both stages (`exact._two_stage`), no start (its bound is the case's)."""
    from dataclasses import replace
    from functools import partial

    from .exact import _two_stage
    from .phased import solve_milp_phases
    solve = solve or solve_milp_phases

    def run(case, seconds: float):
        return _two_stage(problem, replace(params, time_limit_s=seconds), partial(solve, case=(pg.tg.groups, case)))
    return run
