import glob
import re

import numpy as np
import pytest

from synth.errors import InvalidInput, InvalidInstance
from synth.instance import instance_from_dict, instance_to_dict, load_instance, parse_override
from synth.presets import MODELS

from .conftest import write

BASE = """
format = "ocs-synth/instance"
version = 1
name = "t"
[hardware]
preset = "h100"
accelerators = 16
[model]
preset = "qwen3-235b-a22b"
[parallelism]
tp = 4
ep = 16
kvp = 1
[workload]
context_tokens = 4096
"""


def load(tmp_path, text=BASE, **over):
    return load_instance(write(tmp_path, "i.toml", text), over)


@pytest.mark.parametrize("path", sorted(glob.glob("instances/decode/*.toml")))
def test_shipped_instances_load_and_round_trip(path):
    inst = load_instance(path)
    assert inst.source and inst.name
    again = instance_from_dict(instance_to_dict(inst))
    assert instance_to_dict(again) == instance_to_dict(inst)


def test_moe5t_is_the_canonical_deployment():
    inst = load_instance("instances/decode/moe5t-576.toml")
    m = inst.model
    assert (inst.accelerators, inst.hardware.ports, inst.hardware.port_bandwidth_gbps) == (576, 18, 800.0)
    assert (m.layers, m.dense_layers, m.dense_ffn, m.hidden) == (88, 3, 49152, 12288)
    assert (m.experts, m.shared_experts, m.top_k, m.expert_ffn) == (576, 1, 8, 3072)
    assert m.kv_values_per_token_layer == 832 and m.heads == 128
    assert 5.5e12 < m.total_params < 5.7e12
    assert (inst.hardware.fp4_pflops, inst.hardware.hbm_gb, inst.hardware.power_w) == (15.0, 288.0, 1400.0)
    assert [inst.kvp_for(c) for c in (8192, 131072, 131073, 1048576, 5242880)] == [1, 1, 8, 8, 72]
    assert inst.parallelism.ep == 576 and inst.ocs_layout().is_uniform()


def test_preset_parameter_counts():
    from synth.instance import ModelSpec
    ds = ModelSpec(**MODELS["deepseek-v3"])
    assert abs(ds.total_params / 1e9 - 671) < 3 and abs(ds.active_params / 1e9 - 37) < 2
    assert abs(ModelSpec(**MODELS["kimi-k2"]).total_params / 1e12 - 1.03) < 0.03
    assert abs(ModelSpec(**MODELS["qwen3-235b-a22b"]).total_params / 1e9 - 235) < 2
    assert abs(ModelSpec(**MODELS["llama-3.1-405b"]).total_params / 1e9 - 406) < 2


@pytest.mark.parametrize("over,field,match", [
    ({"parallelism.tp": 3}, "parallelism.tp", r"tp = 3 does not divide the 16"),
    ({"parallelism.pp": 3}, "parallelism.pp", r"pp = 3 does not divide the 16"),
    ({"parallelism.ep": 256}, "parallelism.ep", r"ep = 256 exceeds the 128 experts"),
    ({"parallelism.ep": 32}, "parallelism.ep", r"ep = 32 does not divide the 16 accelerators"),
    ({"model.top_k": 200}, "model.top_k", r"must be in 1..experts \(128\), got 200"),
    ({"model.hidden": 0}, "model.hidden", r"must be >= 1, got 0"),
    ({"model.hidden": -4096}, "model.hidden", r"must be >= 1"),
    ({"hardware.port_bandwidth_gbps": 0}, "hardware.port_bandwidth_gbps", r"must be > 0"),
    ({"hardware.ports": "many"}, "hardware.ports", r"must be an integer"),
    ({"workload.context_tokens": 10**7}, "workload.context_tokens", r"exceed the model's limit of 131072"),
    ({"parallelism.placement": [0] * 16}, "parallelism.placement", r"names accelerator 0 twice"),
    ({"parallelism.placement": list(range(15))}, "parallelism.placement", r"lists 15 accelerators"),
    ({"parallelism.kvp": "lots"}, "parallelism.kvp", r'must be an integer >= 1 or "auto"'),
    ({"model.tpo_k": 4}, "model", r'unknown key "tpo_k" \(did you mean "top_k"\?\)'),
    ({"hardware.preset": "h900"}, "hardware.preset", r'unknown preset "h900"'),
    ({"model.preset": [1]}, "model.preset", r"must be a preset name"),      # was a TypeError (unhashable)
    ({"workload.expert_routing": "random"}, "workload.expert_routing", r"must be one of uniform, zipf"),
    ({"fabric.kind": "nvlink"}, "fabric.kind", r"must be one of ocs, eps"),
    # each of these ended in a traceback (OverflowError, ZeroDivisionError, a float NaN cast to int)
    ({"model.hidden": 1e308}, "model.hidden", r"must be at most 9\.0072e\+15 in size"),
    ({"model.combine_bytes": 1e308}, "model.combine_bytes", r"must be at most 1e\+30 in size"),
    ({"hardware.hbm_gb": 1e308}, "hardware.hbm_gb", r"must be at most 1e\+30"),
    ({"hardware.bf16_pflops": 0}, "hardware.bf16_pflops", r"must be > 0"),
    ({"fabric.switches": 10 ** 20}, "fabric.switches", r"must be at most"),
    ({"fabric.switches": 1000}, "fabric.switches", r"1000 switches are more than the"),
])
def test_bad_instance_fields(tmp_path, over, field, match):
    with pytest.raises(InvalidInput, match=match) as ei:
        load(tmp_path, **over)
    assert ei.value.field == field
    assert str(ei.value).startswith(str(tmp_path / "i.toml"))


