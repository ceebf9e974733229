"""Load-aware local search: degree-preserving circuit swaps ranked by the routing's dual lengths and kept when
the routing LP says the step got faster.

The byte-hop search (`local_search`) optimizes a proxy: every link counts the same. Its answer routes 3-4%
above its own floor on dlrm128 at 4 ports, because the optimal routing loads some links harder than others.
The routing LP's capacity duals l (lengths on the links) say which: for any lengths, the time of a wiring is at
least sum_st D_st dist_l(s, t) / sum_e c_e l_e (the Japanese theorem), with equality at the optimal routing's
duals. A swap that takes two circuits (a, b), (c, d) off one switch and joins (a, c), (b, d) on the same
ports keeps every switch a matching. Each round:

1. ranks SAMPLES swaps by that ratio at the current wiring's lengths (a new pair gets the mean length of the
   two circuits it replaces, so the denominator stays put; one all-pairs Dijkstra per swap,
   scipy.sparse.csgraph);
2. tightens the ratio of the best TIGHTEN by a few multiplicative length updates (`tightened`: still a lower
   bound, and on dlrm128 one that orders the swaps as their routed times do, 1e-5 s below them, where the
   first ratio put most of them below the current wiring's time and most were slower) and drops those whose
   bound does not beat the answer;
3. routes the best two with the path LP (`synth.routing.path_lp_routing`), one in the helper process on the
   other core, the second with both swaps at once when they move different circuits, and keeps the faster
   if it beats the answer (else the next two); the kept wiring's duals rank the next round.

A swap is kept only on a routing's time, so the answer is never slower than the start by any routing found.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from synth.model import Wiring, circuit_adjacency
from synth.problem import WiringProblem
from synth.routing import Beside, path_lp_routing

from .local_search import PROGRESS_S, _movable, rewired

SAMPLES = 600        # swaps ranked per round by the ratio at the current lengths
TIGHTEN = 24         # of the best ranked, their ratio tightened by length updates (about 20 ms each)
TIGHTEN_ROUNDS = 8   # length updates per tightening
TIGHTEN_STEP = 0.5   # each: lengths x exp(step x the link's utilization / the largest)
TRIES = 4            # of the best tightened, routed two at a time (one on each core) until one is faster
ROUTE_S = 2.0        # the path LP's least clock per wiring (dlrm128 at 4 ports: 1.6 s, within 2e-5 of the optimum)


def _route(problem: WiringProblem, w: Wiring, clock: float) -> tuple[float, str, np.ndarray]:
    """(time, routing, lengths: n x n, directed, 0 off the links) of wiring `w` by the path LP; inf where a
    demand has no path (two swaps routed at once can cut the wiring in two where each alone did not)."""
    n = problem.accelerators
    net = problem.network(w)
    if net.unserved(problem.traffic.bytes_).any():
        return float("inf"), "disconnected", np.zeros((n, n))
    out: list = []
    theta, how = path_lp_routing(net, problem.traffic.bytes_, time_limit_s=clock, lengths_out=out)
    length = np.zeros((n, n))
    if out:
        length[net.src, net.dst] = out[0]
    return float(theta), how, length


def dual_ratio(count: np.ndarray, length: np.ndarray, demand: np.ndarray, bandwidth: float) -> float:
    """sum_st demand x dist(s, t) / sum_e capacity_e x length_e (s): a lower bound on the time of any routing on
    the circuits `count` (n x n, symmetric) for any `length` >= 0 (directed, on the links), the time itself at the
    optimal routing's capacity duals; inf when some demand has no path."""
    src, dst = np.nonzero(count > 0)
    ln = length[src, dst]
    # csgraph drops zero lengths: a tiny floor keeps every link
    g = sp.csr_matrix((np.maximum(ln, 1e-12 * max(float(ln.max(initial=0.0)), 1e-300)), (src, dst)),
                      shape=count.shape)
    dist = dijkstra(g, directed=True)
    den = float((count[src, dst] * ln).sum()) * bandwidth
    return float((demand * dist).sum()) / den if den > 0 else float("inf")


