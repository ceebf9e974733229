"""The phases objective: a step's phases run one after another, each routed alone (synth.problem, solvers/phased)."""
import json
import re

import numpy as np
import pytest
from click.testing import CliRunner

from solvers import wire
from solvers.bounds import best_bound
from synth.cli import main
from synth.errors import InvalidInput
from synth.formats import load_phases, save_phases
from synth.instance import load_instance
from synth.model import OCSLayout, SolveParams, SolveStatus, TrafficMatrix, TrafficPhase, phases_traffic
from synth.problem import WiringProblem
from synth.verify import wiring_violations
from synth.workload import build_workload, step_phases

from .conftest import write

EXACT = [("milp", "highs"), ("milp", "cbc"), ("cpsat", "auto")]


def phased(phases, ports, n=None, **kw):
    ph = tuple(phases)
    n = ph[0].bytes_.shape[0]
    return WiringProblem(phases_traffic(ph), OCSLayout.uniform(n, ports), 800.0, "phases", phases=ph, **kw)


def pairs(n, edges, b=1e9):
    m = np.zeros((n, n))
    for a, c in edges:
        m[a, c] = m[c, a] = b
    return m


def random_phases(n, seed, k=2):
    rng = np.random.default_rng(seed)
    out = []
    for i in range(k):
        m = rng.integers(0, 5, size=(n, n)).astype(float) * 1e8 * (rng.random((n, n)) < 0.6)
        np.fill_diagonal(m, 0)
        m[0, 1] += 1e8                        # never empty
        out.append(TrafficPhase(f"p{i}", m, float(i + 1)))
    return out


def test_one_phase_is_solved_as_its_time_problem(monkeypatch):
    """A phases problem with one phase (a coupled group's, its hand-off left outside) has the time objective
    of its traffic (the phase's bytes times its weight): the time models solve it, not the phases MILP (18 s
    where the time MILP takes 0.5 s on llama405b-tp8pp4-32's group), and the answer says phases."""
    import solvers.phased as phased_mod

    def refused(*a, **k):
        raise AssertionError("the phases MILP ran")
    monkeypatch.setattr(phased_mod, "solve_milp_phases", refused)
    ring = TrafficPhase("ring", pairs(6, [(i, (i + 1) % 6) for i in range(6)]), 3.0)
    prob = phased([ring], 2)
    res = wire(prob, "milp", SolveParams(time_limit_s=20))
    timed = wire(WiringProblem(TrafficMatrix(3.0 * ring.bytes_), OCSLayout.uniform(6, 2), 800.0, "time"), "milp",
                 SolveParams(time_limit_s=20))
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(timed.objective)
    assert res.objective == pytest.approx(3.0 * 1e9 / 100e9)       # the ring, each pair on its own circuit
    assert res.artifact.solve["objective_kind"] == "phases" and not wiring_violations(res.artifact)
    assert prob.score(res.artifact)[0] == pytest.approx(res.objective)


def test_phase_and_problem_validation():
    with pytest.raises(InvalidInput, match="weight"):
        TrafficPhase("a", pairs(4, [(0, 1)]), 0.0)
    with pytest.raises(InvalidInput) as exc:
        WiringProblem(TrafficMatrix(pairs(4, [(0, 1)])), OCSLayout.uniform(4, 2), 800.0, "phases")
    assert exc.value.field == "objective"
    ph = (TrafficPhase("a", pairs(4, [(0, 1)]), 2.0),)
    with pytest.raises(InvalidInput) as exc:       # the phases must add up to the traffic
        WiringProblem(TrafficMatrix(pairs(4, [(0, 1)])), OCSLayout.uniform(4, 2), 800.0, "phases", phases=ph)
    assert exc.value.field == "phases"
    with pytest.raises(InvalidInput, match="no bytes"):
        phased([TrafficPhase("a", pairs(4, [(0, 1)])), TrafficPhase("b", np.zeros((4, 4)))], 2)


@pytest.mark.parametrize("solver,backend", EXACT)
def test_two_phases_on_a_four_cycle(solver, backend):
    """Phase A (x1) pairs 0-1 and 2-3, phase B (x2) pairs 0-2 and 1-3, 1 GB each way, 2 ports: the 4-cycle
    0-1-3-2 serves both straight, 1e9 / 100e9 s per execution, 3 x 0.01 s in all (as good as the bound of
    each phase alone: every accelerator sends 1 GB on 2 ports, and a cycle relaying half of it over the
    other side costs as much)."""
    prob = phased([TrafficPhase("A", pairs(4, [(0, 1), (2, 3)]), 1.0),
                   TrafficPhase("B", pairs(4, [(0, 2), (1, 3)]), 2.0)], 2)
    res = wire(prob, solver, SolveParams(time_limit_s=60, backend=backend))
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(0.03)
    assert not wiring_violations(res.artifact)


@pytest.mark.parametrize("seed,scale", [(0, 1.0), (1, 1.0), (0, 1e9)])
def test_milp_and_cpsat_agree_on_phases(seed, scale):
    """Also at 1e9 x the bytes (phases of ~1e7 s), where the MILP's lam, 1 / the time in seconds, had fallen
    inside HiGHS's tolerances and it "proved" a worse wiring than CP-SAT's."""
    prob = phased([TrafficPhase(p.name, p.bytes_ * scale, p.weight) for p in random_phases(5, seed)], 2)
    got = {}
    for solver, backend in EXACT:
        res = wire(prob, solver, SolveParams(time_limit_s=60, backend=backend))
        assert res.status == SolveStatus.OPTIMAL, (solver, backend, res.objective, res.bound)
        assert not wiring_violations(res.artifact)
        got[(solver, backend)] = res.objective
    assert max(got.values()) == pytest.approx(min(got.values()), rel=1e-6), got


