"""The case split on the circuits inside small identical groups (solvers/patterns.py): its patterns, where it
applies, that it closes the optimum and never a time some wiring reaches, and its place in `solve_cpsat`."""
import itertools
import time

import networkx as nx
import numpy as np
import pytest

import solvers.patterns as patterns
from solvers import exact, wire
from solvers.benders import MetricCuts
from solvers.patterns import group_patterns, pattern_split, split_bound
from synth.model import OCSLayout, SolveParams, SolveStatus, TrafficMatrix
from synth.problem import WiringProblem
from synth.verify import wiring_violations


def groups(k, s=3, d=4e6, c=1e5, ports=3, layout=None):
    """k groups of s accelerators, {g, g + k, ...}: d bytes between two of a group, c between any two of
    different groups; whole planes (every accelerator on the same switches)."""
    n = k * s
    lab = np.arange(n) % k
    t = np.where(lab[:, None] == lab[None, :], d, c)
    np.fill_diagonal(t, 0.0)
    return WiringProblem(TrafficMatrix(t), layout or OCSLayout.planes(n, ports), 100.0, "time")


def _graph(s, m):
    g = nx.Graph()
    g.add_nodes_from(range(s))
    for (i, j), k in zip(patterns.position_pairs(s), m):
        if k:
            g.add_edge(i, j, k=k)
    return g


@pytest.mark.parametrize("s,ports,most", [(3, 3, 3), (4, 2, 2), (4, 3, 2), (2, 4, 4)])
def test_patterns_are_the_multigraphs_of_a_group_up_to_relabelling(s, ports, most):
    """Every multigraph on s positions within the ports is a relabelling of exactly one pattern (checked by
    networkx's isomorphism test with the multiplicities as edge labels)."""
    pats = group_patterns(s, ports, most)
    same = lambda a, b: nx.is_isomorphic(_graph(s, a), _graph(s, b), edge_match=lambda e, f: e["k"] == f["k"])
    assert all(not same(a, b) for a, b in itertools.combinations(pats, 2))
    pp = patterns.position_pairs(s)
    for m in itertools.product(range(most + 1), repeat=len(pp)):
        deg = np.zeros(s, dtype=int)
        for (i, j), k in zip(pp, m):
            deg[[i, j]] += k
        if deg.max() <= ports:
            assert sum(same(m, p) for p in pats) == 1


def test_pattern_split_applies_only_where_every_relabelling_keeps_the_instance():
    p = groups(4)
    split = pattern_split(p, exact._index(p))
    assert split is not None and len(split.patterns) == 8 and len(split.cases()) == 330
    assert [sorted(g) for g in split.groups] == [[0, 4, 8], [1, 5, 9], [2, 6, 10], [3, 7, 11]]
    fixed = split.fixed((0, 3, 6, 7))          # pattern 6, the triangle, in group 2
    assert fixed[(2, 6)] == fixed[(2, 10)] == fixed[(6, 10)] == 1 and len(fixed) == 12
    t = p.traffic.bytes_.copy()
    t[0, 1] = 2e5                              # one pair across differs: relabelling the groups changes it
    skew = WiringProblem(TrafficMatrix(t), p.layout, 100.0, "time")
    assert pattern_split(skew, exact._index(skew)) is None
    spread = groups(4, layout=OCSLayout.planes(12, 3, 4))     # accelerators on different OCSes
    assert pattern_split(spread, exact._index(spread)) is None
    big = groups(2, s=6, ports=4)              # groups of 6: more than PATTERN_MAX_GROUP
    assert pattern_split(big, exact._index(big)) is None


@pytest.mark.parametrize("quick", [True, False])
def test_pattern_split_closes_the_optimum_and_nothing_a_wiring_reaches(monkeypatch, quick):
    """Two groups of three: every case infeasible just below the proven optimum, and a wiring found (one that
    routes in time) just above it; `quick` False skips the first pass, so the integer flows and the cases'
    own symmetry rows decide (the test can fail: rows that cut a case's wirings would close above the
    optimum)."""
    if not quick:
        monkeypatch.setattr(patterns, "QUICK_S", 0.0)
    p = groups(2)
    ix = exact._index(p)
    split = pattern_split(p, ix)
    opt = 3.28e-4                              # milp-highs and the plain CP-SAT probes: OPTIMAL
    params = SolveParams(time_limit_s=60, threads=2)
    cuts = exact._injection_cuts(MetricCuts(p, ix))
    closed = set()
    verdict, _, info = split_bound(p, ix, split, cuts, opt * (1 - 1e-6), time.perf_counter() + 120, params,
                                   exact._per_switch(p), closed)
    assert verdict == "closed" and info["cases"] == 36 and sum(len(c) == 2 for c in closed) == 36
    verdict, found, _ = split_bound(p, ix, split, cuts, opt * 1.02, time.perf_counter() + 120, params,
                                    exact._per_switch(p), set())
    assert verdict == "found"
    w = exact._wiring_from(p, found[0], {})
    assert not wiring_violations(w)
    assert opt * (1 - 1e-6) <= p.score(w, "optimal")[0] <= opt * 1.02


