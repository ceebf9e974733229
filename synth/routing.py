"""Balanced multi-path routing by multiplicative weights (min-max link utilization, i.e. max concurrent
flow). Each round routes every demand on its shortest path under link lengths that grow exponentially with
the utilization the previous rounds put on each link; the answer is the average of the rounds' routings,
a feasible fractional routing, so its max utilization is an achieved time (an upper bound on the optimum).
This is the zero-sum-game view of max concurrent flow (router vs. link adversary, Garg-Koenemann /
Fleischer style), converging like O(sqrt(log links / rounds)).

Vectorized: one all-sources Dijkstra (scipy.sparse.csgraph) per round and path loads accumulated hop by hop
for all demands at once through the predecessor matrix.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from .network import Network


def _path_loads(net: Network, pred: np.ndarray, s: np.ndarray, d: np.ndarray, amount: np.ndarray,
                eid: np.ndarray) -> np.ndarray:
    loads = np.zeros(net.links)
    cur = d.copy()
    alive = cur != s
    while alive.any():
        prev = pred[s[alive], cur[alive]]
        e = eid[prev, cur[alive]]
        loads += np.bincount(e, weights=amount[alive], minlength=net.links)
        cur[alive] = prev
        alive = cur != s
    return loads


def mwu_routing(net: Network, demand: np.ndarray, rounds: int = 60, time_limit_s: float = 30.0,
                eta: float = 1.0, progress: Callable[[str], None] | None = None,
                lengths_out: list | None = None, preds_out: list | None = None, jitter: float = 1e-3,
                seed: int = 0) -> tuple[float, np.ndarray, int]:
    """(time, link loads in bytes, rounds run) of the averaged MWU routing of `demand`.

    >>> import numpy as np
    >>> ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    >>> dem = np.zeros((4, 4)); dem[0, 1] = 3.0
    >>> 1.5 <= mwu_routing(ring, dem, rounds=200)[0] < 1.6     # optimum 1.5: half direct, half around
    True
    """
    t0 = time.perf_counter()
    n = net.accelerators
    s, d = np.nonzero(demand[:n, :n] > 0)
    amount = demand[s, d]
    eid = np.full((net.nodes, net.nodes), -1, dtype=np.int64)
    eid[net.src, net.dst] = np.arange(net.links)
    cap = net.capacity_bps
    # Equal lengths make every round's shortest paths follow Dijkstra's tie order, which on a structured
    # graph (many equal shortest paths) piles the first rounds onto the same links; a tiny seeded jitter
    # spreads the ties without changing which paths are shortest.
    length = (1.0 + jitter * np.random.default_rng(seed).random(net.links)) / cap
    total = np.zeros(net.links)
    best = (np.inf, None)
    run = 0
    srcs = np.unique(s)
    row_of = np.full(net.nodes, -1)
    row_of[srcs] = np.arange(srcs.size)
    for run in range(1, rounds + 1):
        g = sp.csr_matrix((length, (net.src, net.dst)), shape=(net.nodes, net.nodes))
        _, pred_rows = dijkstra(g, directed=True, indices=srcs, return_predecessors=True)
        pred = np.empty((net.nodes, net.nodes), dtype=np.int64)
        pred[srcs] = pred_rows
        loads = _path_loads(net, pred, s, d, amount, eid)
        if preds_out is not None:   # every round's shortest-path trees: sampling one per demand rounds the average
            preds_out.append(pred[:n, :n].astype(np.int16 if net.nodes < 2 ** 15 else np.int32))
        total += loads
        util = loads / cap
        avg_theta = float((total / run / cap).max())
        if avg_theta < best[0]:
            best = (avg_theta, total / run)
        length = length * np.exp(eta * util / max(util.max(), 1e-300))
        length /= length.min() * cap.min()  # keep numbers in range; only ratios matter
        if progress and run % 10 == 0:
            progress(f"routing round {run}: {avg_theta:.4g} s")
        if time.perf_counter() - t0 > time_limit_s:
            break
    if lengths_out is not None:   # the final congestion-aware link lengths, for callers that need paths
        lengths_out.append(length)
    return best[0], best[1], run
