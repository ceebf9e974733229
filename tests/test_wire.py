"""One shared suite for every wiring back-end (as PuLP's solver_common): same instances, same assertions."""
import json
import math
import re
import time
from collections import Counter
from dataclasses import replace

import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner

from solvers import BASELINES, SOLVERS, wire
from solvers.bounds import LP_TIME_S, best_bound, moore_levels, relay_count_bound
from solvers.exact import integer_units
from synth.cli import main
from synth.errors import Infeasible, InvalidInput
from synth.model import (Circuit, Limit, OCSLayout, SolveParams, SolveResult, SolveStatus, TrafficMatrix, TrafficPhase,
                          Wiring, phases_traffic)
from synth.problem import WiringProblem
from synth.verify import wiring_violations

from .conftest import write

EXACT = [("milp", "highs"), ("milp", "cbc"), ("cpsat", "auto")]


def ring_demand(n, b=1e9):
    t = np.zeros((n, n))
    for a in range(n):
        t[a, (a + 1) % n] = t[(a + 1) % n, a] = b
    return t


def problem(t, ports, objective="time", **kw):
    return WiringProblem(TrafficMatrix(t), OCSLayout.uniform(t.shape[0], ports), 800.0, objective, **kw)


@pytest.fixture
def no_near_moore(monkeypatch):
    """The search without its near-Moore start, for tests of the paths that start would pre-empt (on 40
    accelerators with 6 ports the placed polarity graph of q = 5 answers as built)."""
    import solvers
    monkeypatch.setattr(solvers, "near_moore", lambda *a, **k: None)


@pytest.mark.parametrize("solver,backend", EXACT)
def test_ring_demand_is_served_by_a_ring(solver, backend):
    res = wire(problem(ring_demand(8), 2), solver, SolveParams(time_limit_s=60, backend=backend))
    assert res.status == SolveStatus.OPTIMAL and res.gap == pytest.approx(0, abs=1e-9)
    assert res.objective == pytest.approx(1e9 / 100e9)
    g = nx.Graph(res.artifact.to_networkx())
    assert nx.is_isomorphic(g, nx.cycle_graph(8))
    assert not wiring_violations(res.artifact)


@pytest.mark.parametrize("objective", ["time", "hops"])
def test_exact_backends_agree(objective):
    t = np.full((6, 6), 2e6)
    np.fill_diagonal(t, 0)
    t[0, 3] = t[3, 0] = 8e6
    p = problem(t, 2, objective)
    results = [wire(p, s, SolveParams(time_limit_s=60, backend=b)) for s, b in EXACT]
    for r in results:
        assert not wiring_violations(r.artifact)
        assert r.bound <= r.objective * (1 + 1e-9)
    assert all(r.status == SolveStatus.OPTIMAL for r in results), [(r.solver, r.status) for r in results]
    objs = [r.objective for r in results]
    assert max(objs) == pytest.approx(min(objs), rel=1e-6), objs


@pytest.mark.parametrize("seed", [30, 31, 32, 33, 34])
def test_cpsat_and_milp_prove_the_same_time_optimum(seed):
    # random 4-6 accelerator instances where integer routing in whole MB units cannot split a demand: CP-SAT's
    # integer-routing optimum is no proof (seed 30: 2e-5 s against the fractional 1.75e-5 s); its metric-
    # inequality probes must prove the MILP's optimum
    rng = np.random.default_rng(seed)
    n, ports = int(rng.integers(4, 7)), int(rng.integers(2, 4))
    t = (rng.integers(0, 3, (n, n)) * 1e6).astype(float)
    np.fill_diagonal(t, 0)
    p = problem(t, ports)
    milp = wire(p, "milp", SolveParams(time_limit_s=30, backend="highs"))
    cp = wire(p, "cpsat", SolveParams(time_limit_s=30))
    assert milp.status == SolveStatus.OPTIMAL and cp.status == SolveStatus.OPTIMAL, cp.extra.get("rounds")
    assert cp.objective == pytest.approx(milp.objective, rel=1e-6)
    assert cp.bound <= milp.objective * (1 + 1e-9) and not wiring_violations(cp.artifact)


@pytest.mark.parametrize("objective", ["time", "hops"])
def test_cpsat_model_on_rounded_units_proves_nothing(objective):
    """Demands with no common unit are rounded up to max / 100: CP-SAT's OPTIMAL on them (integer routing of
    other demands) is no proof and its bound no bound. Before, the time model's first round came back OPTIMAL
    with its bound set to the answer (a pipeline of two groups of 3 on 4 ports: the probes and the case split
    never ran)."""
    from solvers.exact import _solve_cpsat
    t = np.zeros((5, 5))
    for a, b, v in ((0, 1, 1e6), (1, 2, np.pi * 1e6), (2, 3, np.e * 1e6), (3, 4, 1.7e6), (0, 4, 2.3e6), (0, 2, 0.9e6)):
        t[a, b] = t[b, a] = v
    res = _solve_cpsat(problem(t, 2, objective), SolveParams(time_limit_s=10), per_switch=False)
    assert res.extra["units_exact"] is False and res.extra.get("integer_routing_optimal")
    assert res.status == SolveStatus.FEASIBLE and "model_bound" not in res.extra and "model" not in res.extra["bounds"]


@pytest.mark.parametrize("seed", [1, 31, pytest.param(41, marks=pytest.mark.slow)])    # (15 s)
def test_cpsat_and_milp_prove_the_same_hops_optimum(seed):
    """Random 8-10 accelerator instances under hops that HiGHS proves in under a second: CP-SAT's two default
    workers left 0.3-1.1% open at 20 s; one worker with every constraint in its LP proves them in 0.1-4 s on
    an AMD EPYC and 0.5-15 s on a slower Intel Xeon (seed 41, where its solutions descend from 1031 units to
    the optimum's 701 before the bound of 700 moves; hinting the best baseline did not help), so its clock is
    40 s: a proof ends the solve, the clock is only a ceiling."""
    rng = np.random.default_rng(seed)
    n, ports, dens = int(rng.choice([6, 8, 10, 12])), int(rng.choice([2, 3, 4])), float(rng.choice([0.3, 0.6, 1.0]))
    t = rng.integers(1, 10, size=(n, n)) * 1e7 * (rng.random((n, n)) < dens)
    np.fill_diagonal(t, 0)
    p = WiringProblem(TrafficMatrix(t), OCSLayout.uniform(n, ports), 400.0, "hops")
    milp = wire(p, "milp", SolveParams(time_limit_s=20, backend="highs"))
    cp = wire(p, "cpsat", SolveParams(time_limit_s=40))
    assert milp.status == SolveStatus.OPTIMAL and cp.status == SolveStatus.OPTIMAL, (cp.objective, cp.bound)
    assert cp.objective == pytest.approx(milp.objective, rel=1e-6) and not wiring_violations(cp.artifact)


def test_metric_inequalities_are_valid_and_tight():
    # Japanese theorem: for any lengths, B sum_a l_a x_a >= lam sum D dist_l at every routable lam; the
    # routing LP's duals make it tight at the wiring's own lam
    from solvers.benders import MetricCuts
    from solvers.exact import _index
    rng = np.random.default_rng(4)
    t = rng.integers(0, 4, (7, 7)).astype(float) * 1e6
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    ix = _index(p)
    cuts = MetricCuts(p, ix)
    w = wire(p, "expander", SolveParams(seed=1)).artifact
    x = np.array([w.adjacency()[q] for q in ix.pairs], dtype=float)
    theta, lengths = cuts.lp_lengths(x)
    assert theta == pytest.approx(p.score(w)[0], rel=1e-6)
    row, W = cuts.row(lengths)
    assert row @ x >= cuts.rhs(W, (1 - 1e-6) / theta)          # valid at the wiring's own time
    assert row @ x < cuts.rhs(W, (1 + 1e-4) / theta)           # and tight: violated just above it
    for _ in range(20):                                        # any lengths give a valid row
        row, W = cuts.row(rng.random(len(ix.arcs)) ** 4)
        assert row @ x >= cuts.rhs(W, (1 - 1e-9) / theta)
    assert cuts.lp_lengths(np.zeros_like(x))[0] == np.inf      # no circuits: a cut-set instead of the LP


def test_relay_count_rows_keep_every_wiring_that_reaches_t():
    # CP-SAT's probes carry the relay-count rows at the probe's T: the optimal wiring satisfies them at its own
    # time, and nothing satisfies them below the relay-count bound (two 4-groups with a light pipeline)
    from ortools.sat.python import cp_model
    from solvers.benders import relay_count_rows
    from solvers.exact import _index, cpsat_topology
    t = np.zeros((8, 8))
    g = np.arange(8) < 4
    t[g[:, None] == g[None, :]] = 1e6
    np.fill_diagonal(t, 0)
    t[np.arange(4), np.arange(4) + 4] = 1e4
    p = problem(t, 4)
    ix = _index(p)
    best = wire(p, "milp", SolveParams(time_limit_s=60))
    assert best.status == SolveStatus.OPTIMAL

    def status(T, fix):
        m = cp_model.CpModel()
        _, x, _ = cpsat_topology(m, p, ix, False, sym=[])
        relay_count_rows(m, p, ix, x, T)
        if fix:
            adj = best.artifact.adjacency()
            for q in ix.pairs:
                m.Add(x[q] == int(adj[q]))
        s = cp_model.CpSolver()
        s.parameters.max_time_in_seconds = 30
        return s.Solve(m)
    assert status(best.objective * (1 + 1e-9), True) in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    assert status(relay_count_bound(p) * (1 - 1e-6), False) == cp_model.INFEASIBLE
    assert status(relay_count_bound(p) * (1 + 1e-3), False) in (cp_model.OPTIMAL, cp_model.FEASIBLE)


def test_relay_rows_carry_the_convex_envelope_of_each_pairs_table():
    # the hull's edges hold at every point of the table (it is floored, so not always convex itself), and the
    # hull's points are table points
    from solvers.benders import _lower_hull
    rng = np.random.default_rng(3)
    for _ in range(500):
        table = np.sort(rng.integers(0, 30, rng.integers(1, 9)))[::-1]
        hull = _lower_hull(table)
        assert hull[0] == (0, table[0]) and hull[-1] == (len(table) - 1, table[-1])
        assert all(table[k] == t for k, t in hull)
        for (k1, t1), (k2, t2) in zip(hull, hull[1:]):
            assert ((k2 - k1) * table >= (k2 - k1) * t1 + (t2 - t1) * (np.arange(len(table)) - k1)).all()
    assert _lower_hull(np.array([3, 2, 0, 0])) == [(0, 3), (2, 0), (3, 0)]


def test_cpsat_probe_rules_out_many_circuits_between_the_stages():
    # the relay rows' envelope lets CP-SAT's LP see that 9 or more circuits between llama405b-tp8pp2-16's stages
    # leave each TP group too few ports (the MILP sees it from its own rows); with the element constraints
    # alone this probe made no proposal and no verdict in 300 s
    from solvers.benders import MetricCuts, probe
    from solvers.exact import _index, _injection_cuts, _symmetry_rows
    from solvers.stages import two_groups
    from synth.bench import suite_problem
    p = suite_problem({"source": "instances/decode/llama405b-tp8pp2-16.toml", "objective": "time"})
    ix = _index(p)
    verdict, _, stats = probe(p, ix, _injection_cuts(MetricCuts(p, ix)), 0.00279637, time.perf_counter() + 60,
                              SolveParams(), _symmetry_rows(p, ix), False, case=(two_groups(p).groups, ("at least", 9)))
    assert verdict == "infeasible" and stats["proposals"] == 0


def flow_model_status(p, T, x_of=None, allowance=None, monkeypatch=None):
    """CP-SAT on the circuits and the integer-flow rows at T (circuits fixed to `x_of` when given)."""
    from ortools.sat.python import cp_model
    import solvers.benders as benders
    from solvers.exact import _index, cpsat_topology
    ix = _index(p)
    if allowance is not None:
        real = benders.flow_units
        monkeypatch.setattr(benders, "flow_units", lambda *a: (real(*a)[0], allowance))
    m = cp_model.CpModel()
    _, x, _ = cpsat_topology(m, p, ix, False, sym=[])
    benders.flow_rows(m, p, ix, x, T)
    if x_of is not None:
        for q in ix.pairs:
            m.Add(x[q] == int(x_of[q]))
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = 60
    s.parameters.num_workers = 2
    return s.Solve(m)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_integer_flows_keep_every_wiring_at_its_own_time(seed, monkeypatch):
    """CP-SAT's integer-flow rows (`benders.flow_rows`) are a relaxation of fractional routing: a wiring's
    circuits route in them at the wiring's own time (the LP's), thanks to the rounding allowance (without it
    the rounded-up demands do not fit on the saturated circuits); and below the optimum nothing routes."""
    from ortools.sat.python import cp_model
    rng = np.random.default_rng(seed)
    t = rng.integers(0, 5, (6, 6)).astype(float) * 1e6 + rng.random((6, 6)) * 1e5
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    ok = (cp_model.OPTIMAL, cp_model.FEASIBLE)
    best = wire(p, "milp", SolveParams(time_limit_s=60))
    assert best.status == SolveStatus.OPTIMAL
    for w in (best.artifact, wire(p, "expander", SolveParams(seed=seed)).artifact):
        T = p.score(w)[0]
        assert flow_model_status(p, T * (1 + 1e-9), w.adjacency()) in ok
        assert flow_model_status(p, T * (1 - 1e-3), w.adjacency()) == cp_model.INFEASIBLE
    assert flow_model_status(p, best.objective * (1 + 1e-9), best.artifact.adjacency(), 0,
                             monkeypatch) == cp_model.INFEASIBLE
    monkeypatch.undo()
    assert flow_model_status(p, best.objective * (1 - 1e-3)) == cp_model.INFEASIBLE


@pytest.mark.parametrize("solver", ["search", "lp-round"])
def test_an_answer_the_bound_proves_is_optimal_with_no_limit(solver):
    # the ring wiring meets the injection bound: the clock that ended the search cut nothing that mattered
    t = np.load("instances/wiring/ring8.npy")
    res = wire(problem(t, 2), solver, SolveParams(time_limit_s=1))
    assert res.status == SolveStatus.OPTIMAL and res.limit == Limit.NONE and res.artifact.solve["limit"] == "none"


def test_time_limit_with_a_solution_is_feasible_not_optimal():
    rng = np.random.default_rng(0)
    t = rng.integers(0, 5, (12, 12)).astype(float) * 1e6
    np.fill_diagonal(t, 0)
    res = wire(problem(t, 3), "milp", SolveParams(time_limit_s=2, backend="highs"))
    assert res.status == SolveStatus.FEASIBLE and res.limit.value == "time"
    assert res.artifact is not None and res.bound <= res.objective and res.gap > 0
    assert not wiring_violations(res.artifact)


@pytest.mark.parametrize("solver", ["search", "lp-round", *BASELINES])
def test_heuristics_return_valid_wirings_with_bounds(solver):
    rng = np.random.default_rng(1)
    t = rng.random((20, 20)) * 1e6
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    res = wire(p, solver, SolveParams(time_limit_s=3, seed=2))
    w = res.artifact
    assert not wiring_violations(w) and res.bound <= res.objective
    assert res.bound == pytest.approx(best_bound(p)[0])
    assert w.solve["status"] == res.status.value and w.solve["gap"] == pytest.approx(res.gap)
    if solver in ("search", "lp-round"):
        assert res.objective <= wire(p, "expander", SolveParams(seed=2)).objective * (1 + 1e-9)


def test_seeds_make_runs_repeatable():
    t = np.random.default_rng(3).random((30, 30)) * 1e6
    np.fill_diagonal(t, 0)
    p = problem(t, 4)
    a = wire(p, "expander", SolveParams(seed=5)).artifact
    b = wire(p, "expander", SolveParams(seed=5)).artifact
    c = wire(p, "expander", SolveParams(seed=6)).artifact
    assert a == b and a != c


def test_bounds_by_hand():
    assert moore_levels(4, 4, 20).tolist()[:6] == [1, 1, 1, 1, 2, 2]
    t = np.full((8, 8), 1.0)
    np.fill_diagonal(t, 0)
    p = problem(t, 3, "hops")
    # each row: 3 peers at 1 hop, 4 at 2 hops (3 * 2 = 6 >= 4) -> 11 byte-hops, 8 rows
    assert best_bound(p)[0] == pytest.approx(88.0)
    assert integer_units(np.array([[0, 6e6], [4e6, 0]]))[0] == 2e6


def test_relay_count_bound_by_hand():
    D, B = 1e6, 100e9          # 800 Gb/s ports
    # K4 all-to-all on 4 ports: 8 circuits over 6 pairs, so 4 pairs have one circuit and relay D - B T each
    # way: 12 D + 8 (D - B T) <= 2 B T 8  ->  T >= 5 D / (6 B); the LP relaxation only sees injection 3 D / (4 B)
    t = np.full((4, 4), D)
    np.fill_diagonal(t, 0)
    assert relay_count_bound(problem(t, 4)) == pytest.approx(5 * D / (6 * B), rel=1e-8)
    # two such groups with a light pipeline between them: each group keeps at most (16 - 1) // 2 = 7 circuits
    t = np.zeros((8, 8))
    g = np.arange(8) < 4
    t[g[:, None] == g[None, :]] = D
    np.fill_diagonal(t, 0)
    t[np.arange(4), np.arange(4) + 4] = 1e4
    # 7 circuits inside each group: 5 pairs relay both ways; 2 of the 4 pipeline pairs get the last circuits;
    # the second group's accelerators receive 1e4 more than they send, 4e4 of relay capacity nobody can use
    assert relay_count_bound(problem(t, 4)) == pytest.approx((44 * D + 6e4 + 4e4) / (52 * B), rel=1e-8)
    # direct: every pair needs ceil(D / (B T)) circuits; 3 peers on 4 ports -> T >= D / B
    assert relay_count_bound(problem(t, 4, policy="direct")) == pytest.approx(D / B, rel=1e-8)
    assert relay_count_bound(problem(t, 4, "hops")) == 0.0


def test_node_excess_sharpens_moore_and_stays_below_the_optimum():
    # a relay through v takes one of v's circuits in and one out, beside v's own bytes: v relays at most
    # ports B T - max(out_v, in_v), so the Moore bound's byte-hops also need sum_v max(0, in_v - out_v)
    D, B = 1e6, 100e9
    t = np.zeros((6, 6))
    t[1:, 0] = D                     # everyone sends D to accelerator 0, which sends D / 2 back to each
    t[0, 1:] = D / 2
    p = problem(t, 3)
    from solvers.bounds import moore_bound, moore_hop_bytes, node_excess
    hb = moore_hop_bytes(p)
    assert hb == pytest.approx(D * (3 * 1 + 2 * 2) + 5 * D / 2)      # by columns: column 0 has 3 at one hop,
    #                                                                  2 at two; the others D / 2 at one hop
    assert node_excess(t) == pytest.approx(5 * D - 5 * D / 2)
    # level by level it is more: accelerator 0 has 3 neighbours, so two of its five partners, 1.5 D each way
    # and back, are two hops away whichever side is counted: 7.5 D + 2 x 1.5 D byte-hops
    from solvers.bounds import level_hop_bytes
    assert level_hop_bytes(p) == pytest.approx(10.5 * D) and level_hop_bytes(p) > hb
    assert moore_bound(p) == pytest.approx((10.5 * D + 2.5 * D) / (18 * B))
    for seed in (26, 32):            # random instances where it beats every other bound
        rng = np.random.default_rng(seed)
        n, ports = int(rng.integers(4, 8)), int(rng.integers(2, 4))
        t = (rng.random((n, n)) < 0.5) * rng.integers(1, 9, (n, n)) * 1e6
        t[:, 0] *= 3
        np.fill_diagonal(t, 0)
        p = problem(t, ports)
        res = wire(p, "milp", SolveParams(time_limit_s=30, backend="highs"))
        assert res.status == SolveStatus.OPTIMAL, seed
        named = res.extra["bounds"]
        assert max(named["moore"], named["relay_count"]) > max(named["injection"], named["lp_relaxation"]), seed
        assert res.bound <= res.objective * (1 + 1e-9), seed


def _hot_two(seed: int, sizes=(5, 8)):
    rng = np.random.default_rng(seed)
    n, ports = int(rng.integers(*sizes)), int(rng.integers(2, 4))
    t = (rng.random((n, n)) < 0.7) * rng.integers(1, 5, (n, n)) * 1e6
    t[:, :2] *= 4                    # two hot accelerators: every row wants them next to it
    np.fill_diagonal(t, 0)
    return t, ports


@pytest.mark.parametrize("seed", [0, 1, 4, 5])
def test_level_bound_never_exceeds_a_proven_optimum(seed):
    """The level-by-level byte-hops (rows or columns, whichever is tighter at each level, and the heaviest
    adjacency graph at one hop) stay below the exact MILP's optimum, for hops and for time (with node
    excess), on skewed demand where they are above the classic Moore count."""
    from solvers.bounds import level_hop_bytes, moore_bound, moore_hop_bytes
    t, ports = _hot_two(seed)
    hops = wire(problem(t, ports, "hops"), "milp", SolveParams(time_limit_s=60))
    assert hops.status == SolveStatus.OPTIMAL
    p = problem(t, ports)
    assert moore_hop_bytes(p) < level_hop_bytes(p) <= hops.objective * (1 + 1e-9)
    timed = wire(p, "milp", SolveParams(time_limit_s=60))
    assert timed.status == SolveStatus.OPTIMAL and moore_bound(p) <= timed.objective * (1 + 1e-9)


def test_level_bound_caps_how_many_are_near_a_hub():
    """Within k hops is a symmetric relation and accelerator v has at most its Moore count M_k(v) others
    within k hops, so the bytes within k hops are at most the heaviest simple graph with those degrees (a
    b-matching), at every level, not only at one hop. A hub talking to 8 others on 2 ports has 2k of them
    within k hops, as a path through it reaches: the level count is then the optimum, where the rows' count
    (each spoke has the hub first) and the one-hop b-matching alone give 34 D."""
    from solvers.bounds import level_hop_bytes, moore_bound, moore_hop_bytes
    D = 1e6
    t = np.zeros((9, 9))
    t[0, 1:] = t[1:, 0] = D
    hops = wire(problem(t, 2, "hops"), "milp", SolveParams(time_limit_s=60))
    assert hops.status == SolveStatus.OPTIMAL and hops.objective == pytest.approx(40 * D)
    assert level_hop_bytes(problem(t, 2, "hops")) == pytest.approx(40 * D)
    for seed in (30, 34, 38):        # random skewed instances where levels >= 2 are capped: below the optimum
        rng = np.random.default_rng(seed)
        n = int(rng.integers(6, 10))
        t = {0: lambda: _hot_two(seed, (6, 10))[0],
             1: lambda: (rng.random((n, n)) < 0.6) * rng.integers(1, 5, (n, n)) * 1e6
             * np.where(np.isin(np.arange(n), rng.choice(n, 2, replace=False)), 5.0, 1.0)[:, None],
             2: lambda: rng.integers(1, 3, (n, n)) * 1e6 + 2e7 * (np.abs(np.subtract.outer(np.arange(n), np.arange(n))) == 1)
             * (np.minimum.outer(np.arange(n), np.arange(n)) % 2 == 0)}[seed % 3]()
        np.fill_diagonal(t, 0)
        p = problem(t, 2, "hops")
        res = wire(p, "milp", SolveParams(time_limit_s=60))
        assert res.status == SolveStatus.OPTIMAL, seed
        assert moore_hop_bytes(p) < level_hop_bytes(p) <= res.objective * (1 + 1e-9), seed
        timed = problem(t, 2)
        res = wire(timed, "milp", SolveParams(time_limit_s=60))
        assert res.status == SolveStatus.OPTIMAL and moore_bound(timed) <= res.objective * (1 + 1e-9), seed


