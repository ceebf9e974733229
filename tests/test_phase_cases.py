"""The phases objective's two-group case split (solvers/phase_cases.py): it proves what the phases MILP proves,
never closes a time a wiring reaches, and runs inside `solve_milp` when the clock allows."""
import time
from dataclasses import replace

import numpy as np
import pytest

from solvers import exact, wire
from solvers.phase_cases import phase_groups, phases_case_bound
from synth.model import Limit, OCSLayout, SolveParams, SolveStatus, TrafficPhase, phases_traffic
from synth.problem import WiringProblem
from synth.verify import wiring_violations


def phased_pipeline(k, ports, pp, w_tp=4.0, w_pp=1.0, d=1e9):
    """Two stages of k accelerators as phases: the all-to-all d inside each stage (weight w_tp), then the
    hand-off of pp bytes from position i of the first stage to i of the second (weight w_pp)."""
    n = 2 * k
    g = np.arange(n) // k
    tp = np.where(g[:, None] == g[None, :], d, 0.0)
    np.fill_diagonal(tp, 0)
    hand = np.zeros((n, n))
    hand[np.arange(k), k + np.arange(k)] = pp
    ph = (TrafficPhase("tp", tp, w_tp), TrafficPhase("pp", hand, w_pp))
    return WiringProblem(phases_traffic(ph), OCSLayout.uniform(n, ports), 800.0, "phases", phases=ph)


# (k, ports, pp) -> the optimum the phases MILP proves alone (HiGHS, 1-30 s): five, six, ten, nine and eight
# circuits across
OPTIMA = {(3, 5, 1e9): 0.026, (3, 4, 5e8): 0.029166666666666664, (4, 5, 2e8): 0.0328, (3, 5, 3e9): 0.032857142857142856,
          (3, 4, 4e9): 0.045384615384615384}