def tightened(count: np.ndarray, length: np.ndarray, demand: np.ndarray, bandwidth: float,
              rounds: int = TIGHTEN_ROUNDS) -> float:
    """The largest `dual_ratio` over `rounds` multiplicative updates of `length` (the step of Garg and
    Koenemann's max-concurrent-flow: route every demand on its shortest path, lengthen each link by its
    utilization), a lower bound on the time of any routing that the carried lengths alone leave loose (dlrm128
    at 4 ports: the ranked swaps' routed times run 1e-5 s above it and in its order, where the carried lengths'
    ratio put them 0.2% below the wiring they came from and most were slower)."""
    n = count.shape[0]
    src, dst = np.nonzero(count > 0)
    cap = count[src, dst] * bandwidth
    ln = length[src, dst].astype(np.float64)
    ln = np.maximum(ln, 1e-9 * max(float(ln.max(initial=0.0)), 1e-300))
    link = np.full((n, n), -1, dtype=np.int64)
    link[src, dst] = np.arange(src.size)
    rows = np.arange(n)
    best = 0.0
    for _ in range(rounds):
        dist, pred = dijkstra(sp.csr_matrix((ln, (src, dst)), shape=(n, n)), directed=True,
                              return_predecessors=True)
        ratio = float((demand * dist).sum()) / float((cap * ln).sum())
        if not np.isfinite(ratio):
            return float("inf")
        best = max(best, ratio)
        # each source's shortest-path tree, farthest node first: a node's bytes pass on to its predecessor
        order = np.argsort(dist, axis=1)
        acc = demand.astype(np.float64)
        for k in range(n - 1, 0, -1):
            v = order[:, k]
            acc[rows, pred[rows, v]] += acc[rows, v]
        s_, v_ = np.nonzero(pred >= 0)
        util = np.bincount(link[pred[s_, v_], v_], weights=acc[s_, v_], minlength=src.size) / cap
        ln = ln * np.exp(TIGHTEN_STEP * util / max(float(util.max()), 1e-300))
    return best


