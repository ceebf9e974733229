"""Multiplicative-weights routing with its helper process: the same bits with or without it, and a helper
that dies or is left mid-block never changes or loses an answer."""
import time

import networkx as nx
import numpy as np
import pytest

from synth import routing
from synth.network import Network
from synth.routing import _Helper, mwu_routing


@pytest.fixture(scope="module")
def case():
    g = nx.random_regular_graph(5, 40, seed=3)
    e = np.array(list(g.edges()))
    net = Network.from_pairs("g", 40, 40, e, 100e9, 0.15)
    rng = np.random.default_rng(1)
    dem = rng.integers(0, 4, (40, 40)).astype(float) * 1e6
    np.fill_diagonal(dem, 0)
    return net, dem


def route(net, dem, workers):
    preds: list = []
    lengths: list = []
    theta, loads, run = mwu_routing(net, dem, rounds=6, time_limit_s=1e9, workers=workers, preds_out=preds,
                                    lengths_out=lengths, seed=5)
    return theta, loads, run, np.stack(preds), lengths[0]


def same(a, b) -> None:
    assert a[0] == b[0] and a[2] == b[2]
    for x, y in zip(a[1:], b[1:]):
        assert np.array_equal(x, y)


def test_helper_gives_the_same_bits(case):
    alone = route(*case, workers=1)
    assert _Helper._proc is None or _Helper._proc.poll() is None
    helped = route(*case, workers=2)
    assert _Helper._proc is not None and _Helper._proc.poll() is None       # it ran, and is kept
    same(alone, helped)
    same(alone, route(*case, workers=2))                                    # reused


def test_a_dead_helper_is_replaced_by_the_caller(case):
    alone = route(*case, workers=1)
    route(*case, workers=2)
    _Helper._proc.kill()             # dies between routings: the next one starts another
    _Helper._proc.wait()
    same(alone, route(*case, workers=2))

    calls = {"n": 0}
    run = routing._Halves.run

    def dies_mid_round(self, k, h, length, want_rows=False):
        calls["n"] += 1
        if calls["n"] == 3:          # in the second block, after the helper was asked
            _Helper._proc.kill()
            _Helper._proc.wait()
        return run(self, k, h, length, want_rows)
    routing._Halves.run = dies_mid_round
    try:
        same(alone, route(*case, workers=2))
    finally:
        routing._Halves.run = run
    assert _Helper._proc is None     # dropped; the next routing starts a new one
    same(alone, route(*case, workers=2))


