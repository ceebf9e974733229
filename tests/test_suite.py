"""The wiring suite: recorded optima and bounds, status-dependent assertions (OPTIMAL => equals the
recorded optimum; anything => respects the recorded bound)."""
from pathlib import Path

import pytest

from synth.bench import bench_wire, check_case, load_suite

FAST = ["ring8", "hotspot6", "alltoall8-time", "alltoall8-hops", "tp-ep6-phases", "llama405b-16-hops", "groups12-radix4"]


def test_suite_file_is_well_formed():
    cases = load_suite("instances/wiring/suite.toml")
    names = {c["name"] for c in cases}
    assert set(FAST) <= names and "moe5t-576" in names
    for c in cases:
        assert "optimum" in c or "bound" in c, c["name"]


def test_every_shipped_instance_has_a_recorded_bound():
    # the target: every instance in instances/ has a wiring with its bound and gap, checked by bench wire
    import glob
    cases = load_suite("instances/wiring/suite.toml")
    recorded = {c["source"] for c in cases if c["objective"] == "time"}
    shipped = set(glob.glob("instances/decode/*.toml")) | set(glob.glob("instances/traffic/*.npy"))
    assert shipped and shipped <= recorded, sorted(shipped - recorded)


@pytest.mark.parametrize("name", FAST)
def test_exact_backends_reach_the_recorded_optimum(name):
    rows = bench_wire("instances/wiring/suite.toml", ["milp:highs", "milp:cbc", "cpsat"], 60, names=[name])
    assert len(rows) == 3
    case = next(c for c in load_suite("instances/wiring/suite.toml") if c["name"] == name)
    for r in rows:
        assert r["verified"] and r["check"] == "ok", r
        assert r["status"] == "OPTIMAL", r
        assert r["objective"] == pytest.approx(case["optimum"], rel=1e-6), r


def test_suite_cases_on_switches_of_a_smaller_radix():
    """`switch_radix` in a case splits each port's plane over OCSes of that many ports, for a raw matrix and for
    an instance (as its [fabric] switch_radix)."""
    from synth.bench import suite_problem
    cases = {c["name"]: c for c in load_suite("instances/wiring/suite.toml")}
    small = suite_problem(cases["groups12-radix4"]).layout
    assert small.switches == 9 and set(small.switch_radix) == {4}
    big = suite_problem(cases["moe5t-576-radix64"]).layout
    assert big.switches == 18 * 9 and set(big.switch_radix) == {64}
    assert suite_problem(cases["moe5t-576"]).layout.is_uniform()
    fitted = suite_problem({**cases["groups12-radix4"], "fibre_plan": "fit"})      # whole planes, cabled after
    assert fitted.layout.is_uniform() and fitted.fibre_fit.switches == (3, 3, 3) and fitted.fibre_fit.radix == 4
    inst = suite_problem({**cases["moe5t-576-radix64"], "fibre_plan": "fit"})
    assert inst.layout.is_uniform() and inst.fibre_fit.switches == (9,) * 18


def test_check_case_semantics():
    case = {"optimum": 2.0, "bound": 1.5}
    assert check_case(case, "OPTIMAL", 2.0) == "ok"
    assert "!= recorded optimum" in check_case(case, "OPTIMAL", 2.5)
    assert check_case(case, "FEASIBLE", 2.5) == "ok"
    assert "beats the recorded optimum" in check_case(case, "FEASIBLE", 1.9)
    assert "below the recorded bound" in check_case({"bound": 1.5}, "FEASIBLE", 1.0)
    assert "worse than best known" in check_case({"bound": 1.0, "best_known": 1.1, "tolerance": 0.05}, "FEASIBLE", 1.3)
    # a demand left unserved is no answer, a baseline's too (the torus on split planes was listed ok at 100%)
    assert check_case(case, "FEASIBLE", float("inf"), baseline=True).startswith("no answer")


