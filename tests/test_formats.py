import json
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from synth.errors import InvalidInput
from synth.formats import (atomic_write, load_switch_layout, load_traffic, load_wiring, open_proof_log, read_xconnect,
                           save_traffic, save_wiring, wiring_from_dict, wiring_to_dict, xconnect_tables, write_xconnect)
from synth.model import OCSLayout, ProofLog, TrafficMatrix, Wiring

from .conftest import write

HYP = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@st.composite
def wirings(draw):
    n = draw(st.integers(2, 12))
    ports = draw(st.integers(1, 4))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(ports):
        perm = rng.permutation(n)
        pairs += [(int(perm[i]), int(perm[i + 1])) for i in range(0, n - 1, 2) if rng.random() < 0.7]
    solve = draw(st.none() | st.fixed_dictionaries({"status": st.just("FEASIBLE"), "objective": st.floats(0, 1e6),
                                                    "bound": st.just(0.0), "seed": st.integers(0, 9)}))
    return Wiring.from_pairs(n, ports, pairs, seed=seed, solve=solve, instance={"name": "t"})


@st.composite
def matrices(draw):
    n = draw(st.integers(1, 9))
    vals = draw(st.lists(st.floats(0, 1e12, allow_nan=False) | st.just(0.0), min_size=n * n, max_size=n * n))
    m = np.array(vals).reshape(n, n)
    np.fill_diagonal(m, 0)
    return m


@HYP
@given(wirings())
def test_wiring_json_round_trip(tmp_path, w):
    path = str(tmp_path / "w.json")
    save_wiring(w, path)
    back = load_wiring(path)
    assert back == w and back.solve == w.solve and back.instance == w.instance
    assert wiring_from_dict(json.loads(json.dumps(wiring_to_dict(w)))) == w


@HYP
@given(wirings())
def test_xconnect_round_trip(w):
    tables = xconnect_tables(w)
    assert set(tables) == set(range(w.layout.switches))
    assert all(t.splitlines()[0] == "switch,port_in,port_out" for t in tables.values())
    assert sorted(read_xconnect(tables, w.layout)) == sorted(w.circuits)


@HYP
@given(matrices(), st.sampled_from([".npy", ".csv"]))
def test_traffic_round_trip(tmp_path, m, ext):
    path = str(tmp_path / f"t{ext}")
    save_traffic(TrafficMatrix(m), path)
    back = load_traffic(path, accelerators=m.shape[0])
    assert np.array_equal(back.bytes_, m)


def test_csv_square_and_rows(tmp_path):
    sq = write(tmp_path, "sq.csv", "0,1,2\n3,0,4\n5,6,0\n")
    assert load_traffic(sq).bytes_[2, 1] == 6
    rows = write(tmp_path, "rows.csv", "src,dst,bytes\n0,3,10\n0,3,5\n2,1,7\n")
    tm = load_traffic(rows)
    assert tm.accelerators == 4 and tm.bytes_[0, 3] == 15


@pytest.mark.parametrize("name,text,match", [
    ("bad.csv", "0,1\n2\n", r"line 2 has 1 columns, expected 2"),
    ("neg.csv", "src,dst,bytes\n0,1,-5\n", r"line 2: bytes -5 must be finite and >= 0"),
    ("nan.csv", "src,dst,bytes\n0,1,nan\n", r"line 2: bytes nan must be finite"),
    ("inf.csv", "0,inf\n0,0\n", r"entry \(0, 1\) is inf, must be finite"),
    ("self.csv", "src,dst,bytes\n1,1,5\n", r"src = dst = 1"),
    ("word.csv", "0,x\n1,0\n", r"line 1"),
    ("empty.csv", "", r"empty CSV"),
    ("nonsq.csv", "0,1,2,3\n1,0,2,3\n", r"line 1 has 4 columns, expected 2"),
    # a dense 1e8 x 1e8 matrix was allocated for this (MemoryError)
    ("far.csv", "src,dst,bytes\n0,1,5\n0,100000000,5\n", r"line 3: names accelerator 100000000: more than the 16384"),
])
def test_bad_csv(tmp_path, name, text, match):
    path = write(tmp_path, name, text)
    with pytest.raises(InvalidInput, match=match) as ei:
        load_traffic(path)
    assert path in str(ei.value)


def test_bad_npy(tmp_path):
    p = tmp_path / "x.npy"
    np.save(p, np.ones((2, 3)))
    with pytest.raises(InvalidInput, match=r"x.npy: traffic: must be a square matrix"):
        load_traffic(str(p))
    p.write_bytes(b"garbage")
    with pytest.raises(InvalidInput, match="not a valid .npy"):
        load_traffic(str(p))
    np.save(p, np.zeros((3, 3)))
    with pytest.raises(InvalidInput, match="matrix is 3 x 3, the instance has 4"):
        load_traffic(str(p), accelerators=4)
    with pytest.raises(InvalidInput, match="no such file"):
        load_traffic(str(tmp_path / "missing.npy"))
    with pytest.raises(InvalidInput, match="unknown traffic format"):
        load_traffic(write(tmp_path, "t.txt", "1"))


