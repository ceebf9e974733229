"""Benchmarks behind BENCHMARKS.md, runnable as `ocs-synth bench ...` (timings, never asserted in tests)."""
from __future__ import annotations

import math
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np


def machine() -> dict[str, Any]:
    import os
    import scipy
    return {"python": platform.python_version(), "numpy": np.__version__, "scipy": scipy.__version__,
            "cpus": os.cpu_count(), "machine": platform.machine()}


def _best(fn, repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t)
    return min(times), out


def bench_workload(instance_path: str, repeat: int = 7) -> dict[str, Any]:
    """Time to build an instance's decode DAG and traffic matrix."""
    from .instance import load_instance
    from .workload import build_workload
    inst = load_instance(instance_path)
    best, wl = _best(lambda: build_workload(inst), repeat)
    return {"instance": inst.name, "accelerators": inst.accelerators, "dag_nodes": wl.graph.number_of_nodes(),
            "build_s_min": best, "repeat": repeat}


def bench_flow(nodes: int = 1024, degree: int = 4, flows: int = 100_000, seed: int = 0,
               repeat: int = 3) -> dict[str, Any]:
    """Route `flows` random unit flows on a random `degree`-regular graph (one shortest path each), link
    loads, max-min fair rates; and the ECMP fluid loads of the same demand."""
    from solvers.baselines import expander
    from .model import OCSLayout
    from .network import Network, ecmp_loads, maxmin_rates, sample_paths

    w = expander(OCSLayout.uniform(nodes, degree), seed=seed + 1)
    adj = np.triu(w.adjacency(), 1)
    i, j = np.nonzero(adj)
    rng = np.random.default_rng(seed)
    s = rng.integers(0, nodes, flows)
    t = rng.integers(0, nodes - 1, flows)
    t = t + (t >= s)

    def run():
        net = Network.from_pairs("expander", nodes, nodes, np.stack([i, j], 1), adj[i, j] * 12.5e9, 0.1)
        t0 = time.perf_counter()
        net.dist
        t1 = time.perf_counter()
        inc, _, hops = sample_paths(net, s, t, 1, seed=seed)
        loads = np.asarray(inc.sum(axis=0)).ravel()
        t2 = time.perf_counter()
        rates = maxmin_rates(inc, net.capacity_bps)
        t3 = time.perf_counter()
        dem = np.zeros((nodes, nodes))
        np.add.at(dem, (s, t), 1.0)
        ecmp_loads(net, dem)
        t4 = time.perf_counter()
        return {"bfs_s": t1 - t0, "paths_and_loads_s": t2 - t1, "maxmin_s": t3 - t2, "total_s": t3 - t0,
                "ecmp_fluid_s": t4 - t3, "mean_hops": float(hops.mean()), "max_link_flows": float(loads.max()),
                "min_rate_gbps": float(rates.min() * 8 / 1e9)}
    runs = [run() for _ in range(repeat)]
    best = min(runs, key=lambda r: r["total_s"])
    return {"nodes": nodes, "degree": degree, "flows": flows, "seed": seed, "repeat": repeat, **best,
            "total_s_median": statistics.median(r["total_s"] for r in runs)}


def bench_routing(instance_path: str, wiring=None, rounds: int = 60, seed: int = 0) -> dict[str, Any]:
    """Multiplicative-weights routing of an instance's decode traffic on `wiring` (default: the expander
    baseline with `seed`), `rounds` rounds alone and with the helper process (`synth.routing`, started
    before the clock), and whether both gave the same bits."""
    from solvers.baselines import expander
    from .instance import load_instance
    from .problem import WiringProblem
    from .routing import _Helper, mwu_routing
    from .workload import build_workload
    inst = load_instance(instance_path)
    prob = WiringProblem.from_instance(inst, build_workload(inst).traffic)
    w = wiring if wiring is not None else expander(prob.layout, seed=seed)
    net = prob.network(w)
    dem = prob.traffic.bytes_
    t = time.perf_counter()
    _Helper.warm()
    start_s = time.perf_counter() - t
    out: dict[str, Any] = {"instance": inst.name, "links": net.links, "sources": int((dem.sum(axis=1) > 0).sum()),
                           "rounds": rounds, "helper_start_s": round(start_s, 3)}
    answers = {}
    for workers in (1, 2):
        t = time.perf_counter()
        theta, loads, run = mwu_routing(net, dem, rounds=rounds, time_limit_s=float("inf"), seed=seed,
                                        workers=workers)
        out[f"workers_{workers}_s"] = round(time.perf_counter() - t, 3)
        answers[workers] = (theta, loads.tobytes(), run)
    out.update(time_s=answers[1][0], same_bits=answers[1] == answers[2],
               speedup=round(out["workers_1_s"] / out["workers_2_s"], 2))
    return out


SUITE_KEYS = {"name", "source", "ports", "port_bandwidth_gbps", "switch_radix", "fibre_plan", "objective", "optimum",
              "bound", "best_known", "tolerance", "note", "small"}