def test_bad_suite_file(tmp_path):
    from click.testing import CliRunner
    from synth.cli import main
    p = tmp_path / "s.toml"
    p.write_text('[[case]]\nname = "x"\nsource = "a.npy"\nobjective = "time"\nportz = 3\n')
    r = CliRunner().invoke(main, ["bench", "wire", "--suite", str(p)])
    assert r.exit_code == 2 and 'did you mean "ports"' in r.stderr and r.stderr.count("\n") == 1
    p.write_text('[[case]]\nname = "x"\nsource = "a.npy"\nobjective = "time"\nfibre_plan = "tidy"\n')
    r = CliRunner().invoke(main, ["bench", "wire", "--suite", str(p)])
    assert r.exit_code == 2 and "case[0].fibre_plan: must be spread or fit, got 'tidy'" in r.stderr
    p.write_text("[[case]\n")
    r = CliRunner().invoke(main, ["bench", "wire", "--suite", str(p)])
    assert r.exit_code == 2 and "malformed TOML" in r.stderr


def test_bench_schedule_rejects_unknown_topology():
    from click.testing import CliRunner
    from synth.cli import main
    r = CliRunner().invoke(main, ["bench", "schedule", "--topology", "torus-3x3"])
    assert r.exit_code == 2 and "unknown topology 'torus-3x3'" in r.stderr and r.stderr.count("\n") == 1


def test_bench_wire_runs_from_any_folder(tmp_path, monkeypatch):
    # the suite names its instances from the project's root: from another folder `bench wire` said
    # "instances/wiring/suite.toml: no such file", and with --suite the cases' files were not found
    import json

    from click.testing import CliRunner

    from synth.cli import main
    suite = str(Path("instances/wiring/suite.toml").resolve())
    monkeypatch.chdir(tmp_path)
    for extra in ([], ["--suite", suite]):
        r = CliRunner().invoke(main, ["bench", "wire", *extra, "--case", "ring8", "--solvers", "greedy", "--json"])
        assert r.exit_code == 0, r.output
        assert json.loads(r.stdout)["rows"][0]["check"] == "ok"


def test_bench_wire_passes_over_what_the_exact_models_refuse():
    # `bench wire --solvers auto,cpsat` over the suite stopped at llama405b-16-step (exit 2: the exact models
    # do not encode the evaluator's step), with no table for the cases already run
    lines = []
    rows = bench_wire("instances/wiring/suite.toml", ["cpsat", "greedy"], 2, names=["llama405b-16-step"],
                      progress=lines.append)
    assert [r["solver"] for r in rows] == ["greedy"] and rows[0]["verified"]
    assert "llama405b-16-step: cpsat skipped (the step objective is the evaluator's model)" in lines


def test_bench_wire_says_how_much_of_a_baseline_fitted_split_planes():
    """groups12-radix4 spreads each plane over three 4-port OCSes: no whole torus or TopoOpt-style fits. Their
    rows say how many of their circuits did (the rest are ports paired at random); the expander's says nothing."""
    rows = {r["solver"]: r for r in bench_wire("instances/wiring/suite.toml", ["torus", "topoopt", "expander"], 5,
                                               names=["groups12-radix4"])}
    assert rows["torus"]["structure"] == {"circuits": 12, "kept": 9} and rows["torus"]["check"] == "ok"
    assert 0 < rows["topoopt"]["structure"]["kept"] < rows["topoopt"]["structure"]["circuits"]
    assert "structure" not in rows["expander"]


def test_the_shipped_best_known_wiring_verifies_at_its_recorded_time():
    """instances/wiring/llama405b-16-phases.best.json: valid on the instance, and its phases objective is the
    suite's best known, above the recorded bound and below what the phases MILP once claimed optimal
    (0.0028472935 s, from a dual bound that lay above its own start)."""
    from synth.bench import suite_problem
    from synth.formats import load_wiring
    from synth.instance import load_instance
    from synth.verify import wiring_violations
    case = next(c for c in load_suite("instances/wiring/suite.toml") if c["name"] == "llama405b-16-phases")
    w = load_wiring("instances/wiring/llama405b-16-phases.best.json")
    assert wiring_violations(w, load_instance(case["source"])) == []
    t = suite_problem(case).score(w, "optimal")[0]
    assert t == pytest.approx(case["best_known"], rel=1e-7) and case["bound"] < t < 0.0028472935 * (1 - 1e-3)