def test_cpsat_proves_small_groups_through_the_split_with_the_milps_optimum():
    p = groups(3)
    res = wire(p, "cpsat", SolveParams(time_limit_s=90))       # the split runs with a minute left
    assert res.status == SolveStatus.OPTIMAL and not wiring_violations(res.artifact)
    split = [r for r in res.extra["rounds"] if r.get("status") == "pattern split"]
    assert split and split[-1]["verdict"] == "closed" and split[-1]["cases"] == 120
    milp = wire(p, "milp", SolveParams(time_limit_s=60))
    assert milp.status == SolveStatus.OPTIMAL and milp.objective == pytest.approx(res.objective, rel=1e-6)


@pytest.mark.slow
def test_cpsat_proves_groups12_on_its_fitted_plan():
    """The suite's groups12-radix4-fit: CP-SAT proves 0.00036 s through the split (25-35 s on 2 cores), which its
    whole-instance probes left 1.6% short after 900 s."""
    t = np.load("instances/wiring/groups12.npy")
    env, split = OCSLayout.fitted_planes(12, 3, 4)
    p = WiringProblem(TrafficMatrix(t), env, 100.0, "time", fibre_fit=split)
    res = wire(p, "cpsat", SolveParams(time_limit_s=300))
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(3.6e-4)


def test_ctrl_c_during_the_split_stops_both_probes_and_keeps_the_answer(monkeypatch, ctrl_c_on):
    """The split's probes run two at a time in worker threads, where CP-SAT's own Ctrl-C does not reach:
    a SIGINT while both run long (first pass at 60 s a probe) stops them, leaves no thread running, and the
    solve answers with its best wiring, FEASIBLE and marked interrupted (the test can fail: without stopping
    the workers' searches the call waits for their 60 s)."""
    import os
    import signal
    import threading
    monkeypatch.setattr(patterns, "QUICK_S", 60.0)
    t = np.load("instances/wiring/groups12.npy")
    env, split = OCSLayout.fitted_planes(12, 3, 4)
    p = WiringProblem(TrafficMatrix(t), env, 100.0, "time", fibre_fit=split)
    before = threading.active_count()
    timer = threading.Timer(4.0, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    try:
        res = wire(p, "cpsat", SolveParams(time_limit_s=120))
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < 15
    assert res.status == SolveStatus.FEASIBLE and res.limit.value == "interrupt"
    assert not wiring_violations(res.artifact)
    assert [r["verdict"] for r in res.extra["rounds"] if r.get("status") == "pattern split"] == ["interrupted"]
    assert threading.active_count() == before


@pytest.mark.slow
def test_auto_takes_cpsat_where_the_split_runs():
    """`auto` picks the MILP up to 16 accelerators, and CP-SAT where the split applies with its clock (groups12 at
    60 s: CP-SAT proves the optimum in about 30 s, the MILP ends 5.6% short)."""
    p = groups(3)
    assert exact.pattern_split_runs(p, SolveParams(time_limit_s=60))
    assert not exact.pattern_split_runs(p, SolveParams(time_limit_s=20))           # the split would not run
    hops = WiringProblem(p.traffic, p.layout, 100.0, "hops")
    assert not exact.pattern_split_runs(hops, SolveParams(time_limit_s=60))
    res = wire(p, "auto", SolveParams(time_limit_s=60))
    assert res.solver == "cpsat" and res.status == SolveStatus.OPTIMAL and not wiring_violations(res.artifact)
    # (10 s: whether HiGHS proves this one in 5 s or runs its clock out turns on the last digits of the bound)
    assert wire(p, "auto", SolveParams(time_limit_s=10)).solver == "milp-highs"
