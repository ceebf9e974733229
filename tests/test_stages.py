"""The two-group case split (solvers/stages.py): valid bounds, proofs the whole-instance MILP's bound cannot
give, and its place in `solve_milp`."""
import math
import time

import numpy as np
import pytest

from solvers import exact, wire
from solvers.bounds import best_bound
from solvers.stages import case_bound, group_relays, partitions, split_cases, two_groups
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
