"""Fibre plans chosen for the wiring (`fibre_plan = "fit"`, `wire --fibre-plan fit`): whole planes wired, then
cabled onto the OCSes each plane is split over (solvers/fibre_plan.py)."""
import json

import networkx as nx
import numpy as np
import pytest
from click.testing import CliRunner

from solvers import wire
from solvers.baselines import expander
from solvers.fibre_plan import fit
from synth.cli import main
from synth.errors import InvalidInput
from synth.instance import load_instance
from synth.model import Circuit, OCSLayout, SolveParams, SolveStatus, TrafficMatrix, Wiring
from synth.problem import WiringProblem
from synth.verify import wiring_violations

from .conftest import write

INSTANCE = "instances/decode/llama405b-tp8pp2-16.toml"


def run(*args):
    r = CliRunner().invoke(main, list(args))
    return r.exit_code, r.stdout, r.stderr


def ring(n, b=1e9):
    t = np.zeros((n, n))
    for a in range(n):
        t[a, (a + 1) % n] = t[(a + 1) % n, a] = b
    return t


@pytest.mark.parametrize("n,ports,radix,planes,spare", [
    (8, 2, 4, None, 0), (12, 3, 4, None, 0), (9, 2, 3, None, 0), (7, 2, 2, None, 0), (11, 3, 5, None, 0),
    (10, 4, 3, 2, 0), (16, 4, 6, 2, 0), (32, 18, 8, None, 0), (24, 4, 6, None, 1), (576, 18, 64, None, 0)])
def test_fit_cables_any_envelope_wiring_onto_as_many_ocses_as_a_fixed_plan(n, ports, radix, planes, spare):
    """Any wiring on the envelope (here the expander, several seeds) is cabled with the same circuits, ports
    and graph onto the OCSes `OCSLayout.planes` would take (same count, same radix), each holding fibres of
    one plane and no more than its ports, and passes verify. Odd radixes, several ports of an accelerator on
    one plane, and dark spare ports included."""
    envelope, split = OCSLayout.fitted_planes(n, ports, radix, planes)
    fixed = OCSLayout.planes(n, ports, radix, planes)
    assert split is not None and envelope.switches == len(split.switches)
    assert sum(split.switches) == fixed.switches and set(fixed.switch_radix) == {radix}
    if spare:
        envelope = envelope.with_spare(spare)
    for seed in range(3):
        w = expander(envelope, seed=seed)
        f = fit(w, split)
        assert not wiring_violations(f)
        assert np.array_equal(f.adjacency(), w.adjacency())
        assert sorted((c.a, c.a_port, c.b, c.b_port) for c in f.circuits) == \
            sorted((c.a, c.a_port, c.b, c.b_port) for c in w.circuits)
        sop = f.layout.switch_of_port
        assert f.layout.switches == fixed.switches and set(f.layout.switch_radix) == {radix}
        assert np.bincount(sop[sop >= 0], minlength=f.layout.switches).max() <= radix
        assert np.array_equal(sop < 0, envelope.switch_of_port < 0)      # dark ports stay dark
        plane_of = np.repeat(np.arange(len(split.switches)), split.switches)
        assert np.array_equal(plane_of[sop[sop >= 0]], envelope.switch_of_port[sop >= 0])


def test_the_envelope_holds_no_more_circuits_than_its_ocses():
    """Nine accelerators on OCSes of 3 ports: a plane takes three OCSes, one circuit each (a matching of 3
    ports), so the envelope's plane holds 3 circuits (radix 6), not the 4 a 9-fibre switch would; a wiring
    with 4 on a plane has no plan and `fit` says so."""
    envelope, split = OCSLayout.fitted_planes(9, 2, 3)
    assert envelope.switch_radix == (6, 6) and split.switches == (3, 3)
    four = tuple(Circuit(0, 2 * i, 0, 2 * i + 1, 0) for i in range(4))
    with pytest.raises(InvalidInput, match="plane 0 holds 4 circuits; its 3 OCSes of 3 ports take 3"):
        fit(Wiring(9, 2, four, OCSLayout.uniform(9, 2)), split)
    assert OCSLayout.fitted_planes(9, 2, 9)[1] is None           # nothing split: the fixed planes themselves