def test_phase_groups_reads_the_tp_phase_and_what_the_others_take():
    p = phased_pipeline(3, 5, 1e9)
    pg = phase_groups(p, 10)
    assert pg.which == 0 and pg.weight == 4.0 and pg.tg.groups == ((0, 1, 2), (3, 4, 5)) and pg.c_top == 15
    # the hand-off: 3e9 bytes one way over c circuits of 1e11 B/s, at least its own injection bound 0.01 s
    (w, b, q), = pg.rest
    assert (w, q) == (1.0, pytest.approx(0.03)) and b == pytest.approx(0.002)
    assert pg.others(1) == pytest.approx(0.03) and pg.others(30) == pytest.approx(0.002)
    assert pg.cutoff(0.026, 2) == pytest.approx((0.026 - 0.015) / 4)
    assert phase_groups(p, 2) is None                                    # groups larger than allowed
    assert phase_groups(replace(p, objective="time"), 10) is None
    pairs = np.where(np.arange(6)[:, None] // 2 == np.arange(6) // 2, 1e9, 0.0) * (1 - np.eye(6))
    ph = (TrafficPhase("tp", pairs, 4.0), p.phases[1])
    three = WiringProblem(phases_traffic(ph), OCSLayout.uniform(6, 5), 800.0, "phases", phases=ph)
    assert phase_groups(three, 10) is None                               # three groups: not this split
    inside = (TrafficPhase("tp", p.phases[0].bytes_, 4.0), TrafficPhase("tp2", p.phases[0].bytes_ / 2, 1.0))
    apart = WiringProblem(phases_traffic(inside), OCSLayout.uniform(6, 5), 800.0, "phases", phases=inside)
    assert phase_groups(apart, 10) is None          # nothing between the groups: c = 0 would be a case too


@pytest.mark.parametrize("key", [(3, 5, 1e9), (3, 4, 5e8), pytest.param((4, 5, 2e8), marks=pytest.mark.slow)])
def test_the_split_proves_the_phases_milps_optimum_and_finds_it_above(key):
    p = phased_pipeline(*key)
    opt = OPTIMA[key]
    pg = phase_groups(p, 10)
    params = SolveParams(backend="highs")
    closed: dict = {}
    b, found, info = phases_case_bound(p, pg, opt * (1 + 1e-3), params, time.perf_counter() + 120, closed)
    assert b is None and found is not None and found.objective <= opt * (1 + 1e-9)     # never proves it away
    assert not wiring_violations(found.artifact) and found.objective == pytest.approx(p.score(found.artifact)[0])
    V = opt * (1 - 1e-4)
    b, found, info = phases_case_bound(p, pg, V, params, time.perf_counter() + 120, closed)
    assert b == V and found is None and info["verdict"] == "bound"
    probed = info["cases_probed"]
    assert all(v == "infeasible" or isinstance(v, float) or "the whole" in v for v in probed.values())


def test_a_range_whose_wiring_is_slower_on_the_whole_is_halved():
    # (3, 5, 3e9): the optimum has nine circuits across, beyond the split's eight; the range 9..15 probed at
    # R(15) finds the tp phase fast enough there, but the hand-off on it is slower, so the range is halved
    key = (3, 5, 3e9)
    p = phased_pipeline(*key)
    pg = phase_groups(p, 10)
    b, found, info = phases_case_bound(p, pg, OPTIMA[key] * (1 - 1e-4), SolveParams(backend="highs"),
                                       time.perf_counter() + 120)
    probed = info["cases_probed"]
    assert "the whole" in probed["('between', 9, 15)"] and probed["('between', 9, 12)"]
    assert probed["('between', 9, 9)"] == "infeasible"
    assert b == pytest.approx(OPTIMA[key] * (1 - 1e-4), rel=1e-12)


def test_a_case_whose_tp_wiring_is_slower_in_whole_gets_the_phases_model():
    # (3, 4, 4e9), eight across: the tp phase alone reaches its cut-off in case (8, (3, 3, 2), (3, 3, 2)) on a
    # wiring whose hand-off is slower than its bytes over the eight circuits; the phases model restricted to
    # the case closes it (its bound on the case's wirings) and finds the optimum above it
    key = (3, 4, 4e9)
    p = phased_pipeline(*key)
    pg = phase_groups(p, 10)
    closed: dict = {}
    params = SolveParams(backend="highs")
    b, found, info = phases_case_bound(p, pg, OPTIMA[key] * (1 + 1e-3), params, time.perf_counter() + 120, closed)
    assert found is not None and found.objective == pytest.approx(OPTIMA[key], rel=1e-9)
    assert not wiring_violations(found.artifact)
    b, found, info = phases_case_bound(p, pg, OPTIMA[key] * (1 - 1e-4), params, time.perf_counter() + 120, closed)
    assert b == pytest.approx(OPTIMA[key] * (1 - 1e-4), rel=1e-12)
    assert "phases model: bound" in info["cases_probed"]["(8, (3, 3, 2), (3, 3, 2))"]


def test_an_unsettled_case_gives_no_bound():
    p = phased_pipeline(3, 5, 1e9)
    pg = phase_groups(p, 10)
    b, found, info = phases_case_bound(p, pg, OPTIMA[(3, 5, 1e9)] * (1 - 1e-4), SolveParams(backend="highs"),
                                       time.perf_counter() + 60, prober=lambda case, T, s: ("unknown", None, None))
    assert b is None and found is None and info["verdict"].startswith("not settled")


@pytest.mark.parametrize("solver,key", [("milp", (3, 5, 1e9)), ("cpsat", (3, 4, 5e8)),
                                        pytest.param("cpsat", (3, 5, 1e9), marks=pytest.mark.slow)])
def test_exact_solvers_prove_phases_through_the_split_when_their_model_does_not(monkeypatch, solver, key):
    """With the clock for it, both exact solvers run the split on the phases objective after their model's
    first round, each with its own case probes (the MILP's, `exact.cpsat_case_prober`): here that round is
    made to end unproven (as its clock cuts it short on llama405b-tp8pp2-16), and the split proves the
    optimum the phases MILP proves alone."""
    import solvers.phased as phased_mod
    monkeypatch.setattr(exact, "STAGES_MIN_S", 0.0)
    name = f"solve_{solver}_phases"
    real = getattr(phased_mod, name)

    def unproven(problem, params, per_switch, start=None):
        res = real(problem, params, per_switch, start)
        return replace(res, status=SolveStatus.FEASIBLE, limit=Limit.TIME, bound=0.5 * res.objective)
    monkeypatch.setattr(phased_mod, name, unproven)
    res = wire(phased_pipeline(*key), solver, SolveParams(time_limit_s=60, backend="highs"))
    splits = [r for r in res.extra["rounds"] if r.get("status") == "case split"]
    assert res.status == SolveStatus.OPTIMAL and splits and splits[-1]["verdict"] == "bound"
    assert res.objective == pytest.approx(OPTIMA[key], rel=1e-9)
    assert not wiring_violations(res.artifact)
