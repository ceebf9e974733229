"""Lower bounds on the wiring objectives; every solver reports the best of these beside its answer.

- injection (time): an accelerator sends at most (its OCS ports x B) per second: max over rows and columns
  of bytes / (ports x B).
- Moore (time and hops): with at most d circuits per accelerator, at most d (D-1)^(h-1) accelerators sit
  h hops from any source (D = the largest degree). Sorting a row's demands in decreasing order against those
  levels gives the fewest byte-hops that row can cost; the sum over rows (or over columns, whichever is
  larger) bounds the hop objective, and divided by the total directed circuit capacity (sum of ports x B)
  it bounds the time: every byte-hop occupies one directed circuit for 1/B seconds. Counted level by level
  (`level_hop_bytes`: byte-hops = sum over k of the bytes farther than k hops) it is sharper: at each level
  the rows' or the columns' count, whichever leaves more bytes farther, and the heaviest graph whose
  degrees are the Moore counts within k hops (a b-matching LP's dual, `bmatching_bytes`; at one hop the
  adjacency graph within the ports, `adjacent_bytes`), which sees that every row cannot have the same hot
  accelerators near it (deepseek-v3-72: 0.5% -> the best wiring's time, so it is optimal; kimi-k2-288 +0.5%,
  deepseek-v3-pd-96 +1.1%; DLRM on 4 ports, at two and three hops: +11%). For time it is
  sharpened by where the relays can happen: a byte relayed by accelerator v takes one of v's incoming and
  one of its outgoing circuits, which also carry v's own bytes in and out, so v relays at most
  ports_v B T - max(out_v, in_v). Summed, (byte-hops - bytes) <= sum_v ports_v B T - sum_v max(out_v, in_v):
  the circuits' capacity must cover the byte-hops plus `node_excess` = sum_v max(0, in_v - out_v), the
  capacity an accelerator that receives more than it sends cannot lend to relays (kimi-k2-288: +2.9%).
- relay split (time, `relay_split_bound`): for any set I of accelerators (tried: the lightest ones), bytes
  inside the rest A cross one A-A circuit only between adjacent pairs, else two or a visit to I, whose A-I
  circuits carry K B T each way and take K ports from A's direct circuits; the least T over K. Counted at
  A's accelerators too, their circuits out (and in) carry all of that within P_A B T less A's node excess.
- LP relaxation (time, small instances): fractional circuits (the degree budget kept, and where the switches
  bind each accelerator's ports per switch and each switch's radix) and fractional multi-commodity routing;
  max concurrent throughput by HiGHS. Relaxes the MILP, so bounds it. Each switch is a matching, which the
  degrees alone do not say of fractional circuits (three half circuits make a triangle of 1.5 on one
  switch): where the switches bind, the odd-set rows on triples of each switch (`switch_triples`) add part
  of Edmonds' description (llama405b-tp8pp4-32 on spread 8-port OCSes: 0.0127358 -> 0.0128961 s).
- relay count (time): circuits are whole. In a step of T seconds a pair with x circuits sends at most x B T
  of its bytes straight; the rest crosses at least two circuits. So every wiring that finishes in T needs
  sum of bytes + sum over directed pairs of max(0, bytes - x B T) <= 2 B T x (circuits), with x integer,
  at most the budget's circuits in all, and inside each demand cluster (`demand_clusters`) at most
  floor((its ports - circuits its crossing bytes need) / 2) and what the switches' matchings hold inside it
  (`matching_cap`); the relays need node_excess as well (above). The fewest relayed bytes for a given T is a
  greedy over the circuits' marginal savings (concave per pair; the cluster caps are laminar, so the greedy
  is exact); the bound is the largest T that fails, by bisection. The LP relaxation misses it because a
  fractional 2.57 circuits carries 2.57 circuits' worth straight (llama405b-tp8pp2-16: LP 2.57 ms, this
  2.764 ms, what the MILP's dual bound reaches after 30 minutes). With the direct policy nothing relays:
  each pair needs ceil(bytes / (B T)) circuits, counted per accelerator too.
"""
from __future__ import annotations

import time
import weakref
from typing import Any

import numpy as np
import scipy.sparse as sp

from synth.model import OCSLayout
from synth.problem import WiringProblem


class ProblemCache:
    """Values computed once per problem object (identity, not equality), for the last `size` problems. Not a
    weakref.WeakKeyDictionary: its removal callbacks run inside garbage collection, where a Ctrl-C is reported
    and dropped ("Exception ignored in ... remove"), so a solve could miss its interrupt (seen once in
    test_ctrl_c_stops_a_long_solve_promptly). A plain weak reference has no callback; a reused id is caught
    by checking that the reference still points at the same object."""

    def __init__(self, size: int = 32) -> None:
        self.size = size
        self._data: dict[int, tuple[weakref.ref, Any]] = {}

    def __contains__(self, problem: object) -> bool:
        ref, _ = self._data.get(id(problem), (None, None))
        return ref is not None and ref() is problem

    def __getitem__(self, problem: object) -> Any:
        if problem not in self:
            raise KeyError(problem)
        return self._data[id(problem)][1]

    def __setitem__(self, problem: object, value: Any) -> None:
        self._data.pop(id(problem), None)
        self._data[id(problem)] = (weakref.ref(problem), value)
        while len(self._data) > self.size:
            del self._data[next(iter(self._data))]

    def setdefault(self, problem: object, value: Any) -> Any:
        if problem not in self:
            self[problem] = value
        return self[problem]


LP_BOUND_MAX = 40
CLUSTER_THRESHOLDS = 32   # distinct demand levels the clusters are taken at (a subset keeps the bound valid)


def injection_bound(problem: WiringProblem) -> float:
    t = problem.traffic.bytes_
    if problem.objective == "hops":
        return float(t.sum())
    ports = problem.layout.capacity.sum(axis=1).astype(np.float64)
    with np.errstate(divide="ignore"):
        rows = np.where(t.sum(axis=1) > 0, t.sum(axis=1) / (ports * problem.port_bytes_per_s), 0.0)
        cols = np.where(t.sum(axis=0) > 0, t.sum(axis=0) / (ports * problem.port_bytes_per_s), 0.0)
    return float(max(rows.max(), cols.max()))


def moore_levels(degree: int, max_degree: int, count: int) -> np.ndarray:
    """Hop distance of the k-th nearest of `count` other nodes in the best case (Moore levels).

    >>> moore_levels(3, 3, 10).tolist()
    [1, 1, 1, 2, 2, 2, 2, 2, 2, 3]
    """
    out = np.empty(count, dtype=np.int64)
    filled, h, level = 0, 1, degree
    while filled < count:
        take = min(level, count - filled)
        out[filled:filled + take] = h
        filled += take
        h += 1
        level = max(level * max(max_degree - 1, 1), 1)
    return out


def moore_hop_bytes(problem: WiringProblem) -> float:
    """The fewest byte-hops any wiring within the port budget can give (see the module doc)."""
    t = problem.traffic.bytes_
    ports = problem.layout.capacity.sum(axis=1)
    dmax = int(ports.max())
    best = 0.0
    for mat in (t, t.T):
        total = 0.0
        srt = -np.sort(-mat, axis=1)
        for deg in np.unique(ports):
            rows = np.flatnonzero(ports == deg)
            lv = moore_levels(int(deg), dmax, t.shape[0] - 1)
            total += float((srt[rows, : t.shape[0] - 1] * lv).sum())
        best = max(best, total)
    return best