GOOD = {"format": "ocs-synth/wiring", "version": 1, "accelerators": 4, "ports_per_accelerator": 1,
        "circuits": [{"switch": 0, "a": [0, 0], "b": [1, 0]}]}


@pytest.mark.parametrize("patch,match", [
    ({"format": "other"}, r"format: must be \"ocs-synth/wiring\""),
    ({"version": 9}, r"version: unsupported version 9"),
    ({"acelerators": 3}, r'unknown key "acelerators" \(did you mean "accelerators"\?\)'),
    ({"accelerators": "4"}, r"accelerators: must be int"),
    ({"circuits": [{"switch": 0, "a": [0, 0]}]}, r"circuits\[0\].b: missing required key"),
    ({"circuits": [{"switch": 0, "a": [0], "b": [1, 0]}]}, r"circuits\[0\].a: must be \[accelerator, port\]"),
    ({"circuits": [{"switch": 0, "a": [0, 0], "b": [9, 0]}]}, r"circuits\[0\]: accelerator outside 0..3"),
    ({"circuits": [{"switch": 0, "a": [0, 0], "b": [1, 0], "c": 1}]}, r'unknown key "c"'),
    ({"layout": {"kind": "weird"}}, r"layout.kind: must be \"by-port\" or \"explicit\""),
])
def test_bad_wiring_documents(tmp_path, patch, match):
    doc = {**GOOD, **patch}
    path = write(tmp_path, "w.json", json.dumps(doc))
    with pytest.raises(InvalidInput, match=match) as ei:
        load_wiring(path)
    assert str(ei.value).startswith(path)


def test_malformed_json(tmp_path):
    with pytest.raises(InvalidInput, match=r"malformed JSON: .* line 1"):
        load_wiring(write(tmp_path, "w.json", "{nope"))


def test_atomic_write_never_leaves_partial_file(tmp_path, monkeypatch):
    target = tmp_path / "out.json"
    target.write_text("precious")

    def boom(*a, **k):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(str(target), "new")
    assert target.read_text() == "precious"
    assert os.listdir(tmp_path) == ["out.json"]


def test_atomic_write_gives_the_mode_of_a_plain_write(tmp_path):
    # the temporary file is created 0o600; a wiring or cross-connect table read by a controller running as
    # another user must get what open() would give: 0o666 less the umask, or the mode of the file it replaces
    mask = os.umask(0o027)
    try:
        new = atomic_write(str(tmp_path / "new.json"), "x")
        assert os.stat(new).st_mode & 0o777 == 0o640
    finally:
        os.umask(mask)
    old = tmp_path / "old.json"
    old.write_text("before")
    os.chmod(old, 0o604)
    atomic_write(str(old), "after")
    assert os.stat(old).st_mode & 0o777 == 0o604 and old.read_text() == "after"


def test_output_into_missing_folder(tmp_path):
    with pytest.raises(InvalidInput, match="does not exist"):
        atomic_write(str(tmp_path / "no" / "f.json"), "x")
    with pytest.raises(InvalidInput, match="folder does not exist"):
        write_xconnect(Wiring(2, 1, (), OCSLayout.uniform(2, 1)), str(tmp_path / "nope"))


