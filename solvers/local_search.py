"""Degree-preserving local search on a wiring, inside switch planes.

A move takes two circuits on the same switch, (a, b) and (c, d), and reconnects them as (a, c) and (b, d):
every port keeps its switch, so the wiring stays realizable (each switch stays a matching) and the degree
sequence is unchanged. Moves are targeted as in the order/degree-problem literature: pick a heavy pair
(u, v) far apart (sampled by bytes x distance), take u's and v's circuits on one switch and join u to v
directly. The objective is hop-weighted bytes (sum of demand x shortest-path hops), re-evaluated with one
all-pairs BFS (scipy.sparse.csgraph) per move; a move is kept when it does not make it worse.

On dense wirings (two hops reach most pairs) :func:`improve_two_hop` maximizes demand-weighted two-hop
coverage instead, re-evaluated incrementally (:class:`TwoHopCoverage`): thousands of moves per second
instead of tens.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from synth.model import Circuit, Wiring

PROGRESS_S = 5.0      # seconds between the progress lines of a search
# The hop count's moves end early when a window of STALL_S seconds took less than STALL_RATE of the hop-weighted
# bytes off per second: the routing that scores the wiring gains more on that clock. A 2,304-accelerator
# all-to-all on 18 ports (one all-pairs BFS per move, 15 moves a second) took 1.2e-4 off per 5 s while
# MWU's routing stood 3.1% above the wiring's own path-length floor after 30 rounds (1.4% after 256);
# dlrm128 at 4 ports takes 2-3e-3 off per 5 s and goes on.
STALL_S = 5.0
STALL_RATE = 1e-4


def _hop_bytes(n: int, a: np.ndarray, b: np.ndarray, demand: np.ndarray,
               dist: bool = True) -> tuple[float, np.ndarray | None]:
    """(sum of demand x hops, the hop distances, or None without `dist`) of the circuits (a[i], b[i]). All
    sources at once, level by level on boolean reach sets: within k hops of v = within k - 1 of v or of any
    neighbour of v, one gather of n x n booleans per neighbour slot (a 128-accelerator 4-port wiring: 0.7 ms
    where csgraph's BFS from every source took 3.9 ms, and the search makes one evaluation per move). A pair's
    distance is the count of levels it stayed unreached, added up as small integers (a pair never reached:
    inf, and the sum inf if it has demand); the sum is demand x those counts, the same bits as demand x the
    float distances (0.34 -> 0.16 ms on that wiring, where each level wrote its newly reached pairs)."""
    from synth.network import padded_neighbours
    nbr, _ = padded_neighbours(n, np.concatenate([a, b]), np.concatenate([b, a]))
    nbr = np.where(nbr >= 0, nbr, np.arange(n)[:, None])       # padding: the node itself (adds nothing)
    reach = np.eye(n, dtype=bool)
    count = np.zeros((n, n), np.uint8 if n < 255 else np.uint16)   # levels each pair stayed unreached
    cols = list(nbr.T)
    got = n
    while True:
        nxt = reach.copy()
        for col in cols:
            nxt |= reach[col]
        now = np.count_nonzero(nxt)
        if now == got:
            break
        count += ~reach
        reach, got = nxt, now
    whole = got == n * n
    d = None if not dist else count.astype(np.float64) if whole else np.where(reach, count, np.inf)
    if not whole and (demand[~reach] > 0).any():
        return float("inf"), d
    return float((demand * count).sum()), d


def rewired(wiring: Wiring, arr: np.ndarray) -> Wiring:
    """`wiring` with its circuits replaced by the rows of `arr` (switch, a, a_port, b, b_port)."""
    circuits = tuple(Circuit(int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4])) for r in arr)
    return Wiring(wiring.accelerators, wiring.ports_per_accelerator, circuits, wiring.layout)


def _movable(arr: np.ndarray, pinned: set | None) -> np.ndarray:
    """Rows of `arr` the search may move: all but the circuits of the `pinned` pairs (a < b)."""
    if not pinned:
        return np.ones(arr.shape[0], dtype=bool)
    lo, hi = np.minimum(arr[:, 1], arr[:, 3]), np.maximum(arr[:, 1], arr[:, 3])
    n = int(max(np.max(hi, initial=0), max(b for _, b in pinned))) + 1
    keys = np.array([a * n + b for a, b in pinned], dtype=np.int64)
    return ~np.isin(lo * n + hi, keys)


def improve_hops(wiring: Wiring, demand: np.ndarray, time_limit_s: float = 20.0, seed: int = 0,
                 progress: Callable[[str], None] | None = None,
                 max_moves: int | None = None, pinned: set | None = None,
                 target: float | None = None) -> tuple[Wiring, float, int, int]:
    """(better wiring, its hop-weighted bytes, moves tried, moves kept); stops at the time limit, after
    `max_moves` moves tried, or once the hop-weighted bytes are at most `target` (a bound met: no move can
    gain), whichever comes first; with neither a move budget nor a target (the hop count a proxy of the
    time), also when the moves stall (STALL_RATE). The circuits of `pinned` pairs are never moved."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    n = wiring.accelerators
    arr = wiring.circuit_array.copy()             # switch, a, a_port, b, b_port
    movable = _movable(arr, pinned)
    if arr.shape[0] < 2:
        return wiring, _hop_bytes(n, arr[:, 1], arr[:, 3], demand, dist=False)[0], 0, 0
    sym = demand + demand.T
    best, dist = _hop_bytes(n, arr[:, 1], arr[:, 3], sym)
    tried = kept = 0
    say_at = t0 + PROGRESS_S
    stall = (t0 + STALL_S, best) if max_moves is None and target is None else None    # (next check, best then)
    cum: np.ndarray | None = None
    while time.perf_counter() - t0 < time_limit_s and (max_moves is None or tried < max_moves):
        if target is not None and best / 2 <= target:
            break
        if stall is not None and time.perf_counter() >= stall[0]:
            if stall[1] - best < STALL_RATE * STALL_S * stall[1]:
                break
            stall = (stall[0] + STALL_S, best)
        tried += 1
        if cum is None:        # the pair weights change only with the distances, i.e. when a move is kept
            flat = (sym * np.where(np.isfinite(dist), dist - 1, n)).ravel()
            tot = flat.sum()
            cum = np.cumsum(flat)
        if tot <= 0:
            break
        k = int(np.searchsorted(cum, rng.random() * tot))
        u, v = divmod(min(k, flat.size - 1), n)
        if u == v:
            continue
        cu = np.flatnonzero(((arr[:, 1] == u) | (arr[:, 3] == u)) & movable)
        cv = np.flatnonzero(((arr[:, 1] == v) | (arr[:, 3] == v)) & movable)
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
            best, dist, cum = val, d2, None
        else:
            arr[e1], arr[e2] = old1, old2
        if progress and time.perf_counter() >= say_at:
            progress(f"local search: {tried} moves, {kept} kept, hop-bytes {best / 2:.6g}")
            say_at += PROGRESS_S
    if progress:
        progress(f"local search: done, {tried} moves, {kept} kept, hop-bytes {best / 2:.6g}")
    return rewired(wiring, arr), best / 2, tried, kept


class TwoHopCoverage:
    """Demand-weighted count of pairs within two hops, sum W[s, t] [d(s, t) <= 2], kept incrementally under
    circuit swaps. With C = A @ A, a symmetric change of A[p, q] by delta moves rows p, q and columns p, q
    of C by delta x the matching rows of A (plus delta^2 on the diagonal), so a swap (4 changes) updates
    C in O(N), and only the rows and columns of its 4 endpoints can change coverage."""

    def __init__(self, adjacency: np.ndarray, weight: np.ndarray):
        self.A = adjacency.astype(np.int64).copy()
        self.C = self.A @ self.A
        self.W = weight.astype(np.float64)
        np.fill_diagonal(self.W, 0.0)
        self.score = float((self.W * self._covered_all()).sum())

    def _covered_all(self) -> np.ndarray:
        return (self.A > 0) | (self.C > 0)

    def _change(self, p: int, q: int, delta: int) -> None:
        A, C = self.A, self.C
        colp, colq = A[:, p].copy(), A[:, q].copy()
        C[:, q] += delta * colp
        C[:, p] += delta * colq
        C[q, :] += delta * colp
        C[p, :] += delta * colq
        C[p, p] += delta * delta
        C[q, q] += delta * delta
        # the row and column updates above both touched (p, q) entries: C[p,q] got delta*A[p,p]... A has a
        # zero diagonal, so the cross terms are exact.
        A[p, q] += delta
        A[q, p] += delta

    def _part(self, rows: np.ndarray) -> float:
        cov_rows = (self.A[rows] > 0) | (self.C[rows] > 0)
        block = cov_rows[:, rows]
        return 2.0 * float((self.W[rows] * cov_rows).sum()) - float((self.W[np.ix_(rows, rows)] * block).sum())

    def swap_delta(self, u: int, x: int, v: int, y: int) -> float:
        """Apply (u, x), (v, y) -> (u, v), (x, y) and return the change of the score (undo with
        `undo(u, x, v, y)`)."""
        rows = np.unique(np.array([u, x, v, y]))
        before = self._part(rows)
        for p, q, d in ((u, x, -1), (v, y, -1), (u, v, 1), (x, y, 1)):
            self._change(p, q, d)
        delta = self._part(rows) - before
        self.score += delta
        return delta

    def undo(self, u: int, x: int, v: int, y: int, delta: float) -> None:
        for p, q, d in ((u, v, -1), (x, y, -1), (u, x, 1), (v, y, 1)):
            self._change(p, q, d)
        self.score -= delta


def improve_two_hop(wiring: Wiring, demand: np.ndarray, time_limit_s: float = 20.0, seed: int = 0,
                    progress: Callable[[str], None] | None = None,
                    max_moves: int | None = None, pinned: set | None = None,
                    until_covered: bool = False) -> tuple[Wiring, int, int]:
    """Swap local search inside switch planes maximizing demand-weighted two-hop coverage, evaluated
    incrementally (:class:`TwoHopCoverage`), until the time limit or `max_moves` moves tried (or, with
    `until_covered`, every byte within two hops); the circuits of `pinned` pairs are never moved. Returns
    (wiring, moves tried, moves kept)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    arr = wiring.circuit_array.copy()
    n = wiring.accelerators
    cov = TwoHopCoverage(wiring.adjacency(), demand + demand.T)
    movable = _movable(arr, pinned)
    by_switch = {int(s): np.flatnonzero((arr[:, 0] == s) & movable) for s in np.unique(arr[:, 0])}
    switches = [s for s, idx in by_switch.items() if idx.size >= 2]
    tried = kept = 0
    if not switches:
        return wiring, 0, 0
    say_at, total = t0 + PROGRESS_S, max(float(cov.W.sum()), 1e-300)
    while True:
        if tried % 256 == 0:
            now = time.perf_counter()
            if now - t0 > time_limit_s:
                break
            if progress and now >= say_at:
                progress(f"two-hop search: {tried} moves, {kept} kept, {100 * cov.score / total:.3f}% of the bytes "
                         "within two hops")
                say_at += PROGRESS_S
        if tried == max_moves or (until_covered and cov.score >= total * (1 - 1e-12)):
            break
        tried += 1
        s = switches[int(rng.integers(len(switches)))]
        e1, e2 = rng.choice(by_switch[s], 2, replace=False)
        r1, r2 = arr[e1], arr[e2]
        u, x, v, y = int(r1[1]), int(r1[3]), int(r2[1]), int(r2[3])
        if rng.random() < 0.5:                      # the other reconnection: (u, y), (v, x)
            v, y = y, v
            flip = True
        else:
            flip = False
        if len({u, x, v, y}) < 4:
            continue
        delta = cov.swap_delta(u, x, v, y)
        if delta >= 0:
            kept += int(delta > 0)
            # circuits: (u, x) and (v, y) become (u, v) and (x, y), each end keeping its port
            pu, px = (r1[2], r1[4])
            pv, py = (r2[4], r2[2]) if flip else (r2[2], r2[4])
            arr[e1] = [s, u, pu, v, pv]
            arr[e2] = [s, x, px, y, py]
        else:
            cov.undo(u, x, v, y, delta)
    if progress:
        progress(f"two-hop search: done, {tried} moves, {kept} kept, {100 * cov.score / total:.3f}% of the bytes "
                 "within two hops")
    return rewired(wiring, arr), tried, kept


def moves(start: Wiring, demand: np.ndarray, dense: bool, budget: float, seed: int = 0, cap: int | None = None,
          pinned: set | None = None, progress: Callable[[str], None] | None = None,
          target: float | None = None) -> tuple[Wiring, float, int, int]:
    """The search's moves from `start` for `budget` seconds (or `cap` moves), never moving the circuits of
    `pinned` pairs: on `dense` wirings (two hops can reach most pairs) demand-weighted two-hop coverage on 4/5
    of the clock (or of the moves; then either phase may use all the clock left), then the hop count; else the
    hop count alone. With a `target` (a bound on the hop-weighted bytes, the hops objective's) the moves stop
    once they meet it, and the two-hop phase once every byte is within two hops, its clock left to the hop
    count. (wiring, its hop-weighted bytes, moves tried, moves kept). On arrays and a wiring alone, so the
    helper process can run it (`synth.routing.Beside`)."""
    if not dense:
        return improve_hops(start, demand, budget, seed, progress, cap, pinned, target)
    t1 = time.perf_counter()
    w, tried, kept = improve_two_hop(start, demand, budget * (0.8 if cap is None else 1.0), seed, progress,
                                     None if cap is None else max(1, cap * 4 // 5), pinned, target is not None)
    left = budget * 0.2 if cap is None and target is None else budget - (time.perf_counter() - t1)
    w, hop_bytes, tried2, kept2 = improve_hops(w, demand, max(left, 0.0), seed, progress,
                                               None if cap is None else max(1, cap - tried), pinned, target)
    return w, hop_bytes, tried + tried2, kept + kept2


def moves_by(deadline: float, start: Wiring, demand: np.ndarray, dense: bool, seed: int, cap: int | None,
             pinned: set | None, target: float | None = None) -> tuple[Wiring, float, int, int]:
    """`moves` until the wall-clock `deadline` (`time.time()`: a helper process shares the wall clock, not the
    caller's perf_counter; a helper that had to start first gets less of the clock, not more)."""
    return moves(start, demand, dense, max(0.0, deadline - time.time()), seed, cap, pinned, None, target)