def test_an_exception_between_ask_and_answer_stops_the_helper(case, monkeypatch):
    alone = route(*case, workers=1)
    calls = {"n": 0}
    run = routing._Halves.run

    def interrupted(self, k, h, length, want_rows=False):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return run(self, k, h, length, want_rows)
    monkeypatch.setattr(routing._Halves, "run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        route(*case, workers=2)
    assert _Helper._proc is None     # its answer was never read: a stale one must not reach the next caller
    monkeypatch.setattr(routing._Halves, "run", run)
    same(alone, route(*case, workers=2))


def test_bench_routing_reports_the_same_bits_and_rejects_bad_input(tmp_path):
    import json

    from click.testing import CliRunner

    from synth.cli import main
    r = CliRunner().invoke(main, ["bench", "routing", "instances/decode/llama405b-tp8pp2-16.toml", "--rounds", "3"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["same_bits"] is True and out["rounds"] == 3 and out["links"] > 0
    r = CliRunner().invoke(main, ["bench", "routing", str(tmp_path / "none.toml")])
    assert r.exit_code == 2 and "none.toml" in r.stderr and r.stderr.count("\n") == 1
    bad = tmp_path / "w.json"
    bad.write_text("{")
    r = CliRunner().invoke(main, ["bench", "routing", "instances/decode/llama405b-tp8pp2-16.toml", "--wiring", str(bad)])
    assert r.exit_code == 2 and "w.json" in r.stderr and r.stderr.count("\n") == 1


@pytest.mark.parametrize("workers", [1, 2])
def test_a_resumed_run_is_the_longer_run(case, workers):
    """`resume` carries MWU across calls: 4 rounds then up to 10 give the bits of one 10-round run, and a call
    past the last round returns what the run had."""
    net, dem = case
    whole = mwu_routing(net, dem, rounds=10, time_limit_s=1e9, workers=workers, seed=5)
    state: dict = {}
    first = mwu_routing(net, dem, rounds=4, time_limit_s=1e9, workers=workers, seed=5, resume=state)
    assert first[2] == 4 and state["run"] == 4 and first[0] > whole[0]
    went_on = mwu_routing(net, dem, rounds=10, time_limit_s=1e9, workers=workers, seed=5, resume=state)
    assert went_on[0] == whole[0] and went_on[2] == 10 and np.array_equal(went_on[1], whole[1])
    again = mwu_routing(net, dem, rounds=10, time_limit_s=1e9, workers=workers, seed=5, resume=state)
    assert again[0] == whole[0] and again[2] == 10


def test_mwu_stops_before_a_round_that_would_end_past_its_clock(case, monkeypatch):
    """MWU ends when another round as long as the last would end past `time_limit_s`, not after the round that
    passed it (4,608 accelerators: rounds of 2.4 s ended a 25 s clock up to 3 s late). On a clock that each
    half-block moves by 1 s (8 blocks of two halves: 16 s a round), 40 s take two rounds and end at 32 s;
    the old check ran a third, to 48 s."""
    from types import SimpleNamespace
    net, dem = case
    now = [0.0]
    run = routing._Halves.run

    def one_second(self, k, h, length, want_rows=False):
        now[0] += 1.0
        return run(self, k, h, length, want_rows)
    monkeypatch.setattr(routing, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    monkeypatch.setattr(routing._Halves, "run", one_second)
    theta, _, rounds = mwu_routing(net, dem, rounds=10, time_limit_s=40.0, workers=1, seed=5)
    assert rounds == 2 and now[0] == 32.0 and np.isfinite(theta)
    now[0] = 0.0
    assert mwu_routing(net, dem, rounds=10, time_limit_s=1.0, workers=1, seed=5)[2] == 1   # one round at least


@pytest.mark.parametrize("ordered", [True, False])
def test_mwu_blocks_take_each_half_its_sources_demands_in_order(ordered):
    """`_Halves.split_work` slices the source-sorted demands (np.isin over all of them took 4.5 s at 4,608
    accelerators): each half's demands, rows and order are a mask's, sorted sources or not."""
    rng = np.random.default_rng(4)
    nodes = 50
    s = rng.integers(0, 40, 3000)
    s = np.sort(s) if ordered else s
    d, amount = rng.integers(0, nodes, s.size), rng.random(s.size)
    blocks = np.array_split(rng.permutation(np.unique(s)), 8)
    work = routing._Halves.split_work(nodes, s, d, amount, blocks)
    o = np.argsort(s, kind="stable")
    s, d, amount = s[o], d[o], amount[o]
    for b, halves in zip(blocks, work):
        for half, got in zip(np.array_split(b, 2), halves):
            mine = np.isin(s, half)
            row = {int(v): i for i, v in enumerate(half)}
            want = (half, np.array([row[int(v)] for v in s[mine]]), s[mine], d[mine], amount[mine])
            for x, y in zip(got, want):
                assert np.array_equal(x, y)


def test_two_hop_routing_is_the_best_over_one_and_two_hops():
    """The two-hop path LP: on K4 a demand's direct link and its two two-hop paths carry it at the optimum;
    on a 4-cycle, where the second path takes three hops, it keeps to the direct link (twice the optimum);
    a demand with no path within two hops has none; on a random graph it is a routing (never below the
    routing LP's optimum) and, with every demand one hop apart, no slower than its direct links."""
    from synth.network import optimal_routing
    from synth.routing import two_hop_routing
    k4 = Network.from_pairs("k4", 4, 4, [(a, b) for a in range(4) for b in range(a + 1, 4)], 1.0, 0.0)
    dem = np.zeros((4, 4))
    dem[0, 1] = 3.0
    assert two_hop_routing(k4, dem)[0] == pytest.approx(1.0) == optimal_routing(k4, dem)[0]
    ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    assert two_hop_routing(ring, dem)[0] == pytest.approx(3.0) and optimal_routing(ring, dem)[0] == pytest.approx(1.5)
    six = Network.from_pairs("ring", 6, 6, [(i, (i + 1) % 6) for i in range(6)], 1.0, 0.0)
    far = np.zeros((6, 6))
    far[0, 3] = 1.0
    assert two_hop_routing(six, far)[0] == np.inf
    g = nx.random_regular_graph(4, 30, seed=2)
    e = np.array(list(g.edges()))
    net = Network.from_pairs("g", 30, 30, e, 100e9, 0.0)
    rng = np.random.default_rng(0)
    near = np.zeros((30, 30))
    near[e[:, 0], e[:, 1]] = rng.uniform(1, 5, len(e)) * 1e6
    t, how = two_hop_routing(net, near)
    assert how.startswith("two-hop lp") and optimal_routing(net, near)[0] * (1 - 1e-6) <= t
    assert t <= (near / 100e9).max() * (1 + 1e-6)


def test_path_lp_routing_goes_on_from_its_last_mwu_round(case):
    """`resume` carries the path LP's MWU across calls: a second call adds rounds to the first's (up to
    `rounds` more), its answer a routing (never below the routing LP's optimum); under the phases objective
    `WiringProblem.score` keeps one such state per phase."""
    from synth.model import OCSLayout, TrafficMatrix, TrafficPhase
    from synth.network import optimal_routing
    from synth.problem import WiringProblem
    from synth.routing import path_lp_routing
    net, dem = case
    state: dict = {}
    first = path_lp_routing(net, dem, time_limit_s=60, rounds=5, resume=state)
    assert state["run"] == 5
    again = path_lp_routing(net, dem, time_limit_s=60, rounds=5, resume=state)
    assert state["run"] == 10
    opt = optimal_routing(net, dem)[0]
    assert min(first[0], again[0]) >= opt * (1 - 1e-6)
    n = 60
    lab = np.arange(n) // 4
    tp = np.where((lab[:, None] == lab[None]) & ~np.eye(n, dtype=bool), 3e7, 0.0)
    ep = np.where(~np.eye(n, dtype=bool), 2e6, 0.0)
    p = WiringProblem(TrafficMatrix(2 * tp + ep), OCSLayout.uniform(n, 6), 800.0, "phases",
                      phases=(TrafficPhase("tp", tp, 2.0), TrafficPhase("ep", ep, 1.0)))
    from solvers.baselines import expander
    wiring = expander(p.layout, 1)
    kept: dict = {}
    p.score(wiring, "mwu", 1.0, resume=kept)
    runs = {i: kept[i]["run"] for i in (0, 1)}
    assert min(runs.values()) >= 1
    p.score(wiring, "mwu", 1.0, resume=kept)
    assert all(kept[i]["run"] > runs[i] for i in (0, 1))


def test_path_lp_routing_gives_mwu_the_clock_its_lp_cannot_use(case):
    """When no path LP beat MWU (or none had time to run), MWU goes on from its last round on the clock left,
    down to MWU_ON_MIN_S: deepseek-v3-144 at `--time-limit 5` scored its searched wiring in 0.52 s of a 1 s
    clock (the LP skipped with 0.45 s left, and MWU not resumed below 0.5 s): 0.00524 s, now 0.00491 s."""
    from synth.routing import MWU_ON_MIN_S, _mwu_on, mwu_routing
    net, dem = case
    state: dict = {}
    theta, _, run = mwu_routing(net, dem, rounds=3, resume=state)
    how = f"mwu ({run} rounds)"
    left = max(0.3, 3 * MWU_ON_MIN_S)
    value, said = _mwu_on(net, dem, theta, how, how, state, 6, left, 0)
    assert state["run"] == 6 and value <= theta and said.startswith("mwu (")
    assert _mwu_on(net, dem, theta, "path-lp (3 paths)", how, state, 9, left, 0) == (theta, "path-lp (3 paths)")
    assert state["run"] == 6          # an LP that beat MWU stands


def test_beside_computes_in_the_helper_and_is_given_up_on_cancel():
    import math
    import os
    from synth.routing import Beside, _cores
    if _cores() < 2:
        pytest.skip("one core: Beside runs nothing")
    job = Beside.start(os.getpid)
    assert job is not None and job.result() not in (None, os.getpid())      # another process
    assert Beside.start(math.sqrt, -1.0).result() is None                    # it raised: the caller computes it
    busy = Beside.start(time.sleep, 60)
    assert Beside.start(os.getpid) is None                                   # one job at a time
    busy.cancel()                                                            # the helper is stopped at once
    assert _Helper._proc is None
    assert Beside.start(math.sqrt, 4.0).result() == 2.0                      # and the next job starts another
    # a Ctrl-C while waiting for it: the helper is stopped; giving the job up after that does nothing more
    job = Beside.start(time.sleep, 60)

    def ctrl_c(self):
        raise KeyboardInterrupt
    real, _Helper.answer = _Helper.answer, ctrl_c
    try:
        with pytest.raises(KeyboardInterrupt):
            job.result()
    finally:
        _Helper.answer = real
    job.cancel()
    assert _Helper._proc is None and not _Helper._lock.locked()
    assert Beside.start(math.sqrt, 9.0).result() == 3.0


def test_the_best_mix_of_routings_is_a_routing_no_worse_than_each(case, monkeypatch):
    """`best_mix`: one demand on a 4-ring routed all clockwise or all the other way takes 1 s either way; half
    and half takes 0.5 s, the optimum. On a random graph the mix of MWU's rounds is never below the routing LP's
    optimum and never above MWU's average; `score` mixes the rounds beyond the path LP's sizes (here forced)."""
    from synth.network import optimal_routing
    from synth.routing import best_mix
    ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    cw = np.zeros(ring.links)
    ccw = np.zeros(ring.links)
    for a, b in ((0, 1), (1, 2)):
        cw[ring.link_id[a, b]] = 1.0
    for a, b in ((0, 3), (3, 2)):
        ccw[ring.link_id[a, b]] = 1.0
    t, w = best_mix([cw, ccw], ring.capacity_bps, 10.0)
    assert t == pytest.approx(0.5, rel=1e-6) and w == pytest.approx([0.5, 0.5], abs=1e-6)
    net, dem = case
    kept: list = []
    theta, avg, _ = mwu_routing(net, dem, rounds=30, time_limit_s=1e9, seed=5, rounds_out=kept)
    assert len(kept) == 30
    mixed, w = best_mix(kept + [avg], net.capacity_bps, 10.0)
    opt = optimal_routing(net, dem)[0]
    assert opt * (1 - 1e-9) <= mixed <= theta * (1 + 1e-12) and w.sum() == pytest.approx(1.0)
    assert best_mix(kept, net.capacity_bps, 0.0) == (np.inf, None)        # no clock: no answer, never a wrong one

    from solvers.baselines import expander
    from synth import problem as problem_mod
    from synth.model import OCSLayout, TrafficMatrix
    monkeypatch.setattr(problem_mod, "EXACT_ROUTING_MAX", 0)
    monkeypatch.setattr(problem_mod, "PATH_LP_MAX_LINKS", 0)
    n = 30
    rng = np.random.default_rng(2)
    t = rng.integers(1, 5, (n, n)).astype(float) * 1e6
    np.fill_diagonal(t, 0)
    p = problem_mod.WiringProblem(TrafficMatrix(t), OCSLayout.uniform(n, 4), 100.0, "time")
    wiring = expander(p.layout, 3)
    value, how = p.score(wiring, "best", 4.0)
    assert how.endswith("their best mix)")
    assert optimal_routing(p.network(wiring), t)[0] * (1 - 1e-9) <= value


def test_the_mix_learns_this_machines_lp_speed(monkeypatch):
    """`best_mix` plans its columns by MIX_RATE, measured on one machine; on one 1.75x slower its LP ran into its
    clock and the score ended 1 s past its own. Each mix of MIX_LEARN_MIN columns or more now records its LP's
    time against the prediction: a finished LP sets the speed, one the clock stopped can only raise it, and the
    columns planned follow. A real mix leaves a ratio in the clamped range."""
    from synth import routing
    monkeypatch.setattr(routing, "_mix_speed", [1.0])
    links, cols = 10_000, 200
    before = routing.mix_columns(links, 10.0)
    predicted = routing.MIX_RATE * links * cols ** 1.5
    routing._learn_speed(links, cols, 2.0 * predicted, finished=True)
    assert routing._mix_speed[0] == pytest.approx(2.0)
    assert routing.mix_columns(links, 10.0) < before
    assert routing.mix_time(links, cols) == pytest.approx(2.0 * predicted / 0.6)
    routing._learn_speed(links, cols, 1.5 * predicted, finished=False)    # stopped early: says "at least 1.5"
    assert routing._mix_speed[0] == pytest.approx(2.0)
    routing._learn_speed(links, cols, 3.0 * predicted, finished=False)
    assert routing._mix_speed[0] == pytest.approx(3.0)
    routing._learn_speed(links, routing.MIX_LEARN_MIN - 1, 100.0, finished=True)   # set-up bound: not learnt
    assert routing._mix_speed[0] == pytest.approx(3.0)
    routing._learn_speed(links, cols, 0.5 * predicted, finished=True)    # a faster machine: more columns
    assert routing._mix_speed[0] == pytest.approx(0.5) and routing.mix_columns(links, 10.0) > before
    rng = np.random.default_rng(0)
    us = [rng.random(400) for _ in range(routing.MIX_LEARN_MIN)]
    t, w = routing.best_mix(us, np.ones(400), 30.0)
    assert np.isfinite(t) and 0.25 <= routing._mix_speed[0] <= 8.0


def test_highs_models_at_different_thread_counts_run_one_after_another():
    """HiGHS sizes each thread's scheduler by the first solve and fails a later one asking for another count.
    The routing LPs ran at HiGHS's own count (2 on 2 cores) and the Moore bound's b-matching at 1, which then
    failed on every call: kimi-k2-288's bound was 0.52% lower after a moe5t-576 solve in the same process. Every
    model now sets its count through `highs_threads`, so each runs whatever ran before it on the thread."""
    from solvers.bounds import bmatching_bytes
    from synth.model import OCSLayout, TrafficMatrix
    from synth.network import optimal_routing
    from synth.problem import WiringProblem
    from synth.routing import best_mix
    rng = np.random.default_rng(1)
    t = rng.random((12, 12)) * 1e6
    np.fill_diagonal(t, 0.0)
    p = WiringProblem(TrafficMatrix(t), OCSLayout.uniform(12, 3), 100.0)
    deg = [np.full(12, 3.0)]
    alone = bmatching_bytes(p, deg)
    assert np.isfinite(alone[0])
    ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    dem = np.zeros((4, 4))
    dem[0, 1] = 3.0
    got: list = []

    def on_a_new_thread():      # its own scheduler, not yet sized: the routing LP sizes it first
        for _ in range(2):
            got.append(optimal_routing(ring, dem)[0])                      # HiGHS's own count
            got.append(bmatching_bytes(p, deg))                            # one thread
            got.append(best_mix([np.ones(ring.links), np.ones(ring.links)], ring.capacity_bps, 5.0)[0])
    import threading
    worker = threading.Thread(target=on_a_new_thread)
    worker.start()
    worker.join()
    assert got == [pytest.approx(1.5), alone, pytest.approx(1.0)] * 2
