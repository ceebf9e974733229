"""Benchmarks behind BENCHMARKS.md, runnable as `ocs-synth bench ...` (timings, never asserted in tests)."""
from __future__ import annotations

import platform
import statistics
import time
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