def test_phases_score_sums_each_phase_alone_and_bounds_hold():
    ph = random_phases(6, 3)
    prob = phased(ph, 2)
    w = wire(prob, "expander", SolveParams(seed=1)).artifact
    alone = sum(p.weight * sub.score(w)[0] for p, (_, sub) in zip(ph, prob.phase_problems()))
    assert prob.score(w)[0] == pytest.approx(alone)
    at_once = prob.as_time().score(w)[0]
    assert at_once <= prob.score(w)[0] * (1 + 1e-9)       # the busiest circuit over the step never takes longer
    opt = wire(prob, "milp", SolveParams(time_limit_s=60))
    assert opt.status == SolveStatus.OPTIMAL
    bound, named = best_bound(prob)
    assert {"phase_sum", "total_injection"} <= set(named) and bound <= opt.objective * (1 + 1e-9)
    assert opt.objective <= prob.score(w)[0] * (1 + 1e-9)


def tp_and_all_to_all(n, group, seed):
    """A tensor-parallel phase inside groups of `group` and an all-to-all phase, random sizes and weights."""
    rng = np.random.default_rng(seed)
    tp = np.zeros((n, n))
    for s in range(0, n, group):
        tp[s:s + group, s:s + group] = 1e9 * rng.uniform(0.5, 3)
    np.fill_diagonal(tp, 0)
    a2a = np.full((n, n), 1e8 * rng.uniform(0.5, 5))
    np.fill_diagonal(a2a, 0)
    return [TrafficPhase("tp", tp, float(rng.integers(1, 4))), TrafficPhase("a2a", a2a, float(rng.integers(1, 4)))]


@pytest.mark.parametrize("seed", [4, 7])
def test_shared_circuits_bound_holds_and_beats_the_phase_sum(seed):
    """Pairs that want parallel circuits for one phase take distinct neighbours from the other's all-to-all:
    the shared-circuits bound sees it (above the phase sum) and stays below the proven optimum (it held on
    30 random instances of 6-8 accelerators against the MILP, BENCHMARKS)."""
    from solvers.bounds import moore_hop_bytes, moore_hop_bytes_by_neighbours, shared_circuits_bound
    prob = phased(tp_and_all_to_all(6, 2, seed), 3)
    _, named = best_bound(prob)
    shared = shared_circuits_bound(prob)
    assert named["shared_circuits"] == pytest.approx(shared)
    assert shared > named["phase_sum"] * 1.02
    opt = wire(prob, "milp", SolveParams(time_limit_s=60))
    assert opt.status == SolveStatus.OPTIMAL and shared <= opt.objective * (1 + 1e-9)
    for _, sub in prob.phase_problems():          # all ports distinct: Moore's bound; fewer: never below it
        hb = moore_hop_bytes_by_neighbours(sub)
        assert hb[-1] == pytest.approx(moore_hop_bytes(sub)) and (np.diff(hb[np.isfinite(hb)]) <= 1e-6).all()


def test_shared_circuits_bound_on_qwen3():
    """qwen3-235b-64: its TP groups of 4 want two circuits a pair, its EP all-to-alls 63 distinct neighbours
    of 18 ports; the phase sum lets each have all, 0.802 ms (the best wiring found: 0.918 ms, relay V's)."""
    from synth.bench import suite_problem
    prob = suite_problem({"source": "instances/decode/qwen3-235b-64.toml", "objective": "phases"})
    bound, named = best_bound(prob, lp=False)
    assert named["phase_sum"] == pytest.approx(0.00080235, rel=1e-4)
    assert named["shared_circuits"] == pytest.approx(0.00088737, rel=1e-4)
    assert bound == named["group_cut"] == pytest.approx(0.00090097, rel=1e-4)


@pytest.mark.parametrize("seed", range(4))
def test_group_cut_bound_holds_and_beats_the_shared_circuits(seed, monkeypatch):
    """TP groups of 2 or 3 beside a random all-to-all on 6 accelerators: the group cut never exceeds the
    optimum (the phases MILP, solved with the group cut left out so that it cannot end on it) and is above
    the shared-circuits bound."""
    import solvers.bounds as sb
    rng = np.random.default_rng(seed)
    n, g, ports = 6, 2 + seed % 2, int(rng.integers(3, 6))
    lab = np.arange(n) // g
    tp = np.where((lab[:, None] == lab[None]) & ~np.eye(n, dtype=bool), float(rng.integers(1, 40)) * 1e7, 0.0)
    ep = rng.integers(0, 5, size=(n, n)).astype(float) * 1e7
    np.fill_diagonal(ep, 0)
    ep[0, n - 1] += 1e7
    prob = phased([TrafficPhase("tp", tp, float(rng.integers(1, 10))),
                   TrafficPhase("ep", ep, float(rng.integers(1, 10)))], ports)
    _, named = best_bound(prob, lp=False)
    monkeypatch.setattr(sb, "group_cut_bound", lambda *a, **k: 0.0)
    res = wire(prob, "milp", SolveParams(time_limit_s=60, seed=0))
    assert res.status == SolveStatus.OPTIMAL
    assert named["shared_circuits"] < named["group_cut"] <= res.objective * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(2))
