import json
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from synth.cli import main
from synth.formats import save_wiring
from synth.model import Wiring

from .conftest import write


def run(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def assert_one_line_error(code, err, *needles):
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ocs-synth: error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_help_lists_commands():
    code, out, _ = run("--help")
    assert code == 0 and "traffic" in out and "verify" in out
    for cmd in ("traffic", "verify"):
        assert run(cmd, "--help")[0] == 0


def test_traffic_instance_json_keys():
    code, out, _ = run("traffic", "instances/decode/moe5t-576.toml", "--json", "--top", "2")
    assert code == 0
    s = json.loads(out)
    assert {"accelerators", "total_bytes", "bytes_by_kind", "max_row_nonzeros"} <= set(s)
    assert s["accelerators"] == 576 and s["max_row_nonzeros"] == 575 and len(s["largest"]) == 2


def test_traffic_context_override_and_raw_matrix(tmp_path):
    code, out, _ = run("traffic", "instances/decode/moe5t-576.toml", "--context", "1048576", "--json")
    assert code == 0 and json.loads(out)["kvp"] == 8
    code, out, _ = run("traffic", "instances/traffic/topoopt-dlrm128-mp.npy", "--json")
    s = json.loads(out)
    assert code == 0 and s["accelerators"] == 128 and s["nonzeros"] == 11234 and s["max_row_nonzeros"] == 127
    assert s["total_bytes"] == pytest.approx(10603200512.0)


def test_traffic_writes_matrix(tmp_path):
    out_npy = str(tmp_path / "m.npy")
    code, out, _ = run("traffic", "instances/decode/llama405b-tp8pp2-16.toml", "-o", out_npy)
    assert code == 0 and "wrote" in out
    m = np.load(out_npy)
    assert m.shape == (16, 16)
    out_csv = str(tmp_path / "m.csv")
    assert run("traffic", out_npy, "-o", out_csv)[0] == 0
    code, out, _ = run("traffic", out_csv, "--json")
    assert json.loads(out)["total_bytes"] == pytest.approx(m.sum())


def test_traffic_bad_inputs(tmp_path):
    assert_one_line_error(*run("traffic", "nope.npy")[::2], "nope.npy", "no such file")
    bad = write(tmp_path, "bad.toml", "[hardware]\npreset='h100'\naccelerators=16\n[model]\npreset='qwen3-235b-a22b'\n"
                "[parallelism]\nep = 256\n")
    assert_one_line_error(*run("traffic", bad)[::2], "bad.toml", "parallelism.ep", "exceeds the 128 experts")
    assert_one_line_error(*run("traffic", "instances/decode/moe5t-576.toml", "-o",
                               str(tmp_path / "missing" / "m.npy"))[::2], "does not exist")
    assert_one_line_error(*run("traffic", "instances/decode/moe5t-576.toml", "--context", "9000000")[::2],
                          "workload.context_tokens")
    assert_one_line_error(*run("traffic", "instances/decode/moe5t-576.toml", "--set", "model.tpo_k=2")[::2],
                          'did you mean "top_k"')


def test_verify_valid_and_invalid(tmp_path):
    w = Wiring.from_pairs(4, 2, [(0, 1), (2, 3), (0, 2), (1, 3)])
    good = str(tmp_path / "good.json")
    save_wiring(w, good)
    code, out, _ = run("verify", good)
    assert code == 0 and "valid" in out
    code, out, _ = run("verify", good, "--json")
    assert code == 0 and json.loads(out)["valid"] is True

    doc = json.loads(open(good).read())
    cases = {
        "port-budget": {"switch": 0, "a": [0, 5], "b": [3, 0]},
        "port-reused": {"switch": 0, "a": [0, 0], "b": [3, 0]},
        "cross-switch": {"switch": 1, "a": [0, 0], "b": [3, 1]},
        "self-loop": {"switch": 0, "a": [2, 0], "b": [2, 1]},
    }
    for rule, extra in cases.items():
        d = dict(doc, circuits=doc["circuits"] + [extra])
        path = write(tmp_path, f"{rule}.json", json.dumps(d))
        code, out, _ = run("verify", path, "--json")
        res = json.loads(out)
        assert code == 1 and not res["valid"]
        assert rule in {v["rule"] for v in res["violations"]}, (rule, res)
        code, out, _ = run("verify", path)
        assert code == 1 and "INVALID" in out and f"[{rule}]" in out
    d = dict(doc, layout={"kind": "by-port", "switch_radix": 2})
    code, out, _ = run("verify", write(tmp_path, "radix.json", json.dumps(d)), "--json")
    assert code == 1 and "radix" in {v["rule"] for v in json.loads(out)["violations"]}


def test_verify_against_instance(tmp_path):
    w = Wiring.from_pairs(4, 2, [(0, 1)])
    path = str(tmp_path / "w.json")
    save_wiring(w, path)
    code, out, _ = run("verify", path, "--instance", "instances/decode/llama405b-tp8pp2-16.toml", "--json")
    assert code == 1 and {v["rule"] for v in json.loads(out)["violations"]} == {"instance"}


def test_verify_bad_files(tmp_path):
    assert_one_line_error(*run("verify", write(tmp_path, "x.json", "{"))[::2], "x.json", "malformed JSON")
    assert_one_line_error(*run("verify", write(tmp_path, "y.json", json.dumps(
        {"format": "ocs-synth/wiring", "version": 1, "accelerators": 2, "ports_per_accelerator": 1,
         "circuits": [], "sovle": {}})))[::2], "y.json", 'did you mean "solve"')
    assert_one_line_error(*run("verify", str(tmp_path / "none.json"))[::2], "none.json", "no such file")
    head = {"format": "ocs-synth/wiring", "version": 1, "ports_per_accelerator": 1, "circuits": []}
    # a billion accelerators were allocated as matrices until the kernel killed the process
    assert_one_line_error(*run("verify", write(tmp_path, "big.json", json.dumps(
        {**head, "accelerators": 10 ** 9})))[::2], "big.json", "accelerators: must be <= 16384")
    # an explicit layout's key under the by-port kind was ignored: the file read as valid
    assert_one_line_error(*run("verify", write(tmp_path, "lay.json", json.dumps(
        {**head, "accelerators": 2, "layout": {"switch_of_port": [[0], [0]]}})))[::2], "lay.json",
        'layout: unknown key "switch_of_port"')
    # a schedule where the wiring belongs was read as a wiring with unknown keys ("collective")
    assert_one_line_error(*run("verify", write(tmp_path, "s.json", json.dumps(
        {"format": "ocs-synth/schedule", "version": 1, "collective": {}, "steps": []})))[::2], "s.json",
        "format: this is an ocs-synth/schedule file, not a wiring")


def test_real_entry_point_exit_code_and_debug(tmp_path):
    bad = write(tmp_path, "x.json", "{")
    r = subprocess.run([sys.executable, "-m", "synth.cli", "verify", bad], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "synth.cli", "--debug", "verify", bad], capture_output=True, text=True)
    assert r.returncode != 0 and "Traceback" in r.stderr


