"""Dimension-ordered and hierarchical collective schedules.

The ranks are laid out on a grid (row-major: rank index i has coordinates unravel(i, dims)); a *line* is
the ranks that differ in one coordinate only. A schedule runs one phase per dimension, each phase a
collective inside every line at once:

- all-gather: a phase gathers, inside each line, everything its members hold so far (after dimension i a
  rank holds its whole sub-grid over dimensions 0..i); reduce-scatter is the reverse with reductions and
  all-reduce both (:func:`solvers.schedules.compose`);
- all-to-all: a phase moves every chunk along the line to the member whose coordinate matches the
  chunk's destination (dimension-ordered routing, store-and-forward between phases).

Inside a line the phase is one direct step where the line's members are pairwise connected (a full-mesh
dimension), a bidirectional ring (half of each member's data each way, m - 1
steps) where consecutive members are connected around the line (a torus dimension), else one step on
shortest paths. :func:`grid_dims` recognizes tori and full meshes of any dimension from the wiring;
:func:`group_dims` recognizes a grouped wiring (blocks of consecutive ranks with dense circuits inside)
for the hierarchical two-level schedule on the grid (groups, group size): dimension 0 indexes the group, so
its lines join the same local rank of every group; the inter-group phase runs first for all-gather (where
it carries the least data) and last for all-to-all.
"""
from __future__ import annotations

import itertools

import numpy as np

from synth.errors import InvalidInput
from synth.model import Collective, CollectiveKind, Schedule, Transfer
from synth.schedule import chunk_bytes

AG, RS, AR, A2A = (CollectiveKind.ALLGATHER, CollectiveKind.REDUCESCATTER, CollectiveKind.ALLREDUCE,
                   CollectiveKind.ALLTOALL)


def _lines(dims: tuple[int, ...], axis: int) -> list[list[int]]:
    """Rank indices of every line along `axis`, each in coordinate order."""
    grid = np.arange(int(np.prod(dims))).reshape(dims)
    moved = np.moveaxis(grid, axis, -1).reshape(-1, dims[axis])
    return [list(map(int, row)) for row in moved]


def _merge(parts: list[list[list[Transfer]]]) -> list[list[Transfer]]:
    """Run step lists side by side: step t of the result is step t of every part that has one."""
    out: list[list[Transfer]] = []
    for part in parts:
        for t, st in enumerate(part):
            if t == len(out):
                out.append([])
            out[t] += st
    return out


def _line_of(dims: tuple[int, ...], axis: int, rank_index: int) -> int:
    """Index into _lines(dims, axis) of the line through `rank_index`."""
    c = list(np.unravel_index(rank_index, dims))
    del c[axis]
    rest = tuple(d for i, d in enumerate(dims) if i != axis)
    return int(np.ravel_multi_index(tuple(c), rest)) if rest else 0


def _line_kind(sub: np.ndarray, line: list[int]) -> str:
    m = len(line)
    block = sub[np.ix_(line, line)] > 0
    if (block | np.eye(m, dtype=bool)).all():
        return "mesh"
    if m > 2 and all(block[i, (i + 1) % m] for i in range(m)):
        return "ring"
    return "paths"


def grid_dims(adjacency: np.ndarray, ranks: tuple[int, ...]) -> tuple[int, ...] | None:
    """Dimensions (>= 2 of them, each >= 2) such that the ranks' circuits are exactly a torus / full-mesh
    grid in row-major rank order: every circuit joins two ranks of one line, and every line is a ring or a
    full mesh. None when no factorization fits."""
    n = len(ranks)
    sub = adjacency[np.ix_(ranks, ranks)] > 0
    for nd in (3, 2, 4):
        for dims in (p for f in _factorizations(n, nd) for p in sorted(set(itertools.permutations(f)))):
            coords = np.array(np.unravel_index(np.arange(n), dims)).T
            differ = (coords[:, None, :] != coords[None, :, :]).sum(axis=2)
            if (sub & (differ != 1)).any():
                continue
            if all(_line_kind(sub, ln) != "paths" for ax in range(nd) for ln in _lines(dims, ax)):
                return dims
    return None


