"""Collective algorithms as phases of concurrent transfers, for the analytical and flow models.

A phase is an (n x n) matrix of bytes rank i sends rank j of the group, repeated `repeat` times back to back
(each repetition is one step with its own alpha). Message size conventions follow
:class:`~synth.model.CollectiveKind`: all-reduce M = each rank's buffer; all-gather M = the full output;
reduce-scatter M = the full input; all-to-all M = what each rank sends in all.

>>> algs = algorithms("allreduce", 4, 8.0)
>>> sorted(algs)
['direct', 'recursive', 'ring', 'tree']
>>> [(ph.repeat, float(ph.pattern.sum(axis=1)[0])) for ph in algs["ring"]]
[(6, 2.0)]
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .model import CollectiveKind


@dataclass(frozen=True, eq=False)
class Phase:
    pattern: np.ndarray
    repeat: int = 1


def _uniform(n: int, per_pair: float) -> np.ndarray:
    p = np.full((n, n), per_pair)
    np.fill_diagonal(p, 0.0)
    return p


def _shift(n: int, nbytes: float, k: int = 1) -> np.ndarray:
    p = np.zeros((n, n))
    p[np.arange(n), (np.arange(n) + k) % n] = nbytes
    return p


def _xor(n: int, mask: int, nbytes: float) -> np.ndarray:
    p = np.zeros((n, n))
    p[np.arange(n), np.arange(n) ^ mask] = nbytes
    return p


def _tree(n: int, M: float) -> list[Phase]:
    """Binary-tree all-reduce (heap order, parent of i is (i - 1) // 2): the whole buffer is reduced up one
    level per phase, deepest first, then broadcast down: 2 x depth phases of M bytes per tree edge."""
    depth = np.floor(np.log2(np.arange(n) + 1)).astype(int)
    up = []
    for d in range(int(depth.max()), 0, -1):
        pat = np.zeros((n, n))
        kids = np.flatnonzero(depth == d)
        pat[kids, (kids - 1) // 2] = M
        up.append(Phase(pat))
    return up + [Phase(ph.pattern.T.copy()) for ph in reversed(up)]


def algorithms(kind: CollectiveKind | str, n: int, message_bytes: float,
               pattern: np.ndarray | None = None) -> dict[str, list[Phase]]:
    """Candidate algorithms for a collective on n ranks: name -> phases."""
    kind = CollectiveKind(kind)
    M = float(message_bytes)
    pow2 = n & (n - 1) == 0
    logn = n.bit_length() - 1
    out: dict[str, list[Phase]] = {}
    if kind in (CollectiveKind.ALLTOALL, CollectiveKind.ALLTOALLV, CollectiveKind.P2P):
        pat = pattern if pattern is not None else _uniform(n, M / max(n - 1, 1))
        out["direct"] = [Phase(pat)]
        if kind == CollectiveKind.ALLTOALL and pattern is None and n > 2:
            # pairwise exchange: n-1 steps, step k sends to rank + k
            out["pairwise"] = [Phase(_shift(n, M / (n - 1), k)) for k in range(1, n)]
        return out
    if kind == CollectiveKind.BROADCAST:
        out["direct"] = [Phase(np.pad(np.full((1, n - 1), M), ((0, n - 1), (1, 0))))]
        return out
    if kind == CollectiveKind.ALLREDUCE:
        out["direct"] = [Phase(_uniform(n, M / n)), Phase(_uniform(n, M / n))]
        out["ring"] = [Phase(_shift(n, M / n), 2 * (n - 1))]
        if pow2 and n > 1:
            rs = [Phase(_xor(n, 1 << k, M / (2 << k))) for k in range(logn)]
            out["recursive"] = rs + rs[::-1]
        out["tree"] = _tree(n, M)
        return out
    # all-gather / reduce-scatter
    out["direct"] = [Phase(_uniform(n, M / n))]
    out["ring"] = [Phase(_shift(n, M / n), n - 1)]
    if pow2 and n > 1:
        steps = [Phase(_xor(n, 1 << k, M / n * (1 << k))) for k in range(logn)]
        out["recursive"] = steps if kind == CollectiveKind.ALLGATHER else steps[::-1]
    return out


def _lines(coords: np.ndarray, k: int) -> np.ndarray:
    """Line id of each rank along dimension k (ranks sharing every other coordinate)."""
    other = np.delete(coords, k, axis=1)
    _, line = np.unique(other, axis=0, return_inverse=True)
    return line.ravel()


def dimension_ordered(kind: CollectiveKind | str, coords: np.ndarray, message_bytes: float,
                      per_pair_bytes: float | None = None) -> list[Phase] | None:
    """Phases of the dimension-ordered algorithm on a grid (torus or full-mesh dimensions): one phase per
    dimension, each an exchange within the lines of that dimension. None unless the ranks form a full grid
    (the product of their coordinate sets). All-to-all: a rank sends each line peer the data for all
    destinations with that peer's coordinate, per_pair x n / L_k; all-gather: phase k forwards everything
    gathered so far, M / n x prod(L_j, j < k) per peer; reduce-scatter mirrors it; all-reduce = RS + AG.

    >>> c = np.array([(x, y) for x in range(2) for y in range(3)])
    >>> [float(ph.pattern[0].sum()) for ph in dimension_ordered("alltoall", c, 5.0)]
    [3.0, 4.0]
    """
    kind = CollectiveKind(kind)
    n, D = coords.shape
    sizes = [len(np.unique(coords[:, k])) for k in range(D)]
    if int(np.prod(sizes)) != n or len({tuple(r) for r in coords.tolist()}) != n:
        return None
    live = [k for k in range(D) if sizes[k] > 1]
    M = float(message_bytes)

    def phase(k: int, per: float) -> Phase:
        line = _lines(coords, k)
        pat = np.where(line[:, None] == line[None, :], per, 0.0)
        np.fill_diagonal(pat, 0.0)
        return Phase(pat)
    if kind in (CollectiveKind.ALLTOALL, CollectiveKind.ALLTOALLV):
        pp = per_pair_bytes if per_pair_bytes is not None else M / max(n - 1, 1)
        return [phase(k, pp * n / sizes[k]) for k in live]
    if kind in (CollectiveKind.ALLGATHER, CollectiveKind.REDUCESCATTER, CollectiveKind.ALLREDUCE):
        ag, held = [], M / n
        for k in live:
            ag.append(phase(k, held))
            held *= sizes[k]
        rs = ag[::-1]
        return {CollectiveKind.ALLGATHER: ag, CollectiveKind.REDUCESCATTER: rs}.get(kind, rs + ag)
    return None


def hierarchical(kind: CollectiveKind | str, local: np.ndarray, message_bytes: float) -> list[Phase] | None:
    """Two-level all-reduce / all-gather / reduce-scatter for switched fabrics: `local[i]` is rank i's leaf
    (or node). Reduce-scatter inside each leaf (M / m per peer), all-reduce of each 1/m share across
    leaves among ranks with the same local index, all-gather inside each leaf; only the 1/m share crosses
    the oversubscribed core. None unless every leaf holds the same number m > 1 of ranks and there is more
    than one leaf."""
    kind = CollectiveKind(kind)
    n = len(local)
    leaves, counts = np.unique(local, return_counts=True)
    if len(leaves) < 2 or len(set(counts.tolist())) != 1 or counts[0] < 2:
        return None
    m, L = int(counts[0]), len(leaves)
    M = float(message_bytes)
    order = np.argsort(local, kind="stable")
    pos = np.empty(n, dtype=np.int64)
    pos[order] = np.arange(n) % m                     # local index of each rank within its leaf
    same_leaf = local[:, None] == local[None, :]
    same_pos = pos[:, None] == pos[None, :]
    intra = np.where(same_leaf, M / m, 0.0)
    np.fill_diagonal(intra, 0.0)
    inter = np.where(same_pos & ~same_leaf, (M / m) / L, 0.0)
    if kind == CollectiveKind.ALLREDUCE:
        return [Phase(intra), Phase(inter), Phase(inter), Phase(intra)]
    if kind == CollectiveKind.ALLGATHER:    # gather across leaves first (small), then inside the leaf
        return [Phase(np.where(same_pos & ~same_leaf, M / n, 0.0)), Phase(np.where(same_leaf & ~np.eye(n, dtype=bool), M / m, 0.0))]
    if kind == CollectiveKind.REDUCESCATTER:
        return [Phase(np.where(same_leaf & ~np.eye(n, dtype=bool), M / m, 0.0)), Phase(np.where(same_pos & ~same_leaf, M / n, 0.0))]
    return None