def test_group_cut_counts_each_group_by_its_busier_direction(seed, monkeypatch):
    """Two TP groups of 3 and a pipeline hand-off from the first to the second: the hand-off crosses the
    circuits between the groups in one direction only, so it takes its bytes over c B (c circuits across),
    not over the 2 c B of both directions. The group cut is higher than for the same bytes split half each
    way, and never above the optimum (the phases MILP without the group cut)."""
    import solvers.bounds as sb
    rng = np.random.default_rng(seed)
    n, g, ports = 6, 3, int(rng.integers(3, 6))
    lab = np.arange(n) // g
    tp = np.where((lab[:, None] == lab[None]) & ~np.eye(n, dtype=bool), float(rng.integers(1, 40)) * 1e7, 0.0)
    pp = np.zeros((n, n))
    pp[np.arange(g), np.arange(g) + g] = float(rng.integers(5, 60)) * 1e7
    w = [float(rng.integers(1, 10)), float(rng.integers(1, 10))]
    one_way = phased([TrafficPhase("tp", tp, w[0]), TrafficPhase("pp", pp, w[1])], ports)
    both_ways = phased([TrafficPhase("tp", tp, w[0]), TrafficPhase("pp", (pp + pp.T) / 2, w[1])], ports)
    cut = sb.group_cut_bound(one_way)
    assert cut > sb.group_cut_bound(both_ways) * 1.02
    monkeypatch.setattr(sb, "group_cut_bound", lambda *a, **k: 0.0)
    res = wire(one_way, "milp", SolveParams(time_limit_s=60, seed=0))
    assert res.status == SolveStatus.OPTIMAL and cut <= res.objective * (1 + 1e-9)


def test_group_quotient_time_of_a_pipeline():
    """Hand-offs g -> g + 1 of P bytes between four stages, with one circuit in all between the stages (fractional):
    the best is a third of it on each of the three hops (or a ring, the same), 3 P / B; two stages: P / B,
    what the busier direction's cut says. Beyond QUOTIENT_MAX_GROUPS groups it is that cut (no LP)."""
    from solvers.bounds import QUOTIENT_MAX_GROUPS, group_quotient_time
    B, P = 100e9 / 8, 4e6
    for k, want in ((4, 3 * P / B), (2, P / B)):
        label = np.repeat(np.arange(k), 2)
        t = np.zeros((2 * k, 2 * k))
        for g in range(k - 1):
            t[2 * g, 2 * g + 2] = t[2 * g + 1, 2 * g + 3] = P / 2
        t[0, 1] = 1e9                                         # bytes inside a group are not routed on the quotient
        assert group_quotient_time(t, label, B) == pytest.approx(want, rel=1e-6)
    k = QUOTIENT_MAX_GROUPS + 1                               # a chain of k stages: every stage sends or takes P
    assert group_quotient_time(np.eye(k, k=1) * P, np.arange(k), B) == pytest.approx(k * P / (2 * B))
    assert group_quotient_time(np.ones((3, 3)) - np.eye(3), np.zeros(3, dtype=int), B) == 0.0   # one group


def test_group_cut_routes_a_pipeline_on_its_stages_quotient(monkeypatch):
    """Four stages of 2 and their hand-offs g -> g + 1: with the quotient's time the group cut is above the cut by
    each group's busier direction alone, and never above the optimum (the phases MILP without the group cut)."""
    import solvers.bounds as sb
    n, g = 8, 2
    lab = np.arange(n) // g
    tp = np.where((lab[:, None] == lab[None]) & ~np.eye(n, dtype=bool), 1e7, 0.0)
    pp = np.zeros((n, n))
    for s in range(0, n - g, g):
        pp[np.arange(s, s + g), np.arange(s, s + g) + g] = 32e7
    prob = phased([TrafficPhase("tp", tp, 8.0), TrafficPhase("pp", pp, 1.0)], 4)
    cut = sb.group_cut_bound(prob)
    monkeypatch.setattr(sb, "group_quotient_time", lambda *a, **k: 0.0)
    assert cut > sb.group_cut_bound(phased(prob.phases, 4)) * 1.1
    monkeypatch.setattr(sb, "group_cut_bound", lambda *a, **k: 0.0)
    res = wire(prob, "milp", SolveParams(time_limit_s=60, seed=0))
    assert res.status == SolveStatus.OPTIMAL and cut <= res.objective * (1 + 1e-9)


def tp_beside_alltoall(n=32, g=4, ports=14):
    """TP groups of `g` (30 MB a pair, 188 executions) beside a 2.6 MB all-to-all (282): qwen3-235b-64's
    shape on fewer accelerators and ports."""
    lab = np.arange(n) // g
    tp = np.where((lab[:, None] == lab[None]) & ~np.eye(n, dtype=bool), 30e6, 0.0)
    ep = np.where(~np.eye(n, dtype=bool), 2.6e6, 0.0)
    return phased([TrafficPhase("tp", tp, 188.0), TrafficPhase("ep", ep, 282.0)], ports), lab


