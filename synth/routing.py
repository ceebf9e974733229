"""Balanced multi-path routing by multiplicative weights (min-max link utilization, i.e. max concurrent
flow). Each round routes every demand on its shortest path under link lengths that grow exponentially with
the utilization the previous rounds put on each link; the answer is the average of the rounds' routings,
a feasible fractional routing, so its max utilization is an achieved time (an upper bound on the optimum).
This is the zero-sum-game view of max concurrent flow (router vs. link adversary, Garg-Koenemann /
Fleischer style), converging like O(sqrt(log links / rounds)).

Two things make a round worth more (moe5t-576's searched wiring, 225 rounds: 0.7138 -> 0.7107 ms; kimi-k2-288,
300 rounds: 1.3224 -> 1.3122 ms; BENCHMARKS.md): the sources are taken in MWU_BLOCKS blocks (a seeded
partition) and the lengths grow after each block, as in Fleischer's commodity-by-commodity rounds, so a
block's paths see the load the blocks before it placed in the same round (the all-sources Dijkstra is split,
not repeated: the same work); and round k weighs k^AVERAGE_POWER in the average, since later rounds route
under better lengths.

Vectorized: one Dijkstra (scipy.sparse.csgraph) per block of sources, and path loads accumulated hop by hop
for all the block's demands at once through the predecessor matrix.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from .network import Network

MWU_BLOCKS = 8          # source blocks per round, the lengths updated after each
AVERAGE_POWER = 0.5     # round k weighs k ** AVERAGE_POWER in the averaged routing


def _path_loads(net: Network, pred: np.ndarray, s: np.ndarray, d: np.ndarray, amount: np.ndarray,
                eid: np.ndarray) -> np.ndarray:
    # accumulated hop by hop, not through _path_links: the MWU hot path (13% faster on moe5t-576)
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
                seed: int = 0, blocks: int = MWU_BLOCKS) -> tuple[float, np.ndarray, int]:
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
    rng = np.random.default_rng(seed)
    length = (1.0 + jitter * rng.random(net.links)) / cap
    total, weights = np.zeros(net.links), 0.0
    best = (np.inf, None)
    run = 0
    srcs = np.unique(s)
    parts = [(b, np.isin(s, b)) for b in np.array_split(rng.permutation(srcs), min(blocks, max(srcs.size, 1)))]
    scale = None         # a whole round's largest utilization (the last round's), which normalizes the steps
    pred = np.empty((net.nodes, net.nodes), dtype=np.int64)
    # one CSR structure; each Dijkstra gets the current lengths in its order (the links are distinct pairs)
    g = sp.csr_matrix((np.arange(1, net.links + 1, dtype=np.float64), (net.src, net.dst)), shape=(net.nodes, net.nodes))
    order = g.data.astype(np.int64) - 1
    for run in range(1, rounds + 1):
        loads = np.zeros(net.links)
        for b, mine in parts:
            g.data = length[order]
            _, pred[b] = dijkstra(g, directed=True, indices=b, return_predecessors=True)
            part = _path_loads(net, pred, s[mine], d[mine], amount[mine], eid)
            loads += part
            if scale is None:        # the first block: its share of a round, scaled up
                scale = max(float((part / cap).max()) * len(parts), 1e-300)
            length = length * np.exp(eta * (part / cap) / scale)
            length /= length.min() * cap.min()  # keep numbers in range; only ratios matter
        if preds_out is not None:   # every round's shortest-path trees: sampling one per demand rounds the average
            preds_out.append(pred[:n, :n].astype(np.int16 if net.nodes < 2 ** 15 else np.int32))
        scale = max(float((loads / cap).max()), 1e-300)
        w = run ** AVERAGE_POWER
        total += w * loads
        weights += w
        avg_theta = float((total / weights / cap).max())
        if avg_theta < best[0]:
            best = (avg_theta, total / weights)
        if progress and run % 10 == 0:
            progress(f"routing round {run}: {avg_theta:.4g} s")
        if time.perf_counter() - t0 > time_limit_s:
            break
    if lengths_out is not None:   # the final congestion-aware link lengths, for callers that need paths
        lengths_out.append(length)
    return best[0], best[1], run


def _path_links(net: Network, pred: np.ndarray, s: np.ndarray, d: np.ndarray, eid: np.ndarray) -> np.ndarray:
    """The links of each demand's path in a shortest-path forest (demands x hops, destination first,
    padded with -1)."""
    cols = []
    cur = d.copy()
    alive = cur != s
    while alive.any():
        col = np.full(s.size, -1, dtype=np.int32)
        prev = pred[s[alive], cur[alive]]
        col[alive] = eid[prev, cur[alive]]
        cols.append(col)
        cur[alive] = prev
        alive = cur != s
    return np.stack(cols, axis=1) if cols else np.full((s.size, 1), -1, dtype=np.int32)


class _PathSet:
    """Distinct paths (rows: demand index, then link ids padded with -1), deduplicated by a 64-bit hash of
    the row. A collision can only drop a path, never invent one, so the LP stays a real routing."""

    def __init__(self, nodes: int) -> None:
        # one odd multiplier per row position: a demand index and at most nodes - 1 hops
        self.mult = np.random.default_rng(12345).integers(1, 2 ** 63, size=nodes + 1, dtype=np.uint64) | np.uint64(1)
        self.keys = np.empty(0, dtype=np.uint64)
        self.parts: list[np.ndarray] = []

    def _hash(self, rows: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return ((rows.astype(np.int64) + 1).astype(np.uint64) * self.mult[:rows.shape[1]]).sum(axis=1)

    def add(self, rows: np.ndarray) -> int:
        """Add the rows not seen yet; returns how many were new."""
        keys = self._hash(rows)
        keys, first = np.unique(keys, return_index=True)
        pos = np.minimum(np.searchsorted(self.keys, keys), max(self.keys.size - 1, 0))
        fresh = (self.keys[pos] != keys) if self.keys.size else np.ones(keys.size, dtype=bool)
        if fresh.any():
            self.parts.append(rows[first[fresh]])
            self.keys = np.sort(np.concatenate([self.keys, keys[fresh]]))
        return int(fresh.sum())

    @property
    def size(self) -> int:
        return int(self.keys.size)

    def rows(self) -> np.ndarray:
        width = max(p.shape[1] for p in self.parts)
        return np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=-1) for p in self.parts])


def path_lp_routing(net: Network, demand: np.ndarray, time_limit_s: float = 30.0, rounds: int = 300,
                    max_columns: int = 1_000_000, seed: int = 0,
                    progress: Callable[[str], None] | None = None) -> tuple[float, str]:
    """(time, how) of the best routing found by MWU, then the max-concurrent-flow LP restricted to the paths
    the MWU rounds used (a path LP, HiGHS interior point), then column generation: a shortest path under the
    LP's capacity duals joins when its reduced cost is negative, until none does (then the answer is the
    optimum over all paths: the routing LP's optimum), progress stalls or time runs out. The MWU average is
    a mix of its rounds' paths, so the path LP is never worse (seeding it with fewer rounds made it worse than
    MWU, and column generation from there adds a path or two per LP on max-concurrent-flow's degenerate
    duals); 300 rounds of MWU alone stay 3-7% above the optimum on 64-144 accelerators, whose paths
    already hold an optimal routing. Paths are deduplicated exactly (rows of link ids); beyond
    `max_columns` paths the MWU answer stands.

    >>> ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    >>> dem = np.zeros((4, 4)); dem[0, 1] = 3.0
    >>> t, how = path_lp_routing(ring, dem); round(t, 6), how.split(" ")[0]
    (1.5, 'path-lp')
    """
    from .network import _solve_lp
    t0 = time.perf_counter()
    n = net.accelerators
    preds: list = []
    theta, _, run = mwu_routing(net, demand, rounds=rounds, time_limit_s=time_limit_s / 3, preds_out=preds, seed=seed)
    mwu_how = f"mwu ({run} rounds)"
    s, d = np.nonzero(demand[:n, :n] > 0)
    if s.size == 0:
        return theta, mwu_how
    amount = demand[s, d]
    m, E = s.size, net.links
    eid = np.full((net.nodes, net.nodes), -1, dtype=np.int64)
    eid[net.src, net.dst] = np.arange(E)
    dem_col = np.arange(m, dtype=np.int32)[:, None]
    pset = _PathSet(net.nodes)
    for pred in preds:
        pset.add(np.concatenate([dem_col, _path_links(net, pred.astype(np.int64), s, d, eid)], axis=1))
        if pset.size > max_columns or time.perf_counter() - t0 > time_limit_s * 0.7:
            return theta, mwu_how
    preds.clear()
    d_scale, c_scale = float(amount.max()), float(net.capacity_bps.max())
    a, cap = amount / d_scale, net.capacity_bps / c_scale
    best, how, gens, last, stale = theta, mwu_how, 0, np.inf, 0
    while True:
        left = time_limit_s - (time.perf_counter() - t0)
        if left < 0.5:
            break
        paths = pset.rows()
        P = paths.shape[0]
        links = paths[:, 1:]
        pi, hi = np.nonzero(links >= 0)
        A_ub = sp.csr_matrix((np.concatenate([np.ones(pi.size), -cap]),
                              (np.concatenate([links[pi, hi], np.arange(E)]), np.concatenate([pi, np.full(E, P)]))),
                             shape=(E, P + 1))
        A_eq = sp.csr_matrix((np.ones(P), (paths[:, 0], np.arange(P))), shape=(m, P + 1))
        c = np.zeros(P + 1)
        c[-1] = 1.0
        duals: list = []
        status, obj, _ = _solve_lp(c, A_ub, np.zeros(E), A_eq, a, np.zeros(P + 1), np.full(P + 1, np.inf), left,
                                   False, duals)
        if status != "optimal":
            break
        value = obj * d_scale / c_scale
        if value < best:
            best, how = value, f"path-lp ({P} paths, {gens} generations)"
        # column generation: a demand's shortest path under the capacity duals prices out when its length is
        # below the demand row's dual (reduced cost < 0). When none does, the LP is optimal over all paths.
        stale = stale + 1 if value > last * (1 - 1e-6) else 0
        last = min(last, value)
        y = np.maximum(-duals[0][:E], 0.0)
        u = duals[0][E:]
        eps = 1e-9 * max(float(y.max()), 1e-300)      # csgraph drops zero-length links; ties stay shortest
        g = sp.csr_matrix((y + eps, (net.src, net.dst)), shape=(net.nodes, net.nodes))
        srcs = np.unique(s)
        dist, pred_rows = dijkstra(g, directed=True, indices=srcs, return_predecessors=True)
        row_of = np.full(net.nodes, -1)
        row_of[srcs] = np.arange(srcs.size)
        new = np.flatnonzero(dist[row_of[s], d] < u * (1 - 1e-7) - 1e-12)
        if new.size == 0:
            if value <= best:
                how = f"path-lp ({P} paths, {gens} generations, optimal)"
            break
        if stale >= 1 or time.perf_counter() - t0 > time_limit_s:   # degenerate duals: ties, no progress
            break
        pred = np.empty((net.nodes, net.nodes), dtype=np.int64)
        pred[srcs] = pred_rows
        added = pset.add(np.concatenate([dem_col[new], _path_links(net, pred, s[new], d[new], eid)], axis=1))
        if added == 0 or pset.size > max_columns:
            break
        if progress:
            progress(f"path LP {value:.6g} s, {added} new paths")
        gens += 1
    return best, how