@pytest.mark.parametrize("argv,needle", [
    (["schedule", "w.json", "--collective", "foo", "--bytes", "1MB"], "'--collective'"),
    (["bench", "schedule", "--chunks", "0"], "'--chunks'"),
    (["wire"], "Missing argument"),
    (["nosuch"], "No such command"),
    # click's FLOAT takes nan and inf: real-valued options are finite (and bounded) at parsing
    (["schedule", "w.json", "--collective", "allgather", "--bytes", "1MB", "--alpha-us", "nan"],
     "'--alpha-us': must be a finite number, got 'nan'"),
    (["schedule", "w.json", "--collective", "allgather", "--bytes", "1MB", "--port-bandwidth-gbps", "inf"],
     "'--port-bandwidth-gbps': must be a finite number"),
    (["schedule", "w.json", "--collective", "allgather", "--bytes", "1MB", "--time-limit", "0"],
     "'--time-limit': must be > 0, got '0'"),
    (["wire", "m.npy", "-o", "w.json", "--ports", "3", "--port-bandwidth-gbps", "1e999"],
     "'--port-bandwidth-gbps': must be a finite number"),
    (["wire", "m.npy", "-o", "w.json", "--time-limit", "-inf"], "'--time-limit': must be a finite number"),
    (["bench", "schedule", "--time-limit", "-1"], "'--time-limit': must be > 0"),
    (["bench", "wire", "--time-limit", "fast"], "'fast' is not a number"),
    # finite but absurd: 1e308 us per step overflowed the saturating all-gather, 1e20 broke the schedule MILP
    (["schedule", "w.json", "--collective", "allgather", "--bytes", "1MB", "--alpha-us", "1e308"],
     "'--alpha-us': must be at most 1e+06, got '1e308'"),
    (["wire", "m.npy", "-o", "w.json", "--ports", "3", "--port-bandwidth-gbps", "1e300"],
     "'--port-bandwidth-gbps': must be at most 1e+30"),
    # a gap of 1 (or more) calls any wiring optimal; below 1e-9 the probes' times are the best answer's own
    (["wire", "m.npy", "-o", "w.json", "--gap", "1"], "'--gap': must be < 1, got '1'"),
    (["wire", "m.npy", "-o", "w.json", "--gap", "0"], "'--gap': must be >= 1e-09, got '0'"),
    (["wire", "m.npy", "-o", "w.json", "--gap", "nan"], "'--gap': must be a finite number"),
])
def test_usage_errors_are_one_line(argv, needle):
    r = CliRunner().invoke(main, argv)
    assert r.exit_code == 2 and needle in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_schedule_checks_the_wiring_files_instance_block(tmp_path):
    """Bandwidth and latencies read from a wiring's instance block are checked where they are read: the
    message names the file and the field (a string or NaN there was a traceback)."""
    w = Wiring.from_pairs(4, 2, [(0, 1), (1, 2), (2, 3), (3, 0)])
    for block, field in (({"port_bandwidth_gbps": "fast"}, "instance.port_bandwidth_gbps"),
                         ({"port_bandwidth_gbps": 800.0, "step_latency_us": float("nan")}, "instance.step_latency_us"),
                         ({"port_bandwidth_gbps": 800.0, "link_latency_us": -1.0}, "instance.link_latency_us"),
                         ({"port_bandwidth_gbps": 800.0, "step_latency_us": 1e20}, "instance.step_latency_us")):
        path = str(tmp_path / "w.json")
        save_wiring(w, path)
        doc = json.load(open(path))
        doc["instance"] = block
        json.dump(doc, open(path, "w"))           # json writes NaN as NaN, which Python's reader takes
        code, _, err = run("schedule", path, "--collective", "allgather", "--bytes", "1MB")
        assert_one_line_error(code, err, "w.json", field, "must be a finite number")


def test_absurd_sizes_are_refused_before_anything_is_built(tmp_path):
    """100,000 ports per accelerator or 20,000 accelerators (a typo) used to load and then run out of memory
    or time; both are refused at once, naming the field."""
    inst = "instances/decode/llama405b-tp8pp2-16.toml"
    assert_one_line_error(*run("traffic", inst, "--set", "hardware.ports=100000")[::2],
                          "hardware.ports", "must be <= 1024")
    assert_one_line_error(*run("traffic", inst, "--set", "hardware.accelerators=20000")[::2],
                          "hardware.accelerators", "more than the 16384")
    m = str(tmp_path / "m.npy")
    np.save(m, np.ones((4, 4)) - np.eye(4))
    out = str(tmp_path / "w.json")
    assert_one_line_error(*run("wire", m, "-o", out, "--ports", "100000", "--port-bandwidth-gbps", "100")[::2],
                          "--ports", "must be <= 1024")
    assert not (tmp_path / "w.json").exists()