@pytest.mark.parametrize("solver,backend", [("milp", "highs"), ("milp", "cbc"), ("cpsat", "auto")])
def test_a_ring_on_small_ocses_is_a_ring_when_the_plan_is_fitted(solver, backend):
    """A ring demand on 8 accelerators, 2 ports, OCSes of 4 ports (each plane on two): with the plan fitted the
    exact models prove the ring (1 GB over 100 GB/s: 10 ms) and the answer is cabled onto 4 OCSes; with the
    fixed spread plan the best wiring is twice as slow (a ring's neighbours do not all share an OCS)."""
    t = TrafficMatrix(ring(8))
    envelope, split = OCSLayout.fitted_planes(8, 2, 4)
    params = SolveParams(time_limit_s=60, backend=backend)
    res = wire(WiringProblem(t, envelope, 800.0, fibre_fit=split), solver, params)
    assert res.status == SolveStatus.OPTIMAL and res.objective == pytest.approx(0.01)
    assert res.artifact.solve["fibre_plan"] == "fitted" and res.artifact.layout.switches == 4
    assert nx.is_isomorphic(nx.Graph(res.artifact.to_networkx()), nx.cycle_graph(8))
    assert not wiring_violations(res.artifact)
    spread = wire(WiringProblem(t, OCSLayout.planes(8, 2, 4), 800.0), solver, params)
    assert spread.status == SolveStatus.OPTIMAL and spread.objective == pytest.approx(0.02)


def test_fitted_problems_refuse_fixed_circuits():
    envelope, split = OCSLayout.fitted_planes(8, 2, 4)
    with pytest.raises(InvalidInput, match="a fitted plan is chosen after the wiring"):
        WiringProblem(TrafficMatrix(ring(8)), envelope, 800.0, fixed_circuits=(Circuit(0, 0, 0, 1, 0),),
                      fibre_fit=split)


def test_cli_fibre_plan_fit_for_a_raw_matrix(tmp_path):
    """`wire --fibre-plan fit`: the wiring file carries the plan (an explicit layout of OCSes of the radix), its
    cross-connect tables one per OCS beside the cabling (`fibres.csv`) and the plan as `--switch-layout` reads
    it (`fibre-plan.csv`: a re-wire on it finds the ring again), it passes verify, and the same seed writes the
    same file. Bad combinations exit 2 with one line and leave the file as it was."""
    m = str(tmp_path / "ring.npy")
    np.save(m, ring(12))
    out, xc = str(tmp_path / "w.json"), tmp_path / "xc"
    xc.mkdir()
    args = ("wire", m, "--ports", "2", "--port-bandwidth-gbps", "800", "--switch-radix", "4", "--fibre-plan", "fit",
            "--solver", "search", "--max-moves", "200", "--seed", "3")
    code, stdout, err = run(*args, "-o", out, "--json", "--xconnect", str(xc))
    assert code == 0, err
    block = json.loads(stdout)
    assert block["fibre_plan"] == "fitted" and block["objective"] == pytest.approx(0.01)
    doc = json.loads(open(out).read())
    assert doc["layout"]["kind"] == "explicit" and doc["layout"]["switch_radix"] == [4] * 6
    assert len(list(xc.glob("switch-*.csv"))) == 6
    assert run("verify", out)[0] == 0
    fibres = np.loadtxt(xc / "fibres.csv", delimiter=",", skiprows=1, dtype=np.int64)   # the cabling
    assert (xc / "fibres.csv").read_text().startswith("accelerator,port,switch,switch_port\n")
    assert len(fibres) == 24 and len({(s, p) for s, p in fibres[:, 2:].tolist()}) == 24
    assert all(doc["layout"]["switch_of_port"][a][k] == s for a, k, s, _ in fibres.tolist())
    assert (fibres[:, 3] < 4).all()
    code, stdout, err = run("wire", m, "--switch-layout", str(xc / "fibre-plan.csv"), "--switch-radix", "4",
                            "--port-bandwidth-gbps", "800", "--solver", "milp", "-o", str(tmp_path / "re.json"),
                            "--json")
    assert code == 0 and json.loads(stdout)["objective"] == pytest.approx(0.01), err   # a re-wire on that cabling
    assert json.loads(open(tmp_path / "re.json").read())["layout"] == doc["layout"]
    again = str(tmp_path / "again.json")
    code, stdout, _ = run(*args, "-o", again)
    assert code == 0 and "fibre plan fitted to the wiring: 6 OCSes of 4 ports" in stdout
    assert json.loads(open(again).read())["circuits"] == doc["circuits"]
    before = open(out).read()
    plan = write(tmp_path, "plan.csv", "0,1\n" * 12)
    fixed = write(tmp_path, "fixed.json", before)
    for extra, needle in [(("--switch-layout", plan), "--fibre-plan: fit chooses the fibre plan; --switch-layout"),
                          (("--fixed", fixed), "--fixed: --fixed keeps circuits on the OCSes of a given fibre plan"),
                          (("--fibre-plan", "tidy"), "'tidy' is not one of 'spread', 'fit'")]:
        code, _, err = run(*args, *extra, "-o", out)
        assert code == 2 and needle in err and err.count("\n") == 1, (extra, err)
    code, _, err = run("wire", INSTANCE, "--fibre-plan", "fit", "-o", out)
    assert code == 2 and "--fibre-plan describes the hardware of a raw matrix" in err
    assert open(out).read() == before


