"""Symmetry breaking for the exact wiring models.

A relabelling of accelerators that maps the demand matrix, the port budgets and the circuit-capable pairs
onto themselves (an automorphism) maps every wiring onto one of the same objective, so branch-and-bound
explores each optimum up to |Aut| times. For a decode step that group is large: a TP-8 x PP-2 deployment
is invariant under every permutation of the eight TP positions applied to both stages (8! = 40,320).

The rows added are the stabilizer-chain (Schreier-Sims style) orderings of one root's row, which are valid
for any group G: fix a root r; for the orbits of the stabilizer G_r pick a point a of a non-trivial orbit O
and require x[r, a] >= x[r, b] for every b in O (some g in G_r maps the heaviest b onto a); then fix a and
repeat with G_{r, a}. Each later group fixes the earlier points and permutes the earlier orbits, so it
keeps the earlier rows satisfied and the rows hold together: at least one optimum survives.

Orbits of a point stabilizer are computed exactly by individualization-refinement (a small nauty: fixed
points get unique colours, the two points tested share one; Weisfeiler-Leman colour refinement, on arrays,
splits off the points no automorphism can exchange, and a search individualizes the rest). Every automorphism
a test finds is kept, and those fixing the current points join whole orbits without further tests. The tests
share a budget of WORK refinements per instance (qwen3-235b-64: 8,800 of them, 7 s; before the kept
automorphisms and the array refinement, one level of the chain took 91 s and the whole chain hours); a test
that runs out keeps its two points apart, which only shrinks orbits, so the rows stay valid (fewer of them).
Only small instances (the exact models' range, MAX_NODES) get here.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

MAX_NODES = 64
WORK = 20000      # refinements (about 0.6 ms each at 64 nodes) for one instance's rows; then the rows so far
WORK_PER_S = 100  # refinements per second of the solve's time limit, at 4,096 edges (fewer on more edges)
WORK_MIN = 200    # refinements however short the limit (small instances need a few dozen)


def _graph(t: np.ndarray, pair_kind: dict[tuple[int, int], object], node_kind: list) -> nx.DiGraph:
    """Demand digraph with pair attributes; pairs of the most common kind (usually: every pair can hold
    circuits) carry no edge, so the graph stays as sparse as the demand."""
    n = t.shape[0]
    kinds = [pair_kind.get((i, j)) for i in range(n) for j in range(i + 1, n)]
    common = max(set(kinds), key=kinds.count) if kinds else None
    g = nx.DiGraph()
    for v in range(n):
        g.add_node(v, kind=node_kind[v])
    for i in range(n):
        for j in range(n):
            kind = pair_kind.get((min(i, j), max(i, j))) if i != j else common
            if t[i, j] > 0 or kind != common:
                g.add_edge(i, j, w=(float(t[i, j]), kind))
    return g


class _OutOfWork(Exception):
    pass


def _arrays(g: nx.DiGraph) -> tuple[int, np.ndarray, np.ndarray, np.ndarray, int]:
    """(n, edge sources, edge targets, edge attribute classes, number of classes) of `g` (nodes 0..n-1),
    cached on it."""
    if "arrays" not in g.graph:
        classes: dict = {}
        src, dst, cls = [], [], []
        for u, v, d in g.edges(data=True):
            src.append(u)
            dst.append(v)
            cls.append(classes.setdefault(d["w"], len(classes)))
        g.graph["arrays"] = (g.number_of_nodes(), np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64),
                             np.asarray(cls, dtype=np.int64), max(1, len(classes)))
    return g.graph["arrays"]


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer: a fixed hash of int64 codes to uint64."""
    z = x.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _colour_arrays(g: nx.DiGraph, colours: list[dict[int, object]]) -> np.ndarray:
    """Colourings (node -> any label) as rows of ints, numbered jointly so that ids compare across them."""
    names = {c: k for k, c in enumerate(sorted({repr(c) for col in colours for c in col.values()}))}
    return np.array([[names[repr(col[v])] for v in range(g.number_of_nodes())] for col in colours], dtype=np.int64)