def test_relay_vees_give_every_tp_pair_two_hop_relays():
    """Each accelerator centres V's to TP pairs of other groups, so every TP pair has common neighbours
    outside its group; the wiring verifies, repeats with its seed, and its TP phase beats what three
    circuits' worth of one- and two-hop paths per pair allow (k = 2 direct, at least one V each).
    `relay_vees` answers with the V's of k = 1, 2 or 3, whichever routes faster; it ranks them before they
    are coloured, which the routing does not see. The V's are searched for MOVES swaps, a budget their 5 s
    clock's builds (0.67 s each) finish on a slow machine too (VEE_MOVES took 0.52-0.67 s on an Intel Xeon, 2
    cores, and the clock then cut one build short and changed the wiring): the clock is only a ceiling."""
    from solvers.bounds import group_phase
    from solvers.vees import COLOUR_MIN_S, VEE_MOVES, _uncoloured, _vee_pairs, _wired, relay_vees
    moves = VEE_MOVES // 3

    def _built(prob, found, k, seed):     # the V's of one k on the switches, as `relay_vees` wires them
        built = _vee_pairs(prob, found, k, seed, 2.5, moves)
        return None if built is None else _wired(prob.layout, built, seed, COLOUR_MIN_S)

    prob, lab = tp_beside_alltoall()
    found = group_phase(prob)
    assert found[0] == 0
    w = _built(prob, found, 2, 3)
    assert w is not None and wiring_violations(w) == []
    assert w.circuits == _built(prob, found, 2, 3).circuits
    adj = w.adjacency()
    same = lab[:, None] == lab[None]
    common = (adj > 0).astype(int) @ ((adj > 0) & ~same).astype(int)   # common neighbours outside the group
    inside = same & ~np.eye(len(lab), dtype=bool)
    assert (adj[inside] == 2).all() and (common[inside] >= 1).all()
    tp_alone = prob.phase_problems()[0][1]
    assert tp_alone.score(w, "optimal")[0] <= 30e6 / (3 * prob.port_bytes_per_s) * (1 + 1e-9)
    answer = relay_vees(prob, seed=3, moves=moves)
    assert answer.circuits == relay_vees(prob, seed=3, moves=moves).circuits and wiring_violations(answer) == []
    others = [_built(prob, found, k, 3) for k in (1, 3)]
    assert answer.circuits in [w.circuits] + [o.circuits for o in others if o is not None]
    pairs = _vee_pairs(prob, found, 2, 3, 2.5, moves)[0]
    assert (_uncoloured(prob.layout, pairs).adjacency() == w.adjacency()).all()
    assert prob.score(_uncoloured(prob.layout, pairs), "optimal") == prob.score(w, "optimal")
    # where the V's do not fit (fewer than four ports left outside a group) there are none
    assert relay_vees(tp_beside_alltoall(16, 4, 6)[0]) is None
    assert relay_vees(phased(random_phases(8, 0), 3)) is None