def test_instance_fibre_plan_fit_and_verify(tmp_path):
    """`[fabric] fibre_plan = "fit"`: the instance's layout is the envelope, `wire` writes a plan on its OCSes,
    and `verify --instance` accepts any plan of those OCSes (the fitted one, a spread one) but not a wiring
    made for other OCSes, nor a plan that mixes planes on an OCS, puts a plane on more OCSes than it has, or
    more fibres on one than its ports. `fit` with `switch_of_port` is refused."""
    text = open(INSTANCE).read()
    fitted = write(tmp_path, "fit.toml", text.replace("[fabric]", "[fabric]\nswitch_radix = 8\nfibre_plan = \"fit\""))
    spread = write(tmp_path, "spread.toml", text.replace("[fabric]", "[fabric]\nswitch_radix = 8"))
    inst = load_instance(fitted)
    assert inst.ocs_layout().is_uniform() and inst.fibre_fit().switches == (2,) * 18
    w_fit, w_spread = str(tmp_path / "fit.json"), str(tmp_path / "spread.json")
    for source, out in ((fitted, w_fit), (spread, w_spread)):
        code, _, err = run("wire", source, "-o", out, "--solver", "greedy")
        assert code == 0, err
    assert run("verify", w_fit, "--instance", fitted)[0] == 0
    assert run("verify", w_spread, "--instance", fitted)[0] == 0       # a fixed plan is one of the plans
    code, stdout, _ = run("verify", w_fit, "--instance", spread, "--json")
    assert code == 1 and "do not fit the instance's OCS switches" in json.loads(stdout)["violations"][0]["message"]
    doc = json.loads(open(w_fit).read())
    sop = np.array(doc["layout"]["switch_of_port"])

    def broken(name, change):
        d = json.loads(json.dumps(doc))
        change(d, sop.copy())
        return write(tmp_path, name, json.dumps(d))

    def moved(d, s, to):    # the first circuit of plane 1's first OCS (switch 2) and its fibres onto switch `to`
        c = next(c for c in d["circuits"] if c["switch"] == 2)
        c["switch"] = to
        s[tuple(c["a"])] = s[tuple(c["b"])] = to
        d["layout"]["switch_of_port"] = s.tolist()

    def mixed(d, s):        # switch 0 (plane 0) also takes fibres of plane 1
        moved(d, s, 0)

    def many(d, s):         # plane 1 on three switches
        d["layout"]["switch_radix"].append(8)
        moved(d, s, len(d["layout"]["switch_radix"]) - 1)

    def big(d, s):
        d["layout"]["switch_radix"][0] = 16

    for name, change, needle in [("mixed.json", mixed, "takes fibres of planes 0 and 1"),
                                 ("many.json", many, "plane 1 is on 3 switches, the instance has 2"),
                                 ("big.json", big, "radix 16; the OCSes have 8 ports")]:
        path = broken(name, change)
        code, stdout, _ = run("verify", path, "--instance", fitted, "--json")
        message = json.loads(stdout)["violations"][0]["message"]
        assert code == 1 and "fibre plan does not fit the instance's OCSes" in message and needle in message, message
    code, _, err = run("evaluate", fitted, "--wiring", w_fit)
    assert code == 0, err
    from synth.cli import default_wiring           # evaluate's wiring when none is given: fitted too
    w = default_wiring(inst)
    assert not wiring_violations(w, inst) and w.layout.switches == 36 and set(w.layout.switch_radix) == {8}
    bad = write(tmp_path, "bad.toml", text.replace(
        "[fabric]", "[fabric]\nfibre_plan = \"fit\"\nswitch_of_port = " + json.dumps([list(range(18))] * 16)))
    code, _, err = run("wire", bad, "-o", str(tmp_path / "x.json"))
    assert code == 2 and "fabric.fibre_plan: fit chooses the fibre plan" in err and err.count("\n") == 1