@pytest.mark.slow
def test_level_bound_below_the_hops_optimum_on_sixty_instances():
    # BENCHMARKS: above the classic count on all 60, equal to the MILP's optimum on 12, never above it
    from solvers.bounds import level_hop_bytes
    for seed in range(60):
        t, ports = _hot_two(seed, (5, 9))
        p = problem(t, ports, "hops")
        res = wire(p, "milp", SolveParams(time_limit_s=180))   # seed 20: 52 s alone, over 60 s beside other work
        assert res.status == SolveStatus.OPTIMAL and level_hop_bytes(p) <= res.objective * (1 + 1e-9), seed


def _idle_beside(seed: int):
    """Demand among all but the last 1-3 accelerators (uniform, or 4-6 MB per pair), those idle or nearly."""
    rng = np.random.default_rng(seed)
    n, ports, idle = int(rng.integers(5, 9)), int(rng.integers(2, 5)), int(rng.integers(1, 4))
    t = rng.integers(4, 7, (n, n)) * 1e6 if seed % 3 else np.full((n, n), 1e6)
    t[n - idle:, :] *= [0, 0.01][seed % 2]
    t[:, n - idle:] *= [0, 0.01][seed % 2]
    np.fill_diagonal(t, 0)
    return t, ports


@pytest.mark.parametrize("seed", [102, 126, "k4"])
def test_relay_split_bound_never_exceeds_a_proven_optimum(seed):
    """Where a port spent on a relay is a port not spent on a direct circuit, the split bound is above every
    other bound and still below the MILP's optimum (BENCHMARKS: 60 random instances with idle or light
    accelerators, never above; above the other bounds on 4; the slow test runs them)."""
    from solvers.bounds import relay_split_bound
    if seed == "k4":                          # a K4 demand, two idle accelerators, 2 ports: 2e-5 s is optimal
        t, ports = np.where(np.eye(6), 0, 1e6) * (np.arange(6) < 4)[:, None] * (np.arange(6) < 4)[None, :], 2
    else:
        t, ports = _idle_beside(seed)
    p = problem(t, ports)
    res = wire(p, "milp", SolveParams(time_limit_s=60))
    others = max(v for k, v in res.extra["bounds"].items() if k not in ("relay_split", "model"))
    assert res.status == SolveStatus.OPTIMAL and others < relay_split_bound(p) <= res.objective * (1 + 1e-9)


