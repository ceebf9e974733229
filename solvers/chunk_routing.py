"""Routing the chunks of a one-step schedule: integral paths whose busiest circuit is close to the balanced
fractional optimum.

A one-step all-to-all is a multi-commodity flow with unsplittable units (chunks). Its time is alpha + the
most loaded directed circuit's bytes / bandwidth, so the aim is the max-concurrent-flow optimum, which uses
non-shortest paths where shortest ones crowd. Three stages:

1. candidates: the multiplicative-weights routing (:func:`synth.routing.mwu_routing`) of the chunks'
   demand; each round routes every pair on a shortest path under congestion-aware lengths, so the distinct
   paths of the rounds are a small candidate set whose average is the balanced fractional routing; for up
   to `max_detour_pairs` pairs also every one-hop-longer detour through each neighbour of the source;
2. rounding: each chunk takes the path of a round drawn at random (seeded), which is the fractional
   routing in expectation;
3. rip-up and reroute on the busiest circuits: every chunk crossing one moves to its candidate path with
   the least busiest circuit (ties: the least growth of the sum of squared loads, a potential that keeps
   descending on plateaus); when a pass stops lowering the maximum, every chunk on a busiest circuit is
   ripped up and reinserted greedily in random order (a kick); the best state is kept.

A schedule step also pays the hop latency of its longest path, so non-shortest candidates are not free: the
search runs for each hop limit from the longest shortest distance up, and the limit with the least
latency + busiest-circuit time wins.

Vectorized where it counts: the candidate paths of all pairs and rounds are walked back through the
predecessor matrices at once, loads are dense per directed pair, each reroute evaluates all of a chunk's
candidates in one numpy expression.
"""
from __future__ import annotations

import time

import numpy as np

from synth.network import Network