def _factorizations(n: int, parts: int) -> list[tuple[int, ...]]:
    """Non-decreasing factorizations of n into `parts` factors >= 2, the most balanced first."""
    def rec(m: int, parts: int, lo: int) -> list[tuple[int, ...]]:
        if parts == 1:
            return [(m,)] if m >= lo else []
        return [(f, *rest) for f in range(lo, int(round(m ** (1 / parts))) + 1) if m % f == 0
                for rest in rec(m // f, parts - 1, f)]
    return sorted(rec(n, parts, 2), key=lambda d: (max(d) - min(d), d))


def group_dims(adjacency: np.ndarray, ranks: tuple[int, ...]) -> tuple[int, int] | None:
    """(groups, group size) when blocks of consecutive ranks hold circuits at least twice as dense inside as
    between them and each block is connected by its own circuits; the densest such blocking. None
    otherwise."""
    from scipy.sparse.csgraph import connected_components
    n = len(ranks)
    sub = adjacency[np.ix_(ranks, ranks)]
    best = None
    for g in range(3, n // 2 + 1):
        if n % g:
            continue
        blocks = np.arange(n) // g
        inside = blocks[:, None] == blocks[None, :]
        inner = sub[inside].sum() / max(1, inside.sum() - n)
        outer = sub[~inside].sum() / max(1, (~inside).sum())
        if inner <= 2 * outer:                 # a real grouping: at least twice as dense inside
            continue
        if any(connected_components(sub[b * g:(b + 1) * g, b * g:(b + 1) * g] > 0)[0] > 1 for b in range(n // g)):
            continue
        if best is None or inner / max(outer, 1e-12) > best[0]:
            best = (inner / max(outer, 1e-12), (n // g, g))
    return None if best is None else best[1]


def _transfer(fab, ranks, a: int, b: int, c: int, size: float, reduce: bool = False,
              path: tuple[int, ...] | None = None) -> Transfer:
    src, dst = ranks[a], ranks[b]
    return Transfer(src, dst, c, size, reduce, fab.path(src, dst) if path is None else path)


def _gather_phase(fab, ranks, sub, line: list[int], held: dict[int, list[int]], size: float) -> list[list[Transfer]]:
    """All-gather inside one line: every member ends with the union of the members' chunk lists."""
    m = len(line)
    kind = _line_kind(sub, line)
    if kind != "ring":
        return [[_transfer(fab, ranks, a, b, c, size) for a in line for b in line if a != b for c in held[a]]]
    steps: list[list[Transfer]] = [[] for _ in range(m - 1)]
    for i, a in enumerate(line):
        half = len(held[a]) // 2
        for direction, part in ((1, held[a][:half]), (-1, held[a][half:])):
            for t in range(m - 1):   # member i's part reaches i + direction * (t + 1) in step t
                src, dst = line[(i + direction * t) % m], line[(i + direction * (t + 1)) % m]
                steps[t] += [_transfer(fab, ranks, src, dst, c, size, path=()) for c in part]
    return steps


def _ring_path(line: list[int], i: int, j: int, ranks, parity: int) -> tuple[int, ...]:
    m = len(line)
    fw, bw = (j - i) % m, (i - j) % m
    step = 1 if fw < bw or (fw == bw and parity == 0) else -1
    hops = fw if step == 1 else bw
    return tuple(ranks[line[(i + step * h) % m]] for h in range(1, hops))


def dimension_ordered(fab, coll: Collective, chunks: int, dims: tuple[int, ...] | None = None,
                      order: tuple[int, ...] | None = None, name: str = "dim-ordered",
                      rotate: bool = True) -> Schedule:
    """The dimension-ordered schedule of `coll` on the grid `dims` (default: recognized from the wiring),
    dimensions taken in `order` (default: 0, 1, ...). With `rotate`, the chunks are split into one lane
    per dimension and lane l takes the dimensions in the order rotated by l, so every phase keeps every
    dimension's circuits busy (needs at least one chunk per rank, all-to-all: per pair, and lane; the lanes
    are balanced when those chunks divide by the dimensions)."""
    from .schedules import compose, validate_group
    validate_group(fab, coll, chunks)
    ranks, n = coll.ranks, len(coll.ranks)
    sub = fab.adjacency[np.ix_(ranks, ranks)]
    dims = dims or grid_dims(fab.adjacency, ranks)
    if dims is None or int(np.prod(dims)) != n:
        raise InvalidInput("the ranks' circuits are not a torus / full-mesh grid", field="algorithm")
    order = order or tuple(range(len(dims)))
    size = chunk_bytes(Schedule(coll, chunks, ()))
    coords = np.array(np.unravel_index(np.arange(n), dims)).T
    kinds = {(ax, i): _line_kind(sub, ln) for ax in range(len(dims)) for i, ln in enumerate(_lines(dims, ax))}
    steps: list[list[Transfer]] = []
    if coll.kind == A2A:
        k = chunks // (n * n)
        ids = np.array([(s * n + d) * k + j for s in range(n) for d in range(n) if s != d for j in range(k)],
                       dtype=np.int64)
        L = len(order) if rotate and k >= len(order) else 1
        lane_of = (ids % k) % L    # lane l: the chunks j = l mod L of every pair, dimensions rotated by l
        lanes = []
        for lane in range(L):
            mine = ids[lane_of == lane]
            at = mine // (n * k)                              # current holder: the source
            dest = (mine // k) % n
            lane_steps = []
            for ax in order[lane:] + order[:lane]:
                here = coords[at].copy()
                here[:, ax] = coords[dest, ax]
                target = np.ravel_multi_index(tuple(here.T), dims)
                lines = _lines(dims, ax)
                moving = target != at
                step = []
                toggle: dict[tuple[int, int], int] = {}
                for c, x, y in zip(mine[moving].tolist(), at[moving].tolist(), target[moving].tolist()):
                    li = _line_of(dims, ax, x)
                    ln, kind = lines[li], kinds[(ax, li)]
                    tie = toggle.get((x, y), 0)                 # antipodal ring moves alternate directions
                    toggle[(x, y)] = 1 - tie
                    path = _ring_path(ln, ln.index(x), ln.index(y), ranks, tie) if kind == "ring" else \
                        (() if kind == "mesh" else None)
                    step.append(_transfer(fab, ranks, x, y, c, size, path=path))
                at = target
                if step:
                    lane_steps.append(step)
            lanes.append(lane_steps)
        steps = _merge(lanes)
        return Schedule(coll, chunks, tuple(map(tuple, steps)), name)
    if coll.kind not in (AG, RS, AR):
        raise InvalidInput(f"{name} does not do {coll.kind.value}", field="algorithm")
    k = chunks // n
    L = len(order) if rotate and k >= len(order) else 1
    lanes = []
    for lane in range(L):          # lane l: chunks j = l mod L of every rank, dimensions rotated by l
        held = {a: [a * k + j for j in range(lane, k, L)] for a in range(n)}
        lane_steps: list[list[Transfer]] = []
        for ax in order[lane:] + order[:lane]:
            lines = _lines(dims, ax)
            lane_steps += _merge([_gather_phase(fab, ranks, sub, ln, held, size) for ln in lines])
            held = {a: union for ln in lines for union in [sorted(c for m in ln for c in held[m])] for a in ln}
        lanes.append(lane_steps)
    steps = _merge(lanes)
    ag = Schedule(Collective(AG, coll.ranks, coll.bytes_), chunks, tuple(map(tuple, steps)), name)
    return compose(coll, ag)


def hierarchical(fab, coll: Collective, chunks: int) -> Schedule:
    """Two-level schedule on a grouped wiring (:func:`group_dims`): for all-gather the inter-group phase
    (same local rank across groups) first, then inside the groups; all-to-all inside the groups first."""
    dims = group_dims(fab.adjacency, coll.ranks)
    if dims is None:
        raise InvalidInput("the ranks' circuits show no group structure", field="algorithm")
    order = (1, 0) if coll.kind == A2A else (0, 1)
    return dimension_ordered(fab, coll, chunks, dims, order, name="hierarchical", rotate=False)