@pytest.mark.slow
def test_relay_vees_on_ocses_smaller_than_a_plane_keep_what_the_switches_hold():
    """Planes of 64 fibres split over 16-port OCSes: none of the V's multigraphs colours (before: None after
    8.6 s of colouring). The best ranked keeps as many of its circuits as the OCSes hold and pairs the ports
    left at random: every port used, the same wiring from the same seed (on a budget of swaps its builds finish
    within their clock: VEE_MOVES took 0.76 s of 0.9 s on an Intel Xeon), faster than the expander."""
    from solvers.baselines import expander
    from solvers.vees import VEE_MOVES, relay_vees
    prob, _ = tp_beside_alltoall(64, 4, 14)
    split = WiringProblem(prob.traffic, OCSLayout.planes(64, 14, 16), 800.0, "phases", phases=prob.phases)
    w = relay_vees(split, seed=3, moves=VEE_MOVES // 3)
    assert w is not None and wiring_violations(w) == [] and len(w.circuits) == 64 * 14 // 2
    assert w.circuits == relay_vees(split, seed=3, moves=VEE_MOVES // 3).circuits
    assert split.score(w, "optimal")[0] < split.score(expander(split.layout, 0), "optimal")[0]


def test_relay_vees_ranking_routes_the_tp_phase_by_its_two_hop_lp(monkeypatch):
    """The ranking of the k's times the sparse TP phase by its two-hop path LP, exact on V's with two circuits
    per pair, and the all-to-all by MWU: a routing's time, never below the optimum's, and within a few
    percent of it; MWU is not asked to route the TP phase."""
    from solvers import vees
    from solvers.bounds import group_phase
    prob, _ = tp_beside_alltoall()
    pairs, _ = vees._vee_pairs(prob, group_phase(prob), 2, 3, 2.5, vees.VEE_MOVES)
    w = vees._uncoloured(prob.layout, pairs)
    (wt, tp), (we, ep) = prob.phase_problems()
    asked = []
    real = type(prob).score
    monkeypatch.setattr(type(prob), "score", lambda self, *a, **k: asked.append(self) or real(self, *a, **k))
    got = vees._rank_time(prob, w, 1.0)
    assert asked == [ep]
    monkeypatch.undo()
    t_opt, e_opt = tp.score(w, "optimal")[0], ep.score(w, "optimal")[0]
    assert got - wt * t_opt == pytest.approx(we * ep.score(w, "mwu", 1.0)[0], rel=0.05)
    assert wt * t_opt + we * e_opt <= got * (1 + 1e-9) <= 1.05 * (wt * t_opt + we * e_opt)


def test_relay_vees_colour_the_next_k_when_the_fastest_does_not_colour(monkeypatch):
    """The V's ranked fastest may not colour onto the switches (on this instance k = 1 at 13 of 400 move
    counts: CP-SAT finds no colouring in 60 s); the next k's are then coloured on what is left of the clock,
    COLOUR_RETRY_S at least, and one of them is the answer, where before a short clock answered None."""
    from solvers import vees
    prob, _ = tp_beside_alltoall()
    real, calls = vees._wired, []

    def first_fails(layout, built, seed, time_limit_s):
        calls.append(time_limit_s)
        return None if len(calls) == 1 else real(layout, built, seed, time_limit_s)
    monkeypatch.setattr(vees, "_wired", first_fails)
    w = vees.relay_vees(prob, 0, 1.2)
    assert w is not None and len(calls) == 2 and wiring_violations(w) == []
    assert calls[0] >= vees.COLOUR_MIN_S and calls[1] >= vees.COLOUR_RETRY_S


def test_the_vees_search_computes_the_tie_break_only_on_ties_and_keeps_the_same_swaps(monkeypatch):
    """`_Vees.search` computes `hops` only where `across` ties; the V's it leaves are those of the rule that
    computes both on every move (the search before), at every move budget tried, and it computes fewer."""
    from solvers import vees
    from solvers.bounds import group_phase
    prob, _ = tp_beside_alltoall()
    found = group_phase(prob)

    def both_every_move(self, moves, deadline):
        cur = (self.across(), self.hops())
        for _ in range(moves):
            if self.peers is None:
                i, j = (int(x) for x in self.rng.choice(len(self.assign), 2, replace=False))
            else:
                i = int(self.rng.integers(len(self.assign)))
                j = self._other(i)
            if self.centres[i] == self.centres[j]:
                continue
            self._swap(i, j)
            new = None if self._bad(i) or self._bad(j) else (self.across(), self.hops())
            if new is not None and (new[0] < cur[0] * (1 - 1e-12)
                                    or new[0] <= cur[0] * (1 + 1e-12) and new[1] <= cur[1]):
                cur = new
            else:
                self._swap(i, j)

    calls, real_hops = [], vees._Vees.hops
    monkeypatch.setattr(vees._Vees, "hops", lambda self: calls.append(1) or real_hops(self))
    counted = {"lazy": 0, "both": 0}
    for k in (1, 2, 3):
        for moves in (50, 400):
            calls.clear()
            lazy = vees._vee_pairs(prob, found, k, 0, 1000.0, moves)
            counted["lazy"] += len(calls)
            with monkeypatch.context() as m:
                m.setattr(vees._Vees, "search", both_every_move)
                calls.clear()
                assert vees._vee_pairs(prob, found, k, 0, 1000.0, moves) == lazy, (k, moves)
            counted["both"] += len(calls)
    assert counted["lazy"] < 0.8 * counted["both"], counted


def test_relay_vees_on_planes_are_built_on_their_switches(monkeypatch):
    """With one port on each of p planes the V's are built coloured, with no colouring search: each group's
    circuits and every V on their planes, so every accelerator meets every plane once, every TP pair keeps two
    V's (two common neighbours outside its group) and its k circuits, and the same seed gives the same
    circuits. Groups of four end by halves, groups of two whole; where the swaps do not repair the layered
    ends (32 accelerators, seed 5) CP-SAT assigns them. The colouring search gets the V's when there is an
    odd number of groups of two, groups of four with c < 3 (the halves would leave pairs without a V),
    another layout, or layered ends that neither repairs nor CP-SAT assigns."""
    from dataclasses import replace
    from solvers.bounds import group_phase
    from solvers import vees
    monkeypatch.setattr(vees, "_coloured", lambda *a, **k: pytest.fail("coloured by search"))

    def built(prob, k, seed=0):
        b = vees._vee_pairs(prob, group_phase(prob), k, seed, 2.0, vees.VEE_MOVES)
        return b, (vees._wired(prob.layout, b, seed, 1.0) if b is not None and b[1] is not None else None)

    for g, k in ((4, 2), (4, 1), (2, 2)):
        prob, lab = tp_beside_alltoall(48, g, 18)
        b, w = built(prob, k)
        assert w is not None and wiring_violations(w) == [] and w.circuits == built(prob, k)[1].circuits
        adj = w.adjacency()
        same = lab[:, None] == lab[None]
        inside = same & ~np.eye(48, dtype=bool)
        common = (adj > 0).astype(int) @ ((adj > 0) & ~same).astype(int)
        assert (adj[inside] == k).all() and (common[inside] >= 2).all() and (adj[~same] <= 1).all()
        if (18 - (g - 1) * k) % 4 == 0:     # no ports left over: every port lit
            assert (adj.sum(axis=1) == 18).all()
    prob = tp_beside_alltoall(48, 4, 18)[0]
    assert built(prob, 3)[0][1] is None                                      # c = 2
    assert built(tp_beside_alltoall(30, 2, 18)[0], 2)[0][1] is None          # 15 groups of two
    two_per_switch = OCSLayout(np.repeat(np.arange(9), 2)[None].repeat(48, axis=0), (96,) * 9)
    assert built(replace(prob, layout=two_per_switch), 2)[0][1] is None
    prob = tp_beside_alltoall(32, 4, 18)[0]
    calls, real = [], vees._Vees.assigned
    monkeypatch.setattr(vees._Vees, "assigned", lambda self, *a: calls.append(1) or real(self, *a))
    b, w = built(prob, 2, seed=5)
    assert calls and w is not None and wiring_violations(w) == []
    lab = np.arange(32) // 4
    adj, same = w.adjacency(), lab[:, None] == lab[None]
    assert (adj[~same] <= 1).all() and (adj[same & ~np.eye(32, dtype=bool)] == 2).all()   # no circuit twice
    monkeypatch.setattr(vees._Vees, "assigned", lambda self, *a: False)
    b = built(prob, 2, seed=5)[0]
    assert b is not None and b[1] is None


@pytest.mark.slow
def test_search_takes_the_relay_vees_where_they_are_faster(monkeypatch):
    """On 32 accelerators with 14 ports the V's wiring beats every searched start and is the answer, faster
    than what the search finds without it."""
    import solvers
    prob, _ = tp_beside_alltoall()
    # what the solve said, what `relay_vees` returned and its stages' times go into the failure's message. About
    # once in eight full runs it gave None: the V's ranked fastest (k = 1, their swaps cut short in a loaded
    # run) did not colour, and the next k's were not tried (test_relay_vees_colour_the_next_k_...)
    import time
    import solvers.vees as vees
    said: list[str] = []
    real, got = solvers.relay_vees, []
    monkeypatch.setattr(solvers, "relay_vees", lambda *a, **k: got.append((real(*a, **k), a[1:], k)) or got[-1][0])
    for stage in ("_vee_pairs", "_rank_time", "_coloured"):
        def logged(*a, _real=getattr(vees, stage), _name=stage, **k):
            t = time.perf_counter()
            out = _real(*a, **k)
            said.append(f"  {_name}: {time.perf_counter() - t:.2f} s -> "
                        + ("None" if out is None else f"{out:.6g}" if isinstance(out, float) else "built"))
            return out
        monkeypatch.setattr(vees, stage, logged)
    res = wire(prob, "search", SolveParams(time_limit_s=6.0, seed=0, progress=said.append))
    # the V's are the answer, unless the search beat them (once in a full suite run under load the heavy pairs'
    # searched wiring won, 2026-12-06; the answer is then faster still, and the comparison below stands)
    vees_s = [float(m.group(1)) for m in (re.match(r"relay vees: ([0-9.e+-]+) s", x) for x in said) if m]
    assert (res.extra["start"] == "relay vees" or vees_s and res.objective <= vees_s[0]) and \
        wiring_violations(res.artifact) == [], "\n".join(
            said + [f"answer {res.objective:.6g} s from {res.extra['start']}"] +
            [f"relay_vees{args} -> {'None' if w is None else 'a wiring'}" for w, args, _ in got])
    monkeypatch.undo()
    monkeypatch.setattr(solvers, "relay_vees", lambda *a, **k: None)
    without = wire(prob, "search", SolveParams(time_limit_s=6.0, seed=0))
    assert without.extra["start"] != "relay vees"
    # where the search's own wiring beat the V's (a loaded run: CI on 75f3db6 answered 0.0480175 s both times),
    # the answer is no slower than without them; else the V's are at least 1% faster
    assert res.objective < 0.99 * without.objective if res.extra["start"] == "relay vees" else \
        res.objective <= without.objective * (1 + 1e-9)


def test_phases_one_after_another_take_longer_than_the_step_at_once():
    """Three accelerators with 2 ports on 2 switches: phase A 0-1 and phase B 1-2, 1 GB each way. The
    triangle does not fit (each switch is a matching, an odd cycle needs three), so the best wirings are
    paths: at once, accelerator 1 sends both phases' bytes on its 2 circuits, 0.01 s; one after another,
    each phase has a single path, 0.01 s each, 0.02 s in all. Both proven, and the phase sum is what the
    step really takes when its collectives do not overlap."""
    ph = [TrafficPhase("A", pairs(3, [(0, 1)]), 1.0), TrafficPhase("B", pairs(3, [(1, 2)]), 1.0)]
    prob = phased(ph, 2)
    res = wire(prob, "milp", SolveParams(time_limit_s=60))
    at_once = wire(prob.as_time(), "milp", SolveParams(time_limit_s=60))
    assert res.status == at_once.status == SolveStatus.OPTIMAL
    assert res.objective == pytest.approx(0.02) and at_once.objective == pytest.approx(0.01)
    assert [sub.score(res.artifact)[0] for _, sub in prob.phase_problems()] == pytest.approx([0.01, 0.01])


def test_step_phases_add_up_to_the_traffic():
    for name in ("llama405b-tp8pp2-16", "qwen3-235b-64"):
        wl = build_workload(load_instance(f"instances/decode/{name}.toml"))
        ph = step_phases(wl)
        assert len(ph) >= 2
        assert np.allclose(sum(p.weight * p.bytes_ for p in ph), wl.traffic.bytes_)
    names = [p.name for p in step_phases(build_workload(load_instance("instances/decode/qwen3-235b-64.toml")))]
    assert "tp_reducescatter+tp_allgather" in names      # the same bytes per execution: one phase


def test_phases_file_round_trip(tmp_path):
    ph = tuple(random_phases(4, 5))
    save_phases(ph, tmp_path / "step.toml", "mine")
    name, back = load_phases(tmp_path / "step.toml")
    assert name == "mine" and [p.name for p in back] == ["p0", "p1"]
    assert all(np.array_equal(a.bytes_, b.bytes_) and a.weight == b.weight for a, b in zip(ph, back))


def run(*args):
    r = CliRunner().invoke(main, [str(a) for a in args])
    return r.exit_code, r.stdout, r.stderr


def test_cli_phases_from_an_instance_and_a_phases_file(tmp_path):
    inst = "instances/decode/llama405b-tp8pp2-16.toml"
    code, out, _ = run("traffic", inst, "--phases", tmp_path / "l16.toml", "--json")
    assert code == 0 and [p["name"] for p in json.loads(out)["phases"]] == ["tp_allreduce", "pp_p2p", "pp_token_ids"]
    w1, w2 = tmp_path / "w1.json", tmp_path / "w2.json"
    code, out, _ = run("wire", inst, "--objective", "phases", "--solver", "search", "--time-limit", "3", "-o", w1,
                       "--json")
    block = json.loads(out)
    assert code == 0 and block["objective_kind"] == "phases" and block["bound"] <= block["objective"]
    assert run("verify", w1, "--instance", inst)[0] == 0
    code, out, _ = run("wire", tmp_path / "l16.toml", "--objective", "phases", "--ports", 18,
                       "--port-bandwidth-gbps", 200, "--solver", "search", "--time-limit", "3", "-o", w2, "--json")
    assert code == 0 and json.loads(out)["objective_kind"] == "phases"
    assert run("verify", w2)[0] == 0
    # a phases file under the time objective is its weighted sum
    code, out, _ = run("wire", tmp_path / "l16.toml", "--ports", 18, "--port-bandwidth-gbps", 200,
                       "--solver", "expander", "-o", w2, "--json")
    assert code == 0 and json.loads(out)["objective_kind"] == "time"


@pytest.mark.parametrize("body,field", [
    ('format = "ocs-synth/phases"\n[[phase]]\nname = "a"\nmatrix = "m.npy"\nweight = -1\n', "phase[0].weight"),
    ('format = "ocs-synth/phases"\n[[phase]]\nname = "a"\nmatrix = "m.npy"\n', "phase[0].weight"),
    ('format = "ocs-synth/phases"\n[[phase]]\nname = "a"\nmatrix = "m.npy"\nweight = 1\ncolour = 2\n',
     "phase[0].colour"),
    ('format = "ocs-synth/phases"\n[[phase]]\nmatrix = "m.npy"\nweight = 1\n[[phase]]\nmatrix = "small.npy"\n'
     'weight = 1\n', "phase[1].matrix"),
    ('format = "ocs-synth/phases"\n', "phase"),
    ('format = "ocs-synth/phases"\n[[phase]]\nmatrix = "missing.npy"\nweight = 1\n', "phase[0].matrix"),
    ('format = "ocs-synth/phases"\n[[phase\n', "malformed TOML"),
    # finite, but times the bytes it overflowed into a matrix entry of inf (reported without the file)
    ('format = "ocs-synth/phases"\n[[phase]]\nname = "a"\nmatrix = "m.npy"\nweight = 1e308\n', "phase[0].weight"),
    ('format = "ocs-synth/phases"\nphase = [1, 2]\n', "phase[0]: must be a [[phase]] table"),   # was a TypeError
])
def test_cli_bad_phases_file(tmp_path, body, field):
    np.save(tmp_path / "m.npy", pairs(4, [(0, 1)]))
    np.save(tmp_path / "small.npy", pairs(3, [(0, 1)]))
    src = write(tmp_path, "step.toml", body)
    out = tmp_path / "w.json"
    out.write_text("keep")
    code, _, err = run("wire", src, "--objective", "phases", "--ports", 2, "--port-bandwidth-gbps", 800, "-o", out)
    assert code == 2 and "step.toml" in err and field in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and out.read_text() == "keep"


def test_cli_phases_objective_needs_phases(tmp_path):
    np.save(tmp_path / "m.npy", pairs(4, [(0, 1)]))
    code, _, err = run("wire", tmp_path / "m.npy", "--objective", "phases", "--ports", 2, "--port-bandwidth-gbps",
                       800, "-o", tmp_path / "w.json")
    assert code == 2 and "m.npy" in err and "--objective" in err
    code, _, err = run("traffic", tmp_path / "m.npy", "--phases", tmp_path / "p.toml")
    assert code == 2 and "--phases" in err and not (tmp_path / "p.toml").exists()


# --- the step objective: the evaluator's analytical decode step ------------------------------------------
def test_step_objective_needs_a_workload_and_its_bound_holds():
    from solvers import baselines
    from synth.evaluate import evaluate_workload, ocs_step_lower_bound_us
    with pytest.raises(InvalidInput) as exc:
        WiringProblem(TrafficMatrix(pairs(4, [(0, 1)])), OCSLayout.uniform(4, 2), 800.0, "step")
    assert exc.value.field == "objective"
    for name in ("llama405b-tp8pp2-16", "qwen3-235b-64"):
        inst = load_instance(f"instances/decode/{name}.toml")
        wl = build_workload(inst)
        prob = WiringProblem.from_instance(inst, wl.traffic, "step", workload=wl)
        lb = ocs_step_lower_bound_us(wl, prob.layout.capacity.sum(axis=1), prob.port_bytes_per_s)
        for seed in (0, 1):
            w = baselines.expander(prob.layout, seed)
            step = evaluate_workload(wl, "ocs", w, routing="balanced").step_time_us
            assert 0 < lb <= step and prob.score(w)[0] == pytest.approx(step * 1e-6)
        assert best_bound(prob)[0] == pytest.approx(lb * 1e-6)


def test_cli_step_objective(tmp_path):
    inst = "instances/decode/llama405b-tp8pp2-16.toml"
    w = tmp_path / "w.json"
    code, out, _ = run("wire", inst, "--objective", "step", "--solver", "search", "--time-limit", "3", "-o", w,
                       "--json")
    block = json.loads(out)
    assert code == 0 and block["objective_kind"] == "step" and 0 < block["bound"] <= block["objective"]
    assert run("verify", w, "--instance", inst)[0] == 0
    code, out, _ = run("evaluate", inst, "--fabric", "ocs", "--wiring", w, "--routing", "balanced", "--json")
    assert code == 0 and json.loads(out)["step_time_us"] * 1e-6 == pytest.approx(block["objective"], rel=1e-9)
    # auto on 16 accelerators: the MILP of the step's communication (phases), timed by the evaluator
    code, out, _ = run("wire", inst, "--objective", "step", "--time-limit", "5", "-o", w, "--json")
    block = json.loads(out)
    assert code == 0 and block["objective_kind"] == "step" and block["proxy"].startswith("phases objective")
    assert run("verify", w, "--instance", inst)[0] == 0
    w.write_text("keep")
    for args in (["--solver", "milp"], ["--solver", "cpsat"]):
        code, _, err = run("wire", inst, "--objective", "step", *args, "-o", w)
        assert code == 2 and "solver" in err
        assert len(err.strip().splitlines()) == 1 and w.read_text() == "keep"
    np.save(tmp_path / "m.npy", pairs(4, [(0, 1)]))
    code, _, err = run("wire", tmp_path / "m.npy", "--objective", "step", "--ports", 2, "--port-bandwidth-gbps", 800,
                       "-o", w)
    assert code == 2 and "instance" in err and w.read_text() == "keep"


@pytest.mark.parametrize("solver", ["milp", pytest.param("cpsat", marks=pytest.mark.slow)])
def test_exact_solvers_above_16_start_from_the_search(solver):
    # TP groups of 4 beside a light all-to-all on 20 accelerators: the coupled groups' wiring (the exact
    # solvers' own start before) took 0.000832 s where the search reaches 0.000512 s in seconds; above 16
    # accelerators the exact solvers start from the search (with a move budget it repeats), so they end
    # no worse than it (one search for both, `solvers._seeded`: CP-SAT's run is slow; its phases model takes
    # the baselines' start in test_wire's test_exact_answer_never_worse_than_a_baseline)
    n = 20
    tp = np.zeros((n, n))
    for g in range(5):
        tp[4 * g:4 * g + 4, 4 * g:4 * g + 4] = 2e6
    np.fill_diagonal(tp, 0)
    ep = np.full((n, n), 1e5)
    np.fill_diagonal(ep, 0)
    p = phased([TrafficPhase("tp", tp, 8.0), TrafficPhase("ep", ep, 4.0)], 4)
    searched = wire(p, "search", SolveParams(time_limit_s=3, max_moves=60)).objective
    res = wire(p, solver, SolveParams(time_limit_s=8, max_moves=60))
    assert res.objective <= searched * (1 + 1e-9) and res.bound <= res.objective
    assert not wiring_violations(res.artifact)


def test_phases_cpsat_proves_nothing_by_excluding_what_it_could_not_colour(monkeypatch):
    """The phases CP-SAT excluded a proposal whose colouring was not found, also when the exact colouring only
    ran out of time, and at the end took the incumbent as proven optimal once every wiring was excluded. Now
    the bound stays what it was before the first unproven exclusion."""
    import solvers.exact as exact_mod
    from solvers.phased import solve_cpsat_phases
    ring = pairs(4, [(i, (i + 1) % 4) for i in range(4)])
    prob = phased([TrafficPhase("a", ring, 1.0), TrafficPhase("b", ring * 2, 1.0)], 2)
    monkeypatch.setattr(exact_mod, "_counts_or_proof", lambda *a, **k: (None, False))
    res = solve_cpsat_phases(prob, SolveParams(time_limit_s=20), per_switch=False)
    assert res.status == SolveStatus.FEASIBLE and res.bound < res.objective * (1 - 1e-6)   # was OPTIMAL, 1 s
    assert res.extra["proposals"] >= 2


def test_a_model_bound_above_a_wiring_in_hand_proves_nothing(monkeypatch):
    """HiGHS's MIP once reported a dual bound of 0.00285509 s on llama405b-tp8pp2-16's phases model beside a
    start of 0.00284729 s, and the answer said OPTIMAL, while a wiring of 0.00283022 s fits the same model. A
    lower bound on every wiring that lies above a wiring in hand is left out (`model_inconsistent`), here
    with HiGHS's dual bound doubled: the Kelley rounds go on and the answer is FEASIBLE, its bound its own."""
    import highspy

    from solvers.phased import solve_milp_phases
    real = highspy.Highs.getInfo

    class Inflated:
        def __init__(self, info):
            self._info = info

        def __getattr__(self, name):
            v = getattr(self._info, name)
            return 2 * v if name == "mip_dual_bound" else v
    monkeypatch.setattr(highspy.Highs, "getInfo", lambda self: Inflated(real(self)))
    prob = phased(random_phases(5, 1), 2)
    res = solve_milp_phases(prob, SolveParams(time_limit_s=20), per_switch=False)
    assert res.status == SolveStatus.FEASIBLE and res.extra["model_inconsistent"] > res.objective
    assert res.bound <= res.objective and "model" not in res.extra["bounds"] and res.extra["kelley_rounds"] >= 2
    monkeypatch.undo()
    honest = solve_milp_phases(prob, SolveParams(time_limit_s=20), per_switch=False)
    assert honest.status == SolveStatus.OPTIMAL and "model_inconsistent" not in honest.extra
    assert honest.objective == pytest.approx(res.objective, rel=1e-6)


def test_finish_leaves_out_a_model_bound_above_the_wiring():
    """`exact._finish`, which every exact solver's answer passes: a model bound 1% above the wiring's own
    objective is left out and nothing is proven by it; one at the objective proves it optimal."""
    from solvers.exact import _finish
    from synth.model import Limit
    prob = phased(random_phases(5, 1), 2)
    w = wire(prob, "greedy", SolveParams(time_limit_s=5)).artifact
    t = prob.score(w, "best")[0]
    bad = _finish(prob, "milp", "", SolveParams(), 0.0, SolveStatus.FEASIBLE, Limit.NONE, w, 1.01 * t, {})
    assert bad.status == SolveStatus.FEASIBLE and bad.bound < t and bad.extra["bounds"]["model_inconsistent"] == 1.01 * t
    good = _finish(prob, "milp", "", SolveParams(), 0.0, SolveStatus.FEASIBLE, Limit.NONE, w, t, {})
    assert good.status == SolveStatus.OPTIMAL and good.extra["proven_by"] == "bound"