def route_chunks(net: Network, adjacency: np.ndarray, src: np.ndarray, dst: np.ndarray, size: float,
                 bandwidth: float, hop_latency_s: float = 0.0, rounds: int = 24, seed: int = 0,
                 max_kicks: int = 20, time_limit_s: float = 20.0, max_detour_pairs: int = 4096,
                 stats: dict | None = None) -> list[tuple[int, ...]]:
    """Paths (intermediate accelerators) for chunks src[i] -> dst[i] of `size` bytes on a fabric whose
    directed pair (u, v) carries adjacency[u, v] x `bandwidth` bytes/s, minimizing the longest path's hops x
    `hop_latency_s` + the busiest circuit's seconds. `stats` receives the busiest circuit (seconds) after
    rounding and after rerouting, the hop limit chosen, the moves and kicks made."""
    from synth.routing import mwu_routing
    t0 = time.perf_counter()
    N = adjacency.shape[0]
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    pairs, pair_of = np.unique(src * N + dst, return_inverse=True)
    ps, pd = pairs // N, pairs % N
    dem = np.zeros((N, N))
    np.add.at(dem, (src, dst), size)
    preds: list[np.ndarray] = []
    mwu_routing(net, dem, rounds=rounds, time_limit_s=max(1.0, time_limit_s / 4), preds_out=preds)
    P = np.stack(preds).astype(np.int64)                        # rounds x N x N
    R = P.shape[0]
    # walk every (pair, round) back from the destination: arcs as u * N + v, padded with the dummy N * N
    dummy = N * N
    cur, s_rep = np.tile(pd, R), np.tile(ps, R)
    r_rep = np.repeat(np.arange(R), pairs.size)
    hops: list[np.ndarray] = []
    alive = cur != s_rep
    while alive.any():
        prev = np.where(alive, P[r_rep, s_rep, cur], cur)
        hops.append(np.where(alive, prev * N + cur, dummy))
        cur = prev
        alive = cur != s_rep
    arcs = np.stack(hops[::-1], axis=1) if hops else np.full((cur.size, 1), dummy)
    rows = np.concatenate([np.tile(np.arange(pairs.size), R)[:, None], arcs], 1)
    if pairs.size <= max_detour_pairs:
        rows = _pad_cat(rows, _detours(adjacency, ps, pd, dummy), dummy)
    uniq, inv = np.unique(rows, axis=0, return_inverse=True)   # distinct candidates, sorted by pair
    round_cand = inv.ravel()[:R * pairs.size].reshape(R, pairs.size)
    inv_cap = np.zeros(dummy + 1)
    u, v = np.nonzero(adjacency > 0)
    inv_cap[u * N + v] = 1.0 / (adjacency[u, v] * bandwidth)
    w = size * inv_cap                                          # seconds a chunk adds to each arc
    length = (uniq[:, 1:] != dummy).sum(axis=1)
    shortest = np.full(pairs.size, np.iinfo(np.int64).max)
    np.minimum.at(shortest, uniq[:, 0], length)
    rnd = np.random.default_rng(seed).integers(0, R, src.size)
    best: tuple[float, np.ndarray, int, dict] | None = None
    limits = range(int(shortest.max()), int(length.max()) + 1)
    for k, limit in enumerate(limits):
        keep = length <= limit
        budget = (time_limit_s - (time.perf_counter() - t0)) / (len(limits) - k)
        choice, info = _search(uniq[keep], np.flatnonzero(keep), round_cand[rnd, pair_of], pair_of, pairs.size,
                               w, dummy, np.random.default_rng(seed + limit), max_kicks, budget)
        used = int(length[choice].max()) if choice.size else 0      # the longest path actually taken
        total = used * hop_latency_s + info["rerouted_s"]
        if best is None or total < best[0]:
            best = (total, choice, used, info)
    _, choice, limit, info = best
    if stats is not None:
        stats.update(info, hop_limit=limit, candidates=int(len(uniq)), rounds=R, wall_s=time.perf_counter() - t0)
    out = []
    for a in uniq[choice, 1:]:
        a = a[a != dummy]
        out.append(tuple(int(x) for x in (a[1:] // N)))
    return out


def _detours(adjacency: np.ndarray, ps: np.ndarray, pd: np.ndarray, dummy: int) -> np.ndarray:
    """Rows (pair, arcs...) of the one-hop-longer detours of every pair: first hop to any out-neighbour w
    of the source no farther from the destination, then a shortest path from w (hop count)."""
    from scipy.sparse.csgraph import shortest_path
    from synth.network import padded_neighbours
    N = adjacency.shape[0]
    dist, pred = shortest_path(adjacency > 0, unweighted=True, directed=True, return_predecessors=True)
    u, v = np.nonzero(adjacency > 0)
    nbr, _ = padded_neighbours(N, u, v)
    pair = np.repeat(np.arange(ps.size), nbr.shape[1])
    w = nbr[ps].ravel()
    s_, d_ = ps[pair], pd[pair]
    ok = (w >= 0) & (w != d_)
    ok[ok] &= dist[w[ok], d_[ok]] <= dist[s_[ok], d_[ok]]
    pair, w, s_, d_ = pair[ok], w[ok], s_[ok], d_[ok]
    hops = [s_ * N + w]
    cur = w.copy()
    rev: list[np.ndarray] = []
    node = d_.copy()
    alive = node != cur
    while alive.any():                                        # walk back from d to w
        prev = np.where(alive, pred[cur, node], node)
        rev.append(np.where(alive, prev * N + node, dummy))
        node = prev
        alive = node != cur
    arcs = np.stack(hops + rev[::-1], axis=1)
    return np.concatenate([pair[:, None], arcs], 1)


def _pad_cat(a: np.ndarray, b: np.ndarray, dummy: int) -> np.ndarray:
    """Stack two row tables, padding the narrower with the dummy arc."""
    width = max(a.shape[1], b.shape[1])
    pad = lambda x: np.pad(x, ((0, 0), (0, width - x.shape[1])), constant_values=dummy)  # noqa: E731
    return np.concatenate([pad(a), pad(b)])


def _search(cands: np.ndarray, cand_ids: np.ndarray, drawn: np.ndarray, pair_of: np.ndarray, n_pairs: int,
            w: np.ndarray, dummy: int, rng: np.random.Generator, max_kicks: int, time_limit_s: float):
    """Rounding and rip-up-and-reroute over the candidates `cands` (rows: pair, arcs...; sorted by pair;
    their ids in the full candidate table `cand_ids`). `drawn`: each chunk's drawn full-table candidate.
    Returns (full-table candidate per chunk, stats)."""
    t0 = time.perf_counter()
    cand_arcs = cands[:, 1:]
    cand_w = w[cand_arcs]                 # seconds each candidate adds to each of its arcs (dummy: 0)
    ptr = np.searchsorted(cands[:, 0], np.arange(n_pairs + 1))
    local = np.full(int(cand_ids.max()) + 1 if cand_ids.size else 1, -1)
    local[cand_ids] = np.arange(cand_ids.size)
    choice = np.where(drawn < local.size, local[np.minimum(drawn, local.size - 1)], -1)
    placed = choice >= 0
    load = np.bincount(cand_arcs[choice[placed]].ravel(), weights=w[cand_arcs[choice[placed]]].ravel(),
                       minlength=dummy + 1)
    peak = max(float(load.max()), float(w.max()))

    # The two below run once per chunk move (half a million times on qwen3-235b-64's schedules), so they
    # keep to ndarray methods and one fancy index each: a path's arcs are distinct (simple paths) and only
    # the zero-weight dummy repeats, so a plain indexed add equals np.add.at.
    def best_for(c: int) -> int:          # the chunk's candidate with the least (max, squares) after adding it
        lo, hi = ptr[pair_of[c]], ptr[pair_of[c] + 1]
        lw, wo = load[cand_arcs[lo:hi]], cand_w[lo:hi]
        after = ((lw + wo).max(axis=1) / peak).round(9)
        low = np.flatnonzero(after == after.min())
        if low.size == 1:
            return lo + int(low[0])
        sq = (wo[low] * (2 * lw[low] + wo[low])).sum(axis=1)
        return lo + int(low[sq.argmin()])     # the first least, as a stable lexsort on (after, sq) gives

    def add(c: int, sign: float) -> None:
        load[cand_arcs[choice[c]]] += sign * cand_w[choice[c]]

    for c in rng.permutation(np.flatnonzero(~placed)):   # drawn path over the hop limit: place greedily
        choice[c] = best_for(c)
        add(c, 1.0)
    first = float(load.max())
    moves, kicks, flat, fruitless = 0, 0, 0, 0
    best_load, best_choice = first, choice.copy()
    wmin = w[w > 0].min()
    while time.perf_counter() - t0 < time_limit_s and fruitless < max_kicks:
        peak = float(load.max())
        hot = load >= peak - 0.5 * wmin                         # the circuits at the peak
        on = np.flatnonzero(hot[cand_arcs[choice]].any(axis=1))
        on = on[ptr[pair_of[on] + 1] - ptr[pair_of[on]] > 1]
        if flat < 2:       # descent: each chunk on a peak circuit to its best path
            for c in rng.permutation(on):
                old = choice[c]
                add(c, -1.0)
                choice[c] = best_for(c)
                moves += int(choice[c] != old)
                add(c, 1.0)
        else:              # kick: rip up every chunk on a peak circuit, reinsert them greedily in random order
            kicks += 1
            flat = 0
            for c in on:
                add(c, -1.0)
            for c in rng.permutation(on):
                choice[c] = best_for(c)
                add(c, 1.0)
        now = float(load.max())
        if now < best_load * (1 - 1e-12):
            best_load, best_choice, flat, fruitless = now, choice.copy(), 0, 0
        else:
            flat += 1
            fruitless += flat == 2
    return cand_ids[best_choice], {"rounded_s": first, "rerouted_s": best_load, "moves": moves, "kicks": kicks}
