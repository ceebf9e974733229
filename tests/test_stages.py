"""The two-group case split (solvers/stages.py): valid bounds, proofs the whole-instance MILP's bound cannot
give, and its place in `solve_milp`."""
import math
import time

import numpy as np
import pytest

from solvers import exact, wire
from solvers.bounds import best_bound
from solvers.stages import (case_bound, case_labels, group_relays, milp_prober, partitions, split_cases,
                            symmetric_relaxation, two_groups)
from synth.model import OCSLayout, SolveParams, SolveStatus, TrafficMatrix
from synth.problem import WiringProblem
from synth.verify import wiring_violations


def pipeline(k, ports, pp, back=1e3, d=1e9):
    """Two stages of k accelerators: all-to-all d inside each, pp from position i to i of the next stage,
    `back` bytes returning."""
    n = 2 * k
    g = np.arange(n) // k
    t = np.where(g[:, None] == g[None, :], d, 0.0)
    np.fill_diagonal(t, 0)
    for i in range(k):
        t[i, k + i], t[k + i, i] = pp, back
    return WiringProblem(TrafficMatrix(t), OCSLayout.uniform(n, ports), 800.0, "time")


def test_two_groups_reads_a_pipeline_and_declines_the_rest():
    tg = two_groups(pipeline(4, 4, 2e8))
    assert tg.groups == ((0, 1, 2, 3), (4, 5, 6, 7)) and tg.ports == 4 and tg.d == 1e9
    assert tg.out_b == (2e8, 1e3) and tg.in_b == (1e3, 2e8)
    p = pipeline(4, 4, 2e8)
    t = p.traffic.bytes_.copy()
    t[0, 5] = 1e3                      # one accelerator sends more across than the others
    assert two_groups(WiringProblem(TrafficMatrix(t), p.layout, 800.0, "time")) is None
    assert two_groups(pipeline(4, 4, 2e8).__class__(p.traffic, p.layout, 800.0, "hops")) is None


def test_partitions():
    assert [len(list(partitions(c, 8))) for c in range(1, 9)] == [1, 2, 3, 5, 7, 11, 15, 22]
    assert list(partitions(4, 2, 3)) == [(3, 1), (2, 2)]


def test_group_model_basics():
    tg = two_groups(pipeline(4, 4, 2e8))
    T = 0.0101
    assert group_relays(tg, 0, (), T) == math.inf              # crossing bytes, no circuit across
    assert group_relays(tg, 0, (1,), T, h_lo=0.5) == math.inf   # one circuit across cannot turn bytes around
    r = [group_relays(tg, 0, (1, 1), T, h_lo=h) for h in (0.0, 0.2, 0.4)]
    assert r[0] >= 0 and r[0] <= r[1] <= r[2]                   # hosting more never needs fewer relays


@pytest.mark.parametrize("k,ports,pp", [(3, 4, 5e7), (3, 5, 1e8)])
def test_case_split_proves_the_optimum_the_relay_count_cannot(k, ports, pp):
    p = pipeline(k, ports, pp)
    res = wire(p, "milp", SolveParams(time_limit_s=60, backend="highs"))
    assert res.status == SolveStatus.OPTIMAL
    opt = res.objective
    assert best_bound(p, lp=False)[0] < 0.9 * opt              # the instance bounds are far below
    tg = two_groups(p)
    closed: dict = {}
    b, found, first = case_bound(p, tg, opt * (1 + 1e-3), SolveParams(backend="highs"), time.perf_counter() + 120,
                                 closed)
    assert b is None and found is not None and found.objective <= opt * (1 + 1e-9)    # never proves a wiring away
    assert not wiring_violations(found.artifact)
    T = opt * (1 - 1e-4)
    b, found, info = case_bound(p, tg, T, SolveParams(backend="highs"), time.perf_counter() + 120, closed)
    assert b == T and found is None and info["verdict"] == "bound"
    assert info["cases"] < first["cases"]                      # cases closed above T were not looked at again
    split = split_cases(tg, T, time.perf_counter() + 60)
    assert split.closed and all(c >= 1 for c, _, _ in split.closed)


def test_an_unsettled_case_does_not_stop_the_next_ones():
    # a probe without a verdict or a bound gives no bound, but the cases after it are still probed: one may
    # find a better wiring (CP-SAT's probes leave hard cases unsettled where the MILP's close them)
    p = pipeline(3, 4, 5e7)
    tg = two_groups(p)
    opt = 0.0067777788888888895
    real = milp_prober(p, tg, SolveParams(backend="highs"))
    asked = []

    def prober(case, T, seconds):
        asked.append(case)
        return ("unknown", None, None) if len(asked) <= 2 else real(case, T, seconds)
    b, found, info = case_bound(p, tg, opt * (1 + 1e-3), SolveParams(backend="highs"), time.perf_counter() + 120,
                                prober=prober)
    assert len(asked) >= 3 and found is not None and found.objective <= opt * (1 + 1e-3)
    b, found, info = case_bound(p, tg, opt * (1 + 1e-3), SolveParams(backend="highs"), time.perf_counter() + 120,
                                prober=lambda case, T, s: ("unknown", None, None))
    assert b is None and found is None and info["verdict"].startswith("not settled")
    assert len(info["cases_probed"]) == info["cases"] - info["closed_by_split"] + 1     # every open case, "at least"


