import json

import networkx as nx
import numpy as np
import pytest
import scipy.sparse as sp
from click.testing import CliRunner

import synth
from solvers.baselines import expander
from synth.cli import main
from synth.errors import InvalidInput
from synth.evaluate import EVALUATE_KEYS, evaluate, time_collective
from synth.fabric import build_network, parse_fabric
from synth.model import CollectiveKind, OCSLayout, Wiring
from synth.network import Network, completion_time, ecmp_loads, maxmin_rates, optimal_routing, sample_paths
from synth.workload import CommOp

B = 100e9          # bytes/s per link
ALPHA, HOP = 0.6, 0.15


def graph_net(g: nx.Graph, cap=B, lat=HOP) -> Network:
    e = np.array(list(g.edges()))
    return Network.from_pairs("g", g.number_of_nodes(), g.number_of_nodes(), e, cap, lat)


def op(kind, n, M, pattern=None):
    from synth.collectives import _uniform
    per_pair = M / (n - 1) if kind == "alltoall" else M / n
    pat = pattern if pattern is not None else _uniform(n, per_pair)
    return CommOp("x", "x", CollectiveKind(kind), np.arange(n)[None, :], pat, M)


@pytest.mark.parametrize("n", [4, 8, 13])
def test_ring_closed_forms(n):
    net = graph_net(nx.cycle_graph(n))
    M = 64e6
    a = ALPHA + HOP
    t = time_collective(net, op("allreduce", n, M), ALPHA, algorithm="ring").time_us
    assert t == pytest.approx(2 * (n - 1) * a + 2 * (n - 1) / n * M / B * 1e6, rel=1e-12)
    for kind in ("allgather", "reducescatter"):
        t = time_collective(net, op(kind, n, M), ALPHA, algorithm="ring").time_us
        assert t == pytest.approx((n - 1) * a + (n - 1) / n * M / B * 1e6, rel=1e-12)


def test_direct_alltoall_on_full_mesh_is_one_step():
    n, M = 8, 7e6
    net = graph_net(nx.complete_graph(n))
    t = time_collective(net, op("alltoall", n, M, pattern=None), ALPHA).time_us
    assert t == pytest.approx(ALPHA + HOP + M / (n - 1) / B * 1e6)


def test_recursive_doubling_on_hypercube():
    n, M = 16, 16e6
    cube = nx.convert_node_labels_to_integers(nx.hypercube_graph(4), ordering="sorted")
    net = graph_net(cube)
    t = time_collective(net, op("allgather", n, M), ALPHA, algorithm="recursive").time_us
    assert t == pytest.approx(4 * (ALPHA + HOP) + (n - 1) / n * M / B * 1e6)


def test_ecmp_loads_hand_examples():
    line = graph_net(nx.path_graph(4), lat=0)
    dem = np.zeros((4, 4)); dem[0, 3] = 6.0
    loads = ecmp_loads(line, dem)
    assert sorted(loads.tolist()) == [0, 0, 0, 6, 6, 6]
    # diamond 0-{1,2}-3 with link 0-1 twice the capacity of 0-2: split 2:1 at node 0
    net = Network.from_pairs("d", 4, 4, [(0, 1), (0, 2), (1, 3), (2, 3)], [2.0, 1.0, 1.0, 1.0], 0.0)
    dem = np.zeros((4, 4)); dem[0, 3] = 3.0
    loads = dict(zip(zip(net.src.tolist(), net.dst.tolist()), ecmp_loads(net, dem).tolist()))
    assert loads[(0, 1)] == pytest.approx(2.0) and loads[(0, 2)] == pytest.approx(1.0)
    assert loads[(1, 3)] == pytest.approx(2.0) and loads[(3, 1)] == 0



def test_ecmp_loads_match_a_demand_by_demand_split_on_a_long_ring():
    """ECMP passes each destination's bytes down its shortest-path DAG level by level, only on the DAG's
    links: the loads of a hop-by-hop split of every demand alone, on a 40-ring with chords (10 levels) and
    uneven capacities."""
    rng = np.random.default_rng(5)
    n = 40
    pairs = [(i, (i + 1) % n) for i in range(n)] + [(i, (i + 7) % n) for i in range(0, n, 5)]
    net = Network.from_pairs("r", n, n, pairs, list(1.0 + rng.random(len(pairs))), 0.0)
    dem = rng.random((n, n)) * (rng.random((n, n)) < 0.3)
    np.fill_diagonal(dem, 0)
    cap = dict(zip(zip(net.src.tolist(), net.dst.tolist()), net.capacity_bps.tolist()))
    out = {v: [b for a, b in cap if a == v] for v in range(n)}
    ref = dict.fromkeys(cap, 0.0)
    for s, t in zip(*np.nonzero(dem)):
        at = np.zeros(n)
        at[s] = dem[s, t]
        for v in sorted(range(n), key=lambda v: -net.dist[v, t]):
            nxt = [u for u in out[v] if net.dist[u, t] == net.dist[v, t] - 1]
            for u in nxt if v != t else []:
                share = at[v] * cap[(v, u)] / sum(cap[(v, x)] for x in nxt)
                ref[(v, u)] += share
                at[u] += share
    assert net.dist[:n, :n].max() >= 10
    assert ecmp_loads(net, dem).tolist() == pytest.approx([ref[k] for k in zip(net.src.tolist(), net.dst.tolist())])