RECEIVERS_HOT = {   # MB; the accelerators that receive more than they send cannot lend it all to relays
    "two idle": ([[0, 1, 3, 3, 0, 0], [1, 0, 6, 1, 0, 0], [4, 4, 0, 2, 0, 0], [6, 6, 12, 0, 0, 0],
                  [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], 3, 8e-05, 0.7),
    "none idle": ([[0, 12, 1, 4, 2, 12, 12, 12], [8, 0, 2, 6, 4, 12, 8, 8], [4, 12, 0, 4, 6, 12, 12, 12],
                   [12, 12, 3, 0, 2, 8, 12, 4], [12, 12, 2, 2, 0, 8, 4, 12], [8, 12, 3, 6, 2, 0, 12, 12],
                   [4, 4, 2, 6, 4, 12, 0, 8], [8, 4, 2, 6, 6, 8, 8, 0]], 3, 3.0166666666666666e-04, 0.93),
}


@pytest.mark.parametrize("case", sorted(RECEIVERS_HOT))
def test_relay_split_bound_counts_the_node_excess(case):
    """Counted at the accelerators of A, the split sees the node excess: the bound rises from 0.64 / 0.82 of
    the optimum (the A-A circuits' count alone) to 0.76 / 0.95 and stays below it. The optima are the
    MILP's on the code before this count (BENCHMARKS: 60 such instances, the count sharper on 33, never
    above the optimum), and the MILP still proves them."""
    from solvers.bounds import relay_split_bound
    t, ports, optimum, least = RECEIVERS_HOT[case]
    p = problem(np.array(t, dtype=np.float64) * 1e6, ports)
    assert least * optimum < relay_split_bound(p) <= optimum * (1 + 1e-9)
    res = wire(p, "milp", SolveParams(time_limit_s=60))
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(optimum, rel=1e-6)


@pytest.mark.slow
def test_relay_split_bound_below_the_optimum_on_sixty_instances():
    from solvers.bounds import relay_split_bound
    for seed in [*range(30), *range(100, 130)]:
        t, ports = _idle_beside(seed) if seed >= 100 else _idle_random(seed)
        if t.max() == 0:
            continue
        p = problem(t, ports)
        res = wire(p, "milp", SolveParams(time_limit_s=120))
        assert res.status == SolveStatus.OPTIMAL and relay_split_bound(p) <= res.objective * (1 + 1e-9), seed


def _idle_random(seed: int):
    rng = np.random.default_rng(seed)
    n, ports, idle = int(rng.integers(5, 9)), int(rng.integers(2, 5)), int(rng.integers(1, 4))
    t = (rng.random((n, n)) < 0.7) * rng.integers(1, 9, (n, n)) * 1e6
    t[n - idle:, :] *= [0, 0.01][seed % 2]
    t[:, n - idle:] *= [0, 0.01][seed % 2]
    np.fill_diagonal(t, 0)
    return t, ports


def test_relay_count_bound_never_exceeds_a_proven_optimum():
    checked = 0
    seeds = (1, 8, 10, 12, 25, 36, 38)       # instances where the bound beats the others (seed 5 too: 13 s to prove)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        n, ports = int(rng.integers(4, 9)), int(rng.integers(2, 6))
        t = {0: lambda: (rng.integers(0, 6, (n, n)) * 1e6).astype(float),
             1: lambda: np.where((np.arange(n) < n // 2)[:, None] == (np.arange(n) < n // 2)[None, :], 5e6, 0.0)
             + (rng.random((n, n)) < 0.2) * 1e5,
             2: lambda: np.full((n, n), 3e6) * rng.integers(1, 3, (n, n)),
             3: lambda: (rng.random((n, n)) < 0.5) * rng.integers(1, 9, (n, n)) * 1e6}[seed % 4]()
        np.fill_diagonal(t, 0)
        p = problem(t, ports)
        res = wire(p, "milp", SolveParams(time_limit_s=90, backend="highs"))
        assert res.status == SolveStatus.OPTIMAL, seed
        named = res.extra["bounds"]
        assert relay_count_bound(p) <= res.objective * (1 + 1e-9), seed
        checked += relay_count_bound(p) > max(named["injection"], named["moore"], named["lp_relaxation"])
    assert checked == len(seeds)


def test_problem_bad_inputs():
    t = ring_demand(6)
    with pytest.raises(Infeasible, match=r"direct-only wiring cannot serve rows 0 \(5 peers, 2 ports\)"):
        WiringProblem(TrafficMatrix(np.where(np.eye(6), 0, 1.0)), OCSLayout.uniform(6, 2), 800.0, policy="direct")
    with pytest.raises(Infeasible, match="cannot serve accelerators 0 and 2: .* no common switch"):
        WiringProblem(TrafficMatrix(np.where(np.eye(3), 0, 1.0)), OCSLayout(np.array([[0, 0], [0, 1], [1, 1]]), (6, 6)),
                      800.0, policy="direct")
    with pytest.raises(InvalidInput, match="no switch can host a circuit"):
        WiringProblem(TrafficMatrix(t), OCSLayout(np.arange(12).reshape(6, 2), (2,) * 12), 800.0)
    with pytest.raises(Infeasible, match="fixed circuits are infeasible.*attached to switch 0, not 1"):
        WiringProblem(TrafficMatrix(t), OCSLayout.uniform(6, 2), 800.0, fixed_circuits=(Circuit(1, 0, 0, 1, 1),))
    with pytest.raises(InvalidInput, match="port budget is zero"):
        WiringProblem(TrafficMatrix(t), OCSLayout(np.full((6, 1), -1), (6,)), 800.0)


def test_problem_refuses_demand_no_wiring_connects():
    """Demand no wiring can connect is refused up front (the MILP used to answer FEASIBLE with an infinite
    objective and `wire` wrote it; lp-round overfilled a switch and stopped on an internal error)."""
    a2a = np.where(np.eye(6), 0, 1.0)
    # one port each: the wiring is a matching, no tree spans six (10 port ends needed, 6 there)
    with pytest.raises(Infeasible, match="connects the 6 accelerators .* needs 10 port ends .* they have 6"):
        WiringProblem(TrafficMatrix(a2a), OCSLayout.uniform(6, 1), 800.0)
    # ... but a relay with spare ports can make the tree: a star through accelerator 5 (five ports)
    sop = np.array([[0, -1, -1, -1, -1]] * 5 + [[0] * 5])
    pairs = np.zeros((6, 6))
    pairs[0, 1:5] = 1.0
    WiringProblem(TrafficMatrix(pairs), OCSLayout(sop, (12,)), 800.0)
    with pytest.raises(Infeasible, match="needs 8 port ends among them .* they have 7"):    # four: one short
        WiringProblem(TrafficMatrix(pairs), OCSLayout(np.where(np.arange(5) < 4, sop, -1), (12,)), 800.0)
    # an accelerator with demand but no port on an OCS
    sop = np.array([[0, 1]] * 5 + [[-1, -1]])
    with pytest.raises(Infeasible, match="accelerator 5 has demand but no OCS port"):
        WiringProblem(TrafficMatrix(a2a), OCSLayout(sop, (12, 12)), 800.0)
    # radix: two switches of radix 2 take two circuits, four accelerators need three
    with pytest.raises(Infeasible, match="need 3 circuits, the switches take 2"):
        WiringProblem(TrafficMatrix(np.where(np.eye(4), 0, 1.0)), OCSLayout.uniform(4, 2, 2), 800.0)
    # two islands of switches: 0 and 1 only on switch 0, 2 and 3 only on switch 1
    sop = np.array([[0, 0], [0, 0], [1, 1], [1, 1]])
    with pytest.raises(Infeasible, match="accelerators 0 and 2 exchange bytes, but no chain of shared switches"):
        WiringProblem(TrafficMatrix(np.where(np.eye(4), 0, 1.0)), OCSLayout(sop, (4, 4)), 800.0)
    # demand inside each island alone is fine
    WiringProblem(TrafficMatrix(np.kron(np.eye(2), 1 - np.eye(2))), OCSLayout(sop, (4, 4)), 800.0)


@pytest.mark.parametrize("solver", ["milp", "lp-round", "search", "expander", "topoopt", "greedy"])
def test_switches_short_of_radix_still_get_a_connected_wiring(solver):
    """Five accelerators with two ports on two switches of radix 4: four circuits in all, exactly a spanning
    path. lp-round filled spare ports past the radix (an invalid wiring, an internal error), and where the
    spent radix left an accelerator without a circuit no 2-swap could reach it: `connect` now re-points a
    circuit on a cycle to the stranded accelerator's free port."""
    p = WiringProblem(TrafficMatrix(np.where(np.eye(5), 0, 1e6)), OCSLayout.uniform(5, 2, 4), 100.0)
    r = wire(p, solver, SolveParams(time_limit_s=5, max_moves=200))
    assert not wiring_violations(r.artifact) and len(r.artifact.circuits) == 4
    assert r.objective == pytest.approx(4.8e-10 * 1e6, rel=1e-6)    # every spanning path: the MILP's optimum


@pytest.mark.parametrize("sop,radix", [
    ([[0, 1, -1], [0, 1, -1], [0, 1, 2], [0, 1, 2], [0, 1, 2], [0, 1, 2]], (12, 12, 12)),   # ports off every OCS
    ([[0, 0], [0, 1], [1, 1], [1, 1]], (8, 8)),                                           # 0, 2: no common switch
    ([[-1, 0, 2], [-1, 2, -1], [0, -1, -1], [2, 1, 1], [1, 3, -1], [1, -1, -1], [1, 2, 1]], (4, 6, 6, 16)),  # both
])
@pytest.mark.parametrize("solver", ["topoopt", "search"])
def test_topoopt_keeps_to_the_ports_each_accelerator_has(sop, radix, solver):
    """TopoOpt-style gave every accelerator the layout's port count and paired accelerators on no common
    switch: on these layouts it raised or came out disconnected (and the search, which builds it as a start,
    raised with it)."""
    n = len(sop)
    p = WiringProblem(TrafficMatrix(np.where(np.eye(n), 0, 1e6)), OCSLayout(np.array(sop), radix), 100.0)
    r = wire(p, solver, SolveParams(time_limit_s=5, max_moves=200))
    assert not wiring_violations(r.artifact) and np.isfinite(r.objective)


def test_connect_repoints_a_cycle_circuit_to_a_stranded_accelerator():
    """Two switches of radix 2, both spent on a doubled circuit 1-2: accelerators 0 and 3 hold no circuit, so
    no 2-swap reaches them; re-pointing one of the parallel circuits to 0's free port on its switch joins 0."""
    from scipy.sparse.csgraph import connected_components

    from solvers.baselines import connect
    w = Wiring(4, 2, (Circuit(0, 1, 0, 2, 0), Circuit(1, 1, 1, 2, 1)), OCSLayout.uniform(4, 2, 2))
    joined = connect(w)
    assert connected_components(w.adjacency())[0] == 3 and connected_components(joined.adjacency())[0] == 2
    assert not wiring_violations(joined) and len(joined.circuits) == 2
    assert joined.adjacency()[1, 2] == 1 and joined.adjacency()[0].sum() == 1


def test_fixed_circuits_are_kept():
    fixed = (Circuit(0, 0, 0, 3, 0),)
    res = wire(problem(ring_demand(6), 2, fixed_circuits=fixed), "milp", SolveParams(time_limit_s=60))
    assert fixed[0] in res.artifact.circuits and not wiring_violations(res.artifact)


@pytest.mark.parametrize("solver", [s for s in SOLVERS if s != "auto"])
def test_every_solver_keeps_fixed_circuits_port_for_port(solver):
    """Two ports of accelerator 1 on switch 1: the exact models held the fixed pair but put it on port 0 (they
    number ports their own way), and every heuristic and baseline dropped the fixed circuit altogether (the
    CLI refused --fixed with them). Now the exact answers are renumbered (same circuits between each pair:
    same objective), the baselines and the search's starts are built on the ports the fixed circuits leave,
    and the search never moves them."""
    sop = np.array([[0, 0, 1, -1], [1, 0, 1, 1], [1, -1, 0, 0]])
    t = np.zeros((3, 3))
    t[0, 1] = t[1, 0] = 1e6
    fixed = (Circuit(1, 1, 2, 2, 0),)
    p = WiringProblem(TrafficMatrix(t), OCSLayout(sop, (5, 3)), 100.0, fixed_circuits=fixed)
    res = wire(p, solver, SolveParams(time_limit_s=4, max_moves=200, seed=1))
    assert fixed[0] in res.artifact.circuits and not wiring_violations(res.artifact)
    if solver in ("torus", "expander"):    # demand-blind: a valid time, not necessarily the best
        assert 4e-5 * (1 - 1e-9) <= res.objective < float("inf")
    else:                                  # 0-1 on two circuits (switch 0 holds two of 0's ports)
        assert res.objective == pytest.approx(4e-5)


@pytest.mark.parametrize("solver", ["search", "lp-round", "expander", "topoopt", "greedy", "torus"])
def test_fixed_circuits_on_a_larger_instance(solver):
    """12 accelerators, 3 ports, an all-to-all; two fixed circuits that are not what the search would build
    (a pair, and a second circuit on it): kept exactly, the rest a connected, verified wiring."""
    fixed = (Circuit(0, 0, 0, 7, 0), Circuit(2, 0, 2, 7, 2))
    p = problem(np.where(np.eye(12), 0, 1e6), 3, fixed_circuits=fixed)
    res = wire(p, solver, SolveParams(time_limit_s=4, max_moves=300, seed=2))
    assert set(fixed) <= set(res.artifact.circuits) and not wiring_violations(res.artifact)
    assert np.isfinite(res.objective) and res.objective >= res.bound > 0


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_exact_hops_answer_is_never_worse_than_the_baselines(solver):
    """On the hops objective the exact models ran their plain model on the whole clock and answered with it:
    on 20 accelerators with random demand, 4 ports, 15 s, milp 2.33e8 and cpsat 2.23e8 byte-hops against
    greedy's 1.94e8 and the search's 1.81e8. Now they start from the search above 16 accelerators and keep
    the better of their answer and the baselines (with their own bound)."""
    rng = np.random.default_rng(0)
    t = rng.random((20, 20)) * 1e6 * (rng.random((20, 20)) < 0.5)
    np.fill_diagonal(t, 0)
    p = problem(t, 4, "hops")
    base = min(wire(p, b, SolveParams(seed=1)).objective for b in ("greedy", "topoopt"))
    res = wire(p, solver, SolveParams(time_limit_s=6, seed=1))
    assert res.objective <= base and res.bound <= res.objective and not wiring_violations(res.artifact)


def test_impose_renumbers_or_swaps():
    """`impose`: a circuit of the fixed pair on the fixed switch takes the fixed ports (the adjacency stays);
    without one, the circuits on the fixed ports are 2-swapped into it, and `connect` never moves it after."""
    from solvers.baselines import impose
    lay = OCSLayout(np.array([[0, 0], [0, 0], [0, 0], [0, 0]]), (8,))
    w = Wiring(4, 2, (Circuit(0, 0, 0, 1, 1), Circuit(0, 0, 1, 1, 0), Circuit(0, 2, 0, 3, 0), Circuit(0, 2, 1, 3, 1)), lay)
    renumbered = impose(w, (Circuit(0, 0, 0, 1, 0),))
    assert Circuit(0, 0, 0, 1, 0) in renumbered.circuits and np.array_equal(renumbered.adjacency(), w.adjacency())
    swapped = impose(w, (Circuit(0, 0, 0, 2, 0),))
    assert Circuit(0, 0, 0, 2, 0) in swapped.circuits and not wiring_violations(swapped)
    assert swapped.degree().tolist() == w.degree().tolist()


def test_direct_policy_keeps_a_fixed_circuit_off_the_demand():
    """Under the direct policy the exact models only had variables for pairs with demand, so a fixed circuit
    between two accelerators that exchange nothing vanished from their answers (which then missed a demand
    pair: objective inf)."""
    sop = np.array([[0, 0, 0, 0], [-1, -1, 0, 0], [0, 0, -1, 0], [-1, 0, 0, -1], [0, 0, -1, 0]])
    t = np.zeros((5, 5))
    t[0, 1] = t[1, 0] = t[2, 3] = t[3, 2] = 1e6
    fixed = (Circuit(0, 0, 1, 3, 1), Circuit(0, 1, 2, 4, 3))
    p = WiringProblem(TrafficMatrix(t), OCSLayout(sop, (15,)), 100.0, policy="direct", fixed_circuits=fixed)
    for solver in ("milp", "cpsat", "search", "lp-round", "greedy"):
        res = wire(p, solver, SolveParams(time_limit_s=4, max_moves=200))
        assert set(fixed) <= set(res.artifact.circuits), solver
        assert res.objective == pytest.approx(8e-5), solver


def test_direct_policy_counts_circuits_and_hops():
    """Direct-only demand needs a circuit per pair: more pairs than the switches take is refused up front;
    and the hops objective under the direct policy is inf for a wiring with a demand pair on no circuit
    (it was scored by shortest paths: a search answer claimed 4e6 byte-hops, relaying a pair)."""
    t = np.roll(np.eye(4), 1, axis=1) * 1e6
    with pytest.raises(Infeasible, match="needs 4 circuits .* the switches take 2"):
        WiringProblem(TrafficMatrix(t), OCSLayout.uniform(4, 2, 3), 100.0, policy="direct")
    t3 = np.roll(np.eye(3), 1, axis=1) * 1e6
    p = WiringProblem(TrafficMatrix(t3), OCSLayout.uniform(3, 3), 100.0, objective="hops", policy="direct")
    path = Wiring(3, 3, (Circuit(0, 0, 0, 1, 0), Circuit(1, 1, 1, 2, 1)), p.layout)
    ring = Wiring(3, 2, (Circuit(0, 0, 0, 1, 0), Circuit(1, 1, 1, 2, 1), Circuit(0, 2, 0, 0, 1)), OCSLayout(
        np.array([[0, 0], [0, 1], [0, 1]]), (8, 8)))
    assert p.score(path)[0] == float("inf")
    p_ring = WiringProblem(TrafficMatrix(t3), ring.layout, 100.0, objective="hops", policy="direct")
    assert p_ring.score(ring)[0] == pytest.approx(3e6)


def test_direct_cover_serves_where_greedy_strands_a_pair():
    """Direct policy on a scattered layout (8 accelerators, 4 ports over 8 switches, a stride-6 ring of
    demand): greedy places first circuits one at a time and strands a pair whose common switches it filled;
    the search and lp-round started from it (or the demand-blind baselines) and answered inf. The cover
    (every pair's circuit by CP-SAT assignment, the rest greedy) starts them now: the MILP's optimum."""
    sop = np.array([[1, 3, 4, 4], [4, 6, 7, 3], [7, 1, 4, 2], [5, 6, 1, 3], [6, 7, 6, 5], [7, 4, 1, 5],
                    [3, 0, 5, 7], [4, 0, 0, 1]])
    t = np.zeros((8, 8))
    t[np.arange(8), (np.arange(8) + 6) % 8] = np.array([2, 4, 1, 2, 1, 3, 1, 1]) * 1e6
    p = WiringProblem(TrafficMatrix(t), OCSLayout(sop, (7, 7, 8, 5, 4, 8, 5, 6)), 100.0, objective="hops",
                      policy="direct")
    assert wire(p, "greedy").objective == float("inf")
    best = wire(p, "milp", SolveParams(time_limit_s=10))
    assert best.status == SolveStatus.OPTIMAL and best.objective == pytest.approx(1.5e7)
    for solver in ("search", "lp-round"):
        res = wire(p, solver, SolveParams(time_limit_s=2, seed=3))
        assert res.objective == pytest.approx(1.5e7), solver
        assert not wiring_violations(res.artifact)
    assert wire(p, "search", SolveParams(time_limit_s=2, seed=3)).extra["start"] == "direct cover"


def test_direct_policy_proven_impossible_by_assignment():
    """Accelerator 0 talks to 1, 2 and 3, which reach only switch 1, where 0 has one port: every count the
    problem checks up front passes (3 peers on 3 ports, a common switch for each pair, 4 circuits the switches
    take), but no wiring gives each pair a circuit. Every solver but the baselines says so: INFEASIBLE, with
    no wiring (the search answered an inf wiring, FEASIBLE)."""
    sop = np.array([[0, 0, 1], [1, -1, -1], [1, -1, -1], [1, -1, -1], [0, 0, -1]])
    t = np.zeros((5, 5))
    t[0, 1:4] = 1e6
    p = WiringProblem(TrafficMatrix(t), OCSLayout(sop, (4, 4)), 100.0, policy="direct")
    for solver in ("milp", "cpsat", "search", "lp-round", "auto"):
        res = wire(p, solver, SolveParams(time_limit_s=2))
        assert res.status == SolveStatus.INFEASIBLE and res.artifact is None, solver
        assert "no direct-only wiring exists" in res.message


def test_connect_threads_a_stranded_accelerator_into_a_bridge():
    """Five accelerators, an all-to-all; accelerator 3's two ports are both on switch 1, whose only other
    ports (one each of 0 and 1) greedy spent on 0-1, a bridge: no 2-swap or re-pointing reaches 3. `connect`
    now threads 3 into that circuit (0-3, 3-1; the switch has room), the MILP's optimum."""
    sop = np.array([[2, 1], [-1, 1], [0, 2], [1, 1], [0, 0]])
    p = WiringProblem(TrafficMatrix(np.where(np.eye(5), 0, 1e6)), OCSLayout(sop, (8, 10, 13, 6)), 100.0)
    res = wire(p, "greedy", SolveParams(time_limit_s=4))
    assert res.objective == pytest.approx(4.8e-4) and not wiring_violations(res.artifact)


def run(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_cli_gap_sets_what_counts_as_optimal(tmp_path):
    """`--gap` is the tolerance behind OPTIMAL, and the wiring file says which one it was: greedy's hotspot6
    wiring (30% above its bound) is FEASIBLE at the default and OPTIMAL at 0.5; CP-SAT on llama405b-tp8pp2-16
    stops, proven, as soon as it is within 5% (at the default its 30 s end FEASIBLE near 1%: fails if the
    option did not reach the solvers)."""
    out = tmp_path / "w.json"
    hw = ("--ports", "3", "--port-bandwidth-gbps", "100", "--time-limit", "20", "--json")
    seen = {}
    for gap in (None, "0.5"):
        code, stdout, err = run("wire", "instances/wiring/hotspot6.npy", "-o", str(out), "--solver", "greedy", *hw,
                                *(("--gap", gap) if gap else ()))
        assert code == 0, err
        block = json.loads(stdout)
        assert json.loads(out.read_text())["solve"]["rel_gap"] == block["rel_gap"] == float(gap or 1e-6)
        seen[gap] = (block["status"], block["gap"])
    assert seen[None][0] == "FEASIBLE" and seen["0.5"] == ("OPTIMAL", seen[None][1]) and 0.2 < seen[None][1] < 0.5
    code, stdout, err = run("wire", "instances/decode/llama405b-tp8pp2-16.toml", "-o", str(out), "--solver", "cpsat",
                            "--time-limit", "30", "--json", "--gap", "0.05")
    block = json.loads(stdout)
    assert code == 0 and block["status"] == "OPTIMAL" and block["limit"] == "none" and 0 < block["gap"] <= 0.05, block
    from synth.formats import load_wiring
    assert not wiring_violations(load_wiring(str(out)))


def test_cli_direct_policy_proven_impossible(tmp_path):
    """The Petersen graph as demand on 3 ports under the direct policy passes every up-front count (3 peers,
    15 pairs, 15 circuits the switches hold) but needs 4 matchings; the CLI says so in one line, exit 2,
    and writes nothing."""
    m, out = str(tmp_path / "petersen.npy"), tmp_path / "w.json"
    np.save(m, nx.to_numpy_array(nx.petersen_graph()) * 1e6)
    code, _, err = run("wire", m, "--ports", "3", "--port-bandwidth-gbps", "100", "--policy", "direct",
                       "--solver", "search", "--time-limit", "10", "-o", str(out))
    assert code == 2 and "--policy: search found no wiring (INFEASIBLE: no direct-only wiring exists" in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_cli_wire_matrix_and_instance(tmp_path):
    m = str(tmp_path / "ring.npy")
    np.save(m, ring_demand(8))
    out = str(tmp_path / "w.json")
    code, stdout, _ = run("wire", m, "--ports", "2", "--port-bandwidth-gbps", "800", "-o", out, "--json",
                          "--solver", "milp", "--xconnect", str(tmp_path))
    block = json.loads(stdout)
    assert code == 0 and block["status"] == "OPTIMAL" and block["gap"] == 0
    assert {"status", "objective", "bound", "gap", "wall_s", "solver", "seed"} <= set(block)
    assert run("verify", out)[0] == 0
    assert (tmp_path / "switch-000.csv").exists() and (tmp_path / "switch-001.csv").exists()
    doc = json.loads(open(out).read())
    assert doc["solve"]["status"] == "OPTIMAL" and doc["instance"]["ports"] == 2
    out2 = str(tmp_path / "w2.json")
    code, stdout, _ = run("wire", "instances/decode/llama405b-tp8pp2-16.toml", "-o", out2, "--json",
                          "--time-limit", "4", "--solver", "search")
    assert code == 0 and json.loads(stdout)["objective"] > 0
    assert run("verify", out2, "--instance", "instances/decode/llama405b-tp8pp2-16.toml")[0] == 0


def test_cli_switch_radix_below_the_accelerators_splits_the_planes(tmp_path):
    """`--switch-radix R` with more accelerators than R: each port's plane on ceil(N / R) switches of R ports
    (before, every plane was one switch with N fibres, which no R-port OCS takes). The wiring passes verify,
    each cross-connect table stays within R ports, and the instance check refuses it for one-switch planes."""
    m = str(tmp_path / "a2a.npy")
    np.save(m, np.where(np.eye(24), 0, 1e6))
    out, xc = str(tmp_path / "w.json"), tmp_path / "xc"
    xc.mkdir()
    code, stdout, err = run("wire", m, "--ports", "3", "--port-bandwidth-gbps", "100", "--switch-radix", "8",
                            "-o", out, "--json", "--solver", "search", "--max-moves", "200", "--xconnect", str(xc))
    assert code == 0, err
    doc = json.loads(open(out).read())
    assert doc["layout"]["kind"] == "explicit" and doc["layout"]["switch_radix"] == [8] * 9
    assert run("verify", out)[0] == 0
    code, stdout, err = run("wire", m, "--ports", "3", "--port-bandwidth-gbps", "100", "--switch-radix", "8",
                            "-o", str(tmp_path / "b.json"), "--solver", "greedy", "--baselines", "--time-limit", "5")
    lines = {ln.split()[1]: ln for ln in stdout.splitlines() if ln.startswith("  baseline ")}
    assert code == 0 and set(lines) == {"expander", "torus", "topoopt"}, (stdout, err)
    assert "objective" in lines["expander"] and "inf" not in stdout
    assert "objective" in lines["torus"]     # as much of the torus as the switches hold (none before: pairs apart)
    assert re.search(r"\(\d+ of its 24 circuits kept\)", lines["torus"]), lines["torus"]
    tables = sorted(xc.glob("switch-*.csv"))
    assert len(tables) == 9
    for t in tables:
        assert len(t.read_text().strip().splitlines()) - 1 <= 4       # one row per circuit: two of its 8 ports
    assert sum(1 for c in doc["circuits"] if c["a"][1] == 0) <= 3 * 4   # port 0: three switches of four circuits
    inst = write(tmp_path, "i.toml", open("instances/decode/llama405b-tp8pp2-16.toml").read())
    w16 = str(tmp_path / "w16.json")
    assert run("wire", inst, "-o", w16, "--solver", "greedy")[0] == 0
    split = write(tmp_path, "s.toml", open(inst).read().replace("[fabric]", "[fabric]\nswitch_radix = 8"))
    code, stdout, _ = run("verify", w16, "--instance", split, "--json")
    assert code == 1 and [v["rule"] for v in json.loads(stdout)["violations"]] == ["instance"]
    assert "do not fit the instance's OCS switches" in json.loads(stdout)["violations"][0]["message"]


def test_cli_switch_layout_file_for_a_raw_matrix(tmp_path):
    """`--switch-layout` gives a raw matrix's fibre plan (as an instance's `switch_of_port` does): every circuit
    on a switch both its ports reach in the plan; bad plans exit 2 naming the file and the field."""
    n = 12
    m = str(tmp_path / "a2a.npy")
    np.save(m, np.where(np.eye(n), 0, 1e6))
    plan = np.array([[0, 1 + a % 2, 3 + a // 6] for a in range(n)])
    csv_plan = write(tmp_path, "plan.csv", "\n".join(",".join(map(str, r)) for r in plan) + "\n")
    out = str(tmp_path / "w.json")
    code, _, err = run("wire", m, "--switch-layout", csv_plan, "--port-bandwidth-gbps", "100", "-o", out,
                       "--solver", "search", "--max-moves", "100")
    assert code == 0, err
    doc = json.loads(open(out).read())
    assert doc["layout"]["switch_of_port"] == plan.tolist() and doc["layout"]["switch_radix"] == [12] * 5
    assert all(plan[c["a"][0], c["a"][1]] == c["switch"] == plan[c["b"][0], c["b"][1]] for c in doc["circuits"])
    assert run("verify", out)[0] == 0
    np.save(str(tmp_path / "plan.npy"), plan)
    assert run("wire", m, "--switch-layout", str(tmp_path / "plan.npy"), "--ports", "3", "--switch-radix", "6",
               "--port-bandwidth-gbps", "100", "-o", out, "--solver", "greedy")[0] == 0
    assert json.loads(open(out).read())["layout"]["switch_radix"] == [6] * 5
    np.save(str(tmp_path / "float.npy"), plan.astype(float))
    bad = {"rows.csv": ("0,1\n0,1\n", "plan: has 2 rows, the traffic has 12 accelerators"),
           "word.csv": ("0,x\n" * n, "word.csv: switch_of_port: line 1: 'x' is not a switch number"),
           "ragged.csv": ("0,1\n" * (n - 1) + "0\n", "line 12 has 1 columns, line 1 has 2"),
           "neg.csv": ("0,-2\n" * n, "switch -2 (switches are numbered from 0"),
           "dark.csv": ("-1,-1\n" * n, "no port is on an OCS"),
           "plan.txt": ("0\n", "unknown fibre plan format")}
    for name, (text, needle) in bad.items():
        path = write(tmp_path, name, text)
        code, _, err = run("wire", m, "--switch-layout", path, "--port-bandwidth-gbps", "100", "-o", out)
        assert code == 2 and needle.replace("plan: ", f"{name}: switch_of_port: ") in err and \
            err.count("\n") == 1, (name, err)
    for args, needle in [(("--switch-layout", csv_plan, "--ports", "2"), "has 3 columns, --ports is 2"),
                         (("--switch-layout", str(tmp_path / "float.npy")), "must be a 2-D integer matrix"),
                         (("--switch-layout", str(tmp_path / "none.csv")), "none.csv"),
                         (("--switch-layout", csv_plan, "--switch-radix", "1"), "cannot host a circuit")]:
        code, _, err = run("wire", m, *args, "--port-bandwidth-gbps", "100", "-o", out)
        assert code == 2 and needle in err and err.count("\n") == 1, (args, err)
    code, _, err = run("wire", "instances/decode/llama405b-tp8pp2-16.toml", "--switch-layout", csv_plan, "-o", out)
    assert code == 2 and "--switch-layout describes the hardware of a raw matrix" in err
    assert json.loads(open(out).read())["layout"]["switch_radix"] == [6] * 5      # nothing overwritten


def test_cli_fixed_circuits_with_the_search(tmp_path):
    """`--fixed` with a heuristic (refused before: exact solvers only): the wiring written keeps the fixed
    circuits port for port and passes verify."""
    m = str(tmp_path / "a2a.npy")
    np.save(m, np.where(np.eye(10), 0, 1e6))
    fixed = write(tmp_path, "fixed.json", json.dumps(
        {"format": "ocs-synth/wiring", "version": 1, "accelerators": 10, "ports_per_accelerator": 3,
         "circuits": [{"switch": 1, "a": [2, 1], "b": [9, 1]}, {"switch": 2, "a": [2, 2], "b": [9, 2]}]}))
    out = str(tmp_path / "w.json")
    code, stdout, err = run("wire", m, "--ports", "3", "--port-bandwidth-gbps", "100", "-o", out, "--json",
                            "--solver", "search", "--time-limit", "5", "--fixed", fixed)
    assert code == 0, err
    circuits = json.loads(open(out).read())["circuits"]
    assert {"switch": 1, "a": [2, 1], "b": [9, 1]} in circuits and {"switch": 2, "a": [2, 2], "b": [9, 2]} in circuits
    assert run("verify", out)[0] == 0


def test_cli_wire_shows_progress_unless_json(tmp_path):
    """A long solve says what it is doing on stderr, each line stamped with the command's seconds: the bound,
    the starts it scored, the search's phases and the final scoring; --json prints the solve block alone."""
    t = np.full((40, 40), 1e6)
    np.fill_diagonal(t, 0)
    m = str(tmp_path / "m.npy")
    np.save(m, t)
    args = ("wire", m, "--ports", "6", "--port-bandwidth-gbps", "800", "--solver", "search", "--time-limit", "6",
            "--max-moves", "2000")
    code, out, err = run(*args, "-o", str(tmp_path / "a.json"))
    lines = err.splitlines()
    assert code == 0 and lines and all(re.match(r"\[ *\d+\.\d s\] ", ln) for ln in lines), err
    for needle in ("bound ", "starts: ", "two-hop search: done", "scoring the searched wiring"):
        assert any(needle in ln for ln in lines), (needle, err)
    assert "FEASIBLE" in out or "OPTIMAL" in out
    code, out, err = run(*args, "-o", str(tmp_path / "b.json"), "--json")
    assert code == 0 and err == "" and json.loads(out)["objective"] > 0


def test_a_move_budget_makes_the_search_repeatable(tmp_path, no_near_moore):
    # with --max-moves the search stops after that many moves, not at the clock: the same seed gives the
    # same circuits (only the solve block's wall time differs). On 6 ports the placed polarity graph (q = 5,
    # grown to 40) would answer as built, with no moves: left out
    t = np.full((40, 40), 1e6) * (1 + (np.arange(40)[:, None] % 3))
    np.fill_diagonal(t, 0)
    for ports in (4, 6):                                 # hop-count moves; two-hop coverage, then hop count
        p = problem(t, ports)
        a, b = (wire(p, "search", SolveParams(time_limit_s=60, seed=2, max_moves=300)) for _ in range(2))
        assert a.artifact == b.artifact and a.objective == b.objective
        assert a.limit == Limit.ITERATIONS and a.extra["moves_tried"] == 300
    m = str(tmp_path / "m.npy")
    np.save(m, t)
    outs = [str(tmp_path / f"w{i}.json") for i in range(2)]
    for out in outs:
        assert run("wire", m, "--ports", "4", "--port-bandwidth-gbps", "800", "-o", out, "--solver", "search",
                   "--max-moves", "300", "--seed", "2", "--time-limit", "60")[0] == 0
    docs = [json.loads(open(out).read()) for out in outs]
    for d in docs:
        d["solve"].pop("wall_s")
    assert docs[0] == docs[1]


def test_cli_wire_bad_inputs(tmp_path):
    m = str(tmp_path / "m.npy")
    np.save(m, np.where(np.eye(6), 0, 1.0))
    cases = [
        (("--ports", "0", "--port-bandwidth-gbps", "100"), "port budget must be >= 1"),
        (("--port-bandwidth-gbps", "100"), "needs --ports"),
        (("--ports", "2", "--port-bandwidth-gbps", "100", "--switch-radix", "1"), "cannot host a circuit"),
        (("--ports", "2", "--port-bandwidth-gbps", "100", "--policy", "direct"),
         "m.npy: policy: direct-only wiring cannot serve rows"),
        (("--ports", "2", "--port-bandwidth-gbps", "100", "--max-moves", "0"), "--max-moves: must be >= 1"),
        (("--ports", "1", "--port-bandwidth-gbps", "100"), "m.npy: ports: no wiring within the port budget connects"),
        (("--ports", "2", "--port-bandwidth-gbps", "100", "--switch-radix", "3"),   # 2 switches of 3 per plane
         "m.npy: layout.switch_radix: no wiring within the switches' radix connects the demand: its groups need 5 "
         "circuits, the switches take 4"),
    ]
    for args, needle in cases:
        code, _, err = run("wire", m, "-o", str(tmp_path / "w.json"), *args)
        assert code == 2 and needle in err and err.count("\n") == 1, (args, err)
    bad_fixed = write(tmp_path, "fixed.json", json.dumps(
        {"format": "ocs-synth/wiring", "version": 1, "accelerators": 6, "ports_per_accelerator": 2,
         "circuits": [{"switch": 1, "a": [0, 0], "b": [1, 1]}]}))
    code, _, err = run("wire", m, "-o", str(tmp_path / "w.json"), "--ports", "2", "--port-bandwidth-gbps", "100",
                       "--fixed", bad_fixed)
    assert code == 2 and "fixed.json: circuits: fixed circuits are infeasible: circuit 0" in err and err.count("\n") == 1
    hw = ("--ports", "2", "--port-bandwidth-gbps", "100")
    for log, needle in ((bad_fixed, "fixed.json: format: not a proof log"),
                        (str(tmp_path / "w.json"), "--proof-log: is the output file")):
        code, _, err = run("wire", m, "-o", str(tmp_path / "w.json"), *hw, "--proof-log", log)
        assert code == 2 and needle in err and err.count("\n") == 1, err
    assert json.loads(open(bad_fixed).read())["circuits"]
    code, out, err = run("wire", m, "-o", str(tmp_path / "ok.json"), *hw, "--solver", "greedy",
                         "--proof-log", str(tmp_path / "proof.jsonl"))
    assert code == 0 and "proof log" in out and (tmp_path / "proof.jsonl").read_text().startswith('{"format"'), err
    (tmp_path / "ok.json").unlink()
    code, _, err = run("wire", m, "-o", str(tmp_path / "no" / "w.json"), "--ports", "2", "--port-bandwidth-gbps", "1")
    assert code == 2 and "does not exist" in err
    assert not (tmp_path / "w.json").exists()
    # traffic with nothing to wire, or in a unit whose times the solvers' tolerances would swamp (both used to
    # end in a traceback: a division by zero, PuLP's NaN coefficients); the file in place stays as it was
    (tmp_path / "w.json").write_text("keep")
    for t, needle in ((np.zeros((4, 4)), "m.npy: traffic: every entry is 0"),
                      (np.where(np.eye(4), 0, 1e-6), "m.npy: traffic: the largest entry, 1e-06 bytes, crosses")):
        np.save(m, t)
        for solver in ("auto", "expander"):
            code, _, err = run("wire", m, "-o", str(tmp_path / "w.json"), "--ports", "2", "--port-bandwidth-gbps",
                               "100", "--solver", solver)
            assert code == 2 and needle in err and err.count("\n") == 1, (solver, err)
    assert (tmp_path / "w.json").read_text() == "keep"


# bytes of hotspot6's largest entry: 1 MB, 1 KB, 1 B (8e-11 s at 100 Gbit/s), and 10 PB (a step of ~1e6 s, where
# the MILPs' lam, 1 / the time in seconds, fell inside HiGHS's tolerances and "proved" a worse wiring)
SCALES = (1e6, 1e3, 1.0, 1e16)


@pytest.mark.parametrize("solver", ["milp", "cpsat", "lp-round", "search", "expander", "topoopt", "greedy"])
def test_answers_scale_with_the_bytes(solver):
    """Time is linear in the bytes: every solver gives the same answer at 1 MB, 1 KB and 1 B per entry (the LP
    relaxation, unscaled, had lp-round's rounding differ with the unit), and at 2 ports every answer is
    connected (a union of two random matchings, the expander and TopoOpt-style's, often was not)."""
    t = np.load("instances/wiring/hotspot6.npy")
    res = []
    for scale in SCALES:
        p = WiringProblem(TrafficMatrix(t / t.max() * scale), OCSLayout.uniform(6, 2), 100.0)
        r = wire(p, solver, SolveParams(time_limit_s=5, max_moves=200))
        assert not wiring_violations(r.artifact) and np.isfinite(r.objective), (solver, scale)
        assert r.artifact.solve["limit"] == r.limit.value and r.artifact.solve["status"] == r.status.value
        assert r.status != SolveStatus.OPTIMAL or (r.limit == Limit.NONE and r.gap <= 1e-6)
        res.append(r)
    unit = [r.objective / s for r, s in zip(res, SCALES)]
    assert unit == pytest.approx([unit[0]] * len(SCALES), rel=1e-6), solver
    if solver in ("milp", "cpsat"):       # hotspot6 at 2 ports: both prove 9.6e-4 s at 8 MB
        assert [r.status for r in res] == [SolveStatus.OPTIMAL] * len(SCALES) and unit[0] == pytest.approx(0.00096 / 8e6)


def _matchings(n: int, p: int, seed: int) -> Wiring:
    """A union of p random perfect matchings, matching k on switch k (port k), as drawn: maybe apart."""
    rng = np.random.default_rng(seed)
    return Wiring(n, p, tuple(Circuit(k, int(a), k, int(b), k) for k in range(p)
                              for a, b in rng.permutation(n).reshape(-1, 2)), OCSLayout.uniform(n, p))


def test_connect_joins_components_on_the_same_ports():
    from scipy.sparse.csgraph import connected_components

    from solvers.baselines import connect, expander

    def ports(w):
        return sorted([(x.switch, x.a, x.a_port) for x in w.circuits] + [(x.switch, x.b, x.b_port) for x in w.circuits])
    apart = 0
    for seed in range(20):
        raw = _matchings(10, 2, seed)
        c = connect(raw)
        assert connected_components(c.adjacency())[0] == 1 and not wiring_violations(c)
        assert ports(c) == ports(raw) and connect(c) is c
        apart += connected_components(raw.adjacency())[0] > 1
        assert connected_components(expander(OCSLayout.uniform(10, 2), seed).adjacency())[0] == 1
    assert apart >= 5                      # two random matchings on 10 are often apart
    one = connect(_matchings(6, 1, 0))     # one port each: no swap can join anything
    assert connected_components(one.adjacency())[0] == 3


def test_identical_groups_are_wired_once_and_replicated():
    from solvers import identical_groups
    t = np.zeros((12, 12))
    for base in (0, 4, 8):                       # three identical TP groups of 4
        for a in range(4):
            for b in range(4):
                if a != b:
                    t[base + a, base + b] = 1e6
    p = problem(t, 3)
    groups = identical_groups(p)
    assert [g.tolist() for g in groups] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]
    res = wire(p, "milp", SolveParams(time_limit_s=30))
    assert "3 identical groups of 4" in res.extra["symmetry"] and not wiring_violations(res.artifact)
    adj = res.artifact.adjacency()
    assert adj[:4, 4:].sum() == 0 and (adj[:4, :4] == adj[4:8, 4:8]).all()
    # a K4 per group on 3 ports serves every pair directly: meets the injection bound, so proven optimal
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(1e6 / 100e9)
    t2 = t.copy()
    t2[8, 9] = 5e6
    assert identical_groups(problem(t2, 3)) is None


@pytest.mark.parametrize("solver", ["milp", "cpsat", "auto"])
def test_exact_solvers_go_on_from_the_copies_to_prove_the_whole(solver):
    """Two triangles of demand on 3 ports (three planes of 6 fibres): each group's optimum is its triangle, the
    fibre each group has left on a plane can join the groups, and only the whole instance's model proves that
    relaying over them does not help. Before, the copies were returned FEASIBLE at 25% in 0.4 s of 20 (the
    relay count's 0.0075 s against 0.01 s); now the exact solvers go on from them to the whole."""
    t = np.zeros((6, 6))
    for base in (0, 3):
        t[base:base + 3, base:base + 3] = 1e9
    np.fill_diagonal(t, 0.0)
    p = problem(t, 3)
    res = wire(p, solver, SolveParams(time_limit_s=20))
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(1e9 / 100e9)
    assert not wiring_violations(res.artifact) and res.artifact.solve["status"] == "OPTIMAL"


def test_exact_solvers_answer_the_copies_where_the_whole_is_beyond_their_models():
    """Two groups of 33: each within EXACT_MAX, the whole of 66 not; the copies are the answer, with the
    group on the whole clock, where going on to the whole would have asked for a model of 66 (exit 2)."""
    t = np.zeros((66, 66))
    for base in (0, 33):
        t[base:base + 33, base:base + 33] = 1e6
    np.fill_diagonal(t, 0.0)
    res = wire(problem(t, 3), "milp", SolveParams(time_limit_s=4))
    assert "2 identical groups of 33" in res.extra["symmetry"] and not wiring_violations(res.artifact)


def test_replicated_groups_are_solved_on_the_clock_left_and_keep_the_groups_objective(monkeypatch):
    import solvers
    t = np.zeros((12, 12))
    rng = np.random.default_rng(3)
    for base in (0, 4, 8):                       # three identical groups of 4, uneven demand inside each
        t[base:base + 4, base:base + 4] = rng.integers(1, 9, size=(4, 4)) * 1e6
    np.fill_diagonal(t, 0.0)
    t[4:8, 4:8] = t[8:12, 8:12] = t[:4, :4]
    clocks = []
    inner = solvers.wire

    def spy(prob, solver="auto", params=SolveParams()):
        clocks.append((prob.accelerators, params.time_limit_s))
        return inner(prob, solver, params)
    monkeypatch.setattr(solvers, "wire", spy)
    for objective in ("time", "hops"):
        p = problem(t, 2, objective)
        clocks.clear()
        res = inner(p, "search", SolveParams(time_limit_s=6, seed=0, max_moves=50))
        assert "3 identical groups of 4" in res.extra["symmetry"] and not wiring_violations(res.artifact)
        # the group gets what the whole's bound left, not the whole limit again
        assert clocks[0][0] == 4 and clocks[0][1] < 6.0
        # not routed again: the group's routing copied, and it is the whole's (exact routing on 12)
        assert "one group's, copied" in res.extra["routing"]
        assert res.objective == pytest.approx(p.score(res.artifact, "optimal")[0], rel=1e-6)


def test_interrupted_exact_solve_returns_an_incumbent(monkeypatch):
    import solvers.exact as ex

    def boom(*a, **k):
        raise KeyboardInterrupt
    monkeypatch.setattr(ex, "solve_milp", boom)
    res = wire(problem(ring_demand(8), 2), "milp", SolveParams(time_limit_s=5))
    assert res.status == SolveStatus.FEASIBLE and res.limit.value == "interrupt"
    assert res.artifact is not None and not wiring_violations(res.artifact)


def test_two_hop_coverage_is_updated_exactly():
    from solvers.local_search import TwoHopCoverage, improve_two_hop
    from solvers.baselines import expander
    rng = np.random.default_rng(0)
    w = expander(OCSLayout.uniform(20, 4), seed=2)
    wt = rng.random((20, 20))
    cov = TwoHopCoverage(w.adjacency(), wt + wt.T)
    arr = w.circuit_array
    for _ in range(100):
        idx = np.flatnonzero(arr[:, 0] == rng.integers(4))
        e1, e2 = rng.choice(idx, 2, replace=False)
        u, x, v, y = arr[e1, 1], arr[e1, 3], arr[e2, 1], arr[e2, 3]
        if len({u, x, v, y}) < 4:
            continue
        d = cov.swap_delta(u, x, v, y)
        assert (cov.C == cov.A @ cov.A).all()
        assert cov.score == pytest.approx(float((cov.W * cov._covered_all()).sum()))
        cov.undo(u, x, v, y, d)
    better, tried, kept = improve_two_hop(w, wt, time_limit_s=0.5, seed=1)
    assert not wiring_violations(better) and tried > 0
    assert (better.degree() == w.degree()).all()


def tp_pp_demand(tp, pp, b=1e9, p2p=1e6):
    """TP groups of `tp` all-to-all, stage s rank i sends to stage s + 1 rank i."""
    n = tp * pp
    t = np.zeros((n, n))
    for s in range(pp):
        g = range(s * tp, (s + 1) * tp)
        for i in g:
            for j in g:
                if i != j:
                    t[i, j] = b
        if s + 1 < pp:
            for i in range(tp):
                t[s * tp + i, (s + 1) * tp + i] = p2p
    return t


def test_symmetry_rows_follow_the_stabilizer_chain():
    from solvers.symmetry import row_orderings
    t = tp_pp_demand(4, 2)
    rows = row_orderings(t, {}, [0] * 8)
    # S4 acting on both stages at once: row 0 sorted over its TP peers 1, 2, 3
    assert rows == [(0, 1, 2), (0, 1, 3), (0, 2, 3)]
    rng = np.random.default_rng(1)
    assert row_orderings(rng.random((7, 7)) * (1 - np.eye(7)), {}, [0] * 7) == []   # no symmetry: no rows
    ring = ring_demand(6)   # dihedral: fixing 0 leaves the reflection (1 5)(2 4); fixing 1 too leaves nothing
    assert row_orderings(ring, {}, [0] * 6) == [(0, 1, 5)]


def _brute_orbits(g, fixed):
    """Orbits of the pointwise stabilizer of `fixed` from every automorphism (networkx VF2)."""
    from networkx.algorithms.isomorphism import DiGraphMatcher
    m = DiGraphMatcher(g, g, node_match=lambda a, b: a["kind"] == b["kind"], edge_match=lambda a, b: a["w"] == b["w"])
    orbit = {v: {v} for v in g}
    for iso in m.isomorphisms_iter():
        if all(iso[v] == v for v in fixed):
            for v, u in iso.items():
                orbit[v].add(u)
    return sorted({tuple(sorted(o)) for v, o in orbit.items() if v not in fixed}, key=lambda o: (-len(o), o[0]))


@pytest.mark.parametrize("name", ["tp-pp", "ring", "random"])
def test_orbits_are_exact(name):
    from solvers.symmetry import _graph, orbits
    rng = np.random.default_rng(3)
    t = {"tp-pp": tp_pp_demand(3, 2), "ring": ring_demand(7), "random": None}[name]
    if t is None:        # a random demand made symmetric under the swap of two halves
        h = rng.integers(0, 3, (4, 4)) * (1 - np.eye(4))
        t = np.block([[h, np.eye(4)], [np.eye(4), h]])
    g = _graph(t, {}, [0] * t.shape[0])
    gens: list = []
    for fixed in ([], [0], [0, 1]):
        assert [tuple(o) for o in orbits(g, fixed, gens)] == _brute_orbits(g, fixed)


@pytest.mark.parametrize("work", [3, 8, 20])
def test_symmetry_rows_stay_valid_when_the_work_runs_out(monkeypatch, work):
    """Orbit tests that give up keep points apart: fewer rows, each still x[r, a] >= x[r, b] with b in the
    orbit of a under the stabilizer of the root and the earlier levels' points (checked by brute force)."""
    import solvers.symmetry as sym
    t = tp_pp_demand(4, 2, p2p=3e8)
    full = sym.row_orderings(t, {}, [0] * 8)
    monkeypatch.setattr(sym, "WORK", work)
    rows = sym.row_orderings(t, {}, [0] * 8)
    assert len(rows) <= len(full) and (work == 20) == (rows == full)
    g = sym._graph(t, {}, [0] * 8)
    fixed: list = []
    for r, a, b in rows:
        fixed = fixed or [r]
        if a not in fixed:               # a new level: its point is fixed after the earlier ones
            fixed.append(a)
        level = fixed[:fixed.index(a)]   # the root and the earlier levels' points
        assert any(a in o and b in o for o in _brute_orbits(g, level)), (r, a, b, level)


@pytest.mark.parametrize("objective,fixed", [("time", ()), ("hops", ()),
                                             ("time", (Circuit(0, 1, 0, 4, 0),)),    # a PP pair pinned
                                             ("hops", (Circuit(1, 0, 1, 1, 1),))])   # a TP pair pinned
def test_symmetry_rows_keep_the_optimum(monkeypatch, objective, fixed):
    import solvers.exact as ex
    p = problem(tp_pp_demand(3, 2, p2p=3e8), 3, objective, fixed_circuits=fixed)
    with_rows = wire(p, "milp", SolveParams(time_limit_s=60, backend="highs"))
    assert with_rows.extra["symmetry_rows"] > 0
    monkeypatch.setattr(ex, "_symmetry_rows", lambda problem, ix, labels=None, seconds=None: [])
    without = wire(p, "milp", SolveParams(time_limit_s=60, backend="highs"))
    assert with_rows.status == without.status == SolveStatus.OPTIMAL
    assert with_rows.objective == pytest.approx(without.objective, rel=1e-6)


def test_cluster_rows_and_probes_keep_the_optimum(monkeypatch):
    import solvers.exact as ex
    from solvers.exact import _index, _solve_milp
    p = problem(tp_pp_demand(3, 2, p2p=3e8), 3)
    ix = _index(p)
    rows = list(ex._cluster_rows(p, ix))
    # the two TP groups: one circuit across each cut; the rest of their 9 ports would hold 4 circuits inside,
    # but each of the 3 switches is a matching, which holds 1 inside a group of 3 (`bounds.matching_cap`)
    assert sorted(rhs for _, sense, rhs in rows if sense == "<=") == [3, 3]
    assert all(rhs == 1 for _, sense, rhs in rows if sense == ">=")
    ref = wire(p, "milp", SolveParams(time_limit_s=60, backend="highs"))
    assert ref.status == SolveStatus.OPTIMAL and ref.extra["cluster_rows"] == 4
    params = SolveParams(time_limit_s=60, backend="highs")
    above = _solve_milp(p, params, per_switch=False, cutoff=ref.objective * 1.05)   # residual cuts on
    assert above.extra["residual_cuts"] > 0
    assert above.status == SolveStatus.OPTIMAL and above.objective == pytest.approx(ref.objective, rel=1e-6)
    below = _solve_milp(p, params, per_switch=False, cutoff=ref.objective * (1 - 1e-4))
    assert below.status == SolveStatus.INFEASIBLE          # nothing better than the optimum
    monkeypatch.setattr(ex, "_cluster_rows", lambda *a, **k: iter(()))
    plain = wire(p, "milp", SolveParams(time_limit_s=60, backend="highs"))
    assert plain.status == SolveStatus.OPTIMAL and plain.objective == pytest.approx(ref.objective, rel=1e-6)


def test_the_search_hop_count_matches_shortest_paths():
    """`_hop_bytes` counts each pair's levels unreached (uint8 below 255 accelerators, uint16 from there): the
    same distances and sum as csgraph's BFS, inf where a pair with demand has no path, and its distances left
    out on request."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path
    from solvers.local_search import _hop_bytes
    rng = np.random.default_rng(3)
    for n, m in [(12, 9), (40, 60), (300, 330)]:          # few circuits: long paths, pieces with no path between
        a, b = rng.integers(0, n, m), rng.integers(0, n, m)
        a, b = a[a != b], b[a != b]
        ref = shortest_path(csr_matrix((np.ones(a.size), (a, b)), shape=(n, n)), directed=False, unweighted=True)
        dem = rng.random((n, n)) * (np.isfinite(ref) & (ref > 2))       # demand only where there is a path
        val, d = _hop_bytes(n, a, b, dem)
        assert np.array_equal(d, ref) and val == pytest.approx(float((dem * np.where(np.isfinite(ref), ref, 0)).sum()))
        assert _hop_bytes(n, a, b, dem, dist=False) == (val, None)
        if not np.isfinite(ref).all():                       # bytes between two pieces: no wiring serves them
            dem[tuple(np.argwhere(~np.isfinite(ref))[0])] = 1.0
            assert _hop_bytes(n, a, b, dem)[0] == float("inf")


def test_greedy_matching_takes_what_the_edge_by_edge_loop_takes():
    """The block scan gives the loop's matching, in its order: random weights with many ties (the tie-break is
    the edge's place), dense and sparse edge lists, a node's edges far apart in the sorted order."""
    from solvers.baselines import greedy_matching
    rng = np.random.default_rng(7)
    for n, m, levels in [(6, 10, 2), (40, 300, 3), (300, 20_000, 4), (600, 5_000, 1000), (50, 1_225, 1)]:
        i, j = rng.integers(0, n, m), rng.integers(0, n, m)
        i, j = i[i != j], j[i != j]
        w = rng.integers(0, levels, i.size).astype(float)
        free, loop = np.ones(n, bool), []
        for e in np.argsort(-w, kind="stable"):
            if free[i[e]] and free[j[e]]:
                free[i[e]] = free[j[e]] = False
                loop.append(int(e))
        assert greedy_matching(i, j, w, n) == loop
    assert greedy_matching(np.array([], int), np.array([], int), np.array([]), 3) == []


def test_near_moore_wiring_from_the_biaffine_plane():
    from scipy.sparse.csgraph import shortest_path
    from solvers.baselines import expander
    from solvers.structured import _biaffine, near_moore
    for n in (50, 48):                                  # 2 q^2 for q = 5, and two vertices removed
        lay = OCSLayout.uniform(n, 6)
        w = near_moore(lay)
        assert w is not None and not wiring_violations(w) and w.degree().max() == 6
        assert w.degree().sum() >= 6 * n - 4            # at most a couple of idle ports
        two = [(shortest_path(x.adjacency() > 0, unweighted=True) == 2).sum() / n for x in (w, expander(lay))]
        assert two[0] >= 0.85 * 30 and two[0] > two[1] + 3     # Moore: 6 x 5 = 30 accelerators at two hops
        assert near_moore(lay, seed=1).circuits != () and near_moore(lay).circuits == w.circuits   # seeded
    assert _biaffine(OCSLayout.uniform(40, 6)) is None          # 2q lost: not built (q = 5's polarity graph is)
    assert near_moore(OCSLayout.uniform(50, 5)) is None         # q = 4 is not prime
    t = np.full((48, 48), 1e6)
    np.fill_diagonal(t, 0)
    res = wire(problem(t, 6), "search", SolveParams(time_limit_s=10, max_moves=200))   # (a budget: 1 s, not 10)
    assert res.extra["start"] == "near-moore" and not wiring_violations(res.artifact)


def test_near_moore_wiring_from_the_polarity_graph():
    from scipy.sparse.csgraph import shortest_path
    from solvers.baselines import expander
    from solvers.structured import near_moore, polarity_orders
    for n in (57, 50):                                  # q^2 + q + 1 for q = 7, and seven vertices removed
        lay = OCSLayout.uniform(n, 8)
        assert polarity_orders(lay) == [7]
        w = near_moore(lay)
        assert w is not None and not wiring_violations(w) and w.degree().max() == 8
        assert w.degree().sum() >= 8 * n - 16           # the absolute points miss one colour each
        within = [(shortest_path(x.adjacency() > 0, unweighted=True) <= 2).mean() for x in (w, expander(lay))]
        assert within[0] >= (1.0 if n == 57 else 0.9) and within[0] > within[1]   # diameter 2 before removals
        assert near_moore(lay, seed=1).circuits != () and near_moore(lay).circuits == w.circuits   # seeded
    assert near_moore(OCSLayout.uniform(20, 8)) is None         # too far below q^2 + q + 1
    t = np.full((57, 57), 1e6)
    np.fill_diagonal(t, 0)
    res = wire(problem(t, 8), "search", SolveParams(time_limit_s=5, max_moves=500))
    assert res.extra["start"] == "near-moore" and not wiring_violations(res.artifact)
    t[:20] *= 2          # skewed senders: the geometric wiring is offered beside the search, placed, never searched
    p = problem(t, 8)
    res = wire(p, "search", SolveParams(time_limit_s=5, max_moves=500))
    built = near_moore(p.layout)
    assert not wiring_violations(res.artifact)
    if res.extra["start"] == "near-moore":           # the same graph, its accelerators relabelled
        assert res.extra["moves_tried"] == 0
        assert nx.is_isomorphic(nx.Graph(res.artifact.to_networkx()), nx.Graph(built.to_networkx()))


@pytest.mark.slow
def test_the_polarity_graph_of_a_larger_plane_keeps_as_many_colours_as_ports_and_grows():
    from scipy.sparse.csgraph import shortest_path
    from solvers.baselines import expander
    from solvers.structured import _polarity, near_moore, polarity_orders
    # 18 ports: q = 19 (381 vertices, 20 colours) kept to 18 colours and grown by 3 or 69 accelerators, q = 23
    # (553) less 41, q = 17 (307) less 51; 8 ports on 64: q = 7's 57 grown by 7; 419 is odd: each switch leaves
    # one port dark. Each is the better of the plane above N and the one below (q = 23 trimmed and q = 19 grown
    # for 384-512; q = 8 trimmed and q = 7 grown for 64)
    for n, ports, q, within in ((384, 18, 19, 300), (450, 18, 19, 290), (512, 18, 23, 295), (256, 18, 17, 230),
                                (64, 8, 7, 52), (419, 18, 19, 290)):
        lay = OCSLayout.uniform(n, ports)
        assert q in polarity_orders(lay)
        w = near_moore(lay)
        assert w.circuits == _polarity(lay, q, 0).circuits
        assert not wiring_violations(w) and w.degree().sum() == n * ports - (ports if n % 2 else 0)
        assert w.degree().min() >= ports - 1
        d, e = (shortest_path(x.adjacency() > 0, unweighted=True) for x in (w, expander(lay)))
        # two hops reach close to the Moore count p + p (p - 1) (C4-free but for the re-paired circuits);
        # the random expander's average distance is 3-10% longer
        assert (d <= 2).sum() / n - 1 >= within and e.mean() > 1.03 * d.mean()
        if n <= 256:            # a plane trimmed (256) and one grown (64): the seed picks which vertices, repeatably
            assert near_moore(lay, seed=1).circuits != w.circuits and near_moore(lay).circuits == w.circuits
    for n, ports in ((100, 16), (400, 32)):      # no prime power q >= p - 1 whose order is near enough
        assert polarity_orders(OCSLayout.uniform(n, ports)) == []


def test_the_polarity_graph_of_a_prime_power_plane():
    """q = 8 and 25 are prime powers: their difference sets come from GF(q^3) over the prime field. On 8 ports
    q = 8's plane (73 points, 8 of its 9 colours) is C4-free: no two accelerators share two neighbours; 650
    accelerators on 18 ports take q = 25's 651 less one (2.493 hops on average) over q = 23's 553 grown (2.505),
    the only plane there before prime powers."""
    from solvers.structured import _distances, _polarity, near_moore, polarity_orders
    lay = OCSLayout.uniform(73, 8)
    assert polarity_orders(lay) == [8, 7]
    w = near_moore(lay)
    a = (w.adjacency() > 0).astype(int)
    common = a @ a
    np.fill_diagonal(common, 0)
    assert not wiring_violations(w) and common.max() == 1 and w.degree().min() >= 7
    assert w.circuits == _polarity(lay, 8, 0).circuits
    lay = OCSLayout.uniform(650, 18)
    assert polarity_orders(lay) == [25, 23]
    w = near_moore(lay)
    hops = {q: _distances(_polarity(lay, q, 0).adjacency() > 0).sum() / (650 * 649) for q in (25, 23)}
    assert w.circuits == _polarity(lay, 25, 0).circuits and hops[25] < hops[23] - 0.01
    assert not wiring_violations(w)


def test_the_polarity_graph_loses_a_vertex_with_its_neighbours_and_mends_the_pairs_apart():
    from scipy.sparse.csgraph import shortest_path
    from solvers.structured import near_moore
    # V - N = q + 2: a vertex and its q + 1 neighbours go; every survivor loses one neighbour, the freed ports
    # are paired to bring the most pairs within two hops. Before: 184 and 4,012 ordered pairs three hops
    # apart, some ports idle
    for n, ports, most in ((48, 8, 130), (288, 18, 3500)):
        w = near_moore(OCSLayout.uniform(n, ports))
        assert not wiring_violations(w) and (w.degree() == ports).all()
        assert (shortest_path(w.adjacency() > 0, unweighted=True) >= 3).sum() <= most


def test_the_mending_matching_is_greedy_on_many_nodes(monkeypatch):
    import solvers.structured as st
    from scipy.sparse.csgraph import shortest_path
    monkeypatch.setattr(st, "MENDING_EXACT_MAX", 0)        # every colour greedy: a few ports may stay idle
    for n, ports, most in ((48, 8, 150), (288, 18, 3550)):
        w = st.near_moore(OCSLayout.uniform(n, ports))
        assert not wiring_violations(w) and w.degree().sum() >= n * ports - 10
        assert (shortest_path(w.adjacency() > 0, unweighted=True) >= 3).sum() <= most     # 138 and 3,470


def test_placing_skewed_demand_on_a_near_moore_wiring_evens_its_two_hop_loads():
    from solvers.structured import near_moore, placed

    def norm(w, t, p=8):         # the two-hop link loads recomputed from scratch, each pair split evenly
        A = (w.adjacency() > 0).astype(float)
        C = A @ A
        W = np.where((A == 0) & ~np.eye(len(A), dtype=bool) & (C > 0), 1 / np.maximum(C, 1), 0)
        G = t * W
        loads = (t * A + G @ A + A @ G)[A > 0]
        return loads.max() * np.mean((loads / loads.max()) ** p) ** (1 / p)

    lay = OCSLayout.uniform(57, 8)
    t = np.full((57, 57), 1e6)
    t[:19] *= 2.0                                        # a third sends and receives more
    t[:, :19] *= 1.5
    np.fill_diagonal(t, 0)
    w = near_moore(lay)
    moved = placed(w, t, seed=0, tries=400, time_limit_s=60)
    assert not wiring_violations(moved) and moved != w and moved == placed(w, t, seed=0, tries=400, time_limit_s=60)
    assert sorted(moved.degree()) == sorted(w.degree())              # the same graph, relabelled
    assert norm(moved, t) < 0.99 * norm(w, t)
    assert placed(w, np.full((57, 57), 1e6) - 1e6 * np.eye(57), tries=50) == w    # uniform demand: nothing to place
    sop = lay.switch_of_port.copy()
    sop[0] = np.roll(sop[0], 1)                          # accelerator 0 has another switch at each port
    other = OCSLayout(sop, lay.switch_radix)
    assert placed(Wiring(57, 8, (), other), t) == Wiring(57, 8, (), other)


def test_placing_keeps_the_heavier_accelerators_off_the_pairs_three_hops_apart():
    from scipy.sparse.csgraph import shortest_path

    from solvers.structured import near_moore, placed

    def far_bytes(w, t):         # bytes between accelerators three or more hops apart, from scratch
        hops = shortest_path((w.adjacency() > 0).astype(float), unweighted=True)
        return float(t[hops >= 3].sum())

    lay = OCSLayout.uniform(52, 8)                       # the polarity graph of q = 7 less five vertices
    w = near_moore(lay)
    t = np.full((52, 52), 1e6)
    t[:17] *= 2.0
    t[:, :17] *= 1.5
    np.fill_diagonal(t, 0)
    assert far_bytes(w, t) > 0                           # some pairs lost their one common neighbour
    near = placed(w, t, seed=0, tries=2000, time_limit_s=60, far=0.0)
    moved = placed(w, t, seed=0, tries=2000, time_limit_s=60)
    assert not wiring_violations(moved) and sorted(moved.degree()) == sorted(w.degree())
    # without the far pairs' term the load search moves the heavier accelerators onto them (185 MB against
    # 132 MB unplaced); with it, 139 MB (the loads evened at a little of that)
    assert far_bytes(moved, t) < 0.8 * far_bytes(near, t)


def _hubs_demand(n=40, hubs=8):
    t = np.full((n, n), 4e6)                           # a busy all-to-all on 32 ...
    t[:hubs] = 0
    t[:, :hubs] = 0
    t[np.arange(hubs), hubs + np.arange(hubs)] = 1e5   # ... and 8 nearly idle senders
    np.fill_diagonal(t, 0)
    return t


def test_relay_hubs_put_idle_accelerators_between_the_busy_ones():
    from solvers.structured import relay_hubs
    n, hubs = 40, 8
    t = _hubs_demand(n, hubs)
    lay = OCSLayout.uniform(n, 6)
    w = relay_hubs(t, lay, seed=3)
    assert w is not None and not wiring_violations(w) and w == relay_hubs(t, lay, seed=3)
    arr = w.circuit_array
    hub_ends = (arr[:, [1, 3]] < hubs)
    assert not hub_ends.all(axis=1).any()              # no hub-hub circuit
    per_busy = np.bincount(arr[hub_ends[:, 0], 3], minlength=n)[hubs:] + np.bincount(arr[hub_ends[:, 1], 1],
                                                                                     minlength=n)[hubs:]
    assert per_busy.sum() == hubs * 6 and per_busy.max() - per_busy.min() <= 1   # every hub port, spread evenly
    hub_pairs = {(min(a, b), max(a, b)) for a, b in arr[hub_ends.any(axis=1)][:, [1, 3]].tolist()}
    assert len(hub_pairs) == hubs * 6                  # never twice between a hub and a busy accelerator
    assert relay_hubs(np.full((n, n), 1e6) - np.diag(np.full(n, 1e6)), lay) is None   # no idle accelerator
    res = wire(problem(t, 6), "search", SolveParams(time_limit_s=6))
    ref = wire(problem(t, 6), "expander", SolveParams())
    assert res.extra["start"] == "relay hubs" and not wiring_violations(res.artifact)
    assert res.objective < ref.objective
    # the hubs beat every start as built, so they are searched too, their circuits pinned, beside the best
    # start; the better searched wiring (by a short routing) is scored: below the hubs' own time (it was
    # their wiring as built, 0.000361 s; searched 0.000343 s), every hub pair kept
    from solvers import HUB_TRIES
    built = relay_hubs(t, lay, 0, HUB_TRIES)
    searched = res.extra["searched"]
    assert set(searched) == {"expander", "relay hubs"} and min(searched, key=lambda k: searched[k]["ranked_s"]) == "relay hubs"
    assert res.extra["moves_kept"] > 0 and res.objective < problem(t, 6).score(built, "best")[0] * (1 - 1e-3)
    pairs = lambda w: {(min(a, b), max(a, b)) for a, b in w.circuit_array[:, [1, 3]].tolist() if min(a, b) < hubs}
    assert pairs(res.artifact) == pairs(built)


@pytest.mark.parametrize("threads", [1, 2])
def test_ctrl_c_while_searching_the_hubs_answers_them_as_built(monkeypatch, no_near_moore, threads):
    # Ctrl-C in the two searches (the hubs, pinned, beside the best start): on one thread the second, run
    # after the first; on two, the one in this process while the helper process runs the hubs' (given up):
    # the hubs as built, which beat the first start as built, with their score in hand; no ranking, no wait
    import solvers.local_search as ls
    from solvers import HUB_TRIES
    from solvers.structured import relay_hubs
    real, calls = ls.improve_two_hop, []

    def stop(*a, **k):
        calls.append(1)
        if len(calls) == threads % 2 + 1:
            raise KeyboardInterrupt
        return real(*a, **k)
    monkeypatch.setattr(ls, "improve_two_hop", stop)
    t = _hubs_demand()
    p = problem(t, 6)
    res = wire(p, "search", SolveParams(time_limit_s=6, threads=threads))
    assert len(calls) == threads % 2 + 1 and res.limit.value == "interrupt" and res.status == SolveStatus.FEASIBLE
    assert res.extra["start"] == "relay hubs" and not wiring_violations(res.artifact)
    assert res.objective == pytest.approx(p.score(relay_hubs(t, p.layout, 0, HUB_TRIES), "best")[0], rel=1e-9)


def test_starts_ranked_by_byte_hops_are_timed_by_ecmp_against_the_searched_wiring(monkeypatch, no_near_moore):
    # beyond SCORED_STARTS_MAX the starts are ranked by byte-hops and never timed; when the moves made the
    # wiring worse, the start as built, timed by ECMP, is the answer (moe5t-576 at 5 s, where MWU had a few
    # rounds: 16% above the bound -> 7.1%)
    import solvers
    from solvers import baseline_wiring
    t = np.full((56, 56), 1e6)
    np.fill_diagonal(t, 0)
    p = problem(t, 4)
    worse = baseline_wiring(p, "torus", 0)
    monkeypatch.setattr(solvers, "SCORED_STARTS_MAX", 8)
    monkeypatch.setattr(solvers, "_moves", lambda problem, params, jobs, *a, **k:
                        [(worse, 0.0, 1, 1, solvers.Limit.TIME) for _ in jobs])
    said: list = []
    res = wire(p, "search", SolveParams(time_limit_s=3, progress=said.append))
    assert any("starts (hop-bytes)" in m for m in said)
    start = baseline_wiring(p, res.extra["start"], 0)
    assert res.extra.get("kept_start") and res.artifact.circuits == start.circuits
    assert res.objective == pytest.approx(p.score(start, "ecmp")[0], rel=1e-9) and res.extra["routing"] == "ecmp"
    assert not wiring_violations(res.artifact)
    # moves that left the start as built: nothing to time it against, the answer is its own best routing
    monkeypatch.setattr(solvers, "_moves", lambda problem, params, jobs, *a, **k:
                        [(start, 0.0, 1, 0, solvers.Limit.TIME) for _ in jobs])
    res = wire(p, "search", SolveParams(time_limit_s=3))
    assert not res.extra.get("kept_start") and res.artifact.circuits == start.circuits
    assert res.objective <= p.score(start, "ecmp")[0] * (1 + 1e-9)


def test_two_searched_starts_never_answer_worse_than_the_better_start_as_built(monkeypatch, no_near_moore):
    # both searches made their wirings worse than the hubs as built (the expander's wiring, here) and tie in
    # the ranking, which then keeps the first start's name: the answer is still the hubs as built, the better
    # start (the run's first branch's start was the fallback before: llama405b-tp8pp4-32's milp at 30 s
    # answered the searched greedy start, 0.0129 s, where its coupled groups' wiring as built took 0.012304 s)
    import solvers
    from solvers import HUB_TRIES, baseline_wiring
    from solvers.structured import relay_hubs
    t = _hubs_demand()
    p = problem(t, 6)
    worse = baseline_wiring(p, "expander", 0)
    monkeypatch.setattr(solvers, "_moves", lambda problem, params, jobs, *a, **k:
                        [(worse, 0.0, 1, 1, solvers.Limit.TIME) for _ in jobs])
    res = wire(p, "search", SolveParams(time_limit_s=6))
    hubs = p.score(relay_hubs(t, p.layout, 0, HUB_TRIES), "best")[0]
    assert hubs < p.score(worse, "best")[0] * (1 - 1e-3)
    assert set(res.extra["searched"]) == {"expander", "relay hubs"} and res.extra.get("kept_start")
    assert res.extra["start"] == "relay hubs" and res.objective == pytest.approx(hubs, rel=1e-9)
    assert not wiring_violations(res.artifact)


def test_the_rival_is_the_lowest_floor_among_wirings_whose_routing_stopped_close_to_the_best():
    from solvers import _rival, baseline_wiring
    t = np.full((24, 24), 1e6)
    np.fill_diagonal(t, 0)
    p = problem(t, 4)
    aside = {"torus": baseline_wiring(p, "torus", 0), "expander": baseline_wiring(p, "expander", 0)}
    assert p.time_floor(aside["expander"]) < p.time_floor(aside["torus"])
    going = {"run": {}}                   # an MWU run that can go on
    # the torus scored 1% faster, both routings cut short: the expander's lower floor goes on
    scores = {"torus": (0.99e-3, "mwu (40 rounds)"), "expander": (1e-3, "mwu (35 rounds)")}
    assert _rival(p, aside, scores, {"torus": going, "expander": going})[0] == "expander"
    # a routing that finished, or a gap beyond RIVAL_CLOSE: the faster as scored
    assert _rival(p, aside, {**scores, "torus": (0.99e-3, "path-lp (optimal)")}, {"torus": {}, "expander": going})[0] == "torus"
    assert _rival(p, aside, {**scores, "torus": (0.9e-3, "mwu (40 rounds)")}, {"torus": going, "expander": going})[0] == "torus"


def test_heavy_pairs_get_the_circuits_their_bytes_fill_and_keep_them():
    from solvers.local_search import improve_hops, improve_two_hop
    from solvers.structured import heavy_pairs
    n = 32
    g = np.arange(n) // 4
    t = np.full((n, n), 1e6)                            # a light all-to-all (EP) ...
    t[g[:, None] == g[None, :]] = 20e6                  # ... and TP groups of 4 with heavy pairs
    np.fill_diagonal(t, 0)
    p = problem(t, 8)
    w, pinned = heavy_pairs(p, seed=1)
    assert not wiring_violations(w) and pinned == {(a, b) for a in range(n) for b in range(a + 1, n) if g[a] == g[b]}
    adj = w.adjacency()
    assert all(adj[a, b] >= 2 for a, b in pinned) and heavy_pairs(p, seed=1)[0] == w
    for improve in (improve_hops, improve_two_hop):     # the search never moves them
        moved = improve(w, t, time_limit_s=60, seed=0, max_moves=400, pinned=pinned)[0].adjacency()
        assert all(moved[a, b] >= adj[a, b] for a, b in pinned)
    assert heavy_pairs(problem(np.full((n, n), 1e6) - np.diag(np.full(n, 1e6)), 8)) is None   # nothing heavy
    res = wire(p, "search", SolveParams(time_limit_s=10, max_moves=400))    # (a budget: 2 s, the clock's answer)
    assert res.extra["start"] == "heavy pairs" and not wiring_violations(res.artifact)
    assert all(res.artifact.adjacency()[a, b] >= 2 for a, b in pinned)
    assert res.objective < wire(p, "expander", SolveParams()).objective


def test_exact_colouring_decides_class_one_and_two():
    from solvers.colouring import colour_cpsat, colour_or_proof
    petersen = list(nx.petersen_graph().edges())     # 3-regular, class 2: four switches needed
    assert colour_cpsat(OCSLayout.uniform(10, 3), petersen, time_limit_s=20) is None
    cs = colour_cpsat(OCSLayout.uniform(10, 4), petersen, time_limit_s=20)
    w = Wiring(10, 4, cs, OCSLayout.uniform(10, 4))
    assert not wiring_violations(w) and len(cs) == 15
    k4 = list(nx.complete_graph(4).edges())           # class 1: three switches suffice
    assert colour_cpsat(OCSLayout.uniform(4, 3), k4) is not None
    # the local search alone finds colourings, the same on every run (class 2 here is proven by CP-SAT's
    # presolve, which runs before it); after it the full search still proves class 2
    ls = colour_cpsat(OCSLayout.uniform(10, 4), petersen, time_limit_s=20, threads=1, ls_share=1.0)
    assert ls == colour_cpsat(OCSLayout.uniform(10, 4), petersen, time_limit_s=20, threads=1, ls_share=1.0)
    assert not wiring_violations(Wiring(10, 4, ls, OCSLayout.uniform(10, 4)))
    assert colour_or_proof(OCSLayout.uniform(10, 3), petersen, 2.0, ls_share=1.0)[0] is None
    assert colour_or_proof(OCSLayout.uniform(10, 3), petersen, 20.0, ls_share=0.1) == (None, True)


def test_topoopt_colours_itself_with_every_port_used():
    from solvers.baselines import topoopt
    rng = np.random.default_rng(3)
    t = rng.random((64, 64)) * 1e6
    np.fill_diagonal(t, 0)
    lay = OCSLayout.uniform(64, 8)
    w = topoopt(t, lay)
    assert not wiring_violations(w) and (w.degree() == 8).all()


def _most_by_cpsat(layout, pairs) -> int:
    """The most of `pairs` the switches of `layout` hold, by CP-SAT (a check on `most_on_switches`)."""
    from ortools.sat.python import cp_model
    m, cap, on_s = cp_model.CpModel(), layout.capacity, {}
    xs = []
    for a, b in pairs:
        x = {s: m.NewBoolVar("") for s in np.flatnonzero((cap[a] > 0) & (cap[b] > 0)).tolist()}
        m.Add(sum(x.values()) <= 1)
        xs += list(x.values())
        for s, v in x.items():
            on_s.setdefault((a, s), []).append(v)
            on_s.setdefault((b, s), []).append(v)
            on_s.setdefault(("radix", s), []).append(v)
    for (a, s), vs in on_s.items():
        m.Add(sum(vs) <= (layout.switch_radix[s] // 2 if a == "radix" else int(cap[a, s])))
    m.Maximize(sum(xs))
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 2
    assert solver.Solve(m) == cp_model.OPTIMAL
    return round(solver.ObjectiveValue())


def test_most_on_switches_keeps_the_heavier_pair_where_the_count_ties():
    """One OCS of radix 2 holds one circuit; (0, 1) and (1, 2) both want it. With weights the heavier stays,
    whichever the greedy start took (its ties are drawn from the seed); lp-round weighs its pairs so."""
    from solvers.colouring import most_on_switches
    lay = OCSLayout(np.zeros((3, 1), dtype=np.int64), (2,))
    a, b = np.array([0, 1]), np.array([1, 2])
    for seed in range(6):
        assert (most_on_switches(lay, a, b, seed) >= 0).sum() == 1
        assert most_on_switches(lay, a, b, seed, weight=np.array([1.0, 1.5])).tolist() == [-1, 0]
        assert most_on_switches(lay, a, b, seed, weight=np.array([1.5, 1.0])).tolist() == [0, -1]


@pytest.mark.parametrize("n, ports, radix", [(24, 6, 8), pytest.param(36, 6, 12, marks=pytest.mark.slow), (48, 4, 16)])
def test_the_torus_on_split_planes_keeps_the_most_of_its_circuits_the_switches_hold(n, ports, radix):
    """Planes split over smaller OCSes hold no whole torus (a neighbour pair shares an OCS on few planes). The
    pairs that did not colour were dropped from the end of the list until the rest coloured, which left
    accelerators with no circuit, and `wire --solver torus` had no answer (kimi-k2-288 on 96-port OCSes: 260
    of 2,592 circuits). Now `most_on_switches` keeps as many as the switches hold (CP-SAT's maximum here, on
    every case: a test that fails on a greedy count), the other ports are paired, and the wiring serves."""
    from solvers.baselines import torus3d, torus_dims
    from solvers.colouring import most_on_switches
    whole, lay = OCSLayout.planes(n, ports), OCSLayout.planes(n, ports, radix)
    full = torus3d(whole, torus_dims(n, ports))
    arr = full.circuit_array
    on = most_on_switches(lay, arr[:, 1], arr[:, 3])
    assert (on >= 0).sum() == _most_by_cpsat(lay, arr[:, [1, 3]].tolist()) < len(arr)
    w = torus3d(lay, torus_dims(n, ports))
    assert not wiring_violations(w) and (w.degree() == ports).all()
    assert torus3d(lay, torus_dims(n, ports)).circuits == w.circuits      # the same seed, the same circuits
    kept = Counter(map(tuple, np.sort(arr[:, [1, 3]], axis=1).tolist())) & \
        Counter(map(tuple, np.sort(w.circuit_array[:, [1, 3]], axis=1).tolist()))
    assert sum(kept.values()) >= (on >= 0).sum() - 2 * n        # the joins may move a few
    p = WiringProblem(TrafficMatrix(np.where(np.eye(n), 0, 1e6)), lay, 800.0)
    res = wire(p, "torus")
    assert np.isfinite(res.objective) and res.extra["structure"] == {"circuits": len(arr), "kept": sum(kept.values())}
    assert res.artifact.solve["structure"] == res.extra["structure"]          # said in the wiring file too
    whole_p = WiringProblem(TrafficMatrix(np.where(np.eye(n), 0, 1e6)), whole, 800.0)
    assert "structure" not in wire(whole_p, "torus").extra                   # whole planes hold it all


def test_ctrl_c_during_a_probe_keeps_the_first_round(monkeypatch):
    from dataclasses import replace
    import solvers.exact as ex
    real = ex._two_stage
    calls = []

    def stop_on_probe(problem, params, solve):
        calls.append(solve)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(problem, replace(params, time_limit_s=2), solve)

    monkeypatch.setattr(ex, "FIRST_SHARE", 0.1)
    monkeypatch.setattr(ex, "_two_stage", stop_on_probe)
    rng = np.random.default_rng(0)
    t = rng.integers(0, 5, (12, 12)).astype(float) * 1e6
    np.fill_diagonal(t, 0)
    res = ex.solve_milp(problem(t, 3), SolveParams(time_limit_s=30, backend="highs"))
    assert res.status == SolveStatus.FEASIBLE and len(calls) == 2     # the first round's answer, not proven
    assert res.limit.value == "interrupt" and res.artifact.solve["limit"] == "interrupt"
    assert res.artifact is not None and not wiring_violations(res.artifact) and res.bound <= res.objective


@pytest.mark.slow
def test_cpsat_and_milp_agree_on_random_instances():
    # 30 random 4-8 accelerator instances, 2-4 ports, demands in 1, 3.3 or 0.777 MB steps: both prove the optimum
    for seed in range(200, 230):
        rng = np.random.default_rng(seed)
        n, ports = int(rng.integers(4, 9)), int(rng.integers(2, 5))
        t = (rng.integers(0, 4, (n, n)) * rng.choice([1e6, 3.3e6, 7.77e5])).astype(float)
        np.fill_diagonal(t, 0)
        p = problem(t, ports)
        milp = wire(p, "milp", SolveParams(time_limit_s=30, backend="highs"))
        cp = wire(p, "cpsat", SolveParams(time_limit_s=30))
        assert milp.status == SolveStatus.OPTIMAL and cp.status == SolveStatus.OPTIMAL, seed
        assert cp.objective == pytest.approx(milp.objective, rel=1e-6), seed


def test_final_answers_are_scored_by_the_routing_lp_when_it_fits():
    # above EXACT_ROUTING_MAX the multi-path routing is an upper bound; "best" replaces it by the LP's optimum
    from synth.problem import EXACT_ROUTING_MAX
    n = EXACT_ROUTING_MAX + 4
    rng = np.random.default_rng(7)
    t = rng.random((n, n)) * 1e6
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    # the path LP first, certified by its column generation or, where that stops on degenerate duals, by the
    # arc LP (small enough here) in the clock left
    res = wire(p, "expander", SolveParams(seed=1))
    w = res.artifact
    from synth.routing import path_lp_routing
    mwu, how = p.score(w, "auto", time_limit_s=2.0)      # MWU (not the LP) at this size, on a short clock
    lp, _ = p.score(w, "optimal")
    assert how.startswith("mwu") and lp < mwu
    assert res.objective == pytest.approx(lp, rel=1e-9) and "optimal" in res.artifact.solve["routing"]
    # the path LP over MWU's paths, grown by column generation until no path has a negative reduced cost,
    # reaches the arc LP's optimum (it takes over where the arc LP is too big)
    from solvers.baselines import greedy
    worse = greedy(t, p.layout)
    for wiring, opt in ((w, lp), (worse, p.score(worse, "optimal")[0])):
        for rounds in (30, 1):       # one round: one path per demand, the rest from column generation
            value, how_path = path_lp_routing(p.network(wiring), t, time_limit_s=30, rounds=rounds)
            assert how_path.startswith("path-lp") and (rounds > 1 or " 0 generations" not in how_path)
            assert value == pytest.approx(opt, rel=1e-5), how_path
            assert value >= opt * (1 - 1e-9)       # a routing's time (its flows rescaled), never below the optimum


@pytest.mark.parametrize("fixed", [(Circuit(0, 1, 0, 4, 0),), (Circuit(1, 0, 1, 1, 1), Circuit(2, 2, 2, 5, 2))])
def test_cpsat_probes_keep_fixed_circuits(fixed):
    # fixed circuits pin switches: the metric-inequality master runs per switch; same optimum as the MILP
    p = problem(tp_pp_demand(3, 2, p2p=3e8), 3, fixed_circuits=fixed)
    milp = wire(p, "milp", SolveParams(time_limit_s=60, backend="highs"))
    cp = wire(p, "cpsat", SolveParams(time_limit_s=60))
    assert milp.status == cp.status == SolveStatus.OPTIMAL
    assert cp.objective == pytest.approx(milp.objective, rel=1e-6)
    assert set(fixed) <= set(cp.artifact.circuits) and not wiring_violations(cp.artifact)


def test_exact_solvers_start_no_worse_than_the_quick_baselines(monkeypatch):
    # a short first round on 20 accelerators is worse than the greedy / TopoOpt-style wirings: the exact
    # solvers start their probes from the best of them, and solve the LP relaxation bound once per problem
    import solvers.bounds as bounds
    calls = []
    real = bounds._solve_lp_relaxation
    monkeypatch.setattr(bounds, "_solve_lp_relaxation", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(20)
    t = rng.random((20, 20)) * 1e6
    np.fill_diagonal(t, 0)
    for solver in ("milp", "cpsat"):
        p = problem(t, 4)
        quick = min(wire(p, b).objective for b in ("greedy", "topoopt"))
        # above 16 accelerators they also start from the search's wiring (a fifth of the time; with a move
        # budget the search is repeatable, so the same search alone gives that start's time)
        searched = wire(p, "search", SolveParams(time_limit_s=4 * 0.2, max_moves=60)).objective
        res = wire(p, solver, SolveParams(time_limit_s=4, max_moves=60))
        assert res.objective <= min(quick, searched) * (1 + 1e-9) and res.bound <= res.objective
        assert not wiring_violations(res.artifact)
    assert len(calls) == 2          # one LP relaxation per problem, however many answers were scored


def test_lp_relaxation_is_not_solved_where_it_meets_the_injection_bound(monkeypatch):
    # the relaxation lies between the injection bound and the symmetric row sums (fractional direct circuits);
    # where they meet it is their value without the interior point, elsewhere it is solved as before
    import solvers.bounds as bounds
    calls = []
    real = bounds._solve_lp_relaxation
    monkeypatch.setattr(bounds, "_solve_lp_relaxation", lambda *a: calls.append(1) or real(*a))
    n = 10
    rng = np.random.default_rng(3)
    cases = {"uniform": (np.full((n, n), 1e6), False),
             "heavy rows": (np.full((n, n), 1e6) * (1 + np.arange(n)[:, None] % 3), False),
             "random": (rng.random((n, n)) * 1e6, True),
             "one heavy pair": (np.full((n, n), 1e5) + 4e6 * np.eye(n, k=1), True)}
    for name, (t, solved) in cases.items():
        t = t.copy()
        np.fill_diagonal(t, 0)
        for ports in (2, 3):
            p = problem(t, ports)
            before = len(calls)
            got = bounds.lp_relaxation_bound(p)
            assert (len(calls) > before) == solved, name
            assert got == pytest.approx(real(problem(t, ports), 30.0)[0], rel=1e-7), (name, ports)
            assert bounds.injection_bound(p) * (1 - 1e-8) <= got <= bounds.symmetric_injection(p) * (1 + 1e-9)


def test_lp_relaxation_holds_the_switches_where_they_bind(monkeypatch):
    """On planes split over switches of 4 ports, four groups of three (0, 4, 8 ...) exchange most bytes: their
    members share a switch on few ports. The LP relaxation with each accelerator's ports per switch and each
    switch's radix reaches the optimum the MILP proves on its own (with those rows left out of the LP: the
    relaxation of degrees alone is the injection bound, 2.9x lower); one switch per port index adds no rows."""
    import solvers.bounds as bounds
    n = 12
    group = np.arange(n) % 4
    t = np.where(group[:, None] == group[None, :], 4e6, 1e5)
    np.fill_diagonal(t, 0)
    p = WiringProblem(TrafficMatrix(t), OCSLayout.planes(n, 3, 4), 100.0)
    assert bounds.switches_bind(p.layout) and not bounds.switches_bind(OCSLayout.planes(n, 3))
    assert not bounds.switches_bind(OCSLayout.planes(n, 3).with_spare(1))      # a dark plane restricts nothing
    with_rows = bounds.lp_relaxation_bound(p)
    monkeypatch.setattr(bounds, "switches_bind", lambda layout: False)
    alone = wire(replace(p), "milp", SolveParams(time_limit_s=60))
    assert alone.status == SolveStatus.OPTIMAL and alone.extra["bounds"]["lp_relaxation"] < 0.4 * alone.objective
    assert with_rows == pytest.approx(alone.objective, rel=1e-6) and with_rows <= alone.objective


@pytest.mark.slow
def test_heavy_pairs_on_split_planes_are_placed_by_a_model_that_sees_the_switches():
    """On planes split over OCSes smaller than a plane (the spread plan) a TP pair holds circuits only on the
    OCSes both reach, and one OCS's matching serves several pairs: `on_switches` places the relay count's
    allocation with an exact model. Its wiring fits the switches, gives every pinned pair two or more circuits,
    repeats with the seed, and beats greedy's pair-by-pair placement; the exact back-ends start from it too."""
    from solvers import baseline_wiring
    from solvers.bounds import switches_bind
    from solvers.structured import heavy_pairs
    n = 16
    g = np.arange(n) // 8
    t = np.where(g[:, None] == g[None, :], 2e8, 0.0)    # two TP groups of 8 (llama405b-tp8pp2-16's shape) ...
    t[np.arange(8), np.arange(8) + 8] = 2e7             # ... and the pipeline's hand-off
    np.fill_diagonal(t, 0)
    p = WiringProblem(TrafficMatrix(t), OCSLayout.planes(n, 18, 8), 800.0)
    assert switches_bind(p.layout)
    w, pinned = heavy_pairs(p, seed=1)
    assert not wiring_violations(w) and pinned and heavy_pairs(p, seed=1)[0] == w
    adj = w.adjacency()
    assert all(adj[a, b] >= 2 for a, b in pinned)
    placed, greedy = p.score(w, "best", 20)[0], p.score(baseline_wiring(p, "greedy"), "best", 20)[0]
    assert placed < greedy                              # 0.000933 s against 0.000981 s
    res = wire(p, "milp", SolveParams(time_limit_s=10))
    assert not wiring_violations(res.artifact) and res.objective <= placed * (1 + 1e-9)


def test_odd_set_rows_hold_on_every_wiring_and_cut_what_no_colouring_realizes():
    """Each switch is a matching, so a set of accelerators holds at most sum over switches of floor(its ports
    there / 2) circuits inside (Edmonds' odd-set rows, `matching_cap`): 3 for a triple on three whole planes,
    where the degrees allow 4.5. The caps hold on every wiring the switches realize (whole and split planes,
    several seeds; on split planes also each switch's own triples, `switch_triples`), and the multigraph they
    cut (a doubled pair beside two single circuits) has no colouring on three planes."""
    from itertools import combinations

    import solvers.bounds as bounds
    from solvers.baselines import expander
    from solvers.colouring import colour_or_proof
    whole, split = OCSLayout.planes(12, 3), OCSLayout.planes(12, 3, 4)
    U = np.array(list(combinations(range(12), 3)))
    assert (bounds.matching_cap(whole.capacity[U].sum(axis=1), whole.switch_radix) == 3).all()
    assert colour_or_proof(OCSLayout.planes(3, 3), [(0, 1), (0, 1), (0, 2), (1, 2)], 10.0) == (None, True)
    assert colour_or_proof(OCSLayout.planes(3, 3), [(0, 1), (0, 2), (1, 2)], 10.0)[0] is not None
    on_switch = [bounds.switch_triples(split, s) for s in range(split.switches)]
    assert sum(c.size for _, c in on_switch) > 0 and all((c == 1).all() for _, c in on_switch)
    for lay in (whole, split):
        caps = bounds.matching_cap(lay.capacity[U].sum(axis=1), lay.switch_radix)
        for seed in range(4):
            w = expander(lay, seed)
            adj = w.adjacency()
            assert (adj[U[:, 0], U[:, 1]] + adj[U[:, 0], U[:, 2]] + adj[U[:, 1], U[:, 2]] <= caps).all()
            per = np.zeros((lay.switches, 12, 12), dtype=np.int64)
            for c in w.circuits:
                per[c.switch, c.a, c.b] += 1
                per[c.switch, c.b, c.a] += 1
            for s, (V, c) in enumerate(on_switch if lay is split else []):
                assert (per[s, V[:, 0], V[:, 1]] + per[s, V[:, 0], V[:, 2]] + per[s, V[:, 1], V[:, 2]] <= c).all()
    # the relay count's demand clusters: groups of three on three whole planes hold 3 circuits inside, not
    # (9 - 1) // 2 = 4; the count rises with it (0.000279 -> 0.000283 s), below the proven optimum (0.00036 s)
    group = np.arange(12) % 4
    t = np.where(group[:, None] == group[None, :], 4e6, 1e5)
    np.fill_diagonal(t, 0)
    assert 0.000283 <= relay_count_bound(WiringProblem(TrafficMatrix(t), whole, 100.0)) <= 0.00036


def test_highs_gets_the_model_in_bulk_and_stops_at_its_deadline():
    # solvers.highs.pulp_highs passes PuLP's model in one call per block: the same optimum as PuLP's own HiGHS
    # on a model with every kind of row and bound; past its deadline it returns unsolved without running
    import pulp
    from solvers.highs import pulp_highs

    def model():
        prob = pulp.LpProblem("m", pulp.LpMaximize)
        x = [prob.add_variable(f"x{i}", 0, 3, cat="Integer") for i in range(6)]
        y = prob.add_variable("y", None, 2.5)
        prob += pulp.lpSum((i + 1) * v for i, v in enumerate(x)) + y
        prob += pulp.lpSum(x) <= 7
        prob += x[0] + x[5] >= 1
        prob += x[1] - x[2] == 0
        prob += y - x[3] >= -10
        return prob, x, y
    ref, xr, yr = model()
    ref.solve(pulp.HiGHS(msg=False))
    ours, xo, yo = model()
    ours.solve(pulp_highs(time.perf_counter() + 10, msg=False))
    assert pulp.LpStatus[ours.status] == "Optimal"
    assert pulp.value(ours.objective) == pytest.approx(pulp.value(ref.objective))
    assert [v.value() for v in xo] == pytest.approx([v.value() for v in xr]) and yo.value() == pytest.approx(2.5)
    late, _, _ = model()
    late.solve(pulp_highs(time.perf_counter() - 1, msg=False))
    assert pulp.LpStatus[late.status] == "Not Solved"
    assert late.sol_status == pulp.LpSolutionNoSolutionFound


@pytest.mark.parametrize("solver", ["milp", "cpsat"])
def test_ctrl_c_stops_a_long_solve_promptly(solver, ctrl_c_on):
    # HiGHS and CP-SAT run in C++ where KeyboardInterrupt cannot reach them: a real SIGINT must still stop the
    # solve within seconds and return the best wiring so far, marked "interrupt"
    from synth.bench import load_suite, suite_problem
    case = next(c for c in load_suite("instances/wiring/suite.toml") if c["name"] == "llama405b-16-time")
    res, wall = _wire_with_ctrl_c_after(4.0, suite_problem(case), solver)
    assert wall < 60
    assert res.limit.value == "interrupt" and res.status == SolveStatus.FEASIBLE
    assert res.artifact is not None and not wiring_violations(res.artifact)


def _wire_with_ctrl_c_after(seconds, p, solver):
    """wire(p, solver) with a 300 s limit and a real SIGINT after `seconds`: (result, wall seconds)."""
    import os
    import signal
    import threading
    timer = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    try:
        res = wire(p, solver, SolveParams(time_limit_s=300))
    finally:
        timer.cancel()
    return res, time.perf_counter() - t0


def test_ctrl_c_during_the_search_that_seeds_an_exact_solve(ctrl_c_on):
    # above 16 accelerators the exact solvers first run the search (up to a minute of a 300 s limit): a SIGINT
    # then ends the command at once with the search's wiring so far, marked "interrupt"
    rng = np.random.default_rng(21)
    t = rng.random((24, 24)) * 1e6
    np.fill_diagonal(t, 0)
    res, wall = _wire_with_ctrl_c_after(3.0, problem(t, 4), "milp")
    assert wall < 30
    assert res.limit.value == "interrupt" and res.status == SolveStatus.FEASIBLE
    assert res.artifact is not None and not wiring_violations(res.artifact)


def test_ctrl_c_during_the_moves_on_both_cores(ctrl_c_on):
    # a real SIGINT while this process and the helper both run the search's moves: the helper (in a session of
    # its own, which a terminal's Ctrl-C does not reach) is stopped, and the start answers at once
    from synth.routing import _Helper, _cores
    if _cores() < 2:
        pytest.skip("one core: no helper")
    import os
    import signal
    import threading
    t = np.full((40, 40), 1e6) * (1 + (np.arange(40)[:, None] % 3))
    np.fill_diagonal(t, 0)
    said, busy = [], []

    def ctrl_c():
        busy.append(_Helper._lock.locked() and any("starts:" in m for m in said))   # moves under way, beside
        os.kill(os.getpid(), signal.SIGINT)
    timer = threading.Timer(4.0, ctrl_c)
    t0 = time.perf_counter()
    timer.start()
    try:
        res = wire(problem(t, 4), "search", SolveParams(time_limit_s=300, progress=said.append))
    finally:
        timer.cancel()
    wall = time.perf_counter() - t0
    assert busy == [True]
    assert wall < 30 and res.limit.value == "interrupt" and res.status == SolveStatus.FEASIBLE
    assert res.extra["moves_tried"] == 0 and "beside" not in res.extra and not wiring_violations(res.artifact)
    assert _Helper._proc is None and not _Helper._lock.locked()


def test_path_lp_by_pdlp_beyond_the_interior_points_size(monkeypatch):
    # on more links than PATH_LP_IPM_MAX_LINKS the path LPs are solved by PDLP: the value is still a routing's
    # time (never below the arc LP's optimum, within PDLP's tolerance of it), and "no improving path" under
    # its approximate duals is not called the optimum; a PDLP that stops short still answers with its iterate
    import synth.network as network
    from solvers import baseline_wiring
    import synth.routing as routing
    n = 20
    rng = np.random.default_rng(3)
    t = rng.random((n, n)) * 1e6
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    net = p.network(baseline_wiring(p, "expander", 0))
    opt = p.score(baseline_wiring(p, "expander", 0), "optimal")[0]
    ipm, how_ipm = routing.path_lp_routing(net, t, time_limit_s=30, rounds=30)
    assert "pdlp" not in how_ipm
    monkeypatch.setattr(routing, "PATH_LP_IPM_MAX_LINKS", 0)
    methods = []
    solve = network._solve_lp

    def spy(*args, **kw):
        methods.append(args[11] if len(args) > 11 else kw.get("method", "ipm"))
        return solve(*args, **kw)
    monkeypatch.setattr(network, "_solve_lp", spy)
    value, how = routing.path_lp_routing(net, t, time_limit_s=30, rounds=30)
    assert methods and set(methods) == {"pdlp"} and how.startswith("path-lp") and "pdlp" in how
    assert "optimal" not in how
    assert opt * (1 - 1e-9) <= value <= opt * (1 + 1e-4)

    def stopped(*args, **kw):         # the iterate of a PDLP that stopped short: it stands, no retry
        status, obj, x = solve(*args, **kw)
        return "Unknown", float("nan"), x
    monkeypatch.setattr(network, "_solve_lp", stopped)
    value, how = routing.path_lp_routing(net, t, time_limit_s=30, rounds=30)
    assert how.endswith("pdlp, unconverged)") and opt * (1 - 1e-9) <= value <= opt * (1 + 1e-4)
    # a PDLP that stops with no point (its clock) is asked again without MWU's earliest tenth of the paths
    # (every demand kept): that one converges, and column generation goes on from it
    columns = []

    def first_stops(*args, **kw):
        columns.append(args[1].shape[1])
        if len(columns) == 1:
            return "Time limit reached", float("nan"), np.empty(0)
        return solve(*args, **kw)
    monkeypatch.setattr(network, "_solve_lp", first_stops)
    value, how = routing.path_lp_routing(net, t, time_limit_s=30, rounds=30)
    assert "pdlp, retried" in how and "unconverged" not in how and len(columns) >= 2
    assert columns[1] < columns[0] and opt * (1 - 1e-9) <= value <= opt * (1 + 1e-4)
    # a PDLP with nothing to show: MWU goes on from its last round (when asked to), as if it had run alone
    monkeypatch.setattr(network, "_solve_lp", lambda *args, **kw: ("Time limit reached", float("nan"), np.empty(0)))
    alone = routing.mwu_routing(net, t, rounds=80, time_limit_s=30)[0]
    assert routing.path_lp_routing(net, t, time_limit_s=30, rounds=30) == \
        (routing.mwu_routing(net, t, rounds=30, time_limit_s=30)[0], "mwu (30 rounds)")
    assert routing.path_lp_routing(net, t, time_limit_s=30, rounds=30, mwu_rounds=80) == (alone, "mwu (80 rounds)")


def test_path_lp_handles_paths_longer_than_64_hops():
    # paths are hashed position by position: a 70-hop path on a ring of 140 needs 71 multipliers
    from synth.network import Network
    from synth.routing import path_lp_routing
    n = 140
    ring = Network.from_pairs("ring", n, n, [(a, (a + 1) % n) for a in range(n)], 1.0, 0.0)
    dem = np.zeros((n, n))
    dem[0, 70] = 2.0
    value, how = path_lp_routing(ring, dem, rounds=20)
    assert value == pytest.approx(1.0, rel=1e-6)   # half each way round (MWU or the path LP, whichever is lower)


def _pipeline(stages, size, inner=1e6, handoff=1e4):
    """TP groups of `size` per pipeline stage (all-to-all inside), stage s hands `handoff` to stage s + 1."""
    n = stages * size
    t = np.zeros((n, n))
    for s in range(stages):
        g = slice(s * size, (s + 1) * size)
        t[g, g] = inner
        if s + 1 < stages:
            t[np.arange(size) + s * size, np.arange(size) + (s + 1) * size] = handoff
    np.fill_diagonal(t, 0)
    return t


def test_coupled_groups_are_found_only_when_identical_and_lightly_tied():
    from solvers.coupled import coupled_groups
    t = _pipeline(2, 4)
    assert [g.tolist() for g in coupled_groups(problem(t, 4))] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    heavy = _pipeline(2, 4, handoff=5e6)          # more bytes between the groups than inside: not groups
    assert coupled_groups(problem(heavy, 4)) is None
    skew = t.copy()
    skew[0, 1] = 2e6                               # the groups differ
    assert coupled_groups(problem(skew, 4)) is None
    assert coupled_groups(problem(t, 4, policy="direct")) is None


@pytest.mark.parametrize("stages", [2, 4])
def test_coupled_groups_are_wired_once_copied_and_joined(stages):
    from solvers import wire as wire_
    from solvers.coupled import coupled_groups, coupled_start
    t = _pipeline(stages, 4)
    p = problem(t, 4)
    groups = coupled_groups(p)
    res = coupled_start(p, "milp", SolveParams(time_limit_s=20), groups, wire_)
    w = res.artifact
    assert not wiring_violations(w) and np.isfinite(res.objective)
    adj = w.adjacency()
    for s in range(1, stages):                     # every group wired like the first, position by position
        g = slice(4 * s, 4 * s + 4)
        assert (adj[g, g] == adj[:4, :4]).all()
    for s in range(stages - 1):                    # every hand-off has a circuit between its two stages
        assert adj[4 * s:4 * s + 4, 4 * s + 4:4 * s + 8].sum() >= 1
    # the whole-instance solve starts from it, so it is never worse
    full = wire_(p, "milp", SolveParams(time_limit_s=4))
    assert full.objective <= res.objective * (1 + 1e-9) and not wiring_violations(full.artifact)


def test_coupled_groups_held_beyond_the_hand_offs_repeat_the_ring():
    """Four stages on four held ports each: the hand-offs ask for a ring (two ports); the other two ports repeat
    it, so every hand-off has two circuits. Before, the crossing bytes alone chose the extra matchings and put
    three circuits on the first and last hand-offs and one on the middle one (llama405b-tp8pp4-32 under phases,
    four held: 0.0128832 s, now 0.0126301 s, better than two held)."""
    from solvers import wire as wire_
    from solvers.coupled import coupled_groups, coupled_start
    p = problem(_pipeline(4, 4), 4)
    res = coupled_start(p, "milp", SolveParams(time_limit_s=10), coupled_groups(p), wire_, more=2)
    assert res.extra["held"] == 4 and not wiring_violations(res.artifact)
    adj = res.artifact.adjacency()                 # (symmetric)
    between = {(a, b): int(adj[4 * a:4 * a + 4, 4 * b:4 * b + 4].sum()) for a in range(4) for b in range(a + 1, 4)}
    assert between == {(0, 1): 2, (1, 2): 2, (2, 3): 2, (0, 3): 2, (0, 2): 0, (1, 3): 0}


def test_coupled_groups_try_more_circuits_across(monkeypatch):
    """The circuits joining the groups are a trade (each costs a port inside its group, more carry the
    hand-off and relays sooner): the held ports the hand-off needs (one here) and up to MORE_HELD more are
    tried and the best kept; llama405b-tp8pp2-16's time optimum has two circuits across where the hand-off
    asks for one. Ctrl-C after a first try answers the best so far."""
    import solvers.coupled as coupled
    from solvers import wire as wire_
    p = problem(_pipeline(2, 4, handoff=1e5), 4)
    groups = coupled.coupled_groups(p)
    res = coupled.coupled_best(p, "milp", SolveParams(time_limit_s=8), groups, wire_)
    tried = res.extra["held_tried"]
    assert sorted(tried) == [1, 2, 3, 4] and res.extra["held"] == 4
    assert res.objective == min(tried.values()) == pytest.approx(1e-5) and tried[1] == pytest.approx(1.1e-5)
    assert not wiring_violations(res.artifact) and res.artifact.adjacency()[:4, 4:].sum() == 4
    full = wire_(p, "milp", SolveParams(time_limit_s=8))       # the solve block says what was tried
    assert full.artifact.solve["coupled_held"] == {str(k): v for k, v in tried.items()}
    assert full.objective <= res.objective * (1 + 1e-9)
    plain = coupled.coupled_start

    def interrupted(*a, **k):
        if a[-1] == 2:
            raise KeyboardInterrupt
        return plain(*a, **k)
    monkeypatch.setattr(coupled, "coupled_start", interrupted)
    res = coupled.coupled_best(p, "milp", SolveParams(time_limit_s=8), groups, wire_)
    assert res.limit == Limit.INTERRUPT and res.extra["held_tried"] == {k: tried[k] for k in (1, 2)}


def test_direct_policy_scores_an_unserved_demand_as_never_done():
    """Direct only: a demand without a circuit of its own is never served (inf, gap 1), not a huge number;
    the search starts from the greedy baseline, which gives every demand its circuit."""
    t = np.zeros((5, 5))
    for a, c in [(0, 1), (2, 3), (0, 2), (1, 4)]:
        t[a, c] = t[c, a] = 1e9
    prob = problem(t, 3, policy="direct")
    res = wire(prob, "expander", SolveParams(seed=0))
    assert res.objective == float("inf") and res.gap == 1.0 and res.status == SolveStatus.FEASIBLE
    res = wire(prob, "search", SolveParams(time_limit_s=5))
    assert res.objective == pytest.approx(0.01) and res.status == SolveStatus.OPTIMAL


def test_cli_writes_no_wiring_that_leaves_demand_unserved(tmp_path):
    """`wire` refuses an answer with an infinite objective (exit 2, one line, the file in place kept):
    here the expander under the direct policy, which leaves demands without a circuit of their own."""
    t = np.zeros((5, 5))
    for a, c in [(0, 1), (2, 3), (0, 2), (1, 4)]:
        t[a, c] = t[c, a] = 1e9
    m, out = str(tmp_path / "m.npy"), tmp_path / "w.json"
    np.save(m, t)
    out.write_text("keep")
    code, _, err = run("wire", m, "-o", str(out), "--ports", "3", "--port-bandwidth-gbps", "800", "--policy",
                       "direct", "--solver", "expander")
    assert code == 2 and err.count("\n") == 1 and "expander found no wiring that serves every pair" in err, err
    assert "on a circuit of its own" in err and out.read_text() == "keep"


def test_cli_spare_ports_stay_dark(tmp_path):
    m = str(tmp_path / "ring.npy")
    np.save(m, ring_demand(6))
    out = tmp_path / "w.json"
    code, stdout, _ = run("wire", m, "--ports", "3", "--port-bandwidth-gbps", "800", "--spare-ports", "1",
                          "--solver", "milp", "-o", str(out), "--json")
    assert code == 0 and json.loads(stdout)["status"] == "OPTIMAL"
    from synth.formats import load_wiring
    w = load_wiring(str(out))
    assert w.circuits and all(c.a_port < 2 and c.b_port < 2 for c in w.circuits)   # port 2 of each is spare
    assert (w.layout.switch_of_port[:, 2] == -1).all() and run("verify", str(out))[0] == 0
    out.write_text("keep")
    for k in ("3", "-1"):
        code, _, err = run("wire", m, "--ports", "3", "--port-bandwidth-gbps", "800", "--spare-ports", k,
                           "-o", str(out))
        assert code == 2 and "--spare-ports" in err and "ring.npy" in err and out.read_text() == "keep"


def test_problem_cache_keys_by_identity_and_keeps_the_last_few():
    from solvers.bounds import ProblemCache

    class P:
        pass
    cache = ProblemCache(size=2)
    a, b, c = P(), P(), P()
    cache[a] = 1
    assert a in cache and b not in cache and cache.setdefault(b, 2) == 2 and cache[a] == 1
    cache[c] = 3                         # a third problem: the oldest goes
    assert a not in cache and cache[b] == 2 and cache[c] == 3
    with pytest.raises(KeyError):
        cache[a]


def test_highs_ctrl_c_sees_a_sigint_while_the_main_thread_is_inside_c(ctrl_c_on):
    # HiGHS's MIP calls its interrupt callback from worker threads while the main thread sits in its run, where
    # Python signal handlers cannot run: the flag must still be set (by the wakeup-fd watcher) within moments
    import os
    import signal
    import threading
    from solvers.ctrl_c import HighsCtrlC
    seen = []
    with HighsCtrlC() as c:
        t0 = time.perf_counter()

        def other_thread():
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)
            while not c.hit and time.perf_counter() - t0 < 5:
                time.sleep(0.01)
            seen.append(time.perf_counter() - t0)

        import hashlib
        helper = threading.Thread(target=other_thread)
        helper.start()
        # one C call of about 1.7 s with the GIL released, as HiGHS's run: the Python handler waits for it
        hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 3_000_000)
        busy = time.perf_counter() - t0
        helper.join()
    assert c.hit and seen[0] < min(1.0, busy), (seen, busy)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


@pytest.mark.parametrize("solver", ["search", "milp", "cpsat", "expander"])
def test_ctrl_c_while_scoring_keeps_the_answer(monkeypatch, solver):
    # the final answer's routing LP or multi-path routing can take tens of seconds; a Ctrl-C there used to end
    # the command with nothing written (exit 130): now the answer stands, timed by ECMP, marked "interrupt"
    from synth.problem import WiringProblem
    real = WiringProblem.score

    def score(self, wiring, routing="auto", time_limit_s=20.0):
        if routing == "best":
            raise KeyboardInterrupt
        return real(self, wiring, routing, time_limit_s)

    monkeypatch.setattr(WiringProblem, "score", score)
    rng = np.random.default_rng(5)
    t = rng.integers(0, 4, (8, 8)).astype(float) * 1e6
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    res = wire(p, solver, SolveParams(time_limit_s=4))
    assert res.limit.value == "interrupt" and res.status == SolveStatus.FEASIBLE
    assert res.artifact is not None and not wiring_violations(res.artifact)
    assert res.bound <= res.objective < math.inf
    assert res.objective >= real(p, res.artifact, "optimal")[0] * (1 - 1e-9)      # ECMP or a start's score


@pytest.mark.parametrize("where", ["_scored_start", "best_bound"])
def test_ctrl_c_before_the_search_keeps_a_start(monkeypatch, where):
    # before the search begins (the bounds, the starts and their scores: seconds on large instances) a Ctrl-C
    # used to leave nothing; now the best start built so far is the answer, timed by ECMP
    import solvers

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(solvers, where, stop)
    rng = np.random.default_rng(21)
    t = rng.random((24, 24)) * 1e6
    np.fill_diagonal(t, 0)
    res = wire(problem(t, 4), "search", SolveParams(time_limit_s=10))
    assert res.limit.value == "interrupt" and res.status == SolveStatus.FEASIBLE
    assert res.artifact is not None and not wiring_violations(res.artifact)
    # the bound is asked for first, by `wire` itself, with a share of the clock
    said = "Ctrl-C while bounding" if where == "best_bound" else "Ctrl-C before the search"
    assert said in res.artifact.solve["routing"] and res.bound <= res.objective < math.inf


def test_ctrl_c_while_the_other_core_scores_the_hubs_gives_it_up(monkeypatch):
    # the relay hubs are scored in the helper process while this one scores the starts: a Ctrl-C there stops
    # the helper (its answer is never waited for) and the best start built so far answers
    import solvers
    from synth.routing import _Helper, _cores
    if _cores() < 2:
        pytest.skip("one core: the hubs are scored here")
    busy = []

    def stop(*args, **kwargs):
        busy.append(_Helper._lock.locked())
        raise KeyboardInterrupt

    monkeypatch.setattr(solvers, "_scored_start", stop)
    res = wire(problem(_hubs_demand(), 6), "search", SolveParams(time_limit_s=10))
    assert busy == [True] and _Helper._proc is None and not _Helper._lock.locked()
    assert res.limit.value == "interrupt" and not wiring_violations(res.artifact)
    # where the starts are ranked by byte-hops (beyond SCORED_STARTS_MAX accelerators) the hubs are scored
    # here, after them, with MWU's helper at hand
    monkeypatch.setattr(solvers, "SCORED_STARTS_MAX", 20)
    wire(problem(_hubs_demand(), 6), "search", SolveParams(time_limit_s=10))
    assert busy == [True, False]


def test_time_floor_is_below_every_routing():
    """`time_floor` (byte-hops over all capacity, each accelerator's bytes over its circuits) never exceeds the
    optimal routing's time; inf where a demand has no path; 0 where it does not apply."""
    from solvers.baselines import expander
    for seed in range(6):
        rng = np.random.default_rng(seed)
        n, ports = int(rng.integers(5, 12)), int(rng.integers(2, 5))
        t = rng.random((n, n)) * (rng.random((n, n)) < 0.6) * 1e6
        t[0] *= 4                          # a heavy sender: the per-accelerator term
        np.fill_diagonal(t, 0)
        p = problem(t, ports)
        w = expander(p.layout, seed)
        floor, opt = p.time_floor(w), p.score(w, "optimal")[0]
        assert 0 < floor <= opt * (1 + 1e-9), seed
        # phases routed one after another: the weighted sum of each phase's floor, above the floor of the step
        # at once (the same bytes over the same capacity, but the accelerators' terms add up)
        ph = (TrafficPhase("a", t * (rng.random((n, n)) < 0.5), 2.0), TrafficPhase("b", t.T.copy(), 1.0))
        pp = WiringProblem(phases_traffic(ph), p.layout, 800.0, "phases", phases=ph)
        floor, opt = pp.time_floor(w), pp.score(w, "optimal")[0]
        assert pp.as_time().time_floor(w) <= floor <= opt * (1 + 1e-9), seed
    apart = Wiring(4, 2, (Circuit(0, 0, 0, 1, 0), Circuit(0, 2, 0, 3, 0)), OCSLayout.uniform(4, 2))
    assert problem(ring_demand(4), 2).time_floor(apart) == math.inf
    assert problem(ring_demand(4), 2, objective="hops").time_floor(apart) == 0.0


def test_the_scoring_clock_goes_to_a_rival_the_search_cannot_beat(monkeypatch):
    """When the searched wiring's floor is above a wiring scored beside the search, its scoring is skipped and
    the rival's MWU goes on from where it stopped (kimi-k2-288: 0.00123805 -> 0.00123249 s)."""
    import synth.problem as sp
    from solvers import _search
    from solvers.baselines import expander
    monkeypatch.setattr(sp, "EXACT_ROUTING_MAX", 4)       # score by MWU alone, as beyond 3,000 links
    monkeypatch.setattr(sp, "PATH_LP_MAX_LINKS", 0)
    p = problem(ring_demand(12), 2)
    ring = wire(p, "milp", SolveParams(time_limit_s=30)).artifact
    state: dict = {}
    score = p.score(ring, "best", 0.3, resume=state)
    assert score[1].startswith("mwu") and 0 < state["run"] < 1000
    rounds = state["run"]
    start = expander(p.layout, 0)
    params = SolveParams(time_limit_s=3, max_moves=1)
    res = _search(p, params, start, "search", time.perf_counter(), {"start": "expander"},
                  p.score(start, "best", 0.3), None, ("ring", ring, score, state))
    assert res.artifact.circuits == ring.circuits
    assert res.extra["start"] == "ring" and state["run"] > rounds and res.objective <= score[0]
    assert not wiring_violations(res.artifact)
    # a rival the searched wiring may beat is not taken: the searched wiring is scored
    far = (score[0] * 1e3, score[1])
    res = _search(p, params, start, "search", time.perf_counter(), {"start": "expander"},
                  p.score(start, "best", 0.3), None, ("ring", ring, far, {}))
    assert res.extra["start"] == "expander"


def test_a_rival_that_beat_the_start_shares_the_scoring_clock(monkeypatch):
    """A rival that beat the start as built, and which the searched wiring's floor does not rule out: the
    searched wiring is scored on half the clock, and when it does not beat the rival, the rival's routing
    goes on from where it stopped (kimi-k2-288 with TP 4 under phases, 60 s: the relay V's 0.000541 ->
    0.000532 s). When it beats the rival's score but not its floor, the rival's routing goes on too and the
    better answer stands; a searched wiring below the rival's floor is the answer. A start that was not timed
    counts as beaten."""
    import synth.problem as sp
    from solvers import _search, baseline_wiring
    from solvers.baselines import expander
    monkeypatch.setattr(sp, "EXACT_ROUTING_MAX", 4)       # score by MWU, as beyond 48 accelerators
    monkeypatch.setattr(sp, "PATH_LP_MAX_LINKS", 0)
    t = np.full((12, 12), 1e9)
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    rival = expander(p.layout, 1)
    state: dict = {}
    score = p.score(rival, "best", 0.3, resume=state)
    start = baseline_wiring(p, "topoopt", 0)
    start_score = p.score(start, "best", 0.3)
    assert start_score[0] > 1.2 * score[0] and p.time_floor(start) < score[0]
    rounds = state["run"]
    params = SolveParams(time_limit_s=3, max_moves=1, threads=1)     # one search: its one move loses to the rival
    said: list = []
    res = _search(p, replace(params, progress=said.append), start, "search", time.perf_counter(),
                  {"start": "topoopt"}, start_score, None, ("expander", rival, score, state))
    assert res.extra["start"] == "expander" and res.artifact.circuits == rival.circuits
    assert state["run"] > rounds and res.objective <= score[0] and not wiring_violations(res.artifact)
    assert any("still beats it" in m for m in said)
    # a rival the searched wiring beat as scored (here by ECMP, its multi-path routing not caught up yet) but
    # whose floor is below the searched answer: its routing goes on in the clock left, and the better stands
    # (kimi-k2-288 at 5 s: the near-Moore wiring's 0.00162 s by ECMP, floor 0.00117 s; 20% -> 7% above the bound)
    far, said = (score[0] * 1e3, "ecmp"), []
    res = _search(p, replace(params, progress=said.append, time_limit_s=6), start, "search", time.perf_counter(),
                  {"start": "topoopt"}, None, None, ("expander", rival, far, state))
    assert any("may still beat it" in m for m in said)
    assert res.extra["start"] == "expander" and res.objective <= score[0] and not wiring_violations(res.artifact)
    # a rival whose floor the searched answer beats is not routed on: the searched wiring is the answer
    torus = baseline_wiring(p, "torus", 0)
    torus_state: dict = {}
    torus_score = p.score(torus, "best", 0.3, resume=torus_state)
    assert p.time_floor(torus) > start_score[0]
    said = []
    res = _search(p, replace(params, progress=said.append), start, "search", time.perf_counter(),
                  {"start": "topoopt"}, None, None, ("torus", torus, (torus_score[0] * 2, "ecmp"), torus_state))
    assert res.extra["start"] == "topoopt" and res.objective < p.time_floor(torus)
    assert not any("may still beat it" in m for m in said)


def test_a_rival_with_the_lower_floor_is_routed_on_first(monkeypatch):
    """A rival that beat the start as built, its routing unsettled, whose floor is below the searched wiring's:
    its routing goes on first, on half the clock; when it then beats the searched wiring's floor it is the
    answer, otherwise the searched wiring is scored on the rest and the better stands (kimi-k2-288 at 5 s:
    the searched expander took the clock first, 20% above the bound, where the near-Moore rival routed on
    gives 7%)."""
    import solvers
    import synth.problem as sp
    from solvers import _search, _unsettled, baseline_wiring
    from solvers.baselines import expander
    # ECMP's answer stands only while the multi-path routing behind it has not caught up; under phases, per phase
    assert _unsettled((1.0, "ecmp")) and _unsettled((1.0, "ecmp, path-lp (9 paths, 0 generations, optimal)"))
    assert not _unsettled((1.0, "optimal")) and not _unsettled((1.0, "path-lp (9 paths, 0 generations, optimal)"))
    monkeypatch.setattr(sp, "EXACT_ROUTING_MAX", 4)
    monkeypatch.setattr(sp, "PATH_LP_MAX_LINKS", 0)
    t = np.full((12, 12), 1e9)
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    rival, start = expander(p.layout, 1), baseline_wiring(p, "torus", 0)
    state: dict = {}
    score = p.score(rival, "best", 0.3, resume=state)
    assert p.time_floor(rival) < score[0] < p.time_floor(start)
    params = SolveParams(time_limit_s=3, max_moves=1, threads=1)
    said: list = []
    res = _search(p, replace(params, progress=said.append), start, "search", time.perf_counter(),
                  {"start": "torus"}, None, None, ("expander", rival, (1.0, "ecmp"), state))
    assert any("has the lower floor" in m for m in said) and not any("scoring the searched" in m for m in said)
    assert res.extra["start"] == "expander" and res.objective <= score[0] and not wiring_violations(res.artifact)
    real = solvers._rival_on
    monkeypatch.setattr(solvers, "_rival_on", lambda *a: replace(real(*a), objective=1.0))   # routes badly
    said = []
    res = _search(p, replace(params, progress=said.append), start, "search", time.perf_counter(),
                  {"start": "torus"}, None, None, ("expander", rival, (2.0, "ecmp"), {**state}))
    assert any("has the lower floor" in m for m in said) and any("scoring the searched" in m for m in said)
    assert res.extra["start"] == "torus" and res.objective < 1.0 and not wiring_violations(res.artifact)
    # a Ctrl-C while the searched wiring is scored: the better of the two stands, marked as interrupted
    monkeypatch.setattr(sp.WiringProblem, "score_or_quick", lambda *a, **k: (5.0, "ecmp (Ctrl-C while scoring)", True))
    res = _search(p, params, start, "search", time.perf_counter(), {"start": "torus"}, None, None,
                  ("expander", rival, (2.0, "ecmp"), {**state}))
    assert res.extra["start"] == "expander" and res.objective == 1.0 and res.limit == Limit.INTERRUPT


def _sweep_case(seed: int, sizes: tuple[int, int] = (6, 40), phases: bool = False) -> WiringProblem:
    """The random instance `seed` of the solver sweep (BENCHMARKS: "Search and lp-round against every
    baseline"): `sizes` accelerators (6-39; the exact models' sweep 13-30), 2-6 ports, one of five demand
    shapes, half of them on random layouts; `phases`: the demand split at random into two phases, the second
    with a ring beside it, weights 2 and 1."""
    rng = np.random.default_rng(seed)
    n, p = int(rng.integers(*sizes)), int(rng.integers(2, 7))
    kind = rng.choice(["rand", "a2a", "hot", "ring", "groups"])
    if kind == "rand":
        t = rng.random((n, n)) * (rng.random((n, n)) < 0.3) * 1e7
    elif kind == "a2a":
        t = np.ones((n, n)) * 1e6
    elif kind == "hot":
        t = np.ones((n, n)) * 1e5
        t[:, rng.choice(n, 2)] *= 20
    elif kind == "ring":
        t = np.roll(np.eye(n), 1, 1) * 1e7 + np.roll(np.eye(n), 3, 1) * 3e6
    else:
        g, t = int(rng.integers(2, 5)), np.zeros((n, n))
        for s in range(0, n, g):
            t[s:s + g, s:s + g] = 5e6
        t += rng.random((n, n)) * 2e5
    np.fill_diagonal(t, 0)
    if phases:
        mask = rng.random((n, n)) < 0.5
        ph = (TrafficPhase("a", t * mask, 2.0), TrafficPhase("b", t * ~mask + np.roll(np.eye(n), 1, 1) * 1e6, 1.0))
    else:
        objective = str(rng.choice(["time", "hops"]))
    if rng.random() < 0.5:
        lay = OCSLayout.uniform(n, p, None if rng.random() < 0.7 else int(rng.integers(max(2, n // 2), n + 1)))
    else:
        k = int(rng.integers(p, 2 * p + 1))
        lay = OCSLayout(rng.integers(0, k, size=(n, p)), tuple(int(x) for x in rng.integers(max(2, n // 2), n + 1, size=k)))
    if phases:
        return WiringProblem(phases_traffic(ph), lay, 100.0, objective="phases", phases=ph)
    return WiringProblem(TrafficMatrix(t), lay, 100.0, objective=objective)


@pytest.mark.parametrize("seed", [24, 35])
def test_search_and_lp_round_never_worse_than_a_baseline(seed):
    """The search did not start from greedy off the direct policy, and lp-round only from its rounding: on a
    ring with stride-3 chords over 19 accelerators on scattered switches the search ended 1.10x greedy's
    time, and lp-round on 9 accelerators in pairs 1.44x TopoOpt-style's. Both start from the best of them now,
    and keep their start when the moves do not beat it."""
    p = _sweep_case(seed)
    params = SolveParams(time_limit_s=2, seed=0, max_moves=300)
    best = min(wire(p, b, params).objective for b in BASELINES)
    for solver in ("search", "lp-round"):
        res = wire(p, solver, params)
        assert res.objective <= best * (1 + 1e-9), solver
        assert not wiring_violations(res.artifact)


@pytest.mark.parametrize("solver,case", [("milp", (317, (13, 31), False)), ("cpsat", (317, (13, 31), False)),
                                         ("milp", (409, (6, 40), True)), ("cpsat", (409, (6, 40), True))])
def test_exact_answer_never_worse_than_a_baseline(solver, case):
    """16 accelerators in groups of two on 6 ports, 5 s: the MILP's first wiring was the better of its own,
    greedy's and TopoOpt-style's (0.000282 s) while the expander, not among its starts, has 0.000248 s. Every
    baseline starts the exact models now, under the phases objective too (10 accelerators, two phases, two
    hot columns: the phases MILP found no wiring in 5 s and answered the expander, 1.8x TopoOpt-style)."""
    p = _sweep_case(*case)
    params = SolveParams(time_limit_s=5)
    best = min(wire(p, b, params).objective for b in BASELINES)
    res = wire(p, solver, params)
    assert res.objective <= best * (1 + 1e-9) and not wiring_violations(res.artifact)


def test_starts_whose_floor_cannot_win_are_not_scored(monkeypatch):
    """The search's starts are scored in the order of their floors (no routing beats a wiring's byte-hops over
    its capacity) and a start whose floor is no better than a time in hand is not scored at all: a ring on
    an all-to-all of 12 on 4 ports has a floor 3x the expander's time."""
    from solvers import _scored_start
    p = problem(np.where(np.eye(12), 0, 1e6), 4)
    ring = Wiring.from_pairs(12, 4, [(i, (i + 1) % 12) for i in range(12)], p.layout)
    good = wire(p, "expander").artifact
    assert p.time_floor(ring) > p.score(good)[0]
    seen, said = [], []
    score = WiringProblem.score
    monkeypatch.setattr(WiringProblem, "score", lambda self, w, *a, **k: seen.append(w) or score(self, w, *a, **k))
    name, w, _, scored = _scored_start(p, SolveParams(time_limit_s=5, progress=said.append),
                                       {"ring": ring, "expander": good})
    assert name == "expander" and seen == [good] and list(scored) == ["expander"]
    assert "ring: floor above that" in said[-1]


def test_lp_round_falls_back_where_its_rounding_leaves_a_pair_apart():
    """Two switches, radix 16 and 6: accelerators 3, 5 and 7 have ports on the second only, whose three
    circuits must all join them to the rest. The LP's rounding spends them elsewhere (objective inf before);
    lp-round now starts from greedy there (or the expander, the first that serves every pair) and reaches
    what milp and cpsat find in 20 s (0.0012 s, not proven: their bounds stay near half)."""
    sop = [[0, 0, 1], [0, 0, 0], [1, 0, -1], [-1, 1, -1], [1, 0, 1], [1, 1, 1], [1, 0, 1], [1, 1, 1]]
    p = WiringProblem(TrafficMatrix(np.where(np.eye(8), 0, 1e6)), OCSLayout(np.array(sop), (16, 6)), 100.0)
    res = wire(p, "lp-round", SolveParams(time_limit_s=3, max_moves=200))
    assert not wiring_violations(res.artifact) and res.extra["start"] in ("greedy", "topoopt", "expander")
    assert res.objective <= 0.0012 * (1 + 1e-6)


def test_realize_begins_no_restart_after_its_deadline(monkeypatch):
    """An odd ring on two ports of one switch each fails every colouring: 64 restarts took 2-3 s at 25
    accelerators (the torus baseline, built twice per exact solve). A deadline in the past leaves one."""
    import synth.realize as realize_mod
    calls = []
    once = realize_mod._realize_once
    monkeypatch.setattr(realize_mod, "_realize_once", lambda *a, **k: calls.append(1) or once(*a, **k))
    odd = [(i, (i + 1) % 7) for i in range(7)]
    with pytest.raises(Infeasible):
        realize_mod.realize(OCSLayout.uniform(7, 2), odd, deadline=time.perf_counter() - 1)
    assert len(calls) == 1
    with pytest.raises(Infeasible):
        realize_mod.realize(OCSLayout.uniform(7, 2), odd, restarts=5)
    assert len(calls) == 6


def test_a_colouring_cut_off_by_the_clock_proves_nothing(monkeypatch):
    """A CP-SAT probe excluded every proposal whose colouring was not found, also when the exact colouring
    only ran out of time, and could then call the probe infeasible: an unproven bound. Now such a proposal
    leaves the probe unsettled; one CP-SAT proves uncolourable is still excluded (an odd ring on 2 ports)."""
    import solvers.exact as exact_mod
    from solvers.benders import MetricCuts, probe
    from solvers.exact import _counts_or_proof, _index, _injection_cuts
    odd = problem(ring_demand(7), 2)
    assert _counts_or_proof(odd, {(i, (i + 1) % 7): 1 for i in range(7)}, False) == (None, True)
    p = problem(ring_demand(8), 2)
    ix = _index(p)
    monkeypatch.setattr(exact_mod, "_counts_or_proof", lambda *a, **k: (None, False))
    verdict, _, stats = probe(p, ix, _injection_cuts(MetricCuts(p, ix)), 1e9 / 100e9 * 1.5,
                              time.perf_counter() + 30, SolveParams(), [], False)
    assert verdict == "unknown" and stats["proposals"] >= 1 and stats["no_goods"] == 0


def test_no_per_switch_round_without_the_time():
    """An uncolourable relaxed answer got the per-switch model on at least 1 s, however little was left:
    10 accelerators, two phases, 3 s ended after 5.6 s."""
    from solvers.exact import _two_stage
    calls = []

    def solve(problem, params, per_switch):
        calls.append(per_switch)
        return SolveResult(SolveStatus.NO_SOLUTION, None, None, 0.0, "milp", "", 0, Limit.NONE,
                           extra={"uncolourable": True})
    p = problem(ring_demand(8), 2)
    res = _two_stage(p, SolveParams(time_limit_s=0.5), solve)
    assert calls == [False] and res.status == SolveStatus.NO_SOLUTION and res.limit == Limit.TIME
    _two_stage(p, SolveParams(time_limit_s=30), solve)
    assert calls == [False, False, True]


def test_exact_starts_whose_floor_cannot_win_are_not_scored(monkeypatch):
    """The exact models' starts (every baseline) are scored in the order of their floors, and one whose floor
    is no better than the model's answer is not scored at all."""
    from solvers.exact import _baseline_start
    p = problem(np.where(np.eye(12), 0, 1e6), 4)
    good = wire(p, "expander")
    ring = Wiring.from_pairs(12, 4, [(i, (i + 1) % 12) for i in range(12)], p.layout)
    seen = []
    score = WiringProblem.score_or_quick
    monkeypatch.setattr(WiringProblem, "score_or_quick", lambda self, w, *a, **k: seen.append(w) or score(self, w, *a, **k))
    res = _baseline_start(p, SolveParams(time_limit_s=5), good, "milp", None, 5, [("ring", ring)])
    assert p.time_floor(ring) > good.objective and seen == [] and res is good
    res = _baseline_start(p, SolveParams(time_limit_s=5), replace(good, objective=None, status=SolveStatus.NO_SOLUTION),
                          "milp", None, 5, [("expander", good.artifact), ("ring", ring)])
    assert seen == [good.artifact] and res.objective == good.objective


def test_baselines_are_built_once_per_problem():
    from solvers import baseline_wiring
    p = _sweep_case(3, (8, 30))
    assert baseline_wiring(p, "torus") is baseline_wiring(p, "torus")
    assert baseline_wiring(p, "torus", 1) is not baseline_wiring(p, "torus")


def test_the_lp_bound_takes_the_first_clock_it_is_given(monkeypatch):
    """The LP relaxation's bound is solved once per problem, on the clock of the first call (a solve now asks
    first, with a quarter of its limit): out of time it is left out, the other bounds stand. HiGHS out of time
    is HiGHS's status 1, given here by the LP call itself: at 1e-4 s HiGHS did not always look at its clock
    (once in a whole-suite run it solved this LP within that limit)."""
    import scipy.optimize
    linprog = scipy.optimize.linprog
    clocks = []

    def timed(*args, options, **kw):
        clocks.append(options["time_limit"])
        if options["time_limit"] < 1e-3:
            return scipy.optimize.OptimizeResult(status=1, x=None, message="Time limit reached")
        return linprog(*args, options=options, **kw)

    monkeypatch.setattr(scipy.optimize, "linprog", timed)
    rng = np.random.default_rng(5)
    t = rng.random((30, 30)) * 1e7 * (rng.random((30, 30)) < 0.4)
    np.fill_diagonal(t, 0)
    short = problem(t, 3)
    _, named = best_bound(short, time_limit_s=1e-4)
    assert "lp_relaxation" not in named and "relay_count" in named
    assert "lp_relaxation" not in best_bound(short)[1]
    assert "lp_relaxation" in best_bound(problem(t, 3))[1]
    assert clocks == [1e-4, LP_TIME_S]                  # the second call on `short` asked nothing


def test_the_wall_time_is_the_whole_solves(monkeypatch):
    """An exact model's answer that was one of its starts reported the time since the model began, not the
    seeding search before it (23 accelerators, 5 s: 1.2 s reported of 4.1)."""
    import solvers
    search_from = solvers._search_from
    monkeypatch.setattr(solvers, "_search_from", lambda *a, **k: time.sleep(1.0) or search_from(*a, **k))
    p = _sweep_case(4, (8, 30))
    t = time.perf_counter()
    res = wire(p, "milp", SolveParams(time_limit_s=3))
    assert res.wall_s >= time.perf_counter() - t - 0.05 and res.artifact.solve["wall_s"] == round(res.wall_s, 3)


def test_lp_round_keeps_the_pairs_that_colour_in_few_colourings(monkeypatch):
    """The rounding's pairs that do not colour were dropped one at a time, each try with 64 colouring
    restarts: 4,123 colourings and 35 s of a 3 s lp-round on 22 accelerators of a scattered layout (two
    phases, three fixed circuits). Then by bisection on how many to drop; now the most that the switches hold
    (`most_on_switches`) once the colouring fails. Either way a few dozen colourings."""
    import synth.realize as realize_mod
    from solvers import _lp_round, baseline_wiring
    p0 = _sweep_case(5, (8, 30), True)
    rng = np.random.default_rng(5)
    ex = baseline_wiring(p0, "expander", 0)
    p = replace(p0, fixed_circuits=tuple(ex.circuits[i] for i in rng.choice(len(ex.circuits), int(rng.integers(1, 4)),
                                                                             replace=False)))
    calls = []
    once = realize_mod._realize_once
    monkeypatch.setattr(realize_mod, "_realize_once", lambda *a, **k: calls.append(1) or once(*a, **k))
    w = _lp_round(p, SolveParams(time_limit_s=60))
    assert not wiring_violations(w) and len(calls) < 200
    assert p.as_time() is p.as_time() and p.phase_problems()[1][1] is p.phase_problems()[1][1]


def test_lp_round_beyond_the_lp_starts_from_heavy_pairs_only_when_they_score_best():
    """Beyond 40 accelerators lp-round started from the heavy pairs' wiring, pinned, whatever the baselines
    scored: 45 accelerators in two phases, heavy pairs 0.00572 s, TopoOpt-style 0.00351 s (lp-round ended at
    0.00224 s, the search from TopoOpt-style at 0.00138). Now the best of them starts. (That instance's
    TopoOpt-style is now realized as much as its switches hold, not mostly paired at random, and scores behind
    the heavy pairs; on this one, 48 accelerators on 4 ports, greedy 0.00159 s starts, the heavy pairs 0.00174.)"""
    p = _sweep_case(1, (20, 80), True)
    said: list = []
    res = wire(p, "lp-round", SolveParams(time_limit_s=10, max_moves=50, progress=said.append))
    assert any(m.startswith("starts:") and "heavy pairs" in m for m in said), said
    assert res.extra["start"] == "greedy" and not wiring_violations(res.artifact)


def test_auto_routing_holds_its_clock_up_to_exact_routing_max(monkeypatch):
    """routing="auto" ran the routing LP to the end whatever its clock up to 48 accelerators (a search's
    starts, a tenth of the clock each: four took 9.5 s of an 8 s solve on 47). The LP now gets the clock (1 s
    at least) and, out of it, ECMP and MWU answer: a routing's time, never below the LP's optimum."""
    import synth.problem as sp
    rng = np.random.default_rng(4)
    t = rng.random((20, 20)) * 1e6
    np.fill_diagonal(t, 0)
    p = problem(t, 3)
    w = wire(p, "expander", SolveParams()).artifact
    opt = p.score(w, "optimal")[0]
    real, limits = sp.optimal_routing, []

    def stopped(net, dem, time_limit_s=60.0, **kw):
        limits.append(time_limit_s)
        raise InvalidInput("routing LP stopped: Time limit reached", field="routing")
    monkeypatch.setattr(sp, "optimal_routing", stopped)
    value, how = p.score(w, "auto", time_limit_s=0.3)
    assert limits == [1.0] and not how.startswith("optimal") and value >= opt * (1 - 1e-9)
    monkeypatch.setattr(sp, "optimal_routing", real)
    assert p.score(w, "auto", time_limit_s=5.0) == (pytest.approx(opt, rel=1e-9), "optimal")


def test_the_other_core_searches_under_the_next_seed_and_the_fewer_byte_hops_win(monkeypatch):
    # one start: the helper process searches from it under seed + 1 while this process searches under the seed,
    # both on the whole clock (or move budget); the run with fewer byte-hops goes on to the scoring
    import solvers
    from solvers.local_search import _hop_bytes
    t = np.full((40, 40), 1e6) * (1 + (np.arange(40)[:, None] % 3))
    np.fill_diagonal(t, 0)
    p = problem(t, 4)
    runs: list = []
    real = solvers._moves

    def kept(*a, **k):
        runs.append(real(*a, **k))
        return runs[-1]
    monkeypatch.setattr(solvers, "_moves", kept)
    said: list = []
    res = wire(p, "search", SolveParams(time_limit_s=60, seed=2, max_moves=300, progress=said.append))
    (mine, other), = runs
    assert other is not None and any("local search beside it (seed 3)" in m for m in said)
    assert mine[2] == other[2] == 300 and mine[0] != other[0]                # two runs, each its whole budget
    best = min((mine, other), key=lambda r: r[1])
    assert res.extra["moves_tried"] == best[2] and not wiring_violations(res.artifact)
    assert res.extra["beside"] == {"seed": 3, "moves_tried": 300, "moves_kept": other[3], "won": other[1] < mine[1]}
    assert res.artifact.solve["beside"] == res.extra["beside"]                  # in the solve block too
    if not res.extra.get("kept_start"):
        assert res.artifact.circuits == best[0].circuits
    hops = lambda w: _hop_bytes(40, w.circuit_array[:, 1], w.circuit_array[:, 3], t)[0]
    assert hops(best[0]) == min(hops(mine[0]), hops(other[0]))
    # one thread: one run, as before
    runs.clear()
    wire(p, "search", SolveParams(time_limit_s=60, seed=2, max_moves=300, threads=1))
    assert runs[0][1] is None and runs[0][0][2] == 300


def _sparse_skewed(n=32, ports=3, seed=5):
    """Skewed all-to-all on a sparse wiring (two hops reach few pairs): the load-aware swaps' regime."""
    rng = np.random.default_rng(seed)
    t = rng.uniform(0.2, 1.0, (n, n)) * rng.uniform(0.2, 1.0, n)[:, None] * 1e8
    np.fill_diagonal(t, 0)
    return problem(t + t.T, ports)


def test_the_dual_ratio_of_a_wiring_at_its_routing_duals_is_its_time():
    """The ranking of the load-aware swaps: sum of demand x distance under the routing LP's capacity duals over
    the duals' capacity-weighted sum is the wiring's time (the Japanese theorem), for the path LP's duals too."""
    from solvers.load_search import _route, dual_ratio
    p = _sparse_skewed()
    w = wire(p, "expander", SolveParams(seed=0)).artifact
    theta, how, length = _route(p, w, 5.0)
    assert how.startswith("path-lp")
    assert dual_ratio(w.adjacency(), length, p.traffic.bytes_, p.port_bytes_per_s) == pytest.approx(theta, rel=1e-4)
    assert theta == pytest.approx(p.score(w, "optimal")[0], rel=1e-4)
    # other lengths give a lower bound only; their updates tighten it, and never past the time
    from solvers.load_search import tightened
    flat = (length > 0) * 1.0
    loose = dual_ratio(w.adjacency(), flat, p.traffic.bytes_, p.port_bytes_per_s)
    tight = tightened(w.adjacency(), flat, p.traffic.bytes_, p.port_bytes_per_s)
    assert loose < tight <= theta * (1 + 1e-9)


def test_load_aware_swaps_keep_only_faster_wirings_on_the_switches():
    """From an expander on a skewed demand, swaps are kept only when the path LP routes them faster: the answer
    passes verify, keeps each port on its switch and the pinned circuits where they were, and its time is its
    routing's (no slower than the start's by the exact LP)."""
    from solvers.load_search import improve_load
    p = _sparse_skewed()
    start = wire(p, "expander", SolveParams(seed=0)).artifact
    t0 = p.score(start, "optimal")[0]
    arr = start.circuit_array
    pin = {(int(min(arr[0, 1], arr[0, 3])), int(max(arr[0, 1], arr[0, 3])))}
    w, t, how, routed, kept, cut = improve_load(p, start, t0, time.perf_counter() + 8, seed=0, pinned=pin)
    assert routed > 0 and kept > 0 and not cut and how.startswith("path-lp")
    assert t < t0 and not wiring_violations(w)
    assert p.score(w, "optimal")[0] <= t * (1 + 1e-6)
    ends = {(c.switch, c.a, c.a_port) for c in start.circuits} | {(c.switch, c.b, c.b_port) for c in start.circuits}
    assert ends == {(c.switch, c.a, c.a_port) for c in w.circuits} | {(c.switch, c.b, c.b_port) for c in w.circuits}
    assert w.adjacency()[next(iter(pin))] >= start.adjacency()[next(iter(pin))]
    assert (w.adjacency().sum(axis=1) == start.adjacency().sum(axis=1)).all()
    # every circuit pinned: nothing to swap, the start comes back
    every = {(int(min(r[1], r[3])), int(max(r[1], r[3]))) for r in arr}
    w, t, how, routed, kept, cut = improve_load(p, start, t0, time.perf_counter() + 8, seed=0, pinned=every)
    assert w is start and routed == kept == 0 and t <= t0 and not cut


@pytest.mark.slow
def test_the_search_ends_with_load_aware_swaps_where_they_apply(monkeypatch):
    """`wire --solver search` on a sparse skewed case: the clock left after the scoring goes to the load-aware
    swaps, and the answer says so; a move budget (a repeatable run), the hops objective and a dense wiring skip
    them."""
    import solvers
    calls = []
    real = solvers._load_swaps

    def spy(problem, params, name, res, t0):
        out = real(problem, params, name, res, t0)
        calls.append((res.objective, out.objective, out.extra.get("load_swaps")))
        return out

    monkeypatch.setattr(solvers, "_load_swaps", spy)
    monkeypatch.setattr(solvers, "LOAD_SEARCH_MIN_S", 5.0)     # the moves' smaller share on this short clock
    p = _sparse_skewed()
    res = wire(p, "search", SolveParams(time_limit_s=10, seed=0))         # (9 of its swaps routed here)
    assert calls and calls[-1][2] is not None and calls[-1][2]["routed"] > 0
    assert res.objective <= calls[-1][0] and res.extra["load_swaps"] == calls[-1][2]
    assert not wiring_violations(res.artifact)
    assert p.score(res.artifact, "optimal")[0] <= res.objective * (1 + 1e-6)
    assert "load_swaps" not in wire(replace(p, objective="hops"), "search", SolveParams(time_limit_s=3)).extra
    assert not solvers._load_swaps_apply(_sparse_skewed(ports=6), SolveParams())
    assert solvers._load_swaps_apply(p, SolveParams()) and not solvers._load_swaps_apply(p, SolveParams(max_moves=9))


def test_a_swapped_wiring_cut_in_two_is_never_faster():
    """The load-aware swaps route two swaps at once where each alone kept every demand's path, and together they
    can cut the wiring in two: its routing is inf, never kept (MWU failed on the unreachable pair, an IndexError
    out of the search, seen once in the Ctrl-C test below)."""
    from solvers.load_search import _route
    t = np.where(np.eye(8), 0, 1e6)
    cut = Wiring.from_networkx(nx.disjoint_union(nx.cycle_graph(4), nx.cycle_graph(4)), 2)
    theta, how, length = _route(problem(t, 2), cut, 2.0)
    assert theta == math.inf and how == "disconnected" and not length.any()
    theta, how, length = _route(problem(t, 2), Wiring.from_networkx(nx.cycle_graph(8), 2), 2.0)
    assert np.isfinite(theta) and length.any()


def test_ctrl_c_during_load_aware_swaps_keeps_the_swaps_kept(monkeypatch):
    """A Ctrl-C while a swap is routed ends the swaps with the last wiring kept and its routing's time; the
    search's answer is then marked interrupted."""
    import solvers
    from solvers import load_search
    p = _sparse_skewed()
    start = wire(p, "expander", SolveParams(seed=0)).artifact
    t0 = p.score(start, "optimal")[0]
    real, calls = load_search._route, []

    def route(*args):
        calls.append(1)
        if len(calls) == 6:
            raise KeyboardInterrupt
        return real(*args)

    monkeypatch.setattr(load_search, "_route", route)
    monkeypatch.setattr(load_search.Beside, "start", classmethod(lambda cls, *a: None))    # both here, in turn
    # the answer's own routing within its first clock (on a loaded 2-core Xeon it once ran out of ROUTE_S and
    # was routed twice, which left one round of swaps before the 6th call): one call, then two rounds of two
    monkeypatch.setattr(load_search, "ROUTE_S", 30.0)
    w, t, how, routed, kept, cut = load_search.improve_load(p, start, t0, time.perf_counter() + 600, seed=0)
    assert cut and len(calls) == 6 and routed == 4 and t <= t0 and not wiring_violations(w)
    assert p.score(w, "optimal")[0] <= t * (1 + 1e-6)
    assert (kept > 0) == (t < t0)
    monkeypatch.setattr(load_search, "improve_load", lambda problem, wiring, time_s, *a: (wiring, time_s, "", 1, 0, True))
    res = wire(p, "expander", SolveParams(seed=0))
    out = solvers._load_swaps(p, SolveParams(time_limit_s=60), "search", res, time.perf_counter())
    assert out.limit == Limit.INTERRUPT and out.extra["load_swaps"] == {"routed": 1, "kept": 0}
    assert out.objective == res.objective


@pytest.mark.parametrize("solver", ["search", "lp-round"])
def test_search_returns_a_start_that_meets_the_bound_as_built(solver):
    """A ring demand on 8 accelerators, 2 ports, OCSes of 4 ports on the spread plan: a start already meets the
    bound (20 ms), so the search (and lp-round) answers OPTIMAL with it and makes no moves (they spent the clock
    on them before)."""
    p = WiringProblem(TrafficMatrix(ring_demand(8)), OCSLayout.planes(8, 2, 4), 800.0)
    res = wire(p, solver, SolveParams(time_limit_s=30))
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(0.02)
    assert res.extra["moves_tried"] == 0 and not wiring_violations(res.artifact)


def test_coupled_start_passes_over_held_ports_that_disconnect_a_group():
    """groups12 on 3 whole planes: holding ports back for the groups' crossing traffic can leave a group too few
    to connect its own demand; that start is passed over (it used to end the run with exit 2, "no wiring within
    the switches' radix connects the demand", raised while building it)."""
    t = np.load("instances/wiring/groups12.npy")
    p = WiringProblem(TrafficMatrix(t), OCSLayout.uniform(12, 3), 100.0)
    res = wire(p, "milp", SolveParams(time_limit_s=10))      # at 5 s the start with more held ports is not tried
    assert res.artifact is not None and np.isfinite(res.objective) and not wiring_violations(res.artifact)


def test_coupled_groups_of_odd_size_hold_their_ports_on_different_planes():
    """A plane is a matching: a group of 3 keeps one circuit inside on a plane where all three of its fibres
    are free and one where it holds a port back, so the held ports go on different planes (groups12 on three
    whole planes: a triangle per group, the groups joined as K4, the suite's optimum 0.00036 s; the same port
    held at every position left a path per group, 0.00064 s inside). Groups of even size keep holding the
    same port everywhere (a plane of 8 fibres less 2 still holds 3 circuits)."""
    import solvers.coupled as coupled
    from solvers import wire as wire_
    t = np.load("instances/wiring/groups12.npy")
    p = WiringProblem(TrafficMatrix(t), OCSLayout.planes(12, 3), 100.0)
    groups = coupled.coupled_groups(p)
    held, _ = coupled._held_ports(p, groups, coupled._crossing(t, groups), 100e9 / 8 * 3.2e-4)
    assert sorted(q for _, q in held) == [0, 1, 2] and sorted(pos for pos, _ in held) == [0, 1, 2]
    res = coupled.coupled_start(p, "milp", SolveParams(time_limit_s=10), groups, wire_)
    assert res.objective == pytest.approx(3.6e-4) and not wiring_violations(res.artifact)
    adj = res.artifact.adjacency()
    for g in groups:                               # a triangle inside, one circuit to each other group
        assert adj[np.ix_(g, g)].sum() == 6 and (adj[np.ix_(g, g)] + np.eye(3) > 0).all()
    even = problem(_pipeline(2, 4, handoff=1e5), 4)
    eg = coupled.coupled_groups(even)
    held, _ = coupled._held_ports(even, eg, coupled._crossing(even.traffic.bytes_, eg), 1e6, more=1)
    assert len(held) == 2 and len({q for _, q in held}) == 1


@pytest.mark.parametrize("solver", ["search", "lp-round"])
def test_moves_stop_where_they_meet_the_hops_bound(solver):
    """On the hops objective the moves' own measure is the objective: they stop once they meet its bound (the
    8-way all-to-all on 3 ports: 3 peers at one hop, 4 at two), where they went on to the clock before (and the
    two-hop phase stops once every byte is within two hops, leaving its clock to the hop count)."""
    t = np.where(np.eye(8), 0, 1e6)
    res = wire(problem(t, 3, "hops"), solver, SolveParams(time_limit_s=60))
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(8.8e7)
    assert res.extra["moves_tried"] < 100000 and not wiring_violations(res.artifact)


def test_hop_moves_end_when_they_stall_unless_given_a_budget_or_a_bound(monkeypatch):
    """The hop count's moves, a proxy of the time, end once a window took less than STALL_RATE of the
    hop-weighted bytes off per second, leaving the clock to the routing (a 2,304-accelerator all-to-all took
    1.2e-4 off per 5 s); a move budget (repeatable runs) or a target (the hops objective, whose moves are its
    objective) keeps them going."""
    import solvers.local_search as ls
    t = np.where(np.eye(24), 0, 1e6)
    w = wire(problem(t, 3), "expander", SolveParams()).artifact
    monkeypatch.setattr(ls, "STALL_S", 0.2)
    monkeypatch.setattr(ls, "STALL_RATE", 1e6)         # every window stalls
    t0 = time.perf_counter()
    got, hop_bytes, tried, _ = ls.improve_hops(w, t, time_limit_s=30, seed=0)
    assert time.perf_counter() - t0 < 5 and tried > 0
    assert hop_bytes <= ls._hop_bytes(24, w.circuit_array[:, 1], w.circuit_array[:, 3], t + t.T)[0] / 2
    assert ls.improve_hops(w, t, time_limit_s=30, seed=0, max_moves=3000)[2] == 3000
    t0 = time.perf_counter()
    ls.improve_hops(w, t, time_limit_s=1.0, seed=0, target=0.0)
    assert time.perf_counter() - t0 >= 1.0
    monkeypatch.setattr(ls, "STALL_RATE", 0.0)         # never stalls: on to the clock
    t0 = time.perf_counter()
    ls.improve_hops(w, t, time_limit_s=1.0, seed=0)
    assert time.perf_counter() - t0 >= 1.0


def test_no_grid_starts_on_a_near_uniform_all_to_all_ranked_by_byte_hops(monkeypatch, no_near_moore):
    """Beyond SCORED_STARTS_MAX (starts ranked by byte-hops alone) a near-uniform all-to-all starts from the
    expander without building TopoOpt-style and the torus, which never come near it there (4,608
    accelerators: 14 s for them); skewed demand keeps them, and so does a near-uniform one whose starts are timed."""
    import solvers
    t = np.full((56, 56), 1e6)
    np.fill_diagonal(t, 0)
    skewed = t.copy()
    skewed[:8, :8] *= 5
    np.fill_diagonal(skewed, 0)

    class Seen(Exception):
        pass

    def seen(problem, params, cands):
        raise Seen(sorted(cands))
    monkeypatch.setattr(solvers, "_scored_start", seen)

    def starts(demand, most):
        monkeypatch.setattr(solvers, "SCORED_STARTS_MAX", most)
        with pytest.raises(Seen) as got:
            wire(problem(demand, 4), "search", SolveParams(time_limit_s=10))
        return got.value.args[0]
    assert starts(t, 8) == ["expander"]
    assert {"topoopt", "torus"} <= set(starts(skewed, 8)) and {"topoopt", "torus"} <= set(starts(t, 256))
