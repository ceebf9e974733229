"""Baseline wirings: the constructions a wiring must beat, and the default wiring of the evaluator.

- :func:`expander`: union of p random perfect matchings, one per OCS switch (a random p-regular multigraph,
  realizable by construction: matching k goes on switch k), joined into one component when it is not
  (:func:`connect`; at 2 ports a union of two matchings often is not).
- :func:`torus3d`: the 3D torus as circuits, ports split evenly over the 6 directions.
"""
from __future__ import annotations

import numpy as np

from synth.errors import Infeasible, InvalidInput
from synth.model import Circuit, OCSLayout, Wiring
from synth.realize import assign_ports, realize


def expander(layout: OCSLayout, seed: int = 0) -> Wiring:
    """One random (near-)perfect matching per switch over the accelerators with a port on it.

    >>> from synth.model import OCSLayout
    >>> w = expander(OCSLayout.uniform(8, 3), seed=1)
    >>> len(w.circuits), sorted(set(w.degree().tolist()))
    (12, [3])
    """
    rng = np.random.default_rng(seed)
    n, sop = layout.accelerators, layout.switch_of_port
    circuits = []
    for s in range(layout.switches):
        a, k = np.nonzero(sop == s)               # every (accelerator, port) on switch s
        order = rng.permutation(len(a))
        a, k = a[order], k[order]
        # pair ports of different accelerators; a port whose partner would be its own accelerator waits
        limit = layout.switch_radix[s] // 2
        stack_a: list[int] = []
        stack_k: list[int] = []
        made = 0
        for x, y in zip(a.tolist(), k.tolist()):
            j = next((i for i in range(len(stack_a) - 1, -1, -1) if stack_a[i] != x), None)
            if j is not None and made < limit:
                circuits.append(Circuit(s, stack_a.pop(j), stack_k.pop(j), x, y))
                made += 1
            else:
                stack_a.append(x)
                stack_k.append(y)
    return connect(Wiring(n, layout.ports, tuple(circuits), layout, solve=None))


def torus3d(layout: OCSLayout, dims: tuple[int, ...], seed: int = 0) -> Wiring:
    """A torus with the given dimensions as circuits (`torus_pairs`), realized by edge colouring (where the
    layout does not hold it all, as much of it as it holds, the ports left paired at random: `_realized`; a
    port the even split leaves over, as the third of three on a ring, stays dark where the whole torus fits)."""
    pairs = torus_pairs(layout, dims)
    w = _realized(layout, pairs, seed)
    return connect(fill_spare_ports(w, seed) if len(w.circuits) < len(pairs) else w)