def test_maxmin_hand_solved():
    # links L0 (cap 10), L1 (cap 4); flows: a uses L0+L1, b uses L0, c uses L1, d uses L0.
    inc = sp.csr_matrix(np.array([[1, 1], [1, 0], [0, 1], [1, 0]], dtype=float))
    r = maxmin_rates(inc, np.array([10.0, 4.0]))
    # L1 saturates first at 2 each (a, c); then b, d share the remaining 8 of L0: 4 each
    assert r.tolist() == pytest.approx([2.0, 4.0, 2.0, 4.0])


def test_flow_and_analytical_agree_on_uniform_ring():
    n, s = 5, 1e6
    net = graph_net(nx.cycle_graph(n), lat=0)
    dem = np.full((n, n), s); np.fill_diagonal(dem, 0)
    analytical = ecmp_loads(net, dem).max() / B
    src, dst = np.nonzero(dem)
    inc, flow_of, _ = sample_paths(net, src, dst, 1)
    assert completion_time(inc, net.capacity_bps, dem[src, dst]) == pytest.approx(analytical, rel=1e-9)
    # a ring all-reduce step (shift by one) too, through the evaluator's two fidelities
    ring = time_collective(net, op("allgather", n, 5e6), 0.0, algorithm="ring").time_us
    flow = time_collective(net, op("allgather", n, 5e6), 0.0, fidelity="flow", algorithm="ring").time_us
    assert flow == pytest.approx(ring, rel=1e-9)


def test_optimal_routing_never_improves_when_a_circuit_is_removed():
    w = expander(OCSLayout.uniform(12, 3), seed=4)
    rng = np.random.default_rng(0)
    dem = rng.random((12, 12)) * 1e6
    np.fill_diagonal(dem, 0)

    def theta(wiring):
        adj = np.triu(wiring.adjacency(), 1)
        i, j = np.nonzero(adj)
        return optimal_routing(Network.from_pairs("o", 12, 12, np.stack([i, j], 1), adj[i, j] * B, 0), dem)[0]
    full = theta(w)
    assert full <= ecmp_loads(graph_net(nx.Graph(w.to_networkx())), dem).max() / B + 1e-12
    for k in range(0, len(w.circuits), 5):
        fewer = Wiring(12, 3, w.circuits[:k] + w.circuits[k + 1:], w.layout)
        try:
            assert theta(fewer) >= full * (1 - 1e-9)
        except InvalidInput:
            pass   # disconnected: no routing at all


@pytest.fixture(scope="module")
def ds72():
    return synth.load_instance("instances/decode/deepseek-v3-72.toml")


def test_evaluate_keys_and_sanity(ds72):
    ev = evaluate(ds72, "eps:4")
    d = ev.to_dict()
    assert set(EVALUATE_KEYS) <= set(d)
    assert ev.step_time_us >= ev.compute_time_us > 0 and ev.tokens_per_s_per_user == pytest.approx(1e6 / ev.step_time_us)
    assert ev.tokens_per_s_per_accelerator == pytest.approx(ev.sequences_per_step / ev.step_time_us * 1e6 / 72)


@pytest.mark.parametrize("name", ["deepseek-v3-72", "qwen3-235b-64", "llama405b-tp8pp2-16", "deepseek-v3-pd-96"])
def test_oversubscription_and_bandwidth_monotone(name):
    inst = synth.load_instance(f"instances/decode/{name}.toml")
    one, two, four = (evaluate(inst, f"eps:{r}").step_time_us for r in (1, 2, 4))
    assert one <= two <= four
    for fabric in ("torus3d", "fullmesh3d", "scaleup", "eps:4"):
        slow = evaluate(inst, fabric).step_time_us
        fast_inst = synth.load_instance(f"instances/decode/{name}.toml",
                                        {"hardware.port_bandwidth_gbps": inst.hardware.port_bandwidth_gbps * 2})
        assert evaluate(fast_inst, fabric).step_time_us <= slow


