"""Structured near-Moore wirings from finite geometry: starts for the search on large uniform all-to-all.

A uniform all-to-all on N accelerators with p ports is served best by a p-regular graph whose distance
levels meet the Moore bound (p at one hop, p(p-1) at two, ...): a random regular graph is ~5% above it
and the swap search reaches ~2.6% in its time budget, because a random graph has many 4-cycles that two-hop
coverage has to undo one swap at a time. Geometry gives them away for free:

- The biaffine plane over Z_q (q prime) has points (x, y) and lines [m, b], (x, y) on [m, b] iff
  y = m x + b (mod q). Its incidence graph is q-regular, bipartite, on 2q^2 vertices, with no 4-cycle (two
  lines of different slopes meet once, lines of one slope never; two points with different x share one
  line, with equal x none). It is properly q-edge-coloured by (x + m) mod q: colour c pairs each point
  with its line of slope c - x, a perfect matching, so colour c can be switch c.
- The (q + 1)-th switch gets a matching inside the parallel classes (points with one x, lines with one
  slope), which are four hops apart, so no such circuit closes a triangle; points are paired at y
  differences +-1 (+-2 across a gap) and lines at b differences +-3 (+-6), and a 4-cycle point-point-
  line-line would need equal differences. What is left over (odd classes) is paired furthest first.
- To fit N <= 2q^2 accelerators, 2q^2 - N vertices are removed (points and lines alternately, no removed
  point on a removed line, spread over the classes); each colour then re-pairs the vertices that lost
  their partner in it, furthest first.

For moe5t-576 (18 ports, q = 17, two vertices removed) the result is 0.35% above the Moore levels in
average distance before any search, against ~5% for the random expander.

Where N is near q^2 + q + 1 instead (two hops can reach everyone: p + p(p - 1) >= N), the Erdos-Renyi
polarity graph of the projective plane PG(2, q) is the near-Moore graph: (q + 1)-regular but for q + 1
absolute points of degree q, diameter 2, every two vertices with exactly one common neighbour. It is built
as a Singer sum graph: with D a perfect difference set of Z_V, V = q^2 + q + 1 (q + 1 residues whose
differences are every nonzero residue once; the exponents i of a primitive element a of GF(q^3) whose a^i
lies in a fixed plane), u ~ v iff u + v is in D. Each s in D pairs u with s - u, a matching that misses only
s / 2, so colour s is switch s for free. Removals and re-pairing per colour are as in `_polarity`
(kimi-k2-288: 18 ports, q = 17, 19 of 307 vertices removed: a vertex and its neighbours).

The polarity graph of a larger plane serves p < q + 1 ports too: any p of its colours (p elements of D) form a
p-regular subgraph, still C4-free, so every vertex has the Moore count p + p (p - 1) within two hops but for
its triangles. With removals below V and growth above it (`_grown`: each new vertex takes a circuit out of
every colour), that gives a near-Moore start for most N up to POLARITY_MAX_RATIO p^2 (18 ports: 154-1,053).
For q a prime power (16, 25, 27, 32, ...) D comes from GF(q^3) as a degree-3e extension of the prime field
(`singer_difference_set`); the nearest plane above N and the nearest below are both built and the one with the
lower hop sum kept (`polarity_orders`). A uniform all-to-all on 18 ports, average distance against the Moore
bound's and the random expander's: 384 accelerators 2.147 (Moore 2.107, expander 2.381), 512 2.370 (2.331,
2.493), 700 2.528 (2.511, 2.604); `ocs-synth wire` at 60 s: 384 and 512 accelerators 2.28% and 1.79% above
the bound where the search from the expander ended at 7.27% and 3.65%, 650 1.04% (q = 25; 1.44% from q = 23's
plane grown) and 16 ports on 256 5.86% (q = 16; 8.08% from q = 17's) (BENCHMARKS.md).
"""
from __future__ import annotations

import time

import numpy as np

from synth.model import Circuit, OCSLayout, Wiring
from synth.network import highs_threads
from synth.realize import assign_ports
from .colouring import MOST_S, most_on_switches

MAX_REMOVED_PER_Q = 2     # remove at most 2q of the 2q^2 vertices: beyond that the geometry is mostly gone
MAX_ADDED_SHARE = 1.0    # the polarity graph grown by up to this share of its vertices (`_grown`)
MAX_REMOVED_SHARE = 0.5  # or trimmed by up to this share (18 ports, 180 of 307 left: 1.919 hops on average, Moore 1.899)
POLARITY_MAX_RATIO = 3.25  # N / p^2 up to which it is built: beyond, three and more hops dominate, where a random
                           # graph does as well (8 ports on 300: average distance 3.09 against the expander's 2.99;
                           # 18 on 1,050: 2.712 against 2.723; 18 on 700: 2.534 against 2.604)
MENDING_WORK_MAX = 2.5e9  # colours x (vertices added or removed) x N^2 up to which the polarity graph is built: its
                          # re-pairing updates N x N distances per circuit, ~1 s per 1e9 (18 ports, 740: 3.2 s)


def _is_prime(q: int) -> bool:
    return (_prime_power(q) or (0, 0))[1] == 1


def _prime_power(q: int) -> tuple[int, int] | None:
    """(r, e) with q = r^e, r prime (q's least factor), else None."""
    r = next((k for k in range(2, q + 1) if q % k == 0), None) if q >= 2 else None
    if r is None:
        return None
    e = 0
    while q % r == 0:
        q, e = q // r, e + 1
    return (r, e) if q == 1 else None


def biaffine_order(layout: OCSLayout) -> int | None:
    """The prime q that fits `layout` (uniform, p = q + 1 ports, 2q^2 - 2q <= N <= 2q^2, every switch
    can take N / 2 circuits), else None."""
    n, p = layout.accelerators, layout.ports
    q = p - 1
    if not layout.is_uniform() or not _is_prime(q) or q < 5:
        return None
    if not (2 * q * q - MAX_REMOVED_PER_Q * q <= n <= 2 * q * q) or min(layout.switch_radix) < n:
        return None
    return q