def load_suite(path: str) -> list[dict[str, Any]]:
    """Cases of a wiring suite file (TOML `[[case]]` tables), checked."""
    import tomllib
    from .errors import InvalidInput, unknown_key_message
    from .formats import read_text
    from .instance import FIBRE_PLANS
    try:
        doc = tomllib.loads(read_text(path))
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"malformed TOML: {exc}", source=path) from None
    cases = doc.get("case", [])
    for i, c in enumerate(cases):
        for k in c:
            if k not in SUITE_KEYS:
                raise InvalidInput(unknown_key_message(k, SUITE_KEYS), field=f"case[{i}]", source=path)
        for k in ("name", "source", "objective"):
            if k not in c:
                raise InvalidInput("missing required key", field=f"case[{i}].{k}", source=path)
        if c.get("fibre_plan", "spread") not in FIBRE_PLANS:
            raise InvalidInput(f"must be spread or fit, got {c['fibre_plan']!r}", field=f"case[{i}].fibre_plan",
                               source=path)
        c["path"] = _resolved(c["source"], path)
    return cases


def _resolved(source: str, suite: str) -> str:
    """A case's source as written when it exists from here (or is absolute), else under the first folder
    above the suite file that holds it: the shipped suite names its instances from the project's root, so
    `bench wire --suite /path/to/suite.toml` works from any folder."""
    if os.path.isabs(source) or os.path.exists(source):
        return source
    for folder in Path(suite).resolve().parents:
        if (folder / source).exists():
            return str(folder / source)
    return source


def suite_problem(case: dict[str, Any]):
    from .formats import is_phases_file, load_phases_traffic, load_traffic
    from .instance import load_instance
    from .model import OCSLayout
    from .problem import WiringProblem
    from .workload import build_workload, step_phases
    phases: tuple = ()
    source = case.get("path", case["source"])
    if is_phases_file(source):
        tm, phases = load_phases_traffic(source)
    elif source.endswith(".toml"):      # `switch_radix`, `fibre_plan` as the instance's [fabric] keys (planes split)
        sets = {f"fabric.{k}": case[k] for k in ("switch_radix", "fibre_plan") if k in case}
        inst = load_instance(source, sets or None)
        wl = build_workload(inst)
        return WiringProblem.from_instance(inst, wl.traffic, objective=case["objective"],
                                           phases=step_phases(wl) if case["objective"] == "phases" else (),
                                           workload=wl if case["objective"] == "step" else None)
    else:
        tm = load_traffic(source)
    n, p, r = tm.accelerators, case["ports"], case.get("switch_radix")
    fitted = case.get("fibre_plan") == "fit"
    layout, split = OCSLayout.fitted_planes(n, p, r) if fitted else (OCSLayout.planes(n, p, r), None)
    return WiringProblem(tm, layout, case["port_bandwidth_gbps"], case["objective"], name=case["name"],
                         phases=phases if case["objective"] == "phases" else (), fibre_fit=split)


def check_case(case: dict[str, Any], status: str, objective: float, rel: float = 1e-6,
               baseline: bool = False) -> str:
    """'ok' or what is wrong: OPTIMAL must equal the recorded optimum; any answer must respect the recorded
    bound (and a FEASIBLE one the best known, within the tolerance); a time that never ends (a demand the
    wiring leaves apart) is no answer, a baseline's included (the torus on split planes was one, listed ok)."""
    if not math.isfinite(objective):
        return "no answer: the wiring leaves a demand unserved"
    opt = case.get("optimum")
    if opt is not None:
        if status == "OPTIMAL" and abs(objective - opt) > rel * max(abs(opt), 1e-300):
            return f"OPTIMAL {objective:.6g} != recorded optimum {opt:.6g}"
        if objective < opt * (1 - rel):
            return f"{objective:.6g} beats the recorded optimum {opt:.6g}"
    bound = case.get("bound")
    if bound is not None and objective < bound * (1 - rel):
        return f"{objective:.6g} is below the recorded bound {bound:.6g}"
    best = case.get("best_known")
    if best is not None and not baseline and status == "FEASIBLE" and objective > best * (1 + case.get("tolerance", 0.0)):
        return f"{objective:.6g} is worse than best known {best:.6g} by more than {case.get('tolerance', 0.0):.0%}"
    return "ok"


