import math

import networkx as nx
import numpy as np
import pytest

from synth.instance import ModelSpec, load_instance
from synth.presets import MODELS
from synth.workload import build_workload, ep_receive_probability

from .conftest import write

SMALL = """
name = "small"
[hardware]
preset = "h100"
accelerators = 16
hbm_gb = 1000
[model]
layers = 4
dense_layers = 1
hidden = 1024
dense_ffn = 4096
heads = 16
attention = "gqa"
kv_heads = 4
head_dim = 64
experts = 16
top_k = 2
expert_ffn = 512
weight_bytes = 2.0
[parallelism]
tp = 4
ep = 8
kvp = 1
[workload]
context_tokens = 1024
batch_per_accelerator = 16
"""


def small(tmp_path, **over):
    return load_instance(write(tmp_path, "s.toml", SMALL), over)


def test_kv_bytes_per_token_mla_and_gqa():
    assert ModelSpec(**MODELS["deepseek-v3"]).kv_bytes_per_token == 70272      # PARAMETERS.md, BF16
    assert ModelSpec(**MODELS["qwen3-235b-a22b"]).kv_bytes_per_token == 192512  # PARAMETERS.md, BF16
    m = ModelSpec(**MODELS["moe5t"])
    assert m.kv_bytes_per_token == 88 * 832 * 1


def test_tp_allreduce_bytes(tmp_path):
    # 16 sequences per TP group of 4, hidden 1024, BF16: M = 16 * 1024 * 2 bytes per all-reduce.
    w = build_workload(small(tmp_path))
    M = 16 * 1024 * 2
    ar = w.traffic.by_kind["tp_allreduce"]
    # one dense layer, two all-reduces; direct RS+AG sends 2M/n to each of the n-1 peers
    assert ar[0, 1] == pytest.approx(2 * 2 * M / 4)
    assert ar[0].sum() == pytest.approx(2 * 2 * (4 - 1) / 4 * M)
    assert ar[0, 4] == 0  # other TP group
    ring = build_workload(small(tmp_path, **{"parallelism.allreduce_algorithm": "ring"}))
    r = ring.traffic.by_kind["tp_allreduce"]
    assert r[0, 1] == pytest.approx(2 * 2 * (4 - 1) / 4 * M) and r[0, 2] == 0 and r[3, 0] > 0
    assert r.sum() == pytest.approx(ar.sum())


def test_ep_dispatch_combine_bytes_uniform(tmp_path):
    # Tokens per accelerator at the FFN: 16 sequences / 4 (TP reduce-scatter) = 4.
    inst = small(tmp_path)
    w = build_workload(inst)
    assert w.tokens_per_accelerator == 4
    q = 1 - math.comb(14, 2) / math.comb(16, 2)  # P(a token hits a rank holding 2 of 16 experts), top-2
    assert ep_receive_probability(inst) == pytest.approx(np.full(8, q))
    d = w.traffic.by_kind["ep_dispatch"]
    per_pair = 4 * q * 1024 * 1.0 * 3          # FP8 dispatch, 3 MoE layers
    assert d[0, 1] == pytest.approx(per_pair) and d[0, 8] == 0
    assert d[0].sum() == pytest.approx(7 * per_pair)
    assert w.traffic.by_kind["ep_combine"] == pytest.approx(d.T * 2)   # BF16 combine
    nodedup = build_workload(small(tmp_path, **{"parallelism.dispatch_dedup": False}))
    assert nodedup.traffic.by_kind["ep_dispatch"][0, 1] == pytest.approx(4 * 0.25 * 1024 * 3)


def test_moe5t_dispatch_by_hand():
    w = build_workload(load_instance("instances/decode/moe5t-576.toml"))
    t = w.tokens_per_accelerator
    per_rank = t * 12288 * 1 * 8 / 576 * 575 * 85     # FP8, top-8 of 576, 85 MoE layers
    d = w.traffic.by_kind["ep_dispatch"]
    assert d.sum(axis=1) == pytest.approx(np.full(576, per_rank))
    assert w.traffic.by_kind["ep_combine"].sum() == pytest.approx(2 * d.sum())
    assert w.traffic.row_nonzeros().min() == 575