def moore_hop_bytes_by_neighbours(problem: WiringProblem) -> np.ndarray:
    """hb[K], K = 0 .. sum of ports: the fewest byte-hops of any wiring whose accelerators have K distinct
    neighbours in all (inf where K cannot give every accelerator with demand one). Accelerator v with k_v
    distinct neighbours reaches at most k_v (D - 1)^(h - 1) others in h hops, so its row costs at least
    g_v(k_v) byte-hops (its sorted demands against those levels, as in `moore_hop_bytes`), and g_v is convex
    in k_v (each level's tail sum is convex in where it starts), so the greedy over the neighbours' marginal
    savings is exact. Rows or columns, whichever needs more, per K."""
    t = problem.traffic.bytes_
    n = problem.accelerators
    ports = problem.layout.capacity.sum(axis=1)
    dmax = int(ports.max())
    kmax = min(dmax, n - 1)
    cap_v = np.minimum(ports, n - 1)
    levels = np.stack([moore_levels(k, dmax, n - 1) for k in range(1, kmax + 1)]).astype(np.float64)
    out = np.zeros(int(cap_v.sum()) + 1)
    for mat in (t, t.T):
        srt = -np.sort(-mat, axis=1)[:, : n - 1]
        g = srt @ levels.T                                   # g[v, k - 1]: row v with k distinct neighbours
        need = srt[:, 0] > 0 if n > 1 else np.zeros(n, dtype=bool)
        if (need & (cap_v < 1)).any():
            return np.full(out.size, np.inf)
        delta = g[:, :-1] - g[:, 1:]                         # saving of the (k + 1)-th neighbour over the k-th
        delta = delta[np.arange(kmax - 1)[None, :] < (cap_v - 1)[:, None]]
        saved = np.concatenate([[0.0], np.cumsum(np.sort(delta)[::-1])])
        first = int(need.sum())
        hb = np.full(out.size, np.inf)
        K = np.arange(first, out.size)
        hb[first:] = float(g[need, 0].sum()) - saved[np.minimum(K - first, saved.size - 1)]
        out = np.maximum(out, hb)
    return out


def node_excess(t: np.ndarray) -> float:
    """sum over accelerators of max(0, bytes in - bytes out): relay capacity no wiring can use (module doc)."""
    return float(np.maximum(t.sum(axis=0) - t.sum(axis=1), 0.0).sum())


def level_hop_bytes(problem: WiringProblem) -> float:
    """The fewest byte-hops any wiring within the port budget can give, level by level: byte-hops =
    sum over k >= 0 of (all bytes - the bytes within k hops), and the bytes within k hops are at most the sum
    of every row's largest entries over the Moore count of nodes within k hops, and at most the same by
    columns (hops are symmetric: circuits are duplex), whichever is less at each k; and at most the heaviest
    simple graph whose degrees are those Moore counts (`bmatching_bytes`: "within k hops" is a symmetric
    relation, and accelerator v has at most M_k(v) others within k hops). Never below `moore_hop_bytes`
    (rows or columns for all levels at once); above it where the rows' and columns' nearest levels are tight
    on different sides, or where every row wants the same few accelerators near it (skewed expert load at
    one hop: kimi-k2-288 +0.54%, deepseek-v3-pd-96 +1.15%, deepseek-v3-144 +2.7%; DLRM's model-parallel
    transfers at two and three hops with 4 ports: +11%). The b-matchings are one LP re-solved level by level,
    on one clock of ADJACENT_LP_S."""
    if problem in _LEVELS_CACHE:
        return _LEVELS_CACHE[problem]
    t = problem.traffic.bytes_
    n = t.shape[0]
    ports = problem.layout.capacity.sum(axis=1)
    dmax = int(ports.max())
    total = float(t.sum())
    lvs = {int(deg): moore_levels(int(deg), dmax, n - 1) for deg in np.unique(ports)}
    ks = np.arange(1, max(int(lv.max(initial=0)) for lv in lvs.values()) + 1)
    counts = {deg: np.searchsorted(lv, ks, side="right") for deg, lv in lvs.items()}   # others within k hops
    reach = np.zeros((n, ks.size), dtype=np.int64)
    for deg, c in counts.items():
        reach[ports == deg] = c
    within = []
    for mat in (t, t.T):
        cum = np.cumsum(-np.sort(-mat, axis=1)[:, : n - 1], axis=1)
        w = np.zeros(ks.size)
        for deg, c in counts.items():    # each row's largest entries over its counts (all past its last level)
            w += cum[np.ix_(np.flatnonzero(ports == deg), c - 1)].sum(axis=0)
        within.append(w)
    bound = np.minimum(*within)
    levels = [i for i in range(ks.size) if bound[i] < total and (reach[:, i] < n - 1).any()]
    for i, cap in zip(levels, bmatching_bytes(problem, [reach[:, i].astype(np.float64) for i in levels])):
        bound[i] = min(bound[i], cap)
    _LEVELS_CACHE[problem] = out = total + float((total - bound).sum())
    return out


SPLIT_SETS = 64          # candidate relay sets I for `relay_split_bound` (the lightest j accelerators), at most
SPLIT_WORK = 2e8         # matrix entries all sets may pass over (each one two partitions): 64 sets to 1,768
                         # accelerators, 11 at 4,096 (576: 0.03 s)
_SPLIT_CACHE = ProblemCache()


def relay_split_bound(problem: WiringProblem) -> float:
    """Time bound from splitting the accelerators into a set A and the rest I (any split is valid; tried:
    I = the j accelerators with the fewest bytes in and out, for the distinct levels of those bytes, and I
    empty). Let K be the circuits between A and I. A byte between two accelerators of A arrives over a
    circuit between them (direct: at most the bytes of each row's p_v - k_v heaviest A-entries, k_v being
    v's circuits into I, and at most the same by columns), or crosses at least two A-A circuits, or visits
    I, which takes an A->I crossing; bytes from A to I take one too. The A-A circuits carry at most
    (P_A - K) B T, the A->I ones K B T, so with S the bytes inside A, m the larger of A->I and I->A bytes and
    L1 the direct bytes:

        2 S - L1(k) - 2 (K B T - m) <= (P_A - K) B T,   i.e.   B T >= (2 S - L1(k) + 2 m) / (P_A + K),

    and K B T >= m. L1 is largest, for a given K, when the K ports go where they cost the least direct bytes
    (each accelerator's losses rise port by port: a greedy over all of them is exact), so the bound is the
    least over K <= min(P_A, P_I) of the larger of both. With I empty it is the two-hop relay bound; with
    idle accelerators in I it sees that a port spent on a relay is a port not spent on a direct circuit
    (deepseek-v3-pd-96, 24 prefill accelerators beside a 72-way decode group: +1.4% over the level count).

    Counted at A's accelerators instead of on the A-A circuits: their circuits out carry the bytes inside A
    (2 S - L1 - 2 R, R being the bytes relayed through I), A's bytes to I (m_out) and the R relays' crossings
    to I, within P_A B T less E_A = sum over A of max(0, bytes in - bytes out), which those accelerators
    cannot lend to relays (the node excess of the module doc); on their circuits in, the same with I's bytes
    to A (m_in) and E'_A = sum over A of max(0, bytes out - bytes in). With R <= K B T - m:

        B T >= (2 S - L1(k) + m + max(m_out + E_A, m_in + E'_A)) / (P_A + K),

    and the larger of both forms holds (deepseek-v3-pd-96, whose decode accelerators receive more than they
    send: +0.47%, gap 2.70% -> 2.23%).

    >>> import numpy as np
    >>> from synth.model import OCSLayout, TrafficMatrix
    >>> t = np.zeros((6, 6)); t[:4, :4] = 1e6; np.fill_diagonal(t, 0)      # K4 demand, two idle relays
    >>> p = WiringProblem(TrafficMatrix(t), OCSLayout.uniform(6, 2), 800.0)
    >>> round(relay_split_bound(p) * 1e5, 6)   # x 1e-5 s; injection 1.5, Moore 1.33, the MILP's optimum 2.0
    1.666667
    """
    if problem.objective != "time":
        return 0.0
    if problem not in _SPLIT_CACHE:
        _SPLIT_CACHE[problem] = _relay_split(problem)
    return _SPLIT_CACHE[problem]