def _carried(arr: np.ndarray, length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(circuits per pair, lengths) of the circuits `arr`: a pair's length as it was, a new pair's the median
    link length."""
    count = circuit_adjacency(length.shape[0], arr)
    fresh = (count > 0) & (length == 0)
    out = length.copy()
    out[fresh] = float(np.median(length[length > 0])) if (length > 0).any() else 1.0
    return count, out


def _ranked(n: int, count: np.ndarray, length: np.ndarray, demand: np.ndarray, bandwidth: float, arr: np.ndarray,
            movable: np.ndarray, rng: np.random.Generator, samples: int,
            until: float) -> list[tuple[float, np.ndarray]]:
    """(`dual_ratio`, circuits) of up to `samples` swaps, best first, drawn until time.perf_counter() passes
    `until`; `count` the circuits per pair (symmetric), `length` the lengths (directed)."""
    rows = np.flatnonzero(movable)
    by_switch: dict[int, np.ndarray] = {}
    for sw in np.unique(arr[rows, 0]):
        on = rows[arr[rows, 0] == sw]
        if on.size >= 2:
            by_switch[int(sw)] = on
    if not by_switch:
        return []
    switches = np.array(sorted(by_switch))
    weights = np.array([by_switch[s].size for s in switches], dtype=np.float64)
    weights /= weights.sum()
    out = []
    for _ in range(samples):
        if time.perf_counter() > until:
            break
        on = by_switch[int(rng.choice(switches, p=weights))]
        i, k = rng.choice(on, 2, replace=False)
        a, b, c, d = int(arr[i, 1]), int(arr[i, 3]), int(arr[k, 1]), int(arr[k, 3])
        if rng.random() < 0.5:           # (a, b), (c, d) -> (a, c), (b, d), else (a, d), (b, c)
            c, d = d, c
            swapped = True
        else:
            swapped = False
        if a == c or b == d or {a, b} == {c, d}:
            continue
        mean = (length[a, b] + length[b, a] + length[c, d] + length[d, c]) / 4
        cnt = count.copy()
        cnt[a, b] -= 1; cnt[b, a] -= 1; cnt[c, d] -= 1; cnt[d, c] -= 1   # noqa: E702
        ln = length.copy()
        for p, q in ((a, c), (b, d)):
            if cnt[p, q] == 0:
                ln[p, q] = ln[q, p] = mean
            cnt[p, q] += 1
            cnt[q, p] += 1
        ratio = dual_ratio(cnt, ln, demand, bandwidth)
        if not np.isfinite(ratio):
            continue
        new = arr.copy()
        if swapped:       # a joins d's port, c keeps its own and takes b's
            new[i, 3:5], new[k, 3:5] = arr[k, 3:5], arr[i, 3:5]
        else:             # a joins c's port, d keeps its own and takes b's
            new[i, 3:5], new[k, 1:3] = arr[k, 1:3], arr[i, 3:5]
        out.append((ratio, new))
    out.sort(key=lambda r: r[0])
    return out


def improve_load(problem: WiringProblem, wiring: Wiring, time_s: float, deadline: float, seed: int = 0,
                 pinned: set | None = None, progress: Callable[[str], None] | None = None
                 ) -> tuple[Wiring, float, str, int, int, bool]:
    """(wiring, its time, routing, swaps routed, swaps kept, interrupted) after swaps kept while the path LP
    finds them faster, until `deadline` (time.perf_counter()); `time_s` is `wiring`'s known time (the routing
    is "" when no routing here beat it). The circuits of `pinned` pairs never move. A Ctrl-C returns what was
    kept so far."""
    n = problem.accelerators
    demand = problem.traffic.bytes_
    rng = np.random.default_rng(seed)
    arr = wiring.circuit_array.copy()
    movable = _movable(arr, pinned)
    best_w, best_t, best_how = wiring, time_s, ""
    routed = kept = 0
    cut = False
    last_say = time.perf_counter()
    try:
        if deadline - time.perf_counter() < 3 * ROUTE_S:
            return best_w, best_t, best_how, 0, 0, False
        # the answer's own routing: its duals rank the first round; where the path LP does not run within the
        # clock (96 accelerators x 18 ports at 2 s), again on twice the clock, which each routing then gets
        clock = ROUTE_S
        while True:
            theta, how, length = _route(problem, wiring, clock)
            if theta < best_t:
                best_t, best_how = theta, how
            if length.any():
                break
            clock *= 2
            if deadline - time.perf_counter() < 3 * clock:
                return best_w, best_t, best_how, 0, 0, False
        count = wiring.adjacency()
        while deadline - time.perf_counter() >= clock:
            # the ranking stops where one routing's clock is left (600 Dijkstras: 0.9 s on 128 accelerators)
            ranked = _ranked(n, count, length, demand, problem.port_bytes_per_s, arr, movable, rng, SAMPLES,
                             deadline - clock)
            if not ranked and time.perf_counter() < deadline - clock:
                break                       # no swap to draw (every circuit pinned, or one per switch)
            cands = []
            for _, new in ranked[:TIGHTEN]:
                if time.perf_counter() > deadline - clock:
                    break
                bound = tightened(*_carried(new, length), demand, problem.port_bytes_per_s)
                if bound < best_t:          # else no routing of it beats the answer
                    cands.append((bound, new))
            cands = sorted(cands, key=lambda c: c[0])[:TRIES]
            while cands and deadline - time.perf_counter() >= clock:
                # the next two, one routed in the helper process on the other core while this one routes the first;
                # the second is both swaps at once where they move different circuits (two kept in one round)
                arrs = [c[1] for c in cands[:2]]
                swaps = [1, 1]
                if len(arrs) == 2:
                    moved = [np.flatnonzero((a != arr).any(axis=1)) for a in arrs]
                    if not np.intersect1d(*moved).size:
                        both = arrs[0].copy()
                        both[moved[1]] = arrs[1][moved[1]]
                        arrs[1], swaps[1] = both, 2
                del cands[:2]
                two = [rewired(wiring, a) for a in arrs]
                helper = Beside.start(_route, problem, two[1], clock) if len(two) == 2 else None
                try:
                    got = [_route(problem, two[0], clock)]
                    other = helper.result() if helper is not None else None
                    if other is None and len(two) == 2 and deadline - time.perf_counter() >= clock:
                        other = _route(problem, two[1], clock)     # one core, or the helper failed
                except KeyboardInterrupt:
                    if helper is not None:
                        helper.cancel()
                    raise
                got += [other] if other is not None else []
                routed += len(got)
                j = min(range(len(got)), key=lambda i: got[i][0])
                t_new, how_new, len_new = got[j]
                if t_new < best_t * (1 - 1e-9) and len_new.any():
                    arr, length = arrs[j], len_new
                    best_w, best_t, best_how = two[j], t_new, how_new
                    count = best_w.adjacency()
                    kept += swaps[j]
                    break
            if progress and time.perf_counter() - last_say >= PROGRESS_S:
                progress(f"load-aware swaps: {routed} routed, {kept} kept, {best_t:.6g} s")
                last_say = time.perf_counter()
    except KeyboardInterrupt:
        cut = True
    return best_w, best_t, best_how, routed, kept, cut