def bench_wire(path: str, solvers: list[str], time_limit_s: float, small_only: bool = False,
               names: list[str] | None = None, progress=None) -> list[dict[str, Any]]:
    from solvers import BASELINES, wire
    from solvers.exact import EXACT_MAX
    from .model import SolveParams
    from .verify import wiring_violations
    rows = []
    for case in load_suite(path):
        if (small_only and not case.get("small")) or (names and case["name"] not in names):
            continue
        problem = suite_problem(case)
        for solver in solvers:
            backend = "auto"
            if ":" in solver:
                solver, backend = solver.split(":", 1)
            if solver in ("milp", "cpsat") and (problem.accelerators > EXACT_MAX or problem.objective == "step"):
                if progress:        # what the exact models refuse (one line each, exit 2, from `wire`)
                    progress(f"{case['name']}: {solver} skipped (" + ("the step objective is the evaluator's "
                             "model" if problem.objective == "step" else f"{problem.accelerators} accelerators")
                             + ")")
                continue
            if progress:
                progress(f"{case['name']}: {solver}")
            res = wire(problem, solver, SolveParams(time_limit_s=time_limit_s, backend=backend))
            valid = res.artifact is not None and not wiring_violations(res.artifact)
            rows.append({"case": case["name"], "solver": res.solver, "status": res.status.value,
                         "objective": res.objective, "bound": res.bound, "gap": res.gap, "wall_s": res.wall_s,
                         "verified": valid, "recorded": case.get("optimum", case.get("bound")),
                         "check": check_case(case, res.status.value, res.objective,
                                             baseline=res.solver in BASELINES) if res.objective else "no answer",
                         **({"structure": res.extra["structure"]} if "structure" in res.extra else {})})
    return rows


def _full_mesh_grid(dims: tuple[int, ...]) -> np.ndarray:
    """A circuit between every two accelerators that differ in exactly one coordinate (row-major grid)."""
    co = np.array(np.unravel_index(np.arange(int(np.prod(dims))), dims)).T
    return ((co[:, None, :] != co[None, :, :]).sum(axis=2) == 1).astype(int)


def classic_topologies() -> dict[str, np.ndarray]:
    """Circuit-count adjacencies of the classic topologies of the schedule benchmarks (the expanders: random
    4-regular graphs, seed 1)."""
    import networkx as nx
    dgx = nx.Graph()
    for quad in ([0, 1, 2, 3], [4, 5, 6, 7]):    # DGX-1 hybrid cube-mesh: two fully connected quads + i <-> i+4
        dgx.add_edges_from((a, b) for a in quad for b in quad if a < b)
    dgx.add_edges_from((i, i + 4) for i in range(4))
    torus = lambda L: nx.convert_node_labels_to_integers(nx.grid_2d_graph(L, L, periodic=True))  # noqa: E731
    return {"biring-8": nx.to_numpy_array(nx.cycle_graph(8), dtype=int),
            "dgx1-8": nx.to_numpy_array(dgx, nodelist=range(8), dtype=int),
            "torus-4x4": nx.to_numpy_array(torus(4), dtype=int),
            "torus-8x8": nx.to_numpy_array(torus(8), dtype=int),
            "torus-16x16": nx.to_numpy_array(torus(16), dtype=int),
            "torus-4x4x4": nx.to_numpy_array(nx.convert_node_labels_to_integers(
                nx.grid_graph([4, 4, 4], periodic=True)), dtype=int),
            "fullmesh-3x3x3": _full_mesh_grid((3, 3, 3)),
            "expander-64": nx.to_numpy_array(nx.random_regular_graph(4, 64, seed=1), dtype=int),
            "expander-256": nx.to_numpy_array(nx.random_regular_graph(4, 256, seed=1), dtype=int)}


def bench_schedule(names: list[str] | None = None, bytes_: float = 64e6, port_gbps: float = 800.0,
                   alpha_us: float = 0.6, time_limit_s: float = 30.0, progress=None,
                   chunks_per: int | None = None) -> list[dict[str, Any]]:
    """Best schedule per (topology, collective): algorithm, steps, time, lower bound, gap, wall time.
    `chunks_per`: chunks per rank (all-to-all: per pair); default 4 up to 16 ranks, else 16 (all-to-all: 1)."""
    from solvers import schedules as S
    from .errors import InvalidInput
    from .model import Collective
    from .schedule import check_schedule
    tops = classic_topologies()
    unknown = [x for x in names or [] if x not in tops]
    if unknown:
        raise InvalidInput(f"unknown topology {unknown[0]!r}; valid: {', '.join(tops)}", field="--topology")
    rows = []
    for name, adj in tops.items():
        if names and name not in names:
            continue
        f = S.Fabric(adj, port_gbps * 1e9 / 8, alpha_us)
        n = adj.shape[0]
        for kind in ("allgather", "allreduce", "alltoall"):
            if progress:
                progress(f"{name}: {kind}")
            coll = Collective(kind, tuple(range(n)), bytes_)
            per = chunks_per or ((4 if n <= 16 else 1) if kind == "alltoall" else (4 if n <= 16 else 16))
            chunks = n * n * per if kind == "alltoall" else n * per
            t = time.perf_counter()
            res = S.best_schedule(f, coll, chunks, synthesize=n <= 16, time_limit_s=time_limit_s)
            rows.append({"topology": name, "collective": kind, "algorithm": res["schedule"].algorithm,
                         "steps": len(res["schedule"].steps), "steps_lower_bound": res["bounds"].steps,
                         "time_us": res["time_us"], "lower_bound_us": res["lower_bound_us"], "gap": res["gap"],
                         "verified": check_schedule(res["schedule"], adj).ok, "wall_s": time.perf_counter() - t})
    return rows