def torus_pairs(layout: OCSLayout, dims: tuple[int, ...]) -> list[tuple[int, int]]:
    """The torus's circuits as accelerator pairs: each dimension of size > 1 gets an even share of the ports
    (2 * (p // 2D), the remainder two at a time to the first dimensions; p the OCS ports every accelerator
    has), half to each direction (a dimension of size 2 gives both halves to its one neighbour)."""
    n, p = layout.accelerators, int(layout.capacity.sum(axis=1).min())
    if int(np.prod(dims)) != n:
        raise InvalidInput(f"{'x'.join(map(str, dims))} is not {n} accelerators", field="dims")
    coords = np.array(np.unravel_index(np.arange(n), dims)).T
    live = [k for k, L in enumerate(dims) if L > 1]
    D = max(1, len(live))
    share = [2 * (p // (2 * D)) + (2 if q < (p % (2 * D)) // 2 else 0) for q in range(D)]
    pairs: list[tuple[int, int]] = []
    for k, ports_k in zip(live, share):
        L = dims[k]
        nb = coords.copy()
        nb[:, k] = (nb[:, k] + 1) % L
        other = np.ravel_multi_index(nb.T, dims)
        for a, b in zip(range(n), other.tolist()):
            if L == 2:
                if a < b:
                    pairs += [(a, b)] * ports_k
            else:
                pairs += [(a, b)] * (ports_k // 2)
    return pairs


def torus_dims(n: int, ports: int) -> tuple[int, ...]:
    """Dimensions for the torus baseline: as many as the ports allow (up to 3, two ports each), near-equal
    and even where possible (a torus of even rings is bipartite, so its circuits always colour)."""
    from synth.fabric import near_cubic_dims
    D = max(1, min(3, ports // 2))
    if D == 3:
        return near_cubic_dims(n, even=True)
    if D == 1:
        return (n,)
    best = None
    for even in (True, False):
        for a in range(1, int(np.sqrt(n)) + 1):
            if n % a == 0 and (not even or (a % 2 == 0 and (n // a) % 2 == 0)):
                best = (a, n // a)
        if best:
            return best
    return (1, n)


def connect(wiring: Wiring, keep: tuple[Circuit, ...] = ()) -> Wiring:
    """`wiring` with its components joined by 2-swaps inside one switch: a circuit (a, b) on a cycle of one
    component (not a bridge: a and b stay joined without it) and a circuit (c, d) of another component on the
    same switch become (a, c) and (b, d) on the same ports, which joins the two components and keeps every
    port's switch and every accelerator's degree. Repeated until one component remains or no such pair of
    circuits exists (e.g. one port per accelerator); deterministic. A random union of two matchings is often
    disconnected (hotspot6 at 2 ports: two components, every demand between them unserved). The circuits in
    `keep` (fixed circuits) are never moved.

    >>> from synth.model import Circuit, OCSLayout
    >>> lay = OCSLayout.uniform(6, 2)
    >>> tri = [(0, 1), (1, 2), (2, 0), (3, 4), (4, 5), (5, 3)]        # two triangles on switches 0 and 1
    >>> cs = [Circuit(k % 2, a, k % 2, b, 1 - k % 2) for k, (a, b) in enumerate(tri)]
    >>> w = Wiring(6, 2, tuple(cs), lay)
    >>> from scipy.sparse.csgraph import connected_components
    >>> connected_components(w.adjacency())[0], connected_components(connect(w).adjacency())[0]
    (2, 1)
    """
    import networkx as nx
    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components
    arr = wiring.circuit_array.copy()
    if arr.shape[0] < 2:
        return wiring
    changed = False
    n = wiring.accelerators
    free = ~_rows_of(arr, keep)       # the circuits the swaps may move
    for _ in range(n):       # each swap joins two components
        g = sp.coo_matrix((np.ones(arr.shape[0]), (arr[:, 1], arr[:, 3])), shape=(n, n))
        k, comp = connected_components(g, directed=False)
        if k <= 1:
            break
        key = np.minimum(arr[:, 1], arr[:, 3]) * n + np.maximum(arr[:, 1], arr[:, 3])
        _, inv, mult = np.unique(key, return_inverse=True, return_counts=True)
        on = np.unique(np.stack([arr[free, 0], comp[arr[free, 1]]], axis=1), axis=0)[:, 0]   # (switch, component)
        mixed = np.bincount(on, minlength=int(arr[:, 0].max()) + 1) >= 2          # switches with two or more
        # the first circuit on such a switch that lies on a cycle (or is one of parallel circuits), tried one
        # at a time: on dense wirings the first one is (all bridges of moe5t-576's greedy wiring, once per
        # component joined, took 2.3 s of its 4.7)
        cand = np.flatnonzero(free & mixed[arr[:, 0]])
        first = next((e for e in cand[:BRIDGE_TRIES].tolist() if mult[inv[e]] > 1 or _on_cycle(arr, e, n)), None)
        if first is None:       # every bridge at once: for the circuits beyond those, and for re-pointing
            bridges = np.array([min(e) * n + max(e) for e in nx.bridges(nx.Graph(arr[:, [1, 3]].tolist()))] or [-1])
            loose = ~np.isin(key, bridges) | (mult[inv] > 1)     # on a cycle, or one of parallel circuits
            rest = np.flatnonzero(loose & free & mixed[arr[:, 0]])
            first = int(rest[0]) if rest.size else None
        if first is None:
            # no two components meet on a switch, e.g. an accelerator whose every port is free while its
            # switches' radix is spent: re-point a circuit on a cycle (a, b) to (a, x), x a free port on
            # that switch in another component (b keeps its other paths; x joins)
            moved = _repoint(wiring.layout, arr, comp, np.flatnonzero(loose & free))
            if moved is not None:
                e1, x, xp = moved
                arr[e1, 3:] = (x, xp)
                changed = True
                continue
            # or put an accelerator x of another component with two free ports on a circuit's switch into
            # the circuit: (a, b) becomes (a, x) and (x, b) where the switch's radix has room (a and b stay
            # joined through x, so even a bridge may take it)
            moved = _insert(wiring.layout, arr, comp, np.flatnonzero(free))
            if moved is None:
                break
            e1, x, xp, xq = moved
            s, b, bp = int(arr[e1, 0]), int(arr[e1, 3]), int(arr[e1, 4])
            arr[e1, 3:] = (x, xp)
            arr = np.vstack([arr, [[s, x, xq, b, bp]]])
            free = np.append(free, True)
            changed = True
            continue
        e1 = int(first)
        e2 = int(np.flatnonzero((arr[:, 0] == arr[e1, 0]) & (comp[arr[:, 1]] != comp[arr[e1, 1]]) & free)[0])
        (s, a, ap, b, bp), (_, c, cp, d, dp) = arr[e1].tolist(), arr[e2].tolist()
        arr[e1], arr[e2] = (s, a, ap, c, cp), (s, b, bp, d, dp)
        changed = True
    if not changed:
        return wiring
    circuits = tuple(Circuit(*map(int, r)) for r in arr)
    return Wiring(wiring.accelerators, wiring.ports_per_accelerator, circuits, wiring.layout, solve=None)


BRIDGE_TRIES = 4    # circuits `connect` tests one by one for lying on a cycle before finding every bridge


def _on_cycle(arr: np.ndarray, e: int, n: int) -> bool:
    """Do the ends of circuit `e` of the circuit array stay joined without it (it is not a bridge)?"""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import breadth_first_order
    rest = np.delete(arr, e, axis=0)
    g = sp.coo_matrix((np.ones(rest.shape[0]), (rest[:, 1], rest[:, 3])), shape=(n, n)).tocsr()
    return bool(np.isin(arr[e, 3], breadth_first_order(g, int(arr[e, 1]), directed=False,
                                                        return_predecessors=False)))


def _rows_of(arr: np.ndarray, circuits: tuple[Circuit, ...]) -> np.ndarray:
    """(rows,) bool: the rows of the circuit array `arr` that are one of `circuits` (either orientation)."""
    if not circuits:
        return np.zeros(arr.shape[0], dtype=bool)
    keys = {_key(c.switch, c.a, c.a_port, c.b, c.b_port) for c in circuits}
    return np.array([_key(*r) in keys for r in arr.tolist()], dtype=bool).reshape(arr.shape[0])


def _key(s: int, a: int, ap: int, b: int, bp: int) -> tuple:
    """A circuit's switch and its two (accelerator, port) ends in order: the same for either orientation."""
    return (s, (a, ap), (b, bp)) if (a, ap) <= (b, bp) else (s, (b, bp), (a, ap))


def residual(layout: OCSLayout, fixed: tuple[Circuit, ...]) -> OCSLayout:
    """The layout the fixed circuits leave to the rest: their ports off every OCS, each switch's radix two
    ports less per fixed circuit on it."""
    sop = layout.switch_of_port.copy()
    radix = list(layout.switch_radix)
    for c in fixed:
        sop[c.a, c.a_port] = sop[c.b, c.b_port] = -1
        radix[c.switch] -= 2
    return OCSLayout(sop, tuple(max(0, r) for r in radix))


def around(fixed: tuple[Circuit, ...], layout: OCSLayout, build, join: bool = True) -> Wiring:
    """`build(layout)` (a construction) around the fixed circuits: built on the layout they leave
    (:func:`residual`), the fixed circuits added on their own ports, the components joined without moving them
    (unless `join` is off: a direct-only wiring)."""
    if not fixed:
        return build(layout)
    rest = build(residual(layout, fixed))
    w = Wiring(layout.accelerators, layout.ports, tuple(fixed) + rest.circuits, layout)
    return connect(w, keep=fixed) if join else w


def holds(wiring: Wiring, fixed: tuple[Circuit, ...]) -> bool:
    """Does `wiring` hold every fixed circuit on its own ports?"""
    have = {_key(*r) for r in wiring.circuit_array.tolist()}
    return all(_key(c.switch, c.a, c.a_port, c.b, c.b_port) in have for c in fixed)


def impose(wiring: Wiring, fixed: tuple[Circuit, ...]) -> Wiring:
    """`wiring` with every fixed circuit on its own ports. A circuit of the same pair on the same switch takes
    the fixed ports (the circuit that held them takes its old ones: the multigraph is unchanged, so an exact
    model's answer, which holds the fixed pairs but numbers ports its own way, keeps its objective); else the
    circuits on the fixed ports, (a, c) and (b, d), become the fixed (a, b) and (c, d) on the same switch (a
    2-swap: degrees kept), a circuit of that switch is dropped if the fixed one needs its radix, and the
    components are joined (where the swaps split one) without moving a fixed circuit."""
    if holds(wiring, fixed):
        return wiring
    radix = wiring.layout.switch_radix
    rows: list[list[int]] = []
    live: list[bool] = []
    at = {}                 # (accelerator, port) -> the row of the circuit on it
    of_pair: dict[tuple[int, int, int], list[int]] = {}    # (switch, a < b) -> rows, dead ones included
    of_switch: dict[int, list[int]] = {}
    count = np.zeros(len(radix), dtype=np.int64)           # live circuits per switch

    def add(r: list[int]) -> int:
        i = len(rows)
        rows.append(r)
        live.append(True)
        at[r[1], r[2]] = at[r[3], r[4]] = i
        of_pair.setdefault((r[0], min(r[1], r[3]), max(r[1], r[3])), []).append(i)
        of_switch.setdefault(r[0], []).append(i)
        count[r[0]] += 1
        return i

    def drop(i: int) -> None:
        r = rows[i]
        live[i] = False
        del at[r[1], r[2]], at[r[3], r[4]]
        count[r[0]] -= 1

    for r in wiring.circuit_array.tolist():
        add(r)
    claimed: set[int] = set()
    swapped = False
    for f in fixed:
        s, a, ka, b, kb = f.switch, f.a, f.a_port, f.b, f.b_port
        same = [i for i in of_pair.get((s, min(a, b), max(a, b)), ()) if live[i] and i not in claimed]
        if same:
            i = next((j for j in same if at.get((a, ka)) == j), same[0])
            r = rows[i]
            if r[1] != a:
                r[1:5] = [r[3], r[4], r[1], r[2]]
            for col, x, k in ((2, a, ka), (4, b, kb)):
                old = r[col]
                if old == k:
                    continue
                j = at.get((x, k))
                if j is None:
                    del at[x, old]
                else:                    # the circuit on x's port k (same switch) moves to x's port `old`
                    rows[j][2 if (rows[j][1], rows[j][2]) == (x, k) else 4] = old
                    at[x, old] = j
                r[col] = k
                at[x, k] = i
            claimed.add(i)
            continue
        swapped = True
        ends = []
        for x, k in ((a, ka), (b, kb)):
            j = at.get((x, k))
            if j is not None:
                r = rows[j]
                ends.append((r[3], r[4]) if (r[1], r[2]) == (x, k) else (r[1], r[2]))
                drop(j)
        claimed.add(add([s, a, ka, b, kb]))
        if len(ends) == 2 and ends[0][0] != ends[1][0]:
            add([s, *ends[0], *ends[1]])
        for i in reversed(of_switch[s]):          # the fixed circuit may need a circuit's share of the radix
            if count[s] <= radix[s] // 2:
                break
            if live[i] and i not in claimed:
                drop(i)
    circuits = tuple(Circuit(*r) for r, ok in zip(rows, live) if ok)
    w = Wiring(wiring.accelerators, wiring.ports_per_accelerator, circuits, wiring.layout)
    return connect(w, keep=fixed) if swapped and _pieces(w) > _pieces(wiring) else w


def _pieces(wiring: Wiring) -> int:
    """Connected components of `wiring` that hold a circuit."""
    from scipy.sparse.csgraph import connected_components
    adj = wiring.adjacency() > 0
    _, label = connected_components(adj, directed=False)
    return int(np.unique(label[adj.any(axis=1)]).size)


def _repoint(layout: OCSLayout, arr: np.ndarray, comp: np.ndarray, loose: np.ndarray):
    """(circuit index, accelerator, port) for `connect`'s re-pointing move, or None: the first circuit on a
    cycle whose switch has a free port of an accelerator in another component."""
    fa, fp = np.nonzero(~_used_ports(layout, arr) & (layout.switch_of_port >= 0))
    fs = layout.switch_of_port[fa, fp]
    for e in loose.tolist():
        hit = np.flatnonzero((fs == arr[e, 0]) & (comp[fa] != comp[arr[e, 1]]))
        if hit.size:
            return e, int(fa[hit[0]]), int(fp[hit[0]])
    return None


def _insert(layout: OCSLayout, arr: np.ndarray, comp: np.ndarray, rows: np.ndarray):
    """(circuit index, accelerator, port, port) for `connect`'s insertion move, or None: the first of `rows`
    whose switch has room for one more circuit and two free ports of one accelerator in another component."""
    used = _used_ports(layout, arr)
    on = np.bincount(arr[:, 0], minlength=layout.switches)
    for e in rows.tolist():
        s = int(arr[e, 0])
        if on[s] >= layout.switch_radix[s] // 2:
            continue
        fa, fp = np.nonzero(~used & (layout.switch_of_port == s))
        keep = comp[fa] != comp[arr[e, 1]]
        fa, fp = fa[keep], fp[keep]
        two = np.flatnonzero(np.bincount(fa, minlength=layout.accelerators) >= 2)
        if two.size:
            x = int(two[0])
            p1, p2 = fp[fa == x][:2].tolist()
            return e, x, int(p1), int(p2)
    return None


def _used_ports(layout: OCSLayout, arr: np.ndarray) -> np.ndarray:
    """(N, ports) bool: the ports the circuits of `arr` (a circuit array) occupy."""
    used = np.zeros(layout.switch_of_port.shape, dtype=bool)
    used[arr[:, 1], arr[:, 2]] = True
    used[arr[:, 3], arr[:, 4]] = True
    return used


def _from_switch_pairs(layout: OCSLayout, pairs: list[tuple[int, int]], switch_of: list[int]) -> Wiring:
    return Wiring(layout.accelerators, layout.ports, assign_ports(layout, pairs, switch_of), layout)


def greedy(traffic: np.ndarray, layout: OCSLayout, seed: int = 0, direct: bool = False,
           have: np.ndarray | None = None) -> Wiring:
    """Largest-demand-first direct circuits (as MixNet): repeatedly give a circuit to the pair with the most
    demand per circuit, (T_ij + T_ji) / (circuits + 1), on a switch where both ends still have a port;
    ports left over pair up inside their switch, and the components are joined (2-swaps). `direct` (a
    direct-only wiring): every pair that exchanges bytes gets its first circuit before any pair a second,
    and nothing is swapped afterwards (a swap could take a pair's only circuit). `have` (symmetric N x N):
    circuits the pairs already hold (built on the ports those leave: :func:`around`), counted per pair."""
    import heapq
    n = layout.accelerators
    t = traffic + traffic.T
    held = np.zeros((n, n), dtype=np.int64) if have is None else np.asarray(have)
    free = layout.capacity.copy()
    on_switch = np.zeros(layout.switches, dtype=np.int64)
    radix = np.array([r // 2 for r in layout.switch_radix])
    i, j = np.nonzero(np.triu(t, 1))
    k0 = held[i, j].tolist()
    heap = [(direct and k > 0, -t[a, b] / (k + 1), int(a), int(b), k)      # (a further circuit, -demand per ...)
            for a, b, k in zip(i.tolist(), j.tolist(), k0)]
    heapq.heapify(heap)
    pairs: list[tuple[int, int]] = []
    switch_of: list[int] = []
    left = free.sum(axis=1).tolist()      # ports each accelerator has free: most pops end here, without numpy
    while heap:
        *_, a, b, k = heapq.heappop(heap)
        if not (left[a] and left[b]):
            continue
        ok = np.flatnonzero((free[a] > 0) & (free[b] > 0) & (on_switch < radix))
        if ok.size == 0:
            continue
        s = int(ok[np.argmax(free[a, ok] + free[b, ok])])
        free[a, s] -= 1
        free[b, s] -= 1
        left[a] -= 1
        left[b] -= 1
        on_switch[s] += 1
        pairs.append((a, b))
        switch_of.append(s)
        heapq.heappush(heap, (direct, -t[a, b] / (k + 2), a, b, k + 1))
    for s, a, b in pair_leftovers(free, on_switch, radix, np.random.default_rng(seed)):
        pairs.append((a, b))
        switch_of.append(s)
    w = _from_switch_pairs(layout, pairs, switch_of)
    return w if direct else connect(w)


def pair_leftovers(free: np.ndarray, made: np.ndarray, most: np.ndarray, rng) -> list[tuple[int, int, int]]:
    """The ports left (`free`: accelerators x switches) paired at random within their switch, never an
    accelerator with itself, while switch s holds fewer than most[s] circuits (`made`, updated): the
    (switch, a, b) of each new circuit."""
    out = []
    for s in range(free.shape[1]):
        stack = [int(a) for a in rng.permutation(np.repeat(np.arange(free.shape[0]), free[:, s]))]
        while len(stack) >= 2 and made[s] < most[s]:
            a = stack.pop()
            k = next((q for q in range(len(stack) - 1, -1, -1) if stack[q] != a), None)
            if k is None:
                break
            out.append((s, a, stack.pop(k)))
            made[s] += 1
    return out


def greedy_matching(i: np.ndarray, j: np.ndarray, weight: np.ndarray, n: int) -> list[int]:
    """The greedy matching of the edges (i[e], j[e]) on n nodes: heaviest first (ties: the earlier edge),
    each taken when both its ends are still free. Returns the taken edges' indices in the order taken.

    The same matching as the edge-by-edge loop, scanned in blocks: each step finds the next edge with both
    ends free in a block of the sorted edges at once (the block doubles while none is found), so the Python
    work grows with the edges taken, not the edges passed over (a 576-accelerator all-to-all: 165,600
    edges, 288 taken)."""
    order = np.argsort(-np.asarray(weight), kind="stable")
    ii, jj = np.asarray(i, dtype=np.int64)[order], np.asarray(j, dtype=np.int64)[order]
    free = np.ones(n, bool)
    taken: list[int] = []
    pos, block = 0, 256
    while pos < order.size:
        ok = free[ii[pos:pos + block]] & free[jj[pos:pos + block]]
        k = int(np.argmax(ok))
        if not ok[k]:
            pos, block = pos + block, block * 2
            continue
        free[ii[pos + k]] = free[jj[pos + k]] = False
        taken.append(int(order[pos + k]))
        pos += k + 1
        block = max(256, block // 2)
    return taken


BLOSSOM_MAX = 128   # accelerators; networkx's Blossom takes 1.7 s per matching at 144 (10 matchings: 17 s)


def topoopt_pairs(traffic: np.ndarray, layout: OCSLayout, ring_ports: int | None = None
                  ) -> tuple[list[tuple[int, int]], list[int]]:
    """TopoOpt-style's circuits as accelerator pairs, and the switch of each where the construction colours
    itself (a uniform layout): `ring_ports` ports per accelerator (default: half, rounded down to even) form
    rings i -> i + k for strides k coprime to n (TotientPerms: 1, then the next coprime strides), the rest go
    to repeated maximum-weight matchings on the demand not yet served directly (Blossom through networkx up
    to BLOSSOM_MAX accelerators, greedy matching beyond), each matching's served pairs discounted by half."""
    import math as _m
    import networkx as nx
    n = layout.accelerators
    cap = layout.capacity.sum(axis=1)        # OCS ports per accelerator (ports off every OCS do not count)
    capable = layout.shares_switch()
    ring_ports = (int(cap.min()) // 2) // 2 * 2 if ring_ports is None else min(ring_ports, int(cap.min()))
    strides = [k for k in range(1, n // 2 + 1) if _m.gcd(k, n) == 1][: ring_ports // 2]
    pairs: list[tuple[int, int]] = []
    colour: list[int] = []    # the switch of each pair when the construction colours itself (uniform layout)
    for c, k in enumerate(strides):
        # stride k is one Hamiltonian cycle 0, k, 2k, ...: alternate two switches along it when n is even
        pairs += [(a, (a + k) % n) for a in range(n)] if n > 2 else [(0, 1)]
        colour += [2 * c + (((a * pow(k, -1, n)) % n) % 2) for a in range(n)] if n > 2 else [2 * c]
    rem = (traffic + traffic.T).astype(np.float64)
    for a, b in pairs:
        rem[a, b] /= 2
        rem[b, a] /= 2
    deg = np.full(n, 2 * len(strides)) if n > 2 else np.bincount(np.array(pairs, int).ravel(), minlength=n)
    for mi in range(int(cap.max()) - 2 * len(strides)):
        room = deg < cap         # the matchings use the ports each accelerator has left
        live = rem * room[:, None] * room[None, :] * capable
        if n <= BLOSSOM_MAX:
            g = nx.Graph()
            iu, ju = np.nonzero(np.triu(live, 1) > 0)
            g.add_weighted_edges_from((int(a), int(b), float(rem[a, b])) for a, b in zip(iu, ju))
            match = nx.max_weight_matching(g, maxcardinality=False)
        else:
            iu, ju = np.nonzero(np.triu(live, 1) > 0)
            match = [(int(iu[e]), int(ju[e])) for e in greedy_matching(iu, ju, rem[iu, ju], n)]
        if not match:
            break
        for a, b in match:
            pairs.append((int(a), int(b)))
            colour.append(2 * len(strides) + mi)
            rem[a, b] /= 2
            rem[b, a] /= 2
            deg[int(a)] += 1
            deg[int(b)] += 1
    return pairs, colour


def topoopt(traffic: np.ndarray, layout: OCSLayout, seed: int = 0, ring_ports: int | None = None,
            structure: tuple[list, list] | None = None) -> Wiring:
    """TopoOpt-style (`topoopt_pairs`, or `structure` where the caller has it), the ports it leaves paired at
    random, realized on the switches (by its own colouring on a uniform layout, else `_realized`)."""
    n, p = layout.accelerators, layout.ports
    cap = layout.capacity.sum(axis=1)        # OCS ports per accelerator (ports off every OCS do not count)
    capable = layout.shares_switch()
    pairs, colour = (list(x) for x in (structure or topoopt_pairs(traffic, layout, ring_ports)))
    deg = np.bincount(np.array(pairs, dtype=np.int64).reshape(-1, 2).ravel(), minlength=n)
    # spare ports (a node left out of a matching) pair up at random so nothing stays dark
    rng = np.random.default_rng(seed)
    spare = [v for v in rng.permutation(n).tolist() for _ in range(int(cap[v] - deg[v]))]
    used = np.zeros((n, p), bool)
    own = n % 2 == 0 and n > 2 and layout.is_uniform() and min(layout.switch_radix) >= n
    for (a, b), c in zip(pairs, colour):
        used[a, c] = used[b, c] = True
    while len(spare) >= 2:
        a = spare.pop()
        k = next((i for i in range(len(spare) - 1, -1, -1) if spare[i] != a), None)
        if k is None:
            break
        b = spare.pop(k)
        pairs.append((a, b))
        both = np.flatnonzero(~used[a] & ~used[b])      # a switch where both still have their port free
        if both.size:
            colour.append(int(both[0]))
            used[a, both[0]] = used[b, both[0]] = True
        else:
            own = False
    if own:   # the construction is its own edge colouring: switch c holds the pairs of colour c
        return connect(_from_switch_pairs(layout, pairs, colour))
    pairs = [(a, b) for a, b in pairs if capable[a, b]]     # a ring's step between ports on no common switch
    return connect(fill_spare_ports(_realized(layout, pairs, seed), seed))


REALIZE_RESTARTS = 8   # colouring restarts of a baseline's whole structure before pairs are dropped
REALIZE_MOST_S = 1.0   # ... and the clock of the most that fit, where it does not colour (TopoOpt-style on split
                       # planes, 64-576 accelerators: the same count at 0.5 s as at 5 s; the torus on kimi-k2-288's
                       # 96-port OCSes 2,083 of 2,592 circuits, 2,109 at 5 s)


def _realized(layout: OCSLayout, pairs: list[tuple[int, int]], seed: int, weight=None) -> Wiring:
    """The pairs as a wiring on the switches (edge colouring); where they do not all colour (a torus on planes
    split over smaller OCSes, an odd ring on too few switches, a layout with fewer ports here and there), as
    many of them as the switches hold (`colouring.most_on_switches`), the rest left out. Before, the last
    pairs were dropped until the rest coloured: the torus on kimi-k2-288's 96-port OCSes kept 260 of its
    2,592 circuits and left accelerators with none, so `wire --solver torus` had no answer (2,083 now).
    `weight` (per pair) makes it the most weight rather than the most pairs."""
    n, p = layout.accelerators, layout.ports
    try:      # a few restarts: on 60 random instances none coloured after the fourth
        return Wiring(n, p, realize(layout, pairs, seed=seed, restarts=REALIZE_RESTARTS), layout)
    except Infeasible:
        from .colouring import most_on_switches
        arr = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        on = most_on_switches(layout, arr[:, 0], arr[:, 1], seed, REALIZE_MOST_S, weight)
        keep = np.flatnonzero(on >= 0)
        return Wiring(n, p, assign_ports(layout, arr[keep].tolist(), on[keep].tolist()), layout)


def pairs_held(wiring: Wiring, pairs: list[tuple[int, int]]) -> int:
    """How many of `pairs` (a multiset: a pair twice asks for two circuits) the wiring's circuits join."""
    n = wiring.accelerators
    arr = wiring.circuit_array
    want = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    have, h = np.unique(np.minimum(arr[:, 1], arr[:, 3]) * n + np.maximum(arr[:, 1], arr[:, 3]), return_counts=True)
    asked, a = np.unique(want.min(axis=1) * n + want.max(axis=1), return_counts=True)
    _, i, j = np.intersect1d(have, asked, assume_unique=True, return_indices=True)
    return int(np.minimum(h[i], a[j]).sum())


def fill_spare_ports(wiring: Wiring, seed: int = 0) -> Wiring:
    """`wiring` with its free ports paired inside their switch (two accelerators, within the switch's radix),
    at random, so that no port stays dark that a circuit could use."""
    lay = wiring.layout
    arr = wiring.circuit_array
    idle = ~_used_ports(lay, arr)
    on = np.bincount(arr[:, 0], minlength=lay.switches)
    rng = np.random.default_rng(seed)
    extra = []
    for s in range(lay.switches):
        free = [(int(a), int(k)) for a, k in zip(*np.nonzero((lay.switch_of_port == s) & idle))]
        free = [free[i] for i in rng.permutation(len(free))]
        room = lay.switch_radix[s] // 2 - int(on[s])     # circuits the switch's radix still takes
        while len(free) >= 2 and room > 0:
            room -= 1
            a = free.pop()
            j = next((i for i in range(len(free) - 1, -1, -1) if free[i][0] != a[0]), None)
            if j is None:
                break
            b = free.pop(j)
            extra.append(Circuit(s, a[0], a[1], b[0], b[1]))
    if not extra:
        return wiring
    return Wiring(wiring.accelerators, wiring.ports_per_accelerator, wiring.circuits + tuple(extra), lay)