@pytest.mark.parametrize("n,ports,radix", [(57, 8, 20), (57, 8, 30), (91, 10, 32)])
def test_the_near_moore_graph_embedded_on_split_planes_keeps_most_of_its_circuits(n, ports, radix):
    """The polarity graph built on whole planes, put on OCSes that each reach a third of a plane or less: most
    of its circuits stay (each on an OCS both ends reach), the rest of the ports are paired, and the wiring is
    valid on the split layout (measured: 191, 213 and 398 of 224, 224 and 450 circuits)."""
    from solvers.structured import embedded, near_moore
    g = near_moore(OCSLayout.planes(n, ports), 0)
    lay = OCSLayout.planes(n, ports, radix)
    assert g is not None and near_moore(lay, 0) is None
    w = embedded(g, lay, 0, 1.0)
    assert not wiring_violations(w)
    whole = set(map(tuple, np.sort(g.circuit_array[:, [1, 3]], axis=1).tolist()))
    kept = sum(tuple(x) in whole for x in np.sort(w.circuit_array[:, [1, 3]], axis=1).tolist())
    assert kept >= 0.8 * len(whole)          # the greedy start alone keeps 171 of the first one's 224
    assert w.degree().min() >= ports - 2 and nx.is_connected(nx.from_numpy_array(w.adjacency() > 0))
    assert len(embedded(g, OCSLayout.planes(n, ports), 0, 1.0).circuits) == len(g.circuits)   # whole: all stay


@pytest.mark.slow
def test_the_search_on_split_planes_starts_from_the_embedded_near_moore_graph():
    """A uniform all-to-all on 57 accelerators, 8 ports, 30-port OCSes (two per plane): no near-Moore graph fits
    the split planes whole, so the search started from the expander or TopoOpt-style wiring (0.00124-0.00126 s
    as built); the polarity graph embedded routes in 0.00112 s, and the search starts from it (the test fails
    without the embedding)."""
    from solvers.structured import embedded, near_moore
    n, ports = 57, 8
    t = np.full((n, n), 1e6)
    np.fill_diagonal(t, 0.0)
    lay = OCSLayout.planes(n, ports, 30)
    p = WiringProblem(TrafficMatrix(t), lay, 100.0, "time")
    e = embedded(near_moore(OCSLayout.planes(n, ports), 0), lay, 0, 1.0)
    best_expander = min(p.score(expander(lay, s), "optimal")[0] for s in range(3))
    assert p.score(e, "optimal")[0] < best_expander
    res = wire(p, "search", SolveParams(time_limit_s=10))
    assert res.extra["start"] == "near-moore" and not wiring_violations(res.artifact)
    assert res.objective < best_expander


@pytest.mark.parametrize("n,ports,radix", [(57, 8, 20), (91, 10, 20)])
def test_relabelling_the_near_moore_graph_fits_more_of_it_on_split_planes(n, ports, radix):
    """On a uniform all-to-all any relabelling keeps the demand, so `relabelled` picks one whose circuits' ends
    share more OCSes: the same graph (each circuit on its switch and ports, accelerators renamed), and more of
    it kept by `embedded` (measured 188 -> 209 of 224 and 337 -> 390 of 450)."""
    from solvers.structured import embedded, near_moore, relabelled
    g = near_moore(OCSLayout.planes(n, ports), 0)
    lay = OCSLayout.planes(n, ports, radix)
    r = relabelled(g, lay, 0, 1.0)
    assert [(c.switch, c.a_port, c.b_port) for c in r.circuits] == [(c.switch, c.a_port, c.b_port) for c in g.circuits]
    assert nx.is_isomorphic(nx.from_numpy_array(g.adjacency()), nx.from_numpy_array(r.adjacency()))

    def kept(w):
        left = {}
        for x in map(tuple, np.sort(w.circuit_array[:, [1, 3]], axis=1).tolist()):
            left[x] = left.get(x, 0) + 1
        e = embedded(w, lay, 0, 1.0)
        assert not wiring_violations(e)
        out = 0
        for x in map(tuple, np.sort(e.circuit_array[:, [1, 3]], axis=1).tolist()):
            if left.get(x, 0) > 0:
                left[x] -= 1
                out += 1
        return out
    assert kept(r) > kept(g) + 0.03 * len(g.circuits)