def test_malformed_and_missing(tmp_path):
    with pytest.raises(InvalidInput, match="malformed TOML"):
        load(tmp_path, "[hardware\n")
    with pytest.raises(InvalidInput, match=r"hardware.accelerators: missing required key"):
        load(tmp_path, BASE.replace("accelerators = 16", ""))
    with pytest.raises(InvalidInput, match=r'unknown key "hardwre" \(did you mean "hardware"\?\)'):
        load(tmp_path, BASE + "\n[hardwre]\nx = 1\n")
    with pytest.raises(InvalidInput, match="no such file"):
        load_instance(str(tmp_path / "none.toml"))
    with pytest.raises(InvalidInput, match="unsupported version 2"):
        load(tmp_path, BASE.replace("version = 1", "version = 2"))
    # a table given as a value ended in a TypeError (dict(17)) before any field was read
    for table in ("model", "hardware", "workload"):
        text = re.sub(rf"\[{table}\][^\[]*", "", BASE).replace("version = 1", f"version = 1\n{table} = 17")
        with pytest.raises(InvalidInput, match=f"{table}: must be a table, got 17"):
            load(tmp_path, text)


def test_weights_that_do_not_fit(tmp_path):
    from synth.workload import build_workload
    inst = load(tmp_path, **{"parallelism.tp": 1, "parallelism.ep": 1, "hardware.hbm_gb": 80})
    with pytest.raises(InvalidInstance, match=r"hardware.hbm_gb: weights need .* GB per accelerator"):
        build_workload(inst)


def test_parse_override():
    assert parse_override("workload.context_tokens=1048576") == ("workload.context_tokens", 1048576)
    assert parse_override("parallelism.placement = random") == ("parallelism.placement", "random")
    with pytest.raises(InvalidInput, match="expected KEY=VALUE"):
        parse_override("novalue")


def test_explicit_switch_layout(tmp_path):
    rows = [[(k + a) % 18 for k in range(18)] for a in range(16)]
    inst = load(tmp_path, **{"fabric.switch_of_port": rows})
    assert inst.ocs_layout().switch_of_port[1, 0] == 1
    with pytest.raises(InvalidInstance, match="must be 16 rows of 18 switches"):
        load(tmp_path, **{"fabric.switch_of_port": rows[:3]})


def test_switch_radix_below_the_accelerators_splits_each_plane(tmp_path):
    """`fabric.switch_radix` smaller than a plane's fibres: each plane on as few switches as hold it (an OCS
    cannot take more fibres than it has ports); an impossible radix names the field."""
    lay = load(tmp_path, **{"fabric.switch_radix": 6}).ocs_layout()      # 16 accelerators, 18 ports (H100)
    assert lay.switches == 18 * 3 and set(lay.switch_radix) == {6}
    assert np.bincount(lay.switch_of_port.ravel()).max() <= 6
    hybrid = load(tmp_path, **{"fabric.switch_radix": 6, "fabric.ocs_ports": 4}).ocs_layout()
    assert (hybrid.switch_of_port[:, 4:] == -1).all() and hybrid.switches == 4 * 3
    assert load(tmp_path, **{"fabric.switch_radix": 16}).ocs_layout().is_uniform()
    with pytest.raises(InvalidInstance, match="a switch of radix 10 cannot take the 18 ports") as ei:
        load(tmp_path, **{"fabric.switch_radix": 10, "fabric.switches": 1})
    assert ei.value.field == "fabric.switch_radix"


def test_layout_radix_is_counted_not_masked():
    """The default switch radix is the most ports on one switch, counted per switch: a switches x
    accelerators x ports mask took gigabytes for many ports (at the ceiling of 1,024 ports and 16,384
    accelerators, 17 GB)."""
    inst = load_instance("instances/decode/llama405b-tp8pp2-16.toml", {"hardware.ports": 1024})
    layout = inst.ocs_layout()
    assert len(layout.switch_radix) == 1024 and set(layout.switch_radix) == {16}