def test_fabric_errors(ds72):
    with pytest.raises(InvalidInput, match=r"unknown fabric 'nvlink'; valid: ocs, eps:R"):
        parse_fabric("nvlink")
    w = expander(OCSLayout.uniform(8, 18))
    with pytest.raises(InvalidInput, match="wiring has 8 accelerators, the instance has 72"):
        evaluate(ds72, "ocs", w)
    # two disjoint halves: accelerators 0 and 36 exchange traffic but have no path
    half = [(a, b) for base in (0, 36) for a, b in nx.random_regular_graph(4, 36, seed=1).edges()
            for a, b in [(a + base, b + base)]]
    lay = OCSLayout.uniform(72, 18)
    cut = Wiring.from_pairs(72, 18, half, lay)
    with pytest.raises(InvalidInput, match=r"accelerators 0 and 36 exchange .* no path"):
        evaluate(ds72, "ocs", cut)


def run(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def test_cli_evaluate_and_compare(tmp_path):
    code, out, _ = run("evaluate", "instances/decode/deepseek-v3-72.toml", "--fabric", "torus3d", "--json")
    assert code == 0 and set(EVALUATE_KEYS) <= set(json.loads(out))
    code, out, _ = run("evaluate", "instances/decode/deepseek-v3-72.toml", "--fabric", "ocs")
    assert code == 0 and "tokens/s per user" in out
    plot = str(tmp_path / "p.png")
    code, out, err = run("compare", "instances/decode/qwen3-235b-64.toml", "--fabrics", "ocs,eps:1,torus3d",
                         "--json", "--plot", plot)
    res = json.loads(out)
    assert code == 0 and res["baseline"] == "eps:4" and set(res["fabrics"]) == {"ocs", "eps:1", "torus3d", "eps:4"}
    assert res["fabrics"]["eps:4"]["speedup_vs_baseline"] == 1.0
    assert set(EVALUATE_KEYS) <= set(res["fabrics"]["ocs"])
    assert open(plot, "rb").read(4) == b"\x89PNG" and "[1/4]" in err


def test_cli_evaluate_bad_inputs(tmp_path):
    from synth.formats import save_wiring
    for args, needle in ((("--fabric", "nvlink"), "unknown fabric"),
                         (("--fabric", "eps:0.5"), "bad parameter"),
                         (("--fabric", "ocs", "--wiring", str(tmp_path / "none.json")), "no such file")):
        code, _, err = run("evaluate", "instances/decode/deepseek-v3-72.toml", *args)
        assert code == 2 and needle in err and err.count("\n") == 1
    w = str(tmp_path / "w.json")
    save_wiring(expander(OCSLayout.uniform(8, 18)), w)
    code, _, err = run("evaluate", "instances/decode/deepseek-v3-72.toml", "--fabric", "ocs", "--wiring", w)
    assert code == 2 and "wiring has 8 accelerators, instance has 72" in err
    code, _, err = run("compare", "instances/decode/deepseek-v3-72.toml", "--plot", str(tmp_path / "no" / "p.png"))
    assert code == 2 and "does not exist" in err


def test_dimension_ordered_alltoall_closed_form_on_full_mesh():
    inst = synth.load_instance("instances/decode/qwen3-235b-64.toml")     # 64 accelerators, 18 ports
    net, _ = build_network(inst, "fullmesh3d:4x4x4")
    n, pp = 64, 1e6
    t = time_collective(net, op("alltoall", n, pp * (n - 1)), ALPHA, algorithm="dimension-ordered").time_us
    cap = 18 / 3 / 3 * inst.hardware.port_bytes_per_s          # a dimension's 6 ports over its 3 neighbours
    per_phase = ALPHA + inst.hardware.link_latency_us + pp * n / 4 / cap * 1e6
    assert t == pytest.approx(3 * per_phase, rel=1e-9)


def test_hierarchical_allreduce_on_eps():
    from synth.collectives import hierarchical
    inst = synth.load_instance("instances/decode/moe5t-576.toml")
    net, _ = build_network(inst, "eps:4")
    leaf = net.meta["leaf_of"]
    phases = hierarchical("allreduce", leaf, 64e6)
    assert len(phases) == 4
    # only 1/m of the message crosses between leaves: 2 * (M/m) * (L-1)/L per rank
    m, L = int(np.bincount(leaf).max()), len(np.unique(leaf))
    cross = sum(ph.pattern[0][leaf != leaf[0]].sum() for ph in phases)
    assert cross == pytest.approx(2 * 64e6 / m * (L - 1) / L)
    t = time_collective(net, op("allreduce", 576, 64e6), ALPHA, algorithm="hierarchical")
    assert t.time_us > 0 and t.algorithm == "hierarchical"


def test_tree_allreduce_closed_form():
    n, M = 7, 1e6                                   # a complete binary tree of depth 2
    g = nx.Graph([(i, (i - 1) // 2) for i in range(1, n)])
    net = graph_net(g)
    t = time_collective(net, op("allreduce", n, M), ALPHA, algorithm="tree").time_us
    assert t == pytest.approx(4 * (ALPHA + HOP + M / B * 1e6))


def test_evaluate_with_a_schedules_routes(tmp_path):
    from solvers import schedules as S
    from synth.formats import save_wiring
    from synth.model import Collective
    from synth.schedule import schedule_to_dict
    inst = synth.load_instance("instances/decode/deepseek-v3-72.toml")
    w = expander(inst.ocs_layout(), seed=0)
    fab = S.Fabric(w.adjacency(), inst.hardware.port_bytes_per_s, inst.hardware.step_latency_us)
    sched = S.pairwise(fab, Collective("alltoall", tuple(range(72)), 1e6), 72 * 72)
    base = evaluate(inst, "ocs", w)
    given = evaluate(inst, "ocs", w, schedules=(sched,))
    ops = {o.name: o for o in given.ops}
    assert ops["ep_dispatch"].algorithm == "schedule:pairwise"
    assert ops["ep_dispatch"].time_us > {o.name: o for o in base.ops}["ep_dispatch"].time_us  # 71 steps of alpha
    wp, sp = str(tmp_path / "w.json"), str(tmp_path / "s.json")
    save_wiring(w, wp)
    open(sp, "w").write(json.dumps(schedule_to_dict(sched)))
    code, out, _ = run("evaluate", "instances/decode/deepseek-v3-72.toml", "--fabric", "ocs", "--wiring", wp,
                       "--schedule", sp, "--json")
    assert code == 0 and any(o["algorithm"] == "schedule:pairwise" for o in json.loads(out)["ops"])


def test_scaleout_and_hybrid_fabrics(ds72):
    from synth.cli import default_wiring
    out = evaluate(ds72, "scaleout")
    up = evaluate(ds72, "scaleup")
    assert out.step_time_us >= up.step_time_us          # one 800G NIC vs 18 x 400G ports
    w9 = default_wiring(ds72, ocs_ports=9)
    assert int(w9.degree().max()) <= 9
    hyb = evaluate(ds72, "hybrid:9", w9)
    assert hyb.step_time_us > 0 and hyb.network_capex_usd > 0
    with pytest.raises(InvalidInput, match="hybrid:4 allows 4"):
        evaluate(ds72, "hybrid:4", w9)
    with pytest.raises(InvalidInput, match="needs a wiring"):
        evaluate(ds72, "ocs")


def test_balanced_routing_never_slower_than_ecmp(ds72):
    w = expander(ds72.ocs_layout(), seed=3)
    ecmp = evaluate(ds72, "ocs", w)
    bal = evaluate(ds72, "ocs", w, routing="balanced")
    assert bal.comm_time_us <= ecmp.comm_time_us * (1 + 1e-9)
    with pytest.raises(InvalidInput, match="must be ecmp or balanced"):
        evaluate(ds72, "ocs", w, routing="magic")


def test_evaluate_with_selected_schedules(tmp_path):
    from synth.formats import save_wiring
    # qwen3-235b-64 cut to 16 accelerators (EP 16): the same ops, a quarter of the chunk routing (49 s at 64)
    text = open("instances/decode/qwen3-235b-64.toml").read()
    small = tmp_path / "qwen3-16.toml"
    small.write_text(text.replace("accelerators = 64", "accelerators = 16").replace("ep = 64", "ep = 16"))
    inst = synth.load_instance(str(small))
    w = expander(inst.ocs_layout(), seed=0)
    wp = str(tmp_path / "w.json")
    save_wiring(w, wp)
    code, out, _ = run("evaluate", str(small), "--fabric", "ocs", "--wiring", wp, "--schedule", "auto", "--json")
    ops = {o["name"]: o for o in json.loads(out)["ops"]}
    assert code == 0 and ops["ep_dispatch"]["algorithm"].startswith("schedule:")
    assert ops["tp_reducescatter"]["algorithm"].startswith("schedule:")
    code, _, err = run("evaluate", str(small), "--fabric", "eps:4", "--schedule", "auto")
    assert code == 2 and "needs an ocs or hybrid fabric" in err