def polarity_orders(layout: OCSLayout) -> list[int]:
    """The prime powers q whose polarity graph fits `layout` (uniform, p <= q + 1 ports of which it uses p
    colours, V = q^2 + q + 1 with (1 - MAX_REMOVED_SHARE) V <= N <= (1 + MAX_ADDED_SHARE) V, N <=
    POLARITY_MAX_RATIO p^2, the re-pairing's work within MENDING_WORK_MAX, every switch can take N / 2
    circuits), at most two: the nearest plane at or above N (trimmed) and the nearest below it (grown); `near_moore`
    keeps the better. Neither side always wins: on 18 ports 384 accelerators are best as q = 19's 381 grown (2.147
    hops on average, 553 trimmed 2.237), 900 as q = 31's 993 trimmed (2.630, 871 grown 2.644). Where p < q + 1
    the graph keeps p of its q + 1 colours, a C4-free p-regular graph (p + p (p - 1) accelerators within two
    hops, the Moore count) near any such V (18 ports: 154-1,053 accelerators)."""
    n, p = layout.accelerators, layout.ports
    if not layout.is_uniform() or p < 6 or min(layout.switch_radix) < n or n > POLARITY_MAX_RATIO * p * p:
        return []
    above, below = [], []
    q = max(5, p - 1)
    while (q * q + q + 1) * (1 - MAX_REMOVED_SHARE) <= n:
        V = q * q + q + 1
        if _prime_power(q) and V * (1 - MAX_REMOVED_SHARE) <= n <= V * (1 + MAX_ADDED_SHARE) \
                and p * (abs(n - V) + 1) * n * n <= MENDING_WORK_MAX:
            (above if V >= n else below).append(q)
        q += 1
    return above[:1] + below[-1:]