def _relay_split(problem: WiringProblem) -> float:
    t = problem.traffic.bytes_.astype(np.float64)
    n = t.shape[0]
    ports = problem.layout.capacity.sum(axis=1).astype(np.int64)
    load = t.sum(axis=0) + t.sum(axis=1)
    order = np.argsort(load, kind="stable")
    steps = np.flatnonzero(np.diff(load[order]) > 0) + 1        # I = order[:j] ends between two levels
    steps = steps[steps <= n - 2]
    sets = int(min(SPLIT_SETS, SPLIT_WORK // (n * n)))
    if sets < 1:
        return 0.0
    if steps.size > sets - 1:
        steps = steps[np.linspace(0, steps.size - 1, sets - 1).round().astype(int)] if sets > 1 else steps[:0]
    surplus_in = np.maximum(t.sum(axis=0) - t.sum(axis=1), 0.0)     # each accelerator's node excess, each way
    surplus_out = np.maximum(t.sum(axis=1) - t.sum(axis=0), 0.0)
    best = 0.0
    for j in np.concatenate([[0], steps]).astype(int):
        I, A = order[:j], order[j:]
        tAA = t[np.ix_(A, A)]
        out_i, in_i = (float(t[np.ix_(A, I)].sum()), float(t[np.ix_(I, A)].sum())) if j else (0.0, 0.0)
        m = max(out_i, in_i)
        # the A side's node excess (module doc), each way: A's circuits out carry A's bytes to I, the relays'
        # A -> I crossings and the bytes inside A, within P_A B T less what A's accelerators cannot relay
        lent = max(out_i + float(surplus_in[A].sum()), in_i + float(surplus_out[A].sum()))
        pa, PI = ports[A], int(ports[I].sum())
        PA = int(pa.sum())
        K = np.arange(min(PA, PI) + 1)
        direct, k = [], int(min(pa.max(), A.size))
        for mat in (tAA, tAA.T):
            top = -np.sort(np.partition(-mat, k - 1, axis=1)[:, :k], axis=1)   # each row's k largest, desc
            keep = top[np.arange(k)[None, :] < pa[:, None]]
            losses = np.sort(np.concatenate([keep, np.zeros(PA - keep.size)]))  # a port beyond the row: free
            direct.append(keep.sum() - np.concatenate([[0.0], np.cumsum(losses)])[K])
        L1 = np.minimum(*direct)
        with np.errstate(divide="ignore", invalid="ignore"):
            need = np.maximum((2 * tAA.sum() - L1 + m + max(m, lent)) / (PA + K),
                              np.where(K > 0, m / np.maximum(K, 1), np.inf if m > 0 else 0.0))
        best = max(best, float(need.min()) / problem.port_bytes_per_s)
    return best * (1 - 1e-9)


ADJACENT_LP_MAX_PAIRS = 400_000   # accelerator pairs with demand above which `adjacent_bytes` is not solved
ADJACENT_LP_S = 10.0              # its LP's time limit (kimi-k2-288: 0.8 s; 576 skewed accelerators: ~5 s)


def adjacent_bytes(problem: WiringProblem) -> float:
    """At most how many bytes can travel between adjacent accelerators (one hop): the adjacency graph is
    simple with each accelerator's degree within its ports (`bmatching_bytes` with those degrees).

    >>> import numpy as np
    >>> from synth.model import OCSLayout, TrafficMatrix
    >>> t = np.zeros((4, 4)); t[1:, 0] = 1.0         # three send to accelerator 0, which has one port
    >>> lay = OCSLayout(np.array([[0, -1], [0, 1], [0, 1], [1, 0]]), (4, 4))
    >>> round(adjacent_bytes(WiringProblem(TrafficMatrix(t), lay, 800.0)), 9)
    1.0
    """
    n = problem.accelerators
    return bmatching_bytes(problem, [np.minimum(problem.layout.capacity.sum(axis=1), n - 1).astype(np.float64)])[0]


def bmatching_bytes(problem: WiringProblem, degrees: list[np.ndarray],
                    time_limit_s: float = ADJACENT_LP_S) -> list[float]:
    """For each degree vector d: at most how many bytes (t_uv + t_vu per pair) a simple graph with
    accelerator v's degree at most d[v] can hold: the heaviest b-matching, whose LP relaxation (0 <= x <= 1)
    bounds it above. The value used is the objective of the LP's dual made feasible (accelerator prices
    y >= 0, each pair's excess max(0, w - y_u - y_v)), an upper bound whatever the LP's accuracy. One HiGHS
    model, its row bounds changed from one vector to the next and re-solved from the last basis (dual simplex
    keeps it dual feasible: 600 accelerators, five levels, 6.8 s where separate solves took 11.6 s). inf (no
    bound) when every pair carries the same bytes (any regular wiring reaches the rows' bound), above
    ADJACENT_LP_MAX_PAIRS pairs, and for the vectors not solved within `time_limit_s` in all."""
    import highspy
    from solvers.highs import threads
    from synth.formats import quiet_stdout
    t0 = time.perf_counter()
    t = problem.traffic.bytes_
    out = [float("inf")] * len(degrees)
    off = t[~np.eye(t.shape[0], dtype=bool)]
    w = np.triu(t + t.T, 1)
    i, j = np.nonzero(w)
    if off.size == 0 or np.ptp(off) == 0 or i.size > ADJACENT_LP_MAX_PAIRS or not degrees:
        return out
    n = t.shape[0]
    scale = float(w[i, j].max())
    c = w[i, j] / scale
    with quiet_stdout():          # HiGHS prints its banner at the first model
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", threads(1))
    inf = highspy.kHighsInf
    h.addCols(i.size, -c, np.zeros(i.size), np.ones(i.size), 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
              np.zeros(0))
    a = sp.csr_matrix((np.ones(2 * i.size), (np.concatenate([i, j]), np.tile(np.arange(i.size), 2))),
                      shape=(n, i.size))
    rows = np.arange(n, dtype=np.int32)
    degrees = [np.asarray(deg, dtype=np.float64) for deg in degrees]
    h.addRows(n, np.full(n, -inf), degrees[0], a.nnz, a.indptr[:-1].astype(np.int32), a.indices.astype(np.int32),
              a.data)
    for k, deg in enumerate(degrees):
        left = time_limit_s - (time.perf_counter() - t0)
        if left <= 0:
            break
        if k:
            h.changeRowsBounds(n, rows, np.full(n, -inf), deg)
        h.setOptionValue("time_limit", h.getRunTime() + max(left, 0.1))    # HiGHS's clock runs on over runs
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            break
        y = np.maximum(-np.asarray(h.getSolution().row_dual), 0.0)
        excess = np.maximum(c - y[i] - y[j], 0.0)
        out[k] = float(deg @ y + excess.sum()) * scale
    return out


def moore_bound(problem: WiringProblem) -> float:
    hb = level_hop_bytes(problem)
    if problem.objective == "hops":
        return hb
    cap = problem.layout.capacity.sum() * problem.port_bytes_per_s
    return (hb + node_excess(problem.traffic.bytes_)) / cap


def demand_levels(t: np.ndarray, max_levels: int | None = None) -> np.ndarray:
    """The distinct positive demand values, ascending; with `max_levels`, at most that many spread over them."""
    levels = np.unique(t[t > 0])
    if max_levels is not None and levels.size > max_levels:
        levels = levels[np.unique(np.linspace(0, levels.size - 1, max_levels).round().astype(np.int64))]
    return levels


def demand_clusters(t: np.ndarray, max_levels: int | None = None):
    """The accelerator sets the demand clusters into, as (member mask, crossing bytes): weak components of
    the demand at or above each of its distinct values (e.g. the tensor-parallel groups), neither single
    accelerators nor all of them; crossing = the larger of the bytes leaving and entering the set. With
    `max_levels`, only that many levels (spread over the distinct values) are tried. The sets are laminar:
    a component at a higher level lies inside one at a lower level."""
    from scipy.sparse.csgraph import connected_components
    n = t.shape[0]
    seen: set[bytes] = set()
    for th in demand_levels(t, max_levels):
        k, lab = connected_components(sp.csr_matrix(t >= th), directed=True, connection="weak")
        sizes = np.bincount(lab, minlength=k)
        for c in np.flatnonzero((sizes >= 2) & (sizes < n)):
            inside = lab == c
            key = np.packbits(inside).tobytes()
            if key in seen:
                continue
            seen.add(key)
            crossing = float(max(t[np.ix_(inside, ~inside)].sum(), t[np.ix_(~inside, inside)].sum()))
            if crossing > 0:
                yield inside, crossing


def max_circuits(problem: WiringProblem) -> int:
    """Circuits the budget can hold: half the ports, and on each switch half of min(radix, its ports)."""
    cap = problem.layout.capacity
    radix = np.asarray(problem.layout.switch_radix, dtype=np.int64)
    return int(min(cap.sum() // 2, (np.minimum(radix, cap.sum(axis=0)) // 2).sum()))


SWITCH_TRIPLES_MAX = 10000  # the LP relaxation's odd-set rows on triples of each switch's accelerators, when
                            # they come to at most this many (20,160 on 32 accelerators' 16-port OCSes: 1.2 -> 5 s)


def matching_cap(b: np.ndarray, radix) -> np.ndarray:
    """Most circuits the switches hold inside a set of accelerators with b[..., s] ports on switch s: each
    switch is a matching, so at most floor(b_s / 2) of them on s, and radix_s / 2 (Edmonds' odd-set rows,
    summed over the switches). The degree budget allows sum b_s / 2: half a circuit more per switch where b_s
    is odd, which a fractional wiring (or the MILP's degree relaxation, before its colouring) takes."""
    radix = np.asarray(radix, dtype=np.int64)
    return (np.minimum(b // 2, radix // 2) * (radix >= 2)).sum(axis=-1)


def switch_triples(layout: OCSLayout, s: int) -> tuple[np.ndarray, np.ndarray]:
    """(triples, caps) of the accelerators on switch s whose ports there are odd in sum (each cap
    floor(that / 2), within radix / 2): the odd-set rows of one switch's matching, in its circuits."""
    cap, radix = layout.capacity[:, s], int(layout.switch_radix[s])
    on = np.flatnonzero(cap > 0)
    if on.size < 3 or radix < 2:
        return np.zeros((0, 3), dtype=np.int64), np.zeros(0, dtype=np.int64)
    from itertools import combinations
    U = on[np.array(list(combinations(range(on.size), 3)), dtype=np.int64)]
    b = cap[U].sum(axis=1)
    keep = b % 2 == 1
    return U[keep], np.minimum(b[keep] // 2, radix // 2)


_RELAY_CACHE = ProblemCache()
_LEVELS_CACHE = ProblemCache()


def relay_count_bound(problem: WiringProblem) -> float:
    """The relay-count bound of the module doc (time objective; 0 when it does not apply). Computed once per
    problem: every scored answer attaches it (0.5 s on 576 accelerators)."""
    if problem not in _RELAY_CACHE:
        _RELAY_CACHE[problem] = _relay_count_bound(problem)
    return _RELAY_CACHE[problem]


def relay_count_circuits(problem: WiringProblem, T: float):
    """(i, j, circuits) per demand pair of the relay count's fewest-relays allocation at time T: how many
    circuits the count gives each pair when it spends the budget where it saves the most relayed bytes
    (a heavy pair gets as many as its bytes fill). None for the direct policy or without demand."""
    return _relay_count_bound(problem, at=T)


def _relay_count_bound(problem: WiringProblem, at: float | None = None):
    if problem.objective != "time" or not (problem.traffic.bytes_ > 0).any():
        return None if at is not None else 0.0
    feasible = _relay_count_test(problem)
    if at is not None:
        return feasible(at, counts=True) if problem.policy != "direct" else None
    return _least_failing(problem, lambda T: feasible(T, margin=True))


def _least_failing(problem: WiringProblem, feasible) -> float:
    """The largest T at which `feasible` (monotone in T) fails, from the injection bound (0 when it holds there),
    to 1e-9 relative. `feasible(T)` is a bool (bisection), or a margin, >= 0 where T is feasible and rising in
    T, whose sign change Brent's method finds in a few evaluations (the relay count: 32 bisection steps of
    0.36 s each at 4,608 accelerators); the answer is checked to fail, so it stays a bound either way."""
    from scipy.optimize import brentq
    lo = injection_bound(problem)
    if lo <= 0:
        return 0.0
    first = feasible(lo)
    graded = not isinstance(first, (bool, np.bool_))
    holds = (lambda T: feasible(T) >= 0) if graded else feasible
    if (first >= 0) if graded else first:
        return 0.0
    hi = 2 * lo
    while not holds(hi):
        lo, hi = hi, 2 * hi
    if graded:
        root = brentq(feasible, lo, hi, xtol=1e-300, rtol=1e-11)
        below = root * (1 - 1e-10)
        if lo < below and not holds(below):     # fails there: the bound, within 1e-10 of the root
            return below
        hi = max(lo, min(hi, root))             # otherwise bisect what is left (never seen: a safeguard)
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if not holds(mid) else (lo, mid)
    return lo


def _relay_count_test(problem: WiringProblem):
    """feasible(T, counts=False, surplus=None, circuits=None): whether the relay count lets a wiring finish in
    T (with `surplus`, when at most that many circuits are a pair's second, third, ...: `shared_circuits_bound`;
    with `circuits`, when at most that many circuits join pairs with demand: `group_cut_bound`)."""
    t = problem.traffic.bytes_
    n = problem.accelerators
    B = problem.port_bytes_per_s
    cap = problem.layout.capacity
    ports = cap.sum(axis=1)
    iu, ju = np.nonzero(np.triu((t > 0) | (t > 0).T, 1))
    d1, d2 = t[iu, ju], t[ju, iu]
    m_p = problem.layout.shared_ports()[iu, ju]          # most circuits each pair can have
    X = max_circuits(problem)
    total = float(t.sum())
    excess, port_sum = node_excess(t), float(ports.sum())
    clusters = list(demand_clusters(t, CLUSTER_THRESHOLDS))
    # smallest cluster holding each pair, and each cluster's parent (index len(clusters) = everything)
    order = sorted(range(len(clusters)), key=lambda c: int(clusters[c][0].sum()))
    clusters = [clusters[c] for c in order]
    owner = np.full(iu.size, len(clusters))
    parent = np.full(len(clusters), len(clusters))
    for c in reversed(range(len(clusters))):        # larger first, so the smallest holder is written last
        inside = clusters[c][0]
        owner[inside[iu] & inside[ju]] = c
    for c2 in range(len(clusters)):
        parent[c2] = next((c for c in range(c2 + 1, len(clusters)) if clusters[c][0][clusters[c2][0]].all()),
                          len(clusters))
    cl_ports = np.array([int(ports[m].sum()) for m, _ in clusters], dtype=np.int64)
    radix = np.asarray(problem.layout.switch_radix, dtype=np.int64)
    cl_match = np.array([int(matching_cap(cap[m].sum(axis=0), radix)) for m, _ in clusters], dtype=np.int64)
    cl_cross = np.array([x for _, x in clusters])
    direct = problem.policy == "direct"

    def feasible(T: float, counts: bool = False, surplus: int | None = None, circuits: int | None = None,
                 margin: bool = False):
        bt = B * T
        need = np.maximum(1, np.ceil(cl_cross / bt - 1e-9)).astype(np.int64)
        caps = np.append(np.minimum((cl_ports - need) // 2, cl_match), X)
        if direct:                               # every pair needs its bytes' worth of circuits
            req = np.ceil(np.maximum(d1, d2) / bt - 1e-9).astype(np.int64)
            if (req > m_p).any() or surplus is not None and int(np.maximum(req - 1, 0).sum()) > surplus:
                return False
            at = np.bincount(iu, req, n) + np.bincount(ju, req, n)
            if (at > ports).any():
                return False
            inner = np.bincount(owner, req, len(caps))
            for c in range(len(clusters)):       # a cluster's pairs include its sub-clusters' pairs
                inner[parent[c]] += inner[c]
            return bool((inner <= caps).all())
        k_p = np.minimum(m_p, np.ceil(np.maximum(d1, d2) / bt - 1e-9).astype(np.int64))
        pid = np.repeat(np.arange(iu.size), k_p)
        k = np.arange(pid.size) - np.repeat(np.cumsum(k_p) - k_p, k_p)      # 0-based circuit index
        gain = (np.clip(d1[pid] - k * bt, 0, bt) + np.clip(d2[pid] - k * bt, 0, bt))
        where = owner[pid]
        alive = np.ones(pid.size, dtype=bool)
        for c in range(len(caps)):               # smallest clusters first: keep each one's best `cap` savings
            sel = np.flatnonzero(alive & (where == c))
            if sel.size > caps[c]:
                drop = sel[np.argsort(-gain[sel], kind="stable")[max(caps[c], 0):]]
                alive[drop] = False
            if c < len(clusters):
                where[sel] = parent[c]
        if counts:                               # the circuits each pair gets in the fewest-relays allocation
            return iu, ju, np.bincount(pid[alive], minlength=iu.size)
        saved = float(gain[alive].sum())
        if surplus is not None:                  # at most `surplus` second, third, ... circuits of a pair
            # (the cluster caps and this cap are two laminar families whose intersection the greedy does not
            # solve exactly; each alone gives an upper bound on the savings, so the smaller one is valid)
            first = gain[k == 0]
            more = np.sort(gain[k > 0])[::-1][:max(surplus, 0)]
            best = np.sort(np.concatenate([first, more]))[::-1][:X]
            saved = min(saved, float(best.sum()))
        if circuits is not None:                 # at most `circuits` of them on pairs with demand: the best ones
            saved = min(saved, float(np.sort(gain)[::-1][:max(circuits, 0)].sum()))
        relayed = float((d1 + d2).sum() - saved)
        room = bt * min(2 * X, port_sum - excess / bt) * (1 + 1e-12) - (total + relayed)
        return room / (bt * 2 * X) if margin else room >= 0       # margin: in units of the budget's capacity

    return feasible


LP_TIME_S = 30.0   # the LP relaxation's clock when the caller gives none


def lp_relaxation_bound(problem: WiringProblem, time_limit_s: float = LP_TIME_S) -> float | None:
    """Time bound from fractional circuits and fractional routing (None when too large or not `time`). Where
    the switches bind (`switches_bind`: planes split over OCSes, explicit layouts) the circuits are split over
    the switches too, each accelerator within its ports on each and each switch within its radix.

    Where the LP's optimum is the injection bound it is not solved: fractional direct circuits x_ij =
    max(t_ij, t_ji) / (B T) are feasible at T once every accelerator's sum of them fits its ports, so the
    relaxation lies between the injection bound and that symmetric row sum / (p B); when the two meet (every
    near-uniform demand, e.g. a 40-accelerator all-to-all: 5 s of interior point) the relaxation is their value.
    """
    if problem.objective == "time" and problem.accelerators <= LP_BOUND_MAX and problem not in _LP_CACHE and \
            not switches_bind(problem.layout):
        inj = injection_bound(problem)
        if symmetric_injection(problem) <= inj * (1 + 1e-12):
            return inj
    sol = _lp_relaxation(problem, time_limit_s)
    return None if sol is None else sol[0]


def symmetric_injection(problem: WiringProblem) -> float:
    """Largest over accelerators of sum_j max(t_ij, t_ji) / (its ports x B): the time of fractional direct
    circuits sized to each pair's heavier direction, an upper bound on the LP relaxation (degree rows only)."""
    t = problem.traffic.bytes_
    ports = problem.layout.capacity.sum(axis=1).astype(np.float64)
    need = np.maximum(t, t.T).sum(axis=1)
    with np.errstate(divide="ignore"):
        return float(np.where(need > 0, need / (ports * problem.port_bytes_per_s), 0.0).max())


def lp_relaxation_solution(problem: WiringProblem, time_limit_s: float = 30.0):
    """(pairs, fractional circuits per pair) of the LP relaxation, or None."""
    sol = _lp_relaxation(problem, time_limit_s)
    return None if sol is None else (sol[1], sol[2])


_LP_CACHE = ProblemCache()


def _lp_relaxation(problem: WiringProblem, time_limit_s: float):
    """The LP relaxation's (time bound, pairs, fractional circuits), solved once per problem (every answer of a
    solve attaches it; on 40 accelerators it takes seconds)."""
    if problem not in _LP_CACHE:
        _LP_CACHE[problem] = _solve_lp_relaxation(problem, time_limit_s)
    return _LP_CACHE[problem]


class ConcurrentFlow:
    """The rows of max concurrent flow of a demand d (n x n, in units of a circuit's capacity) by source on the
    complete digraph, with one capacity column per pair (both its arcs): columns are the flows (one block of
    arcs per source with demand), the pairs' capacities, then lambda; `eq` (conservation: out - in - lambda x
    supply = 0 at every (source, node)) and `cap` (flow on an arc - its pair's capacity <= 0). `pairs` lists
    each pair as (min, max), in the order of its column."""

    def __init__(self, d: np.ndarray) -> None:
        n = d.shape[0]
        self.i, self.j = i, j = np.nonzero(~np.eye(n, dtype=bool))
        A = i.size
        ends, self.arc_pair = np.unique(np.minimum(i, j) * n + np.maximum(i, j), return_inverse=True)
        self.pairs = list(zip((ends // n).tolist(), (ends % n).tolist()))
        self.srcs = srcs = np.flatnonzero(d.sum(axis=1) > 0)
        K = srcs.size
        self.nf = nf = K * A
        self.nv = nv = nf + len(self.pairs) + 1
        self.k_idx, self.a_idx = np.repeat(np.arange(K), A), np.tile(np.arange(A), K)
        col = np.arange(nf)
        supply = -d[srcs]                                  # K x n: the row total at the source, -d elsewhere
        supply[np.arange(K), srcs] = d[srcs].sum(axis=1)
        self.eq = sp.csr_matrix((np.concatenate([np.ones(nf), -np.ones(nf), -supply.ravel()]),
                                 (np.concatenate([self.k_idx * n + i[self.a_idx], self.k_idx * n + j[self.a_idx],
                                                  np.arange(K * n)]),
                                  np.concatenate([col, col, np.full(K * n, nv - 1)]))), shape=(K * n, nv))
        self.cap = sp.csr_matrix((np.concatenate([np.ones(nf), -np.ones(A)]),
                                  (np.concatenate([self.a_idx, np.arange(A)]),
                                   np.concatenate([col, nf + self.arc_pair]))), shape=(A, nv))

    def solve(self, A_ub, b_ub, time_limit_s: float, ub: np.ndarray | None = None, extra: int = 0):
        """Largest lambda under the conservation rows and the given rows (interior point); None when HiGHS does
        not find it (out of time, or lambda 0). `extra` columns may follow lambda (column nv - 1) in A_ub."""
        from scipy.optimize import linprog
        nv = self.nv + extra
        c = np.zeros(nv)
        c[self.nv - 1] = -1.0
        ub = np.full(nv, np.inf) if ub is None else np.concatenate([ub, np.full(nv - len(ub), np.inf)])
        eq = _widened(self.eq, nv)
        res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=eq, b_eq=np.zeros(eq.shape[0]),
                      bounds=np.stack([np.zeros(nv), ub], 1), method="highs-ipm",
                      options={"time_limit": time_limit_s})
        return None if res.status != 0 or res.x[self.nv - 1] <= 0 else res.x


def _widened(m: sp.csr_matrix, cols: int) -> sp.csr_matrix:
    """`m` with empty columns appended up to `cols`."""
    return sp.csr_matrix((m.data, m.indices, m.indptr), shape=(m.shape[0], cols))


def _solve_lp_relaxation(problem: WiringProblem, time_limit_s: float):
    n = problem.accelerators
    if problem.objective != "time" or n > LP_BOUND_MAX:
        return None
    # in units of the largest entry and of the time it takes over one circuit (`unit` s), so that a circuit
    # carries 1 and lambda is O(1) whatever the bytes and the bandwidth (unscaled, 1 KB at 100 Gbit/s made
    # lambda ~1e7 and the interior point's roundings left lp-round a wiring that could not route every demand)
    unit = problem.traffic.bytes_.max() / problem.port_bytes_per_s
    f = ConcurrentFlow(problem.traffic.bytes_ / problem.traffic.bytes_.max())
    P = len(f.pairs)
    ends = np.array(f.pairs).T                            # degree: sum of a node's pairs' circuits <= its ports
    A_ub = sp.vstack([f.cap, sp.csr_matrix((np.ones(2 * P), (ends.ravel(), f.nf + np.tile(np.arange(P), 2))),
                                           shape=(n, f.nv))])
    ub = np.full(f.nv, np.inf)
    if problem.policy == "direct":  # a source's flow may only leave the source and enter its destination directly
        ub[:f.nf][f.i[f.a_idx] != f.srcs[f.k_idx]] = 0.0
    b_ub = np.concatenate([np.zeros(f.i.size), problem.layout.capacity.sum(axis=1)])
    rows, extra = _switch_rows(problem.layout, f)
    if extra:
        A_ub = sp.vstack([_widened(A_ub.tocsr(), f.nv + extra), rows[0]])
        b_ub = np.concatenate([b_ub, rows[1]])
    x = f.solve(A_ub, b_ub, time_limit_s, ub, extra)
    if x is None:
        return None
    return float(unit / x[f.nv - 1]) * (1 - 1e-9), f.pairs, x[f.nf:f.nf + P]


def switches_bind(layout: OCSLayout) -> bool:
    """Whether the switches restrict a fractional wiring beyond each accelerator's port count: not when every
    switch with fibres reaches every accelerator with the same ports, within its radix (switches left dark, as
    `--spare-ports` leaves them, do not count)."""
    used = layout.capacity.sum(axis=0) > 0
    cap, radix = layout.capacity[:, used], np.asarray(layout.switch_radix)[used]
    return not ((cap == cap[:1]).all() and (cap > 0).all() and (radix >= cap.sum(axis=0)).all())


def _switch_rows(layout: OCSLayout, f: ConcurrentFlow):
    """The switches in the LP relaxation, where they bind: a pair's circuits are the sum of its circuits on each
    switch both reach (columns after lambda), an accelerator holds on a switch at most its ports there, a
    switch at most radix / 2 circuits. Where every switch reaches every accelerator alike within its radix
    (one switch per port index, radix >= N) these rows add nothing (a fractional wiring splits evenly over
    the planes) and are left out: ((rows, right-hand sides), columns added), or (None, 0)."""
    if not switches_bind(layout):
        return None, 0
    cap, radix = layout.capacity, np.asarray(layout.switch_radix)
    n, S = cap.shape
    pair_of = np.full((n, n), -1, dtype=np.int64)
    ends = np.array(f.pairs, dtype=np.int64).reshape(-1, 2).T
    pair_of[ends[0], ends[1]] = np.arange(ends.shape[1])
    ya, yb, ys = [], [], []
    for s in np.flatnonzero(radix >= 2):          # one block of pairs per switch: S <= accelerators x ports
        on = np.flatnonzero(cap[:, s] > 0)
        a, b = np.triu_indices(on.size, 1)
        ya.append(on[a]), yb.append(on[b]), ys.append(np.full(a.size, s))
    ya, yb, ys = (np.concatenate(v) if v else np.zeros(0, dtype=np.int64) for v in (ya, yb, ys))
    Y, P, nv = ya.size, len(f.pairs), f.nv + ya.size
    yc = f.nv + np.arange(Y)
    link = sp.csr_matrix((np.concatenate([np.ones(P), -np.ones(Y)]),     # pair's circuits <= its switches' sum
                          (np.concatenate([np.arange(P), pair_of[ya, yb]]), np.concatenate([f.nf + np.arange(P), yc]))),
                         shape=(P, nv))
    port = sp.csr_matrix((np.ones(2 * Y), (np.concatenate([ya * S + ys, yb * S + ys]), np.tile(yc, 2))),
                         shape=(n * S, nv))
    switch = sp.csr_matrix((np.ones(Y), (ys, yc)), shape=(S, nv))
    rhs = np.concatenate([np.zeros(P), cap.ravel().astype(np.float64), (radix // 2).astype(np.float64)])
    blocks = [link, port, switch]
    live = np.flatnonzero(radix >= 2)
    m = (cap[:, live] > 0).sum(axis=0)
    if 0 < (m * (m - 1) * (m - 2) // 6).sum() <= SWITCH_TRIPLES_MAX:    # each switch's odd-set rows on triples
        odd = [switch_triples(layout, s) for s in live]
        key = (ys * n + ya) * n + yb                              # ascending: switch, then triu order
        U = np.concatenate([u for u, _ in odd])
        su = np.repeat(live, [c.size for _, c in odd])
        cols = yc[np.searchsorted(key, (su[:, None] * n + U[:, [0, 0, 1]]) * n + U[:, [1, 2, 2]])].ravel()
        k = U.shape[0]
        blocks.append(sp.csr_matrix((np.ones(3 * k), (np.repeat(np.arange(k), 3), cols)), shape=(k, nv)))
        rhs = np.concatenate([rhs] + [c.astype(np.float64) for _, c in odd])
    return (sp.vstack(blocks).tocsr(), rhs), Y


def _moore_at_surplus(sub: WiringProblem, X: int, M: np.ndarray, cap: float) -> np.ndarray:
    """A phase's Moore bound (s) when M of the X circuits are a pair's second, third, ...: 2 (X - M) distinct
    neighbour slots in all (`moore_hop_bytes_by_neighbours`), over all capacity `cap` (bytes/s)."""
    hb = moore_hop_bytes_by_neighbours(sub)
    return (hb[np.minimum(2 * (X - M), hb.size - 1)] + node_excess(sub.traffic.bytes_)) / cap


SHARED_EVALS = 40     # relay-count bisections the shared-circuits bound may spend on its search over M


def _least_over(X: int, bound, spent) -> float:
    """The least of a bound over 0..X, by splitting intervals: bound(lo, hi) is a lower bound over [lo, hi]
    that is exact when lo == hi (it evaluates the costly part at hi); the interval with the least bound is
    split until it is a single value or spent() reaches SHARED_EVALS, and its bound is the answer."""
    import heapq
    heap = [(bound(0, X), 0, X)]
    while True:
        value, lo, hi = heapq.heappop(heap)
        if lo == hi or spent() >= SHARED_EVALS:
            return value
        mid = (lo + hi) // 2
        heapq.heappush(heap, (bound(lo, mid), lo, mid))
        heapq.heappush(heap, (bound(mid + 1, hi), mid + 1, hi))


def shared_circuits_bound(problem: WiringProblem, lp: bool = False,
                          parts: list[tuple[float, WiringProblem, dict[str, float]]] | None = None) -> float:
    """The phases objective's bound on circuits the phases share (0 when it does not apply).

    Every phase runs on the same circuits. Write M for the circuits beyond the first between a pair (a
    wiring's surplus): they give a phase that wants parallel circuits (a tensor-parallel group's all-reduce)
    its direct bandwidth, and take distinct neighbours from a phase that wants many (an all-to-all): a wiring
    with surplus M has at most 2 (X - M) neighbour slots in all (X the circuits the budget holds). So each
    phase takes at least max(its injection (and LP) bound, its Moore bound with 2 (X - M) neighbours
    (`moore_hop_bytes_by_neighbours`), its relay count with at most M surplus circuits), and the step at
    least the weighted sum of those, at the wiring's own M: the minimum over M bounds every wiring. The
    Moore part grows with M and the relay part falls, so intervals of M are bounded by the relay count at
    their upper end; the interval with the least bound is split until it is a single M (exact) or
    SHARED_EVALS relay counts were spent (then the least interval bound is the answer). `parts`: (weight,
    phase problem, its named bounds) when the caller has them."""
    if problem.objective != "phases":
        return 0.0
    X = max_circuits(problem)
    B = problem.port_bytes_per_s
    cap = min(float(problem.layout.capacity.sum()), 2.0 * X) * B
    M_all = np.arange(X + 1)
    weights, consts, moores, tests, subs = [], [], [], [], []
    if parts is None:
        parts = [(w, sub, best_bound(sub, lp)[1]) for w, sub in problem.phase_problems()]
    for w, sub, named in parts:
        moores.append(_moore_at_surplus(sub, X, M_all, cap))
        consts.append(max([v for k, v in named.items() if k not in ("moore", "relay_count")] + [0.0]))
        tests.append(_relay_count_test(sub))
        weights.append(w)
        subs.append(sub)
    moore = np.array(moores)                                 # phases x (X + 1)
    wts, const = np.array(weights), np.array(consts)[:, None]
    relays: dict[int, np.ndarray] = {}

    def relay(M: int) -> np.ndarray:
        if M not in relays:
            relays[M] = np.array([_least_failing(sub, lambda T, f=f: f(T, surplus=M, margin=True))
                                  for sub, f in zip(subs, tests)])
        return relays[M]

    def step(lo: int, hi: int, r: np.ndarray) -> float:       # least weighted sum over M in [lo, hi] with r
        return float((wts[:, None] * np.maximum(np.maximum(const, moore[:, lo:hi + 1]), r[:, None])).sum(axis=0).min())

    if np.allclose(relay(0), relay(X), rtol=1e-9, atol=0.0):  # nobody gains from parallel circuits: M = 0
        return step(0, 0, relay(0))
    return _least_over(X, lambda lo, hi: step(lo, hi, relay(hi)), lambda: len(relays))


def group_phase(problem: WiringProblem) -> tuple[int, np.ndarray] | None:
    """(index of the phase, group label of every accelerator) for the heaviest phase (weight x bytes) whose
    demand is two or more disjoint groups of one size, every ordered pair inside a group with the same bytes,
    every accelerator in one (a TP all-reduce), when another phase carries bytes too. None otherwise."""
    from scipy.sparse.csgraph import connected_components
    if problem.objective != "phases" or len(problem.phases) < 2:
        return None
    found = None
    for i, ph in enumerate(problem.phases):
        t = ph.bytes_
        k, label = connected_components(t > 0, directed=False)
        sizes = np.bincount(label)
        if k < 2 or sizes.min() < 2 or np.ptp(sizes) or (t > 0).sum() != int((sizes * (sizes - 1)).sum()):
            continue
        inside = t[(label[:, None] == label[None, :]) & ~np.eye(len(t), dtype=bool)]
        if np.ptp(inside) > 1e-9 * inside.max():
            continue
        weight = ph.weight * float(t.sum())
        if found is None or weight > found[0]:
            found = (weight, i, label)
    return None if found is None else (found[1], found[2])


def group_cut_bound(problem: WiringProblem, lp: bool = False,
                    parts: list[tuple[float, WiringProblem, dict[str, float]]] | None = None) -> float:
    """The phases objective's bound on circuits inside the groups of a TP-like phase (`group_phase`; 0 when
    there is none).

    Write x for a wiring's circuits with both ends in one group. The group phase's demand is all inside the groups,
    so at most x circuits serve it directly: it takes at least its relay count with the x best circuits' savings
    (falling in x). Every other phase's bytes between groups cross the circuits between groups, at most (ports - 2x)
    / 2 of them, so it takes at least 2 Q / (ports - 2x), Q its time on one circuit between groups
    (`group_quotient_time`: each group's busier direction, and the bytes routed on the groups' quotient;
    llama405b-tp8pp2-16 2.7867 -> 2.8007 ms, llama405b-tp8pp4-32 12.294 -> 12.368 ms, where the bytes of both
    directions over both directions' capacity gave the first figures); and a wiring with x circuits on the P pairs
    inside groups has at least x - P of them beyond a pair's first, so its Moore bound with 2 (X - max(0, x - P))
    neighbour slots holds (both rising in x), beside its own best bound. The step takes at least the weighted sum at
    the wiring's own x, so the minimum over x bounds every wiring: intervals of x are bounded by the group phase at
    their upper end and the others at their lower end, the least split until a single x or SHARED_EVALS relay counts
    (qwen3-235b-64: x = 270 or so, two circuits per TP pair being x = 192; 0.887 -> 0.901 ms, since the
    shared-circuits bound let its all-to-all keep every circuit between groups while the TP pairs took three)."""
    found = group_phase(problem)
    if found is None:
        return 0.0
    which, label = found
    X = max_circuits(problem)
    B = problem.port_bytes_per_s
    ports = float(problem.layout.capacity.sum())
    cap = min(ports, 2.0 * X) * B
    same = label[:, None] == label[None, :]
    P = int(np.triu(same, 1).sum())
    xs = np.arange(X + 1)
    if parts is None:
        parts = [(w, sub, best_bound(sub, lp)[1]) for w, sub in problem.phase_problems()]
    rising = np.zeros(X + 1)
    with np.errstate(divide="ignore"):
        ext = np.where(ports - 2 * xs > 0, (ports - 2 * xs) * B, 0.0)
        for i, (w, sub, named) in enumerate(parts):
            if i == which:
                continue
            t = sub.traffic.bytes_
            moore = _moore_at_surplus(sub, X, np.maximum(0, xs - P), cap)
            one = group_quotient_time(t, label, B)                  # seconds on one circuit between groups
            cut = np.where(ext > 0, 2 * B * one / np.where(ext > 0, ext, 1.0), np.inf if one > 0 else 0.0)
            rising += w * np.maximum(max(named.values()), np.maximum(moore, cut))
    w_g, sub_g, named_g = parts[which]
    test = _relay_count_test(sub_g)
    falling: dict[int, float] = {}

    def fall(x: int) -> float:
        if x not in falling:
            least = _least_failing(sub_g, lambda T: test(T, circuits=x, margin=True))
            falling[x] = w_g * max(max(named_g.values()), least)
        return falling[x]

    return _least_over(X, lambda lo, hi: fall(hi) + float(rising[lo:hi + 1].min()), lambda: len(falling))


def group_sums(t: np.ndarray, label: np.ndarray) -> np.ndarray:
    """(k, k) bytes from group to group (the diagonal: inside each group) of t, groups `label` = 0 .. k - 1."""
    k = int(label.max()) + 1
    onehot = sp.csr_matrix((np.ones(label.size), (label, np.arange(label.size))), shape=(k, label.size))
    return np.asarray((onehot @ sp.csr_matrix(t) @ onehot.T).todense())


QUOTIENT_MAX_GROUPS = 40   # groups at most for `group_quotient_time`'s LP (40: 62,400 flow variables, 1-2 s)


def group_quotient_time(t: np.ndarray, label: np.ndarray, B: float, time_limit_s: float = 5.0) -> float:
    """Q (seconds): a demand's bytes between groups (`label`) take at least Q / c on any wiring with c circuits
    between the groups.

    Group g holds c_g of those circuits' ends, and its bytes out of (into) it leave (enter) on those alone, so
    the demand takes at least max(out_g, in_g) / (c_g B); since sum_g c_g = 2 c, at least sum_g max(out_g,
    in_g) / (2 c B): the busier direction's cut (a pipeline's one-way hand-off counts twice what its bytes
    over both directions would). Sharper, contract each group to a node: a wiring's circuits between groups
    become a multigraph on the groups with c edges, each carrying B per direction, and every byte between
    groups is routed on it (the circuits inside a group only add capacity the quotient does not need). So the
    demand takes at least the max-concurrent-flow time on the best fractional multigraph with c edges, which
    scales as 1 / c: with one edge in all, an LP (fractional edges c_ij summing to 1, flows by source group).
    It is above the cut where the bytes go between groups that are not all adjacent: a four-stage pipeline's
    hand-offs g -> g + 1 need a path or a ring of stages and take 3 P / (c B), not 2 P / (c B)
    (llama405b-tp8pp4-32). Where every pair of groups on edges of its own (c_ij in proportion to the pair's
    busier direction) already meets the cut, as a uniform all-to-all's do, the cut is Q and no LP runs; so it
    is beyond QUOTIENT_MAX_GROUPS groups or when the LP does not finish. 0 without bytes between groups."""
    D = group_sums(t, label)
    k = D.shape[0]
    np.fill_diagonal(D, 0.0)
    if not (D > 0).any():
        return 0.0
    cut = float(np.maximum(D.sum(axis=0), D.sum(axis=1)).sum() / (2 * B))
    direct = np.maximum(D, D.T).sum() / (2 * B)           # every pair on its own edges (>= Q): its busier direction
    if direct <= cut * (1 + 1e-9) or k > QUOTIENT_MAX_GROUPS:
        return cut
    scale = D.max()
    f = ConcurrentFlow(D / scale)
    E = len(f.pairs)
    one = sp.csr_matrix((np.ones(E), (np.zeros(E, dtype=np.int64), f.nf + np.arange(E))), shape=(1, f.nv))
    x = f.solve(sp.vstack([f.cap, one]), np.concatenate([np.zeros(f.i.size), [1.0]]), time_limit_s)
    return cut if x is None else max(cut, float(scale / (x[-1] * B)) * (1 - 1e-7))


_PHASES_CACHE = ProblemCache()
_STEP_CACHE = ProblemCache()


def _phases_bound(problem: WiringProblem, lp: bool, time_limit_s: float = LP_TIME_S) -> tuple[float, dict[str, float]]:
    """The phases objective's bounds: every phase takes at least its own best bound alone, so their weighted
    sum bounds the step ("phase_sum"); the phases share their circuits, and parallel circuits one phase
    wants take distinct neighbours from another ("shared_circuits", `shared_circuits_bound`); and the step's
    bytes at once (the ``time`` objective) never take longer than the phases one after another, so every
    ``time`` bound holds too ("total_" + its name). `time_limit_s` is shared by the LP relaxations."""
    memo = _PHASES_CACHE.setdefault(problem, {})
    if lp not in memo:
        each = time_limit_s / (1 + len(problem.phases))
        total, named = best_bound(problem.as_time(), lp, each)
        parts = [(w, sub, best_bound(sub, lp, each)) for w, sub in problem.phase_problems()]
        memo[lp] = {**{f"total_{k}": v for k, v in named.items()},
                    "phase_sum": float(sum(w * b[0] for w, _, b in parts)),
                    "shared_circuits": shared_circuits_bound(problem, lp, [(w, sub, b[1]) for w, sub, b in parts])}
        cut = group_cut_bound(problem, lp, [(w, sub, b[1]) for w, sub, b in parts])
        if cut > 0:                          # where a phase is TP-like
            memo[lp]["group_cut"] = cut
    named = memo[lp]
    return max(named.values()), dict(named)


def instant_bound(problem: WiringProblem) -> tuple[float, dict[str, float]]:
    """A bound that takes no time and each named one, as `best_bound`: injection for the time and hop
    objectives (the phases' weights and the step's other terms make it no bound there: 0)."""
    named = {"injection": injection_bound(problem)} if problem.objective in ("time", "hops") else {"none": 0.0}
    return max(named.values()), named


def final_bound(problem: WiringProblem) -> tuple[float, dict[str, float], bool]:
    """`best_bound` for a final answer: a Ctrl-C while it runs (the first call computes the relay count and
    the LP relaxation) leaves `instant_bound`. Returns (bound, named bounds, interrupted)."""
    try:
        return (*best_bound(problem), False)
    except KeyboardInterrupt:
        return (*instant_bound(problem), True)


def best_bound(problem: WiringProblem, lp: bool = True, time_limit_s: float = LP_TIME_S) -> tuple[float, dict[str, float]]:
    """The best (largest) lower bound and each named bound. `time_limit_s`: the LP relaxation's clock; it is
    solved once per problem (the first call's clock: an LP that runs out of it is left out, every later
    call included: the bound stays valid, and a solve's answers all carry the same one)."""
    if problem.objective == "phases":
        return _phases_bound(problem, lp, time_limit_s)
    if problem.objective == "step":
        if problem not in _STEP_CACHE:
            from synth.evaluate import ocs_step_lower_bound_us
            _STEP_CACHE[problem] = 1e-6 * ocs_step_lower_bound_us(
                problem.workload, problem.layout.capacity.sum(axis=1), problem.port_bytes_per_s)
        return _STEP_CACHE[problem], {"critical_path": _STEP_CACHE[problem]}
    named = {"injection": injection_bound(problem), "moore": moore_bound(problem)}
    if problem.objective == "time":
        named["relay_count"] = relay_count_bound(problem)
        named["relay_split"] = relay_split_bound(problem)
    if lp:
        lpb = lp_relaxation_bound(problem, time_limit_s)
        if lpb is not None:
            named["lp_relaxation"] = lpb
    return max(named.values()), named