def test_write_xconnect_files(tmp_path):
    w = Wiring.from_pairs(4, 2, [(0, 1), (2, 3), (0, 2), (1, 3)])
    paths = write_xconnect(w, str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["switch-000.csv", "switch-001.csv", "fibres.csv", "fibre-plan.csv"]
    assert open(paths[0]).read().count("\n") == 3
    assert open(paths[2]).read().splitlines() == ["accelerator,port,switch,switch_port"] + \
        [f"{a},{k},{k},{a}" for a in range(4) for k in range(2)]
    assert load_switch_layout(paths[3], 4, 2).switch_of_port.tolist() == [[0, 1]] * 4


@pytest.mark.parametrize("edit, match", [
    (lambda t: t.replace("switch,port_in,port_out", "a,b,c"), r"switch-000.csv: header: the first row"),
    (lambda t: t + "0,x,1\n", r"switch-000.csv: row 4: expected three integers"),
    (lambda t: t + "1,0,1\n", r"switch-000.csv: row 4.switch: names switch 1"),
    (lambda t: t + "0,0,9\n", r"switch-000.csv: row 4.port_in: port 0 is already cross-connected"),
    (lambda t: t.replace("0,0,", "0,7,"), r"switch-000.csv: row 2.port_in: switch 0 has no port 7"),
])
def test_read_xconnect_names_the_table_and_row(edit, match):
    w = Wiring.from_pairs(4, 2, [(0, 1), (2, 3), (0, 2), (1, 3)])
    tables = xconnect_tables(w)
    assert tables[0].startswith("switch,port_in,port_out\n0,0,")
    with pytest.raises(InvalidInput, match=match):
        read_xconnect({**tables, 0: edit(tables[0])}, w.layout)


def test_proof_log_keeps_what_proves_most_and_survives_a_torn_line(tmp_path):
    path = tmp_path / "proof.jsonl"
    log = open_proof_log(path)
    log.add("a", "c1", {"verdict": "unsettled", "T": 1.0, "clock_s": 60.0})
    log.add("a", "c1", {"verdict": "infeasible", "T": 1.0, "clock_s": 240.0})
    log.add("a", "c1", {"verdict": "infeasible", "T": 0.9, "clock_s": 1.0})    # proves less: not kept
    log.add("a", "c1", {"verdict": "unsettled", "T": 2.0, "clock_s": 1.0})     # nor this
    log.add("b", "c1", {"verdict": "infeasible", "T": 0.5, "clock_s": 1.0})
    assert log.get("a", "c1") == {"verdict": "infeasible", "T": 1.0, "clock_s": 240.0} and len(log) == 2
    with open(path, "a") as fh:                 # a run killed mid-write
        fh.write('{"problem":"a","case":"c2","verd')
    again = open_proof_log(path)
    assert again.entries == log.entries
    again.add("a", "c2", {"verdict": "infeasible", "T": 1.0, "clock_s": 2.0})
    assert open_proof_log(path).get("a", "c2")["T"] == 1.0
    assert ProofLog().get("a", "c1") is None


@pytest.mark.parametrize("text, match", [
    ('{"format": "ocs-synth/wiring", "version": 1}\n', "line 1 is not a proof log header"),
    ('{"format": "ocs-synth/proof-log", "version": 1}\n{"problem": "a", "case": "c", "verdict": "maybe", '
     '"T": 1, "clock_s": 1}\n', "line 2.verdict: must be one of"),
    ('{"format": "ocs-synth/proof-log", "version": 1}\n{"problem": "a", "case": "c", "verdict": "infeasible", '
     '"clock_s": 1}\n', "line 2.T: missing"),
    ('{"format": "ocs-synth/proof-log", "version": 1}\n{"problem": "a", "case": "c", "verdict": "bound", '
     '"T": 1, "clock_s": 1}\n', "line 2.value: missing"),
    ('{"format": "ocs-synth/proof-log", "version": 1}\n{"problem": "a", "case": "c", "verdict": "bound", '
     '"T": 1, "clock_s": 1, "value": NaN}\n', "line 2.value: must be a number"),
    ('{"format": "ocs-synth/proof-log", "version": 1}\n[1]\n', "line 2: expected an object"),
    ('{"format": "ocs-synth/proof-log", "version": 1}\nnope\n', "malformed JSON: .* at line 2"),
    ("a file of my own", "not a proof log"),
])
def test_bad_proof_logs_are_named_and_left_alone(tmp_path, text, match):
    path = write(tmp_path, "proof.jsonl", text)
    with pytest.raises(InvalidInput, match=match):
        open_proof_log(path)
    assert open(path).read() == text


def test_quiet_stdout_in_two_threads_gives_stdout_back(tmp_path):
    """Two threads' blocks overlapping (A opens, B opens, A closes, B closes): descriptor 1 is quiet while
    either is open and points back at the real stdout after both (saving and restoring it per block left it
    on /dev/null: `wire --json` printed nothing)."""
    import threading

    from synth.formats import quiet_stdout
    out = tmp_path / "out.txt"
    real = os.dup(1)
    fd = os.open(out, os.O_WRONLY | os.O_CREAT)
    os.dup2(fd, 1)
    os.close(fd)
    try:
        steps = [threading.Event() for _ in range(4)]

        def block(me: int, wait_for: int, then: int) -> None:
            with quiet_stdout():
                steps[me].set()
                steps[wait_for].wait(5)
                os.write(1, b"hidden ")
            steps[then].set()

        a = threading.Thread(target=block, args=(0, 1, 2))
        b = threading.Thread(target=lambda: (steps[0].wait(5), block(1, 2, 3)))
        a.start()
        b.start()
        a.join(10)
        b.join(10)
        assert all(e.is_set() for e in steps)
        os.write(1, b"shown")
    finally:
        os.dup2(real, 1)
        os.close(real)
    assert out.read_text() == "shown"