def test_relabelling_is_repeatable_under_its_draw_budget():
    """The same seed and draw budget give the same labels however fast the machine (the clock only caps it):
    the swap search used to run until its clock, so two runs of one seed drew different numbers of swaps."""
    from solvers.structured import near_moore, relabelled
    g = near_moore(OCSLayout.planes(57, 8), 0)
    lay = OCSLayout.planes(57, 8, 20)
    a, b = (relabelled(g, lay, 3, time_limit_s=60.0, draws=5000) for _ in range(2))
    assert a.circuits == b.circuits and a.circuits != g.circuits


def _components_within_ocses(plan_wirings):
    """Every pair of fibres any of the wirings joins sits on one OCS of the plan: the circuits keep their ends."""
    lay = plan_wirings[0].layout
    return all(lay.switch_of_port[c.a, c.a_port] == lay.switch_of_port[c.b, c.b_port] == c.switch
               for w in plan_wirings for c in w.circuits)


def test_one_fibre_plan_hosts_a_wiring_and_a_rewire_on_its_cabling():
    """A wiring fitted to its plan and a second mode wired on that cabling (another seed's search): one plan
    hosts both, on as many OCSes as a fixed plan; each keeps its circuits port for port and verifies, and
    the same inputs give the same plan. Two wirings fitted apart join their planes' fibres into blocks
    larger than an OCS: no plan, and the detail names the plane."""
    from solvers.fibre_plan import common
    envelope, split = OCSLayout.fitted_planes(32, 4, switch_radix=8)
    a = fit(expander(envelope, seed=0), split)
    t = TrafficMatrix(np.where(~np.eye(32, dtype=bool), 1e6, 0.0))
    b = wire(WiringProblem(t, a.layout, 100.0), "search", SolveParams(time_limit_s=3, seed=4, max_moves=200)).artifact
    assert b.circuits != a.circuits and b.layout == a.layout
    plan = common([a, b], 8)
    assert plan.status == "found" and plan.layout.switches == OCSLayout.planes(32, 4, 8).switches == 16
    assert set(plan.layout.switch_radix) == {8} and np.bincount(plan.layout.switch_of_port.ravel()).max() <= 8
    for before, after in zip((a, b), plan.wirings):
        assert wiring_violations(after) == []
        assert sorted((c.a, c.a_port, c.b, c.b_port) for c in after.circuits) == \
            sorted((c.a, c.a_port, c.b, c.b_port) for c in before.circuits)
    assert _components_within_ocses(plan.wirings)
    assert np.array_equal(common([a, b], 8).layout.switch_of_port, plan.layout.switch_of_port)
    other = fit(expander(envelope, seed=1), split)
    none = common([a, other], 8)
    assert none.status == "none" and none.layout is None and none.wirings == ()
    assert none.detail.startswith("plane ") and "an OCS has 8 ports" in none.detail
    with pytest.raises(InvalidInput, match="b.json: accelerators: 16 accelerators x 4 ports, a.json has 32 x 4"):
        common([a, expander(OCSLayout.planes(16, 4), 0)], 8, names=["a.json", "b.json"])


def test_blocks_that_first_fit_cannot_pack_are_packed_or_refuted_by_cpsat():
    """Block sizes 5, 4, 3, 3, 3, 2 on two OCSes of 10 ports: first-fit decreasing leaves the 2 out, CP-SAT
    packs them (5 + 3 + 2, 4 + 3 + 3); three blocks of 6 on two such OCSes fit by count (18 <= 20) and
    CP-SAT proves that no packing exists."""
    from solvers.fibre_plan import _packed
    sizes = np.array([5, 4, 3, 3, 3, 2])
    where, status = _packed(sizes, 2, 10, 10.0)
    assert status == "found" and np.bincount(where, weights=sizes, minlength=2).tolist() == [10, 10]
    assert _packed(np.array([6, 6, 6]), 2, 10, 10.0) == (None, "none")
    assert _packed(np.array([11]), 2, 10, 10.0) == (None, "none")


