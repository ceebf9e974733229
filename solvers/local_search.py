"""Degree-preserving local search on a wiring, inside switch planes.

A move takes two circuits on the same switch, (a, b) and (c, d), and reconnects them as (a, c) and (b, d):
every port keeps its switch, so the wiring stays realizable (each switch stays a matching) and the degree
sequence is unchanged. Moves are targeted as in the order/degree-problem literature: pick a heavy pair
(u, v) far apart (sampled by bytes x distance), take u's and v's circuits on one switch and join u to v
directly. The objective is hop-weighted bytes (sum of demand x shortest-path hops), re-evaluated with one
all-pairs BFS (scipy.sparse.csgraph) per move; a move is kept when it does not make it worse.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from synth.model import Circuit, Wiring


def _hop_bytes(n: int, a: np.ndarray, b: np.ndarray, demand: np.ndarray) -> tuple[float, np.ndarray]:
    g = sp.csr_matrix((np.ones(2 * a.size), (np.concatenate([a, b]), np.concatenate([b, a]))), shape=(n, n))
    d = shortest_path(g, method="D", unweighted=True, directed=False)
    if not np.isfinite(d[demand > 0]).all():
        return float("inf"), d
    return float((demand * np.where(np.isfinite(d), d, 0)).sum()), d


def improve_hops(wiring: Wiring, demand: np.ndarray, time_limit_s: float = 20.0, seed: int = 0,
                 progress: Callable[[str], None] | None = None) -> tuple[Wiring, float, int, int]:
    """(better wiring, its hop-weighted bytes, moves tried, moves kept)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n = wiring.accelerators
    arr = wiring.circuit_array.copy()             # switch, a, a_port, b, b_port
    if arr.shape[0] < 2:
        return wiring, _hop_bytes(n, arr[:, 1], arr[:, 3], demand)[0], 0, 0
    sym = demand + demand.T
    best, dist = _hop_bytes(n, arr[:, 1], arr[:, 3], sym)
    tried = kept = 0
    # circuits of each (accelerator, switch)
    while time.perf_counter() - t0 < time_limit_s:
        tried += 1
        w = sym * np.where(np.isfinite(dist), dist - 1, n)
        flat = w.ravel()
        tot = flat.sum()
        if tot <= 0:
            break
        k = int(np.searchsorted(np.cumsum(flat), rng.random() * tot))
        u, v = divmod(min(k, flat.size - 1), n)
        if u == v:
            continue
        cu = np.flatnonzero((arr[:, 1] == u) | (arr[:, 3] == u))
        cv = np.flatnonzero((arr[:, 1] == v) | (arr[:, 3] == v))
        common = np.intersect1d(arr[cu, 0], arr[cv, 0])
        if common.size == 0:
            continue
        s = int(rng.choice(common))
        e1 = int(rng.choice(cu[arr[cu, 0] == s]))
        e2 = int(rng.choice(cv[arr[cv, 0] == s]))
        if e1 == e2:
            continue
        # orient so that u, v are the "a" ends
        r1, r2 = arr[e1].copy(), arr[e2].copy()
        if r1[1] != u:
            r1[[1, 2, 3, 4]] = r1[[3, 4, 1, 2]]
        if r2[1] != v:
            r2[[1, 2, 3, 4]] = r2[[3, 4, 1, 2]]
        x, y = r1[3], r2[3]
        if len({u, v, x, y}) < 4:
            continue
        new1 = [s, u, r1[2], v, r2[2]]
        new2 = [s, x, r1[4], y, r2[4]]
        old1, old2 = arr[e1].copy(), arr[e2].copy()
        arr[e1], arr[e2] = new1, new2
        val, d2 = _hop_bytes(n, arr[:, 1], arr[:, 3], sym)
        if val <= best:
            kept += int(val < best)
            best, dist = val, d2
        else:
            arr[e1], arr[e2] = old1, old2
        if progress and tried % 100 == 0:
            progress(f"local search: {tried} moves, {kept} kept, hop-bytes {best:.6g}")
    circuits = tuple(Circuit(int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in arr)
    return Wiring(n, wiring.ports_per_accelerator, circuits, wiring.layout), best / 2, tried, kept