def singer_difference_set(q: int) -> np.ndarray:
    """A perfect difference set of Z_(q^2 + q + 1), q = r^e a prime power: the i < q^2 + q + 1 with a^i in the
    plane {c0 + c1 a : c0, c1 in GF(q)} of GF(q^3) = F_r[x] / (g), g the first primitive polynomial of degree
    m = 3e found (coefficients counted up, the constant term fastest), a = x. Elements are m digits base r;
    GF(q) is 0 and the powers of b = a^V; each of the plane's q^2 - 1 nonzero elements a^i gives i mod V, q + 1
    residues in all (for q prime: the a^i whose a^2 coordinate is 0).

    >>> def perfect(q):
    ...     D, V = singer_difference_set(q).tolist(), q * q + q + 1
    ...     return len(D) == q + 1 and sorted((x - y) % V for x in D for y in D if x != y) == list(range(1, V))
    >>> [perfect(q) for q in (5, 4, 8, 9)]
    [True, True, True, True]
    """
    r, e = _prime_power(q) or (0, 0)
    if r == 0:
        raise ValueError(f"{q} is not a prime power")
    m = 3 * e
    V, order = q * q + q + 1, r ** m - 1
    for code in range(r ** m):
        g = [(code // r ** k) % r for k in range(m)]        # x^m = -(g[m-1] x^(m-1) + ... + g[0])
        if g[0] == 0:
            continue
        powers = np.zeros((order, m), dtype=np.int64)
        v = [1] + [0] * (m - 1)
        for i in range(order):
            powers[i] = v
            top = v[-1]
            v = [(-g[0] * top) % r] + [(v[k - 1] - g[k] * top) % r for k in range(1, m)]
            if v[0] == 1 and not any(v[1:]) and i < order - 1:
                break                   # x is not primitive
        else:
            weights = r ** np.arange(m)
            log = np.empty(r ** m, dtype=np.int64)
            log[powers @ weights] = np.arange(order)
            field = np.vstack([np.zeros(m, np.int64), powers[np.arange(q - 1) * V]])  # GF(q): 0 and b^j
            c1a = np.vstack([np.zeros(m, np.int64), powers[np.arange(q - 1) * V + 1]])   # c1 a, c1 in GF(q)
            plane = (field[:, None, :] + c1a[None, :, :]).reshape(-1, m) % r
            codes = plane @ weights
            return np.unique(log[codes[codes > 0]] % V)
    raise ValueError(f"no primitive polynomial of degree {m} over F_{r}")   # cannot happen


def _pair_furthest(nodes: list[int], dist: np.ndarray, adj: np.ndarray, cls: np.ndarray,
                   rng: np.random.Generator) -> list[tuple[int, int]]:
    """Pair `nodes` (in random order) each with the unpaired, non-adjacent node furthest from it, same
    parallel class first among equals; distances are updated as circuits are added (they only shrink)."""
    left = np.array(rng.permutation(nodes), dtype=np.int64)
    free = np.ones(len(left), bool)
    out = []
    for i, v in enumerate(left):
        if not free[i]:
            continue
        free[i] = False
        cand = np.flatnonzero(free)
        cand = cand[adj[v, left[cand]] == 0]
        if cand.size == 0:
            continue
        score = dist[v, left[cand]] + 0.5 * (cls[left[cand]] == cls[v])
        j = int(cand[int(np.argmax(score))])
        free[j] = False
        w = int(left[j])
        out.append((int(v), w))
        _join(adj, dist, int(v), w)
    return out


DIST_CAP = 127    # hop distances are kept as uint8 up to this (a - x - b sums stay within 255): a quarter of the
                  # memory traffic of float32 in `_join`, which the re-pairing calls once per circuit (moe5t-576's
                  # three planes: 2,700 calls, 1.2 s as float32)


def _distances(adj: np.ndarray) -> np.ndarray:
    """Hop distances of the graph `adj` (uint8; the vertex count, at most DIST_CAP, where there is no path)."""
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path
    dist = shortest_path(csr_matrix(adj), unweighted=True)
    dist[~np.isfinite(dist)] = adj.shape[0]
    return np.minimum(dist, DIST_CAP).astype(np.uint8)


def _graph(n: int, edges: dict[int, list[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """The adjacency (int8) of the circuits `edges` ({colour: pairs}) on n vertices, and its `_distances`."""
    adj = np.zeros((n, n), np.int8)
    for pairs in edges.values():
        if pairs:
            a, b = np.array(pairs, dtype=np.int64).T
            adj[a, b] = adj[b, a] = 1
    return adj, _distances(adj)


def _join(adj: np.ndarray, dist: np.ndarray, a: int, b: int) -> None:
    """Add the circuit a - b to `adj` and shorten `dist` through it (distances only shrink)."""
    adj[a, b] = adj[b, a] = 1
    np.minimum(dist, dist[:, [a]] + 1 + dist[[b], :], out=dist)
    np.minimum(dist, dist[:, [b]] + 1 + dist[[a], :], out=dist)


def near_moore(layout: OCSLayout, seed: int = 0) -> Wiring | None:
    """The biaffine-plane or polarity-graph wiring of the module doc for `layout`, the one with the lowest hop
    sum of those that fit (the biaffine plane, and the polarity graphs of `polarity_orders`; 18 ports, 576
    accelerators: moe5t-576 keeps the biaffine plane's, 2.420 hops on average against q = 23's 2.435 and
    q = 25's 2.437), or None when none fits."""
    built = [w for w in [_biaffine(layout, seed)] + [_polarity(layout, q, seed) for q in polarity_orders(layout)]
             if w is not None]
    if len(built) < 2:
        return built[0] if built else None
    return min(built, key=lambda w: _distances(w.adjacency() > 0).sum())


def _biaffine(layout: OCSLayout, seed: int = 0) -> Wiring | None:
    """The biaffine plane of the module doc less 2q^2 - N vertices, or None when it does not fit."""
    q = biaffine_order(layout)
    if q is None:
        return None
    n = layout.accelerators
    V = 2 * q * q
    # vertex ids: point (x, y) -> x q + y, line [m, b] -> q^2 + m q + b
    x, m, b = np.meshgrid(np.arange(q), np.arange(q), np.arange(q), indexing="ij")
    x, m, b = x.ravel(), m.ravel(), b.ravel()
    pt = x * q + (m * x + b) % q
    ln = q * q + m * q + b
    colour = (x + m) % q
    # removals: points (x, 0) and lines [m, 1] with x, m = 0, 1, ...; (x, 0) is on [m, 1] iff m x + 1 = 0
    r = V - n
    rm_pts = [i * q for i in range(q)][: (r + 1) // 2]
    rm_lns = []
    for s in range(q):
        if len(rm_lns) == r // 2:
            break
        if all((s * (p_ // q) + 1) % q for p_ in rm_pts):
            rm_lns.append(q * q + s * q + 1)
    if len(rm_pts) + len(rm_lns) != r:
        return None
    removed = np.zeros(V, bool)
    removed[rm_pts + rm_lns] = True
    keep = ~(removed[pt] | removed[ln])
    edges = {c: list(zip(pt[keep & (colour == c)].tolist(), ln[keep & (colour == c)].tolist())) for c in range(q)}
    adj, dist = _graph(V, edges)
    alive = np.flatnonzero(~removed)
    cls = np.concatenate([np.arange(q * q) // q, q + np.arange(q * q) // q])   # x of a point, q + slope of a line
    rng = np.random.default_rng(seed)
    for c in range(q):   # re-pair who lost its colour-c partner
        matched = {v for e in edges[c] for v in e}
        edges[c] += _pair_furthest([int(v) for v in alive if v not in matched], dist, adj, cls, rng)
    edges[q] = _pair_furthest(alive.tolist(), dist, adj, cls, rng)
    ids = -np.ones(V, np.int64)
    ids[alive] = np.arange(n)
    pairs = [(int(ids[a]), int(ids[b_])) for c in range(q + 1) for a, b_ in edges[c]]
    switch_of = [c for c in range(q + 1) for _ in edges[c]]
    return Wiring(n, layout.ports, assign_ports(layout, pairs, switch_of), layout)


MENDING_EXACT_MAX = 40    # nodes up to which `_pair_mending` solves its matching exactly (networkx's blossom is
                          # pure Python: the polarity graph took 0.3 s at 288 accelerators, 5.2 s at 931)


def _pair_mending(nodes: list[int], dist: np.ndarray, adj: np.ndarray,
                  rng: np.random.Generator) -> list[tuple[int, int]]:
    """Pair `nodes` (non-adjacent pairs only) by a maximum-weight matching whose weights count the pairs three
    or more hops apart that the new circuit brings within two (a's far partners among b and b's neighbours,
    and b's among a's); distance breaks ties, then a seeded draw. Exact (networkx, most pairs first) up to
    MENDING_EXACT_MAX nodes, greedy by weight beyond (931 accelerators on 32 ports: 44,968 far pairs against
    the exact 44,266 and furthest-first's 46,792; 1.4 s against 5.2 s and 1.1 s). `adj` and `dist` are
    updated."""
    import networkx as nx
    if len(nodes) < 2:
        return []
    far = dist >= 3
    near = adj.astype(bool) | np.eye(adj.shape[0], dtype=bool)      # each node and its neighbours
    nodes = np.asarray(nodes, dtype=np.int64)
    k = nodes.size
    mended = far[nodes] @ near[nodes].T.astype(np.int64)             # [i, j]: i's far partners j brings near
    i, j = np.triu_indices(k, 1)
    keep = adj[nodes[i], nodes[j]] == 0
    i, j = i[keep], j[keep]
    weight = (mended[i, j] + mended[j, i]) + 1e-3 * np.minimum(dist[nodes[i], nodes[j]].astype(np.float64), 9.0) \
        + 1e-6 * rng.random(i.size)
    if k <= MENDING_EXACT_MAX:
        g = nx.Graph()
        g.add_weighted_edges_from(zip(i.tolist(), j.tolist(), weight.tolist()))
        chosen = [tuple(sorted(e)) for e in nx.max_weight_matching(g, maxcardinality=True)]
    else:
        from .baselines import greedy_matching
        chosen = [(int(i[e]), int(j[e])) for e in greedy_matching(i, j, weight, k)]
        free = np.ones(k, bool)
        free[np.asarray(chosen, dtype=np.int64).ravel()] = False
        # two left over (adjacent to each other, or their partners taken): each takes an end of a chosen pair
        left = np.flatnonzero(free).tolist()
        apart = adj[np.ix_(nodes, nodes)] == 0 if len(left) >= 2 else None
        while len(left) >= 2:
            x, y = left.pop(), left.pop()
            for e, (a, b) in enumerate(chosen):
                if apart[x, a] and apart[y, b] or apart[x, b] and apart[y, a]:
                    a, b = (a, b) if apart[x, a] and apart[y, b] else (b, a)
                    chosen[e] = (x, a)
                    chosen.append((y, b))
                    break
    out = sorted((int(nodes[x]), int(nodes[y])) for x, y in chosen)
    for a, b in out:
        _join(adj, dist, a, b)
    return out


def _polarity(layout: OCSLayout, q: int, seed: int) -> Wiring | None:
    """The polarity graph of PG(2, q) on p of its colours less V - N vertices, re-paired per colour by `_pair_mending`
    (grown by `_grown` where N > V). Three ways to remove them, the one whose hop sum over its circuits (a uniform
    all-to-all's floor) is lower kept: pairwise non-adjacent vertices in a seeded order (each was the one common
    neighbour of its C(q + 1, 2) neighbours' pairs; where there are that many), the first V - N of that order
    (adjacent ones lose their common circuits once: fewer to re-pair), and, when V - N >= p + 1, a vertex x with all
    its neighbours (the rest non-adjacent): then every survivor loses one neighbour, and only the pairs on a line
    through x lose their common neighbour (the pole of that line lies on x's polar line). On kimi-k2-288 (V - N = 19
    = q + 2) the seeded order leaves 3,266 ordered pairs three hops apart, the star 3,430, and the non-adjacent
    removal with furthest-first re-pairing 4,012 (BENCHMARKS.md)."""
    n, V = layout.accelerators, q * q + q + 1
    D = singer_difference_set(q)[:layout.ports]   # p of its q + 1 colours: any p keep it C4-free
    u = np.arange(V)
    mate = (D[:, None] - u[None, :]) % V            # mate[c, u]: u's partner on colour c (u itself: none)
    full = np.zeros((V, V), np.int8)
    for c in range(D.size):
        full[u, mate[c]] = 1
    absolute = np.diag(full) > 0
    np.fill_diagonal(full, 0)
    rng = np.random.default_rng(seed)
    if n > V:
        return _wiring_of(layout, _grown(mate, n, rng))
    order = rng.permutation(V)

    def fill(removed: np.ndarray, apart: bool = True) -> np.ndarray | None:
        # fill up to V - n removed vertices in the seeded order; `apart`: none adjacent to another removed one
        # (no circuit lost twice), None when there are not that many
        removed = removed.copy()
        for v in order:
            if removed.sum() == V - n:
                return removed
            if not removed[v] and not (apart and full[v, removed].any()):
                removed[v] = True
        return removed if removed.sum() == V - n else None

    ways = [fill(np.zeros(V, bool)), fill(np.zeros(V, bool), apart=False)]
    if V - n >= D.size + 1:
        star = np.zeros(V, bool)
        x = int(order[~absolute[order]][0])
        star[x] = True
        star[full[x] > 0] = True
        ways.append(fill(star))
    best = None
    for removed in (r for r in ways if r is not None):
        adj = full.copy()
        adj[removed, :] = 0
        adj[:, removed] = 0
        dist = _distances(adj)
        alive = np.flatnonzero(~removed)
        edges = {}
        for c in range(D.size):
            ok = ~removed & ~removed[mate[c]] & (mate[c] != u)
            edges[c] = [(int(a), int(mate[c, a])) for a in np.flatnonzero(ok & (u < mate[c]))]
            # re-pair who lost its colour-c partner (and the colour's absolute point)
            edges[c] += _pair_mending([int(v) for v in alive if not ok[v]], dist, adj, rng)
        # a uniform all-to-all's floor on it: its hop sum over its circuits (a far pair costs a hop, a port
        # left unpaired a circuit)
        floor = float(dist[np.ix_(alive, alive)].sum()) / sum(len(e) for e in edges.values())
        if best is None or floor < best[0]:
            best = (floor, removed, edges)
    if best is None:
        return None
    _, removed, edges = best
    ids = -np.ones(V, np.int64)
    ids[~removed] = np.arange(n)
    return _wiring_of(layout, {c: [(int(ids[a]), int(ids[b])) for a, b in e] for c, e in edges.items()})


def _wiring_of(layout: OCSLayout, edges: dict[int, list[tuple[int, int]]]) -> Wiring:
    """The wiring whose switch c holds the circuits `edges[c]`."""
    pairs = [e for c in sorted(edges) for e in edges[c]]
    switch_of = [c for c in sorted(edges) for _ in edges[c]]
    return Wiring(layout.accelerators, layout.ports, assign_ports(layout, pairs, switch_of), layout)


def _grown(mate: np.ndarray, n: int, rng: np.random.Generator) -> dict[int, list[tuple[int, int]]]:
    """The polarity graph's colours (`mate[c, u]`: u's partner on colour c, u itself for the colour's
    absolute point) on V vertices grown to n > V: on each colour, (n - V + 1) / 2 of its circuits are taken
    out, those whose ends lost the fewest so far (a seeded draw among equals), and the new vertices, the
    colour's absolute point and those ends are paired by `_pair_mending`. The old vertices keep a C4-free
    graph but for the circuits re-paired; each new vertex gets a partner per colour. Returns {colour:
    circuits}."""
    P, V = mate.shape
    u = np.arange(V)
    split = np.zeros(V, np.int64)            # circuits each old vertex has lost so far
    kept = {}
    for c in range(P):
        a = np.flatnonzero(u < mate[c])
        b = mate[c, a]
        out = np.argsort(split[a] + split[b] + rng.random(a.size), kind="stable")[:(n - V + 1) // 2]
        split[a[out]] += 1
        split[b[out]] += 1
        stay = np.ones(a.size, bool)
        stay[out] = False
        kept[c] = list(zip(a[stay].tolist(), b[stay].tolist()))
    adj, dist = _graph(n, kept)
    edges = {}
    missing = np.zeros(n, np.int64)          # colours each vertex has no circuit on so far
    for c in range(P):
        paired = np.zeros(n, bool)
        paired[np.asarray(kept[c], dtype=np.int64).ravel()] = True
        free = np.flatnonzero(~paired)
        if free.size % 2:   # n odd: one vertex per colour stays out, the one left out of the fewest so far
            out = free[np.argmin(missing[free] + 0.5 * rng.random(free.size))]
            free = free[free != out]
        mended = _pair_mending(free.tolist(), dist, adj, rng)
        paired[np.asarray(mended, dtype=np.int64).ravel()] = True
        edges[c] = kept[c] + mended
        missing[~paired] += 1
    return edges


HUB_SHARE = 0.25   # accelerators whose busier direction carries at most this share of the busiest one's are hubs


def hub_mask(t: np.ndarray) -> np.ndarray:
    """The accelerators `relay_hubs` makes hubs: their busier direction carries at most HUB_SHARE of the
    busiest accelerator's bytes."""
    load = np.maximum(t.sum(axis=0), t.sum(axis=1))
    return load <= HUB_SHARE * load.max()


def relay_hubs(t: np.ndarray, layout: OCSLayout, seed: int = 0, tries: int = 1) -> Wiring | None:
    """A wiring for skewed demand where some accelerators are nearly idle (prefill instances beside a decode
    EP group, light ranks of a DLRM): their ports are what relays need (an accelerator relays at most
    ports B T - max(out, in)), and a byte relayed by an idle accelerator costs no busy circuit twice. Every
    hub circuit goes to a busy accelerator, spread evenly (fewest hub circuits first) and never twice to
    the same one; the busy accelerators' other ports are paired at random, avoiding repeats. Built switch
    by switch as matchings, so it is realizable by construction. None when there is no hub (or fewer than
    two busy accelerators per hub port of a switch). With `tries`, the draw with the fewest byte-hops of
    that many (their routing is balanced, so byte-hops rank them: deepseek-v3-pd-96, best of 32 draws
    0.0038194 s (seed 0) and 0.0038174 s (seed 1) against 0.0038338-0.0038408 s for single ones; 0.01 s
    a draw)."""
    if tries > 1:
        draws = [relay_hubs(t, layout, seed * tries + k) for k in range(tries)]
        return None if draws[0] is None else draws[_fewest_byte_hops(draws, t)]
    n = layout.accelerators
    hub = hub_mask(t)
    if not hub.any() or hub.sum() * 2 > n:
        return None
    rng = np.random.default_rng(seed)
    sop = layout.switch_of_port
    adj = np.zeros((n, n), bool)
    got = np.zeros(n, np.int64)                   # hub circuits of each busy accelerator
    circuits = []
    for s in range(layout.switches):
        a, k = np.nonzero(sop == s)
        order = rng.permutation(len(a))
        a, k = a[order].tolist(), k[order].tolist()
        limit = layout.switch_radix[s] // 2
        hubs = [(x, y) for x, y in zip(a, k) if hub[x]]
        busy = [(x, y) for x, y in zip(a, k) if not hub[x]]
        if len(busy) < len(hubs):
            return None
        made = 0
        for x, y in hubs:                          # each hub port to the least-served busy accelerator
            cand = [i for i, (b, _) in enumerate(busy) if not adj[x, b]]
            if made == limit or not cand:
                continue
            i = min(cand, key=lambda i: got[busy[i][0]])
            b, z = busy.pop(i)
            circuits.append(Circuit(s, x, y, b, z))
            adj[x, b] = adj[b, x] = True
            got[b] += 1
            made += 1
        _pair_at_random(busy, adj, s, limit - made, circuits)
    return Wiring(n, layout.ports, tuple(circuits), layout)


def _pair_at_random(free: list[tuple[int, int]], adj: np.ndarray, s: int, limit: int, circuits: list) -> None:
    """Pair the free (accelerator, port)s of switch `s` (already in random order) into at most `limit`
    circuits, avoiding pairs that already have one (a repeat only as a last resort)."""
    made = 0
    while len(free) >= 2 and made < limit:
        x, y = free.pop()
        others = [i for i in range(len(free)) if free[i][0] != x]
        if not others:
            break
        j = next((i for i in reversed(others) if not adj[x, free[i][0]]), others[-1])
        b, z = free.pop(j)
        circuits.append(Circuit(s, x, y, b, z))
        adj[x, b] = adj[b, x] = True
        made += 1


def heavy_pairs(problem, seed: int = 0, tries: int = 1, seconds: float = 10.0):
    """A start that gives every heavy pair the circuits its bytes fill: the relay count's allocation at its
    own bound (`solvers.bounds.relay_count_circuits`: the budget spent where it saves the most relayed bytes)
    for the pairs it gives two or more, placed first (each on the switch with the most free ports at both
    ends), then the other ports paired at random per switch, avoiding repeats. The hop-count search sees
    only adjacency, so it never adds a second circuit to a pair and would move one away: those circuits are
    returned as `pinned` pairs to keep. qwen3-235b-64 (TP 4 pairs of 28 MB, 2.6 MB EP pairs, 18 ports): two
    circuits per TP pair and the EP ports at random give 0.000824-0.000827 s against 0.000865 s from the
    search, which keeps one. Returns (wiring, pinned pairs) or None when no pair needs two circuits (or they
    do not fit on the switches). With `tries`, the draw with the fewest byte-hops. Where the switches bind
    the allocation is placed by `on_switches` instead, in at most `seconds`."""
    from .bounds import relay_count_bound, relay_count_circuits
    if problem.objective != "time" or problem.policy == "direct" or problem.fixed_circuits:
        return None
    T = relay_count_bound(problem)
    alloc = relay_count_circuits(problem, T) if T > 0 else None
    if alloc is None:
        return None
    iu, ju, cnt = alloc
    heavy = cnt >= 2
    if not heavy.any():
        return None
    from .bounds import switches_bind
    if switches_bind(problem.layout):
        placed_ = on_switches(problem, T, seed, min(seconds, ON_SWITCHES_S))
        if placed_ is not None:
            return placed_
    pairs = list(zip(iu[heavy].tolist(), ju[heavy].tolist(), cnt[heavy].tolist()))
    seeds = [seed] if tries <= 1 else [seed * tries + k for k in range(tries)]
    draws = [w for w in (_heavy_draw(problem.layout, pairs, s) for s in seeds) if w is not None]
    if not draws:
        return None
    return draws[_fewest_byte_hops(draws, problem.traffic.bytes_)], {(a, b) for a, b, _ in pairs}


ON_SWITCHES_S = 10.0          # `on_switches`' model: its clock at most,
ON_SWITCHES_MAX_VARS = 20000  # and its circuit variables (pairs on each switch) at most


def on_switches(problem, T: float, seed: int = 0, time_limit_s: float = ON_SWITCHES_S):
    """`heavy_pairs` where the switches bind (planes split over OCSes, explicit fibre plans): there a pair can
    hold circuits only on the OCSes both reach, and one OCS's matching serves several pairs, so the relay
    count's allocation, placed pair by pair, falls short of it (greedy too). Instead an exact model places
    it: integer circuits per switch and pair (each switch a b-matching within its radix), maximizing the relay
    count's savings at T, sum over pairs of the concave min(bytes - k B T, B T)+ of each further circuit
    (HiGHS, `time_limit_s`; its best wiring when the clock stops it). Ports it leaves are paired at random per
    switch (`seed`), the components joined. llama405b-tp8pp4-32 on spread 16-port OCSes: 0.0132703 s as built,
    against 0.0140672 s from greedy and the search after it. Returns (wiring, the pairs with two or more
    circuits) or None when the model is too large or finds nothing."""
    import highspy

    from .baselines import connect, pair_leftovers
    from .exact import _index, _wiring_from
    ix = _index(problem)
    if not 0 < sum(len(ix.on[p]) for p in ix.pairs) <= ON_SWITCHES_MAX_VARS:
        return None
    t, bt = problem.traffic.bytes_, problem.port_bytes_per_s * T
    from synth.formats import quiet_stdout
    with quiet_stdout():                                   # HiGHS's banner, at a process's first model
        H = highspy.Highs()
    H.setOptionValue("output_flag", False)
    H.setOptionValue("threads", highs_threads(0))
    H.setOptionValue("time_limit", float(time_limit_s))
    H.setOptionValue("mip_rel_gap", 1e-3)
    H.setOptionValue("random_seed", int(seed))
    y = {(s, *p): H.addIntegral(lb=0, ub=mx) for p in ix.pairs for s, mx in ix.on[p]}
    at: dict = {}
    for k, v in y.items():
        for a in k[1:]:
            at.setdefault((k[0], a), []).append(v)
        at.setdefault((k[0], None), []).append(v)
    for (s, a), vs in at.items():
        H.addConstr(sum(vs) <= (problem.layout.switch_radix[s] // 2 if a is None else int(ix.cap[a, s])))
    gains = []
    for p in ix.pairs:
        ks = np.arange(ix.max_x[p])
        g = (np.clip(t[p] - ks * bt, 0, bt) + np.clip(t[p[::-1]] - ks * bt, 0, bt)) / bt
        g = g[g > 1e-9]
        if g.size:
            z = [H.addVariable(lb=0, ub=1) for _ in g]
            H.addConstr(sum(z) - sum(y[(s, *p)] for s, _ in ix.on[p]) <= 0)
            gains += list(zip(z, g.tolist()))
    H.maximize(sum(w * z for z, w in gains))
    if H.getInfo().primal_solution_status != 2:            # no feasible point
        return None
    counts = {k: int(round(H.variableValue(v))) for k, v in y.items() if H.variableValue(v) > 0.5}
    free, made = ix.cap.copy(), np.zeros(problem.layout.switches, dtype=np.int64)
    for (s, a, b), c in counts.items():
        free[a, s] -= c
        free[b, s] -= c
        made[s] += c
    for s, a, b in pair_leftovers(free, made, np.asarray(problem.layout.switch_radix) // 2,
                                  np.random.default_rng(seed)):
        key = (s, min(a, b), max(a, b))
        counts[key] = counts.get(key, 0) + 1
    w = connect(_wiring_from(problem, counts, {}))
    x = w.adjacency()
    return w, {p for p in ix.pairs if x[p] >= 2}


def _fewest_byte_hops(draws: list[Wiring], t: np.ndarray) -> int:
    """Index of the wiring with the fewest byte-hops for demand `t` (the first among equals)."""
    if len(draws) == 1:
        return 0
    from .local_search import _hop_bytes
    return int(np.argmin([_hop_bytes(w.accelerators, w.circuit_array[:, 1], w.circuit_array[:, 3], t, dist=False)[0]
                          for w in draws]))


def _heavy_draw(lay: OCSLayout, pairs: list[tuple[int, int, int]], seed: int) -> Wiring | None:
    """One seeded draw of `heavy_pairs`: the (a, b, circuits) placed first, the other ports at random."""
    n, sop = lay.accelerators, lay.switch_of_port
    rng = np.random.default_rng(seed)
    used = np.zeros(sop.shape, dtype=bool)                 # (accelerator, port) taken
    made = np.zeros(lay.switches, dtype=np.int64)
    radix = np.asarray(lay.switch_radix) // 2
    adj = np.zeros((n, n), dtype=bool)
    circuits: list = []
    for a, b, k in pairs:
        for _ in range(int(k)):
            fa = np.bincount(sop[a][(~used[a]) & (sop[a] >= 0)], minlength=lay.switches)
            fb = np.bincount(sop[b][(~used[b]) & (sop[b] >= 0)], minlength=lay.switches)
            ok = np.flatnonzero((fa > 0) & (fb > 0) & (made < radix))
            if ok.size == 0:
                return None
            score = np.minimum(fa, fb)[ok] + rng.random(ok.size) * 0.5
            sw = int(ok[int(np.argmax(score))])
            pa = int(np.flatnonzero((sop[a] == sw) & ~used[a])[0])
            pb = int(np.flatnonzero((sop[b] == sw) & ~used[b])[0])
            used[a, pa] = used[b, pb] = True
            made[sw] += 1
            circuits.append(Circuit(sw, a, pa, b, pb))
            adj[a, b] = adj[b, a] = True
    for sw in range(lay.switches):
        a, k = np.nonzero((sop == sw) & ~used)
        order = rng.permutation(len(a))
        _pair_at_random(list(zip(a[order].tolist(), k[order].tolist())), adj, sw, int(radix[sw] - made[sw]),
                        circuits)
    return Wiring(n, lay.ports, tuple(circuits), lay)


PLACE_TRIES = 1500    # position swaps tried by `placed` (the clock is a ceiling; 1.1 s at 288 accelerators)
PLACE_POWER = 8       # the L^p norm of the link loads it lowers: the busiest links, smoothly
PLACE_FAR = 2.0       # weight of the byte-hops of pairs three or more hops apart, spread over every link


def placed(wiring: Wiring, demand: np.ndarray, seed: int = 0, tries: int = PLACE_TRIES,
           time_limit_s: float = 10.0, far: float = PLACE_FAR) -> Wiring:
    """`wiring` with its accelerators relabelled so that skewed demand loads its links evenly: a swap search
    over which accelerator sits at which vertex, lowering the L^PLACE_POWER norm of the link loads when
    every pair at distance two splits its bytes evenly over its two-hop paths. On a near-Moore graph, where
    most pairs have one two-hop path, that routing is nearly forced, and where a third of the accelerators
    carry more bytes it matters where they sit: kimi-k2-288's polarity graph routes in 1.2512 ms as built,
    1.2356 ms placed (MWU, BENCHMARKS.md). Pairs three or more hops apart (the polarity graph with vertices
    removed: on kimi-k2-288 3,430 of 82,656 ordered pairs) have no forced path; their byte-hops, times `far`,
    are spread over every link. Without that term the search put the heavier accelerators on them as often
    as anywhere (on the graph of non-adjacent removals, 4,012 such pairs: byte-hops 2.7% above the bound,
    with it 2.5%, and the time 0.0012155 -> 0.0012122 s under the path LP, BENCHMARKS.md). Only for layouts
    in which every accelerator has the same switch at every port (a relabelling keeps the circuits on their
    switches); otherwise `wiring` is returned.

    Incremental: with W = [not adjacent, not equal] / (common neighbours) and F the demand seen from the
    vertices, the loads are F o A + (F o W) A + A (F o W); a swap changes two rows and two columns of F, so
    each trial costs O(N^2), not O(N^3)."""
    from scipy.sparse.csgraph import shortest_path
    sop = wiring.layout.switch_of_port
    if not (sop == sop[0]).all() or wiring.accelerators < 4:
        return wiring
    t0 = time.perf_counter()
    n = wiring.accelerators
    A = (wiring.adjacency() > 0).astype(np.float64)
    C = A @ A
    W = np.where((A == 0) & ~np.eye(n, dtype=bool) & (C > 0), 1.0 / np.maximum(C, 1.0), 0.0)
    links = A > 0
    hops = shortest_path(A, unweighted=True)
    X = far * np.where(np.isfinite(hops) & (hops >= 3), hops, 0.0) / max(int(links.sum()), 1)
    rng = np.random.default_rng(seed)
    perm = np.arange(n)                       # vertex v hosts accelerator perm[v]
    F = demand.astype(np.float64).copy()
    G = F * W
    L = F * A + G @ A + A @ G
    S = float((F * X).sum())                  # the far pairs' share of every link
    p = PLACE_POWER

    def norm(loads: np.ndarray) -> float:
        m = float(loads.max())
        return m * float(np.mean((loads / m) ** p)) ** (1.0 / p) if m > 0 else 0.0

    cur = norm(L[links] + S)
    for trial in range(tries):
        if trial % 64 == 0 and time.perf_counter() - t0 > time_limit_s:
            break
        a, b = (int(v) for v in rng.choice(n, 2, replace=False))
        x, y = perm[a], perm[b]
        if np.array_equal(demand[x], demand[y]) and np.array_equal(demand[:, x], demand[:, y]):
            continue                              # the same bytes both ways: the swap changes nothing
        q = perm.copy()
        q[a], q[b] = q[b], q[a]
        F2 = F.copy()                             # rows and columns a, b seen from the swapped vertices
        F2[[a, b], :] = demand[q[[a, b]]][:, q]
        F2[:, [a, b]] = demand[q][:, q[[a, b]]]
        dF = F2 - F
        dG = dF * W
        ab = [a, b]
        # dG = its rows a, b + K (its columns a, b off those rows); dL = dF o A + dG A + A dG
        K = dG.copy()
        K[ab] = 0.0
        dL = dF * A
        dL[ab] += dG[ab] @ A
        dL += np.outer(K[:, a], A[a]) + np.outer(K[:, b], A[b])
        dL += np.outer(A[:, a], dG[a]) + np.outer(A[:, b], dG[b])
        dL[:, ab] += A @ K[:, ab]
        L2 = L + dL
        S2 = S + float((dF * X).sum())
        v = norm(L2[links] + S2)
        if v < cur:
            cur, perm, F, L, S = v, q, F2, L2, S2
    if (perm == np.arange(n)).all():
        return wiring
    return _renamed(wiring, perm)


def _renamed(wiring: Wiring, perm: np.ndarray) -> Wiring:
    """`wiring` with accelerator v renamed perm[v]: every circuit on its switch and ports."""
    circuits = tuple(Circuit(c.switch, int(perm[c.a]), c.a_port, int(perm[c.b]), c.b_port) for c in wiring.circuits)
    return Wiring(wiring.accelerators, wiring.ports_per_accelerator, circuits, wiring.layout)


RELABEL_CAP = 3       # `relabelled`: OCSes shared by a circuit's ends counted up to this
RELABEL_DRAWS = 300_000   # ... and its swaps drawn (moe5t-576 on 64-port OCSes: about 3 s), the clock a cap only


def relabelled(wiring: Wiring, layout: OCSLayout, seed: int = 0, time_limit_s: float = 3.0,
               draws: int = RELABEL_DRAWS) -> Wiring:
    """`wiring` (on whole planes, every accelerator alike) with its accelerators relabelled so that more of its
    circuits can sit on `layout`'s smaller OCSes (`embedded`): a swap search over which accelerator sits at
    which vertex, raising the sum over circuits of the OCSes both ends reach (up to RELABEL_CAP: a circuit
    with more choices is not harder to place), `draws` swaps drawn from `seed` (the same seed, the same labels,
    unless `time_limit_s` stops it first). Only for demand every relabelling keeps (a near-uniform
    all-to-all). moe5t-576's biaffine plane on 64-port OCSes (nine per plane): 3,623 of 5,182 circuits kept
    as built, 4,134 relabelled for 3 s (BENCHMARKS.md)."""
    n = layout.accelerators
    arr = wiring.circuit_array
    reach = (layout.capacity > 0).astype(np.int32)
    shared = np.minimum(reach @ reach.T, RELABEL_CAP)      # OCSes two accelerators both reach, capped
    u, v = arr[:, 1], arr[:, 3]
    ends = np.concatenate([u, v])                           # the circuits at each vertex
    at = np.split(np.tile(np.arange(len(arr)), 2)[np.argsort(ends, kind="stable")],
                  np.cumsum(np.bincount(ends, minlength=n))[:-1])
    lab = np.arange(n)                                      # vertex -> accelerator
    rng = np.random.default_rng(seed)
    end = time.perf_counter() + time_limit_s
    for batch in range(0, draws, 256):                      # a batch of draws between clock checks
        if time.perf_counter() > end:
            break
        for x, y in rng.integers(n, size=(min(256, draws - batch), 2)).tolist():
            if x == y:
                continue
            es = np.union1d(at[x], at[y])
            before = shared[lab[u[es]], lab[v[es]]].sum()
            lab[x], lab[y] = lab[y], lab[x]
            if shared[lab[u[es]], lab[v[es]]].sum() < before:
                lab[x], lab[y] = lab[y], lab[x]
    return _renamed(wiring, lab)


def embedded(wiring: Wiring, layout: OCSLayout, seed: int = 0, time_limit_s: float = MOST_S) -> Wiring | None:
    """`wiring` (built on whole planes, e.g. `near_moore`'s) on `layout`, whose planes are split over smaller
    OCSes: as many of the wiring's circuits as fit are kept (`colouring.most_on_switches`, `time_limit_s`),
    the rest of the ports paired at random per OCS (`seed`) and the components joined. kimi-k2-288's placed
    polarity graph on 96-port OCSes (three per plane): 2,445 of its 2,592 circuits kept (the greedy start
    2,090), the wiring 0.0012407 s as built, where the search's answer on that plan was 0.0012796 s
    (BENCHMARKS.md). None when nothing fits or the wiring has another number of accelerators."""
    from .baselines import connect, pair_leftovers
    n = layout.accelerators
    arr = wiring.circuit_array
    if wiring.accelerators != n or not len(arr):
        return None
    a, b = arr[:, 1], arr[:, 3]
    on = most_on_switches(layout, a, b, seed, time_limit_s)
    keep_e = np.flatnonzero(on >= 0)
    if not len(keep_e):
        return None
    keep_s = on[keep_e]
    radix = np.asarray(layout.switch_radix, dtype=np.int64) // 2
    free, made = layout.capacity.copy(), np.bincount(keep_s, minlength=layout.switches)
    np.subtract.at(free, (a[keep_e], keep_s), 1)
    np.subtract.at(free, (b[keep_e], keep_s), 1)
    rng = np.random.default_rng(seed)
    rest = pair_leftovers(free, made, radix, rng)
    pairs = list(zip(a[keep_e].tolist(), b[keep_e].tolist())) + [(u, v) for _, u, v in rest]
    switch_of = keep_s.tolist() + [s for s, _, _ in rest]
    return connect(Wiring(n, layout.ports, assign_ports(layout, pairs, switch_of), layout))