def test_cli_fibre_plan_writes_one_cabling_for_several_wirings(tmp_path):
    """`ocs-synth fibre-plan A.json B.json --switch-radix R -o DIR`: the cabling and each wiring on it (valid,
    with its cross-connect tables), exit 0; no plan: exit 1, one line, nothing written; bad input: exit 2,
    one line naming the file or option, and the inputs untouched."""
    m = str(tmp_path / "m.npy")
    np.save(m, np.where(~np.eye(16, dtype=bool), 1e6, 0.0))
    a, b, c = (str(tmp_path / f"{k}.json") for k in "abc")
    common_args = ("--switch-radix", "8", "--port-bandwidth-gbps", "100", "--time-limit", "3")
    assert run("wire", m, "--ports", "3", "--fibre-plan", "fit", *common_args, "--max-moves", "50", "-o", a,
               "--xconnect", str(tmp_path))[0] == 0
    assert run("wire", m, "--switch-layout", str(tmp_path / "fibre-plan.csv"), *common_args, "--seed", "2",
               "--max-moves", "50", "-o", b)[0] == 0
    assert run("wire", m, "--ports", "3", "--fibre-plan", "fit", *common_args, "--seed", "7", "--max-moves", "50",
               "-o", c)[0] == 0
    out = tmp_path / "out"
    out.mkdir()
    code, stdout, err = run("fibre-plan", a, b, "--switch-radix", "8", "-o", str(out), "--json")
    assert code == 0, err
    doc = json.loads(stdout)
    assert doc["switches"] == 6 and doc["written"] == [str(out / "a.json"), str(out / "b.json")]
    for k in "ab":
        assert run("verify", str(out / f"{k}.json"))[0] == 0
        assert sorted(p.name for p in (out / k).iterdir()) == \
            ["fibre-plan.csv", "fibres.csv"] + [f"switch-{s:03d}.csv" for s in range(6)]
    plan = np.loadtxt(out / "fibre-plan.csv", delimiter=",", dtype=np.int64)
    assert plan.tolist() == json.loads((out / "a.json").read_text())["layout"]["switch_of_port"]
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run("fibre-plan", a, c, "--switch-radix", "8", "-o", str(empty))
    # two fits made apart: plane 0's circuits of the two join 14 of its 16 fibres into one block
    assert code == 1 and "no fibre plan hosts them all: plane 0: the wirings' circuits join 14 of its" in err, err
    assert err.count("\n") == 1 and not any(empty.iterdir())
    before = {p: open(p).read() for p in (a, b)}
    other = str(tmp_path / "other.json")
    assert run("wire", m, "--ports", "2", "--port-bandwidth-gbps", "100", "--time-limit", "2", "-o", other)[0] == 0
    twin, clash = tmp_path / "twin", tmp_path / "clash"
    twin.mkdir()
    clash.mkdir()
    write(clash, "a", "a file named like a wiring's folder")
    write(twin, "a.json", open(a).read())
    for args, needle in [((a, other, "--switch-radix", "8", "-o", str(out)), "other.json: accelerators: 16 "
                          "accelerators x 2 ports, "),
                         ((a, b, "--switch-radix", "8", "-o", str(tmp_path)), "--output: would overwrite the input"),
                         ((a, str(twin / "a.json"), "--switch-radix", "8", "-o", str(out)), "two wirings are named a"),
                         ((a, b, "--switch-radix", "1", "-o", str(out)), "--switch-radix: a switch of radix 1"),
                         ((a, b, "--switch-radix", "8", "--planes", "5", "-o", str(out)), "--planes: must be 1..3"),
                         ((a, b, "--switch-radix", "8", "-o", str(tmp_path / "nope")), "--output: folder does not"),
                         ((a, b, "--switch-radix", "8", "-o", str(clash)), "clash/a is a file, where the cross-connect"),
                         ((a, str(tmp_path / "missing.json"), "--switch-radix", "8", "-o", str(out)), "missing.json")]:
        code, _, err = run("fibre-plan", *args)
        assert code == 2 and needle in err and err.count("\n") == 1, (args, err)
    assert {p: open(p).read() for p in (a, b)} == before