def test_totals_are_conserved(tmp_path):
    for inst in (small(tmp_path), load_instance("instances/decode/deepseek-v3-pd-96.toml"),
                 load_instance("instances/decode/llama405b-tp8pp2-16.toml"),
                 load_instance("instances/decode/moe5t-576.toml").with_context(1048576)):
        w = build_workload(inst)
        assert w.traffic.total_bytes == pytest.approx(sum(o.total_bytes for o in w.comm_ops()))
        for kind, mat in w.traffic.by_kind.items():
            assert mat.sum() == pytest.approx(sum(o.total_bytes for o in w.comm_ops() if o.kind == kind))


def test_kvp_combine_by_hand():
    inst = load_instance("instances/decode/moe5t-576.toml").with_context(1048576)
    w = build_workload(inst)
    assert w.kvp == 8
    b = w.batch_per_accelerator
    partial = 128 * (128 * 2 + 8)                   # heads x (v dim BF16 + softmax max/sum FP32)
    per_pair = b / 8 * partial * 88                 # each shard sends the owners' partials, 88 layers
    c = w.traffic.by_kind["kvp_combine"]
    assert c[0, 1] == pytest.approx(per_pair) and c[0, 8] == 0
    assert c.sum() == pytest.approx(576 * 7 * per_pair)


def test_placement_permutes_the_matrix(tmp_path):
    base = build_workload(small(tmp_path)).traffic.bytes_
    w = build_workload(small(tmp_path, **{"parallelism.placement": "random", "workload.seed": 3}))
    p = w.rank_to_accelerator
    assert not np.array_equal(w.traffic.bytes_, base)
    assert np.allclose(w.traffic.bytes_[np.ix_(p, p)], base)
    strided = build_workload(small(tmp_path, **{"parallelism.placement": "strided"})).traffic.by_kind["tp_allreduce"]
    assert strided[0, 4] > 0 and strided[0, 1] == 0        # TP group {0, 4, 8, 12}


def test_zipf_routing_makes_hot_pairs(tmp_path):
    uni = build_workload(small(tmp_path)).traffic.by_kind["ep_dispatch"]
    hot = build_workload(small(tmp_path, **{"workload.expert_routing": "zipf", "workload.zipf_s": 1.2,
                                            "workload.seed": 5})).traffic.by_kind["ep_dispatch"]
    assert hot.sum(axis=0).max() > 1.3 * uni.sum(axis=0).max()
    loads = [1.0] * 16
    loads[3] = 20.0
    exp = build_workload(small(tmp_path, **{"workload.expert_routing": "explicit", "workload.expert_load": loads}))
    col = exp.traffic.by_kind["ep_dispatch"].sum(axis=0)
    assert np.argmax(col[:8]) == 1      # expert 3 lives on EP rank 1 (2 experts per rank)


def test_pd_disaggregation_kv_transfer():
    inst = load_instance("instances/decode/deepseek-v3-pd-96.toml")
    w = build_workload(inst)
    kv = w.traffic.by_kind["pd_kv"]
    units = 72
    expected = units * w.batch_per_accelerator / 1024 * 4096 * 70272
    assert kv.sum() == pytest.approx(expected)
    assert kv[:24, 24:].sum() == pytest.approx(expected) and kv[24:].sum() == 0


def test_dag_is_acyclic_and_has_the_layers():
    w = build_workload(load_instance("instances/decode/llama405b-tp8pp2-16.toml"))
    g = w.graph
    assert nx.is_directed_acyclic_graph(g)
    assert sum(1 for n in g if n.endswith(".attention")) == 126
    assert sum(1 for n in g if n.endswith(".pp_p2p")) == 1
    moe = build_workload(load_instance("instances/decode/deepseek-v3-72.toml")).graph
    assert set(moe.predecessors("L5.shared_expert")) == set(moe.predecessors("L5.ep_dispatch"))
    assert "L5.shared_expert" in set(moe.predecessors("L6.attention"))


def test_auto_batch_fills_hbm():
    inst = load_instance("instances/decode/moe5t-576.toml")
    w = build_workload(inst)
    free = 288e9 * 0.9 - w.weights_bytes_per_accelerator
    per_seq = 88 * 832 * 131072
    assert w.batch_per_accelerator == int(free // per_seq)
    assert w.weights_bytes_per_accelerator + w.kv_bytes_per_accelerator <= 288e9 * 0.9
