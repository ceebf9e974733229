"""Collective algorithms as phases of concurrent transfers, for the analytical and flow models.

A phase is an (n x n) matrix of bytes rank i sends rank j of the group, repeated `repeat` times back to back
(each repetition is one step with its own alpha). Message size conventions follow
:class:`~synth.model.CollectiveKind`: all-reduce M = each rank's buffer; all-gather M = the full output;
reduce-scatter M = the full input; all-to-all M = what each rank sends in all.

>>> algs = algorithms("allreduce", 4, 8.0)
>>> sorted(algs)
['direct', 'recursive', 'ring']
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
        return out
    # all-gather / reduce-scatter
    out["direct"] = [Phase(_uniform(n, M / n))]
    out["ring"] = [Phase(_shift(n, M / n), n - 1)]
    if pow2 and n > 1:
        steps = [Phase(_xor(n, 1 << k, M / n * (1 << k))) for k in range(logn)]
        out["recursive"] = steps if kind == CollectiveKind.ALLGATHER else steps[::-1]
    return out
