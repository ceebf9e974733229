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

Orbits of a point stabilizer are computed exactly by coloured-digraph isomorphism (networkx VF2: fixed
points get unique colours, the two points tested share one), after Weisfeiler-Leman colour refinement has
split off the points no automorphism can exchange. Only small instances (the exact models' range) get here.
"""
from __future__ import annotations

import networkx as nx
import numpy as np

MAX_NODES = 64


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


def _refine(g: nx.DiGraph, colours: list[dict[int, object]]) -> list[dict[int, int]]:
    """Weisfeiler-Leman colour refinement of one or more colourings of `g`, refined jointly so that colour
    ids are comparable across them (an isomorphism-invariant stable partition)."""
    names = {c: k for k, c in enumerate(sorted({repr(c) for col in colours for c in col.values()}))}
    cols = [{v: names[repr(c)] for v, c in col.items()} for col in colours]
    pred = {v: [(u, hash(d["w"])) for u, d in g.pred[v].items()] for v in g}
    succ = {v: [(u, hash(d["w"])) for u, d in g.succ[v].items()] for v in g}
    while True:
        sigs = [{v: (col[v], tuple(sorted((col[u], w) for u, w in pred[v])),
                     tuple(sorted((col[u], w) for u, w in succ[v]))) for v in g} for col in cols]
        ids = {s: k for k, s in enumerate(sorted({s for sig in sigs for s in sig.values()}))}
        new = [{v: ids[sig[v]] for v in g} for sig in sigs]
        if all(len(set(n_.values())) == len(set(c.values())) for n_, c in zip(new, cols)):
            return new
        cols = new


def _extend(g: nx.DiGraph, c1: dict[int, object], c2: dict[int, object], depth: int = 0) -> bool:
    """Is there an automorphism of `g` mapping colouring c1 onto c2? Individualization-refinement with
    backtracking (a small nauty): refine both, compare, and individualize a non-singleton cell."""
    r1, r2 = _refine(g, [c1, c2])
    h1: dict[int, list[int]] = {}
    h2: dict[int, list[int]] = {}
    for v, c in r1.items():
        h1.setdefault(c, []).append(v)
    for v, c in r2.items():
        h2.setdefault(c, []).append(v)
    if {c: len(v) for c, v in h1.items()} != {c: len(v) for c, v in h2.items()}:
        return False
    cell = min((c for c, vs in h1.items() if len(vs) > 1), key=lambda c: (len(h1[c]), c), default=None)
    if cell is None:
        m = {h1[c][0]: h2[c][0] for c in h1}
        return all(g.has_edge(m[u], m[v]) and g[m[u]][m[v]]["w"] == d["w"] for u, v, d in g.edges(data=True))
    v1 = h1[cell][0]
    for v2 in h2[cell]:
        n1 = dict(r1)
        n2 = dict(r2)
        n1[v1] = n2[v2] = ("ind", depth)
        if _extend(g, n1, n2, depth + 1):
            return True
    return False


def _same_orbit(g: nx.DiGraph, fixed: list[int], a: int, b: int) -> bool:
    c1 = {v: ("k", g.nodes[v]["kind"]) for v in g}
    for k, v in enumerate(fixed):
        c1[v] = ("fixed", k)
    c2 = dict(c1)
    c1[a] = c2[b] = ("moved",)
    return _extend(g, c1, c2)


def orbits(g: nx.DiGraph, fixed: list[int]) -> list[list[int]]:
    """Orbits of the stabilizer of `fixed` (pointwise) on the other nodes, exactly."""
    colour = {v: ("k", g.nodes[v]["kind"]) for v in g}
    for k, v in enumerate(fixed):
        colour[v] = ("fixed", k)
    cells: dict[int, list[int]] = {}
    for v, c in _refine(g, [colour])[0].items():
        if v not in fixed:
            cells.setdefault(c, []).append(v)
    out: list[list[int]] = []
    for cell in cells.values():
        reps: list[list[int]] = []
        for v in sorted(cell):
            for orb in reps:
                if _same_orbit(g, fixed, orb[0], v):
                    orb.append(v)
                    break
            else:
                reps.append([v])
        out.extend(reps)
    return sorted(out, key=lambda o: (-len(o), o[0]))


def row_orderings(t: np.ndarray, pair_kind: dict[tuple[int, int], object], node_kind: list,
                  max_levels: int | None = None) -> list[tuple[int, int, int]]:
    """Symmetry-breaking rows (r, a, b), each meaning x[r, a] >= x[r, b], valid for the automorphism
    group of the demand digraph with node and pair attributes (see the module doc)."""
    n = t.shape[0]
    if n > MAX_NODES or n < 3:
        return []
    g = _graph(t, pair_kind, node_kind)
    first = orbits(g, [])
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
            orb = next((o for o in orbits(g, fixed) if len(o) > 1), None)
            if orb is None:
                break
            a = orb[0]
            rows.extend((root, a, b) for b in orb[1:])
            fixed.append(a)
        if len(rows) > len(best):
            best = rows
    return best