def test_symmetric_relaxation_drops_the_hand_off_and_labels_follow_the_groups():
    p = pipeline(3, 4, 5e7)
    tg = two_groups(p)
    r = symmetric_relaxation(p, tg)
    t = r.traffic.bytes_
    assert t[:3, 3:].sum() == 0 and t[3:, :3].sum() == 0 and (t[:3, :3] == p.traffic.bytes_[:3, :3]).all()
    assert case_labels(tg.groups, (3, (2, 1), (3,)), 6) == [2, 1, 0, 3, 0, 0]
    cap = p.layout.capacity.copy()
    cap[0, 0] += 1                              # one accelerator with an extra port on the first switch
    lay = OCSLayout(cap, p.layout.switch_radix)
    assert symmetric_relaxation(WiringProblem(p.traffic, lay, 800.0, "time"), tg) is None


def test_labelled_probes_never_close_a_case_the_instance_can_reach():
    """The labelled probe on the relaxation fixes each accelerator's cross degree; it must not lose a case
    with a wiring: wherever the instance's multiset probe finds one at T, the labelled one finds one too."""
    from dataclasses import replace

    from solvers.exact import _solve_milp, _two_stage
    p = pipeline(3, 4, 5e7)
    tg = two_groups(p)
    relaxed = symmetric_relaxation(p, tg)
    T = 0.0067777788888888895 * 1.05
    params = SolveParams(time_limit_s=30, backend="highs")
    reached = labelled_closed = 0
    for c in range(1, 7):
        for xa in partitions(c, 3, 4):
            for xb in partitions(c, 3, 4):
                case = (c, xa, xb)
                plain = _two_stage(p, params, lambda q, prm, per_switch: _solve_milp(
                    q, prm, per_switch, cutoff=T, case=(tg.groups, case)))
                lab = _two_stage(relaxed, params, lambda q, prm, per_switch: _solve_milp(
                    q, prm, per_switch, cutoff=T, case=(tg.groups, case), labelled=True))
                assert lab.status != SolveStatus.NO_SOLUTION and plain.status != SolveStatus.NO_SOLUTION
                if plain.status != SolveStatus.INFEASIBLE:
                    reached += 1
                    assert lab.status != SolveStatus.INFEASIBLE, case
                    assert lab.objective <= plain.objective * (1 + 1e-9)
                labelled_closed += lab.status == SolveStatus.INFEASIBLE
    assert reached >= 3 and labelled_closed >= 3            # both kinds occur: the check is not empty
    # and the prober: the relaxation's wiring scored on the instance, or the instance's own probe after it
    run = milp_prober(p, tg, replace(params, time_limit_s=30))
    verdict, res, _ = run((2, (1, 1), (1, 1)), T, 30.0)
    assert verdict in ("found", "infeasible")
    if verdict == "found":
        assert res.objective <= T * (1 + 1e-6) and not wiring_violations(res.artifact)


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_exact_solvers_run_the_case_split_when_they_have_the_time(monkeypatch, solver):
    p = pipeline(3, 4, 5e7)
    monkeypatch.setattr(exact, "STAGES_MIN_S", 0.0)
    monkeypatch.setattr(exact, "STAGES_FIRST_S", 0.3)     # a first round too short to prove anything
    res = wire(p, solver, SolveParams(time_limit_s=60, backend="highs"))
    splits = [r for r in res.extra["rounds"] if r.get("status") == "case split"]
    assert res.status == SolveStatus.OPTIMAL and splits
    assert res.objective == pytest.approx(0.0067777788888888895, rel=1e-9)
    assert not wiring_violations(res.artifact)


def test_highs_thread_counts_can_change_within_a_process():
    """HiGHS keeps a scheduler per thread sized by the first solve; a later solve with another count used to
    stop at once ("Not Solved"); solvers.highs.threads resets it."""
    p = pipeline(3, 3, 5e7)
    tg = two_groups(p)
    for th in (1, 2, 1):
        r = exact._solve_milp(p, SolveParams(time_limit_s=30, backend="highs", threads=th), per_switch=False,
                              cutoff=0.0101, case=(tg.groups, ("at least", 5)))
        assert r.status in (SolveStatus.INFEASIBLE, SolveStatus.OPTIMAL, SolveStatus.FEASIBLE), (th, r.message)