def _refine(g: nx.DiGraph, colours: list[dict[int, object]]) -> list[dict[int, int]]:
    """Weisfeiler-Leman colour refinement of one or more colourings of `g`, refined jointly so that colour
    ids are comparable across them (an isomorphism-invariant stable partition)."""
    return [dict(enumerate(row.tolist())) for row in _refine_arrays(g, _colour_arrays(g, colours))]


def _refine_arrays(g: nx.DiGraph, cols: np.ndarray) -> np.ndarray:
    """:func:`_refine` on colourings as rows of ints. A node's new colour is its colour with the multisets of
    (colour, edge class) of its in- and out-neighbours, each multiset hashed as a sum of mixed codes (a hash
    collision can only merge two colours: a coarser partition, which the exact check in :func:`_extend`
    still answers correctly). Vectorized: the pure-Python refinement took 15-30 ms per call at 64 nodes,
    and a stabilizer chain there makes thousands of calls."""
    n, src, dst, cls, width = _arrays(g)
    k = cols.shape[0]
    while True:
        sig = np.empty((k, n, 3), dtype=np.uint64)
        for r in range(k):
            c = cols[r]
            sig[r, :, 0] = c.astype(np.uint64)
            for col_i, (a, b) in enumerate(((src, dst), (dst, src)), start=1):    # in-, then out-neighbours
                h = np.zeros(n, dtype=np.uint64)
                np.add.at(h, b, _mix(c[a] * width + cls + col_i * (1 << 40)))
                sig[r, :, col_i] = h
        # new colours: (old colour, hash of both neighbour multisets) numbered in sorted order (a 1-D sort;
        # np.unique over rows took most of the time)
        old, nb = sig[:, :, 0].ravel(), _mix(sig[:, :, 1] ^ _mix(sig[:, :, 2])).ravel()
        order = np.lexsort((nb, old))
        step = np.empty(order.size, dtype=np.int64)
        step[0] = 0
        step[1:] = (old[order][1:] != old[order][:-1]) | (nb[order][1:] != nb[order][:-1])
        new = np.empty(order.size, dtype=np.int64)
        new[order] = np.cumsum(step)
        new = new.reshape(k, n)
        if all(np.count_nonzero(np.bincount(new[r])) == np.count_nonzero(np.bincount(cols[r])) for r in range(k)):
            return new
        cols = new


def _extend(g: nx.DiGraph, c1: np.ndarray, c2: np.ndarray, work: list[int], depth: int = 0) -> dict[int, int] | None:
    """An automorphism of `g` mapping colouring c1 onto c2 (colour arrays), or None when there is none.
    Individualization-refinement with backtracking (a small nauty): refine both, compare, and individualize
    a node of the smallest non-singleton cell. Each refinement spends one unit of `work`; _OutOfWork when
    it is gone."""
    if work[0] <= 0:
        raise _OutOfWork
    work[0] -= 1
    r1, r2 = _refine_arrays(g, np.stack([c1, c2]))
    s1 = np.bincount(r1)
    s2 = np.bincount(r2, minlength=s1.size)
    if s1.size != s2.size or not np.array_equal(s1, s2):
        return None
    multi = np.flatnonzero(s1 > 1)
    if multi.size == 0:
        m = np.empty(r1.size, dtype=np.int64)
        m[np.argsort(r1)] = np.argsort(r2)                # node with colour c -> the node with colour c
        n, src, dst, cls, width = _arrays(g)
        code = lambda a, b, c: (a * n + b) * width + c   # noqa: E731
        if np.array_equal(np.sort(code(src, dst, cls)), np.sort(code(m[src], m[dst], cls))):
            return dict(enumerate(m.tolist()))
        return None
    cell = int(multi[np.argmin(s1[multi])])                 # the smallest, the lowest colour among equals
    v1 = int(np.flatnonzero(r1 == cell)[0])
    ind = int(max(r1.max(), r2.max())) + 1
    for v2 in np.flatnonzero(r2 == cell).tolist():
        n1, n2 = r1.copy(), r2.copy()
        n1[v1] = n2[v2] = ind
        m = _extend(g, n1, n2, work, depth + 1)
        if m is not None:
            return m
    return None


def _base_colours(g: nx.DiGraph, fixed: list[int]) -> dict[int, object]:
    colour = {v: ("k", g.nodes[v]["kind"]) for v in g}
    for k, v in enumerate(fixed):
        colour[v] = ("fixed", k)
    return colour


