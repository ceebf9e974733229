"""All-gather by saturating every in-circuit at every step (for expanders and other irregular wirings).

Broadcast trees along shortest paths fix which in-circuit of a rank brings each root's data at each level,
and on an expander those levels are uneven, so per-step loads are too (20-35% above the cut bound). Here
the chunks flow like a swarm: every step every directed circuit carries up to `c` chunks (c x its circuit
count), and every rank v fills its in-circuits with chunks it lacks and the sender holds, chosen by a
greedy b-matching (circuits with the fewest useful chunks pick first, each first up to an even share of
what v can get this step, so the last steps stay balanced, then up to the budget; each picks the chunks
that are rarest over the whole fabric, so scarce chunks spread first and no rank waits on one at the end;
a chunk is never delivered twice). Holdings grow geometrically, so after the first steps every circuit is full until the
last few chunks: the time approaches the cut bound (n - 1) k / d chunks x chunk bytes / B, plus one alpha
per step. The budget c trades steps (alpha each) against the partly idle last steps; the best of a few
budgets is kept. Each rank receives each chunk once, so the reverse is a valid reduce-scatter.
"""
from __future__ import annotations

import math

import numpy as np

from synth.errors import InvalidInput
from synth.model import Collective, CollectiveKind, Schedule, Transfer
from synth.schedule import chunk_bytes

AG, RS, AR = CollectiveKind.ALLGATHER, CollectiveKind.REDUCESCATTER, CollectiveKind.ALLREDUCE


def _swarm(sub: np.ndarray, k: int, c: int, seed: int, max_steps: int) -> list[list[tuple[int, int, int]]] | None:
    """Steps of (sender, receiver, chunk) with per-circuit budget c; None if it stalls."""
    n = sub.shape[0]
    C = n * k
    have = np.zeros((n, C), dtype=bool)
    have[np.repeat(np.arange(n), k), np.arange(C)] = True
    holders = np.ones(C, dtype=np.int64)
    inn = [np.flatnonzero(sub[:, v]) for v in range(n)]
    rng = np.random.default_rng(seed)
    jitter = rng.random(C)                                    # seeded tie-break among equally rare chunks
    steps: list[list[tuple[int, int, int]]] = []
    while not have.all():
        if len(steps) >= max_steps:
            return None
        step: list[tuple[int, int, int]] = []
        by_rarity = np.argsort(holders + jitter, kind="stable")   # rarest chunks first
        for v in rng.permutation(n):
            need = ~have[v]
            if not need.any():
                continue
            us = inn[v]
            useful = have[us] & need                          # in-neighbour x chunk
            taken = np.zeros(C, dtype=bool)
            mult = sub[us, v]
            # first pass: an even share of what v can get this step (the last steps stay balanced), then
            # the rest of the budget
            share = min(c, math.ceil(int(useful.any(axis=0).sum()) / int(mult.sum())))
            got = np.zeros(len(us), dtype=np.int64)
            order = np.argsort(useful.sum(axis=1), kind="stable")
            for cap in (share, c):
                for i in order:
                    room = cap * int(mult[i]) - got[i]
                    if room <= 0:
                        continue
                    pick = by_rarity[np.flatnonzero((useful[i] & ~taken)[by_rarity])[:room]]
                    if pick.size == 0:
                        continue
                    taken[pick] = True
                    got[i] += pick.size
                    u = int(us[i])
                    step += [(u, int(v), int(x)) for x in pick]
        if not step:
            return None
        for u, v, x in step:
            have[v, x] = True
        holders = have.sum(axis=0)
        steps.append(step)
    return steps


def saturating_allgather(fab, coll: Collective, chunks: int, budgets: tuple[int, ...] | None = None,
                         seed: int = 0) -> Schedule:
    """All-gather (reduce-scatter, all-reduce by reversal) on the ranks' own circuits; see the module doc.
    `budgets`: the per-circuit chunk budgets to try (default: around the alpha / bandwidth balance)."""
    from .schedules import compose
    if coll.kind not in (AG, RS, AR):
        raise InvalidInput("saturating flows do all-gather, reduce-scatter and all-reduce", field="algorithm")
    ranks, n = coll.ranks, len(coll.ranks)
    k = chunks // n
    sub = fab.adjacency[np.ix_(ranks, ranks)].astype(np.int64)
    if any(not sub[:, v].any() for v in range(n)):
        raise InvalidInput("a rank has no circuit from the other ranks", field="ranks")
    size = chunk_bytes(Schedule(coll, chunks, ()))
    if budgets is None:
        # steps ~ (n - 1) k / (d c), each paying alpha; the idle tail grows with c: c* ~ sqrt(steps_1 alpha / w)
        d = max(1, int(sub.sum(axis=0).min()))
        w = size / fab.port_bytes_per_s * 1e6                # us per chunk on one circuit
        star = math.sqrt((n - 1) * k / d * max(fab.alpha_us, 1e-9) / max(2 * w, 1e-12))
        budgets = tuple(sorted({max(1, min(k * n, int(round(star * f)))) for f in (0.5, 1.0, 2.0)}))
    best: tuple[float, int, list] | None = None
    for c in budgets:
        raw = _swarm(sub, k, c, seed, max_steps=4 * n * k)
        if raw is None:
            continue
        t = 0.0                                               # the analytical time, from the raw steps
        for st in raw:
            a = np.asarray(st, dtype=np.int64)
            per = np.bincount(a[:, 0] * n + a[:, 1], minlength=n * n)
            t += fab.alpha_us + (per / np.maximum(sub.ravel(), 1)).max() * size / fab.port_bytes_per_s * 1e6
        if best is None or t < best[0]:
            best = (t, c, raw)
    if best is None:
        raise InvalidInput("the saturating all-gather stalled (a rank unreachable on the ranks' circuits?)",
                           field="ranks")
    _, c, raw = best
    steps = tuple(tuple(Transfer(ranks[u], ranks[v], x, size) for u, v, x in st) for st in raw)
    return compose(coll, Schedule(Collective(AG, coll.ranks, coll.bytes_), chunks, steps, f"saturate(c={c})"))
