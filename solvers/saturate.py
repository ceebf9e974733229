"""All-gather by saturating flows, step by step (for irregular and expander wirings).

Broadcast trees along shortest paths fix which in-circuit of a rank brings each root's data at each level,
and on an expander those levels are uneven, so per-step loads are too (30-40% above the cut bound). Here a
rank receives each root's k chunks whenever any in-neighbour holds them, split over all such in-circuits,
and a step is sized to what the ranks can take in: each step has a per-circuit chunk budget c_t (a low
quantile, over ranks, of available chunks / in-circuits, doubled until some rank can take a whole root);
every rank fills its in-circuits by a greedy b-matching (roots with the fewest holders first, each root's chunks water-filled
onto its holders' least-loaded circuits, a root only when all of its chunks fit, so holding stays
per-root). Ranks that could take more keep it for later steps, when more neighbours hold it. The time is
sum_t (alpha + c_t x chunk bytes / B), against the cut bound (n - 1) k / d chunks.
"""
from __future__ import annotations

import numpy as np

from synth.errors import InvalidInput
from synth.model import Collective, CollectiveKind, Schedule, Transfer
from synth.schedule import chunk_bytes

AG, RS, AR = CollectiveKind.ALLGATHER, CollectiveKind.REDUCESCATTER, CollectiveKind.ALLREDUCE


def saturating_allgather(fab, coll: Collective, chunks: int, quantile: float = 0.1, max_steps: int = 64) -> Schedule:
    from .schedules import compose
    if coll.kind not in (AG, RS, AR):
        raise InvalidInput("saturating flows do all-gather, reduce-scatter and all-reduce", field="algorithm")
    ranks, n = coll.ranks, len(coll.ranks)
    k = chunks // n
    sub = fab.adjacency[np.ix_(ranks, ranks)].astype(np.int64)
    inn = [np.flatnonzero(sub[:, v]) for v in range(n)]
    if any(len(x) == 0 for x in inn):
        raise InvalidInput("a rank has no circuit from the other ranks", field="ranks")
    size = chunk_bytes(Schedule(coll, chunks, ()))
    have = np.eye(n, dtype=bool)                              # have[v, r]: v holds root r's chunks
    steps: list[list[Transfer]] = []
    while not have.all():
        if len(steps) >= max_steps:
            raise InvalidInput("saturating all-gather did not finish", field="algorithm")
        holders = (sub.T > 0).astype(np.int64) @ have.astype(np.int64)   # [v, r]: in-neighbours of v holding r
        avail = (holders > 0) & ~have
        take = [avail[v].sum() * k / sub[:, v].sum() for v in range(n)]
        c = max(1, int(np.ceil(np.quantile(take, quantile))))
        while True:      # the budget grows until some rank can take a whole root (single holders need k)
            step: list[Transfer] = []
            got = np.zeros_like(have)
            for v in range(n):
                roots = np.flatnonzero(avail[v])
                if roots.size == 0:
                    continue
                us = inn[v]
                cap = c * sub[us, v]
                load = np.zeros(len(us), dtype=np.int64)
                hold = have[np.ix_(us, roots)]                    # in-neighbour x root
                for ri in np.argsort(hold.sum(axis=0), kind="stable"):
                    idx = np.flatnonzero(hold[:, ri])
                    free = cap[idx] - load[idx]
                    if free.sum() < k:
                        continue
                    give = np.zeros(len(idx), dtype=np.int64)
                    for _ in range(k):                            # water-fill the root's chunks
                        j = int(np.argmax(free - give))
                        give[j] += 1
                    load[idx] += give
                    r = int(roots[ri])
                    j = 0
                    for u_i, g in zip(idx, give):
                        for _ in range(int(g)):
                            step.append(Transfer(ranks[int(us[u_i])], ranks[v], r * k + j, size))
                            j += 1
                    got[v, r] = True
            if step or c >= k * int(sub.max()):
                break
            c = min(2 * c, k * int(sub.max()))
        if not step:
            raise InvalidInput("saturating all-gather made no progress", field="algorithm")
        steps.append(step)
        have |= got
    ag = Schedule(Collective(AG, coll.ranks, coll.bytes_), chunks, tuple(map(tuple, steps)), "saturate")
    return compose(coll, ag)