def _same_orbit(g: nx.DiGraph, fixed: list[int], a: int, b: int, work: list[int]) -> dict[int, int] | None:
    """An automorphism fixing `fixed` pointwise that maps a to b, or None (none exists, or the work ran out:
    then a and b are kept apart, which leaves orbits smaller and the rows valid)."""
    if work[0] <= 0:
        return None
    c1 = _base_colours(g, fixed)
    c2 = dict(c1)
    c1[a] = c2[b] = ("moved",)
    cols = _colour_arrays(g, [c1, c2])      # _extend refines them
    try:
        return _extend(g, cols[0], cols[1], work)
    except _OutOfWork:
        return None


def orbits(g: nx.DiGraph, fixed: list[int], gens: list[dict[int, int]] | None = None,
           work: list[int] | None = None) -> list[list[int]]:
    """Orbits of the stabilizer of `fixed` (pointwise) on the other nodes, exactly while `work` lasts.
    `gens` holds automorphisms found so far (it gains the ones found here); those fixing `fixed` join their
    points' orbits without a test, so a large orbit costs a few tests instead of one per point."""
    gens = [] if gens is None else gens
    work = [WORK] if work is None else work
    parent = list(range(g.number_of_nodes()))

    def find(v: int) -> int:
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    def join(m: dict[int, int]) -> None:
        for u, v in m.items():
            ru, rv = find(u), find(v)
            if ru != rv:
                parent[max(ru, rv)] = min(ru, rv)

    for m in gens:
        if all(m[v] == v for v in fixed):
            join(m)
    cells: dict[int, list[int]] = {}
    for v, c in _refine(g, [_base_colours(g, fixed)])[0].items():
        if v not in fixed:
            cells.setdefault(c, []).append(v)
    out: list[list[int]] = []
    for cell in cells.values():
        reps: list[int] = []
        for v in sorted(cell):
            if any(find(v) == find(r) for r in reps):
                continue
            for r in reps:
                m = _same_orbit(g, fixed, r, v, work)
                if m is not None:
                    gens.append(m)
                    join(m)
                    break
            else:
                reps.append(v)
        groups: dict[int, list[int]] = {}
        for v in sorted(cell):
            groups.setdefault(find(v), []).append(v)
        out.extend(groups.values())
    return sorted(out, key=lambda o: (-len(o), o[0]))


def row_orderings(t: np.ndarray, pair_kind: dict[tuple[int, int], object], node_kind: list,
                  max_levels: int | None = None, seconds: float | None = None) -> list[tuple[int, int, int]]:
    """Symmetry-breaking rows (r, a, b), each meaning x[r, a] >= x[r, b], valid for the automorphism
    group of the demand digraph with node and pair attributes (see the module doc). `seconds`, the time
    limit of the solve they are for, scales the work budget (WORK_PER_S; a fixed count, so the rows are
    the same on every machine): about 7% of the limit goes to the rows."""
    n = t.shape[0]
    if n > MAX_NODES or n < 3:
        return []
    g = _graph(t, pair_kind, node_kind)
    gens: list[dict[int, int]] = []
    edges = _arrays(g)[1].size + n
    work = [WORK if seconds is None else min(WORK, max(WORK_MIN, int(seconds * WORK_PER_S * 4096 / edges)))]
    first = orbits(g, [], gens, work)
    if len(first[0]) < 2:
        return []
    # the root: a node of the largest orbit, or a node every relabelling fixes (e.g. an end of a fixed
    # circuit), whose row can then be sorted over the whole group's orbits; the one giving more rows
    roots = [first[0][0]] + [o[0] for o in first if len(o) == 1][:1]
    best: list[tuple[int, int, int]] = []
    for root in roots:
        fixed = [root]
        rows: list[tuple[int, int, int]] = []
        while max_levels is None or len(fixed) <= max_levels:
            orb = next((o for o in orbits(g, fixed, gens, work) if len(o) > 1), None)
            if orb is None:
                break
            a = orb[0]
            rows.extend((root, a, b) for b in orb[1:])
            fixed.append(a)
        if len(rows) > len(best):
            best = rows
    return best
