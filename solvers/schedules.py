"""Collective schedule synthesis on a wiring: constructions, CP-SAT synthesis, lower bounds, selection.

Every function takes the wiring's circuit-count adjacency (accelerators x accelerators) and a
:class:`~synth.model.Collective`; schedules returned here are checked by :func:`synth.schedule.check_schedule`
in :func:`best_schedule` before anything leaves this module.

Constructions (fast, always available): ``ring`` (on a Hamiltonian cycle of the ranks when the wiring has
one among them, else in rank order with forwarded hops), ``biring`` (chunks split over both directions of
the ring), ``multiring`` (both directions of every edge-disjoint Hamiltonian cycle found), ``direct`` (one
step per phase, every chunk on its own path over the whole fabric: :mod:`solvers.chunk_routing`),
``trees`` (every chunk down its own shortest-path broadcast tree, parents chosen by load), ``saturate``
(every in-circuit full at every step: :mod:`solvers.saturate`), ``dim-ordered`` / ``hierarchical``
(per-dimension phases on recognized torus / full-mesh grids and grouped wirings: :mod:`solvers.dimensional`),
``double-tree`` (all-reduce on two complementary binary trees), ``recursive``
(recursive doubling / halving for power-of-two groups), ``pairwise`` (all-to-all in n - 1
shifted steps), ``bruck`` (all-to-all in ceil(log2 n) steps). All-reduce is
reduce-scatter followed by all-gather.

Synthesis by MILP (``milp``, groups of up to 8 ranks): the time-expanded multi-commodity flow with a
duration per step, minimizing the analytical completion time for the fewest steps.

Synthesis (``cpsat``, small groups): the k-synchronous model of SCCL: have[c, v, t] / send[c, u->v, t] with
per-step rounds r_t (each directed circuit carries at most r_t chunks per step); first the fewest steps (the
latency optimum), then for each step count the fewest total rounds (the bandwidth optimum) -> the Pareto set.
Reduce-scatter is the all-gather schedule reversed with reductions; all-reduce is the two back to back.

Lower bounds: steps of a store-and-forward schedule >= the largest distance between ranks that must
exchange data and >= ceil(log_{d+1} n); time >= alpha + the longest distance's hop latency + the bandwidth
bound; all-gather / reduce-scatter bandwidth: (M / n) / min over cuts S of B_in(S) / |ranks
outside S| (the exact optimum on any graph, ForestColl), found by binary search over parametric min-cuts
(networkx max-flow); twice that for all-reduce; all-to-all: the max-concurrent-flow LP optimum
(:func:`synth.network.optimal_routing`) with the ingress and hop bounds as cheap checks. A phase done in one
step moves unicast flows only (a chunk's owner is its only holder), so it is bounded by min over hop limits
h of h x hop latency + the flow LP on paths of at most h hops (:func:`synth.network.hop_limited_routing`);
a phase in two or more steps pays one more alpha; the time bound is the smaller of the two.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from scipy.sparse.csgraph import shortest_path
import scipy.sparse as sp

from synth.errors import InvalidInput
from synth.schema import finite_number
from synth.model import Collective, CollectiveKind, Schedule, Transfer
from synth.schedule import check_schedule, chunk_bytes, schedule_time_us

AG, RS, AR, A2A = (CollectiveKind.ALLGATHER, CollectiveKind.REDUCESCATTER, CollectiveKind.ALLREDUCE,
                   CollectiveKind.ALLTOALL)


@dataclass(frozen=True)
class Fabric:
    """What schedules run on: circuit counts, bandwidth per circuit and direction, alpha, hop latency."""

    adjacency: np.ndarray
    port_bytes_per_s: float
    alpha_us: float = 0.6
    link_latency_us: float = 0.0

    def __post_init__(self) -> None:
        for name, positive in (("port_bytes_per_s", True), ("alpha_us", False), ("link_latency_us", False)):
            if not finite_number(getattr(self, name), positive):
                raise InvalidInput(f"must be a finite number {'> 0' if positive else '>= 0'}, "
                                   f"got {getattr(self, name)!r}", field=name)
        adj = np.asarray(self.adjacency)
        pred_dist = shortest_path(sp.csr_matrix(adj > 0), method="D", unweighted=True, directed=False,
                                  return_predecessors=True)
        object.__setattr__(self, "_dist", pred_dist[0])
        object.__setattr__(self, "_pred", pred_dist[1])

    @property
    def dist(self) -> np.ndarray:
        return self._dist  # type: ignore[attr-defined]

    def path(self, a: int, b: int) -> tuple[int, ...]:
        """Intermediate accelerators of a shortest path a -> b (empty for a direct circuit)."""
        if not np.isfinite(self.dist[a, b]):
            raise InvalidInput(f"ranks {a} and {b} are not connected by the wiring", field="ranks")
        out = []
        cur = self._pred[a, b]  # type: ignore[attr-defined]
        while cur != a:
            out.append(int(cur))
            cur = self._pred[a, cur]  # type: ignore[attr-defined]
        return tuple(reversed(out))

    def network(self):
        """The fabric as a :class:`synth.network.Network` (one directed link per circuit pair), cached."""
        if getattr(self, "_net", None) is None:
            from synth.network import Network
            N = self.adjacency.shape[0]
            iu, ju = np.nonzero(np.triu(self.adjacency, 1))
            object.__setattr__(self, "_net", Network.from_pairs(
                "fabric", N, N, np.stack([iu, ju], 1), self.adjacency[iu, ju] * self.port_bytes_per_s, 0))
        return self._net  # type: ignore[attr-defined]

    def time_us(self, s: Schedule) -> float:
        return schedule_time_us(s, self.adjacency, self.port_bytes_per_s, self.alpha_us, self.link_latency_us)


def _t(fab: Fabric, a: int, b: int, c: int, size: float, reduce: bool = False) -> Transfer:
    return Transfer(a, b, c, size, reduce, fab.path(a, b))


MAX_CHUNKS = 4096    # or 8x the default, if more (a dimension-ordered all-to-all needs lanes x n^2): 4,096
                     # chunks of an all-reduce on 8 ranks take 94 s and 1.9 GB (65,536 ran out of 300 s at
                     # 11 GB; 1e8 was killed for memory)


def validate_group(fab: Fabric, coll: Collective, chunks: int) -> None:
    n, N = len(coll.ranks), fab.adjacency.shape[0]
    bad = [r for r in coll.ranks if r >= N]
    if bad:
        raise InvalidInput(f"rank {bad[0]} is not in the wiring (accelerators 0..{N - 1})", field="ranks")
    d = fab.dist[np.ix_(coll.ranks, coll.ranks)]
    if not np.isfinite(d).all():
        i, j = np.argwhere(~np.isfinite(d))[0]
        raise InvalidInput(f"the wiring leaves ranks {coll.ranks[i]} and {coll.ranks[j]} disconnected", field="ranks")
    if chunks < 1:
        raise InvalidInput(f"must be >= 1, got {chunks}", field="chunks")
    most = max(MAX_CHUNKS, 8 * default_chunks(fab, coll))
    if chunks > most:
        raise InvalidInput(f"at most {most} (each chunk is a transfer in every step it moves), got {chunks}",
                           field="chunks")
    if coll.kind == A2A:
        if chunks % (n * n):
            raise InvalidInput(f"all-to-all chunks must be a multiple of n^2 = {n * n}, got {chunks}", field="chunks")
    elif chunks % n:
        raise InvalidInput(f"chunks ({chunks}) must be a multiple of the {n} ranks", field="chunks")


# --------------------------------------------------------------------------------------------------
# Constructions
# --------------------------------------------------------------------------------------------------
def hamiltonian_order(fab: Fabric, ranks: tuple[int, ...], time_limit_s: float = 1.0,
                      seed: int | None = None) -> list[int] | None:
    """A cycle through all ranks using only direct circuits among them (DFS, Warnsdorff order with seeded
    random tie-breaks when `seed` is given), or None."""
    n = len(ranks)
    if n <= 2:
        return list(ranks)
    adj = fab.adjacency[np.ix_(ranks, ranks)] > 0
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed) if seed is not None else None
    order, used = [0], np.zeros(n, dtype=bool)
    used[0] = True

    def dfs() -> bool:
        if time.perf_counter() - t0 > time_limit_s:
            return False
        if len(order) == n:
            return bool(adj[order[-1], 0])
        cand = np.flatnonzero(adj[order[-1]] & ~used)
        if rng is not None:
            cand = rng.permutation(cand)
        cand = cand[np.argsort([(adj[c] & ~used).sum() for c in cand], kind="stable")]
        for c in cand:
            used[c] = True
            order.append(int(c))
            if dfs():
                return True
            order.pop()
            used[c] = False
        return False
    import sys
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 4 * n + 100))
    try:
        found = dfs()
    finally:
        sys.setrecursionlimit(old)
    return [ranks[i] for i in order] if found else None


def _ring_steps(fab: Fabric, order: list[int], kind: CollectiveKind, k: int, size: float, idx: dict[int, int],
                direction: int = 1, chunk_offset: int = 0, chunk_stride: int = 1) -> list[list[Transfer]]:
    """Ring reduce-scatter / all-gather steps along `order` (chunk ids: piece * k + j, mapped by stride)."""
    n = len(order)
    steps: list[list[Transfer]] = []

    def cid(piece_rank: int, j: int) -> int:
        return (idx[piece_rank] * k + j) * chunk_stride + chunk_offset

    if kind in (RS, AR):
        for t in range(n - 1):
            step = []
            for i, a in enumerate(order):
                piece_rank = order[(i - direction * (1 + t)) % n]
                nxt = order[(i + direction) % n]
                step += [_t(fab, a, nxt, cid(piece_rank, j), size, True) for j in range(k)]
            steps.append(step)
    if kind in (AG, AR):
        for t in range(n - 1):
            step = []
            for i, a in enumerate(order):
                piece_rank = order[(i - direction * t) % n]
                nxt = order[(i + direction) % n]
                step += [_t(fab, a, nxt, cid(piece_rank, j), size) for j in range(k)]
            steps.append(step)
    return steps


def ring(fab: Fabric, coll: Collective, chunks: int, bidirectional: bool = False) -> Schedule:
    n = len(coll.ranks)
    if coll.kind not in (AG, RS, AR):
        raise InvalidInput(f"ring does not do {coll.kind.value}", field="algorithm")
    order = hamiltonian_order(fab, coll.ranks) or list(coll.ranks)
    idx = {a: i for i, a in enumerate(coll.ranks)}
    k = chunks // n
    size = chunk_bytes(Schedule(coll, chunks, ()))
    if not bidirectional:
        return Schedule(coll, chunks, tuple(map(tuple, _ring_steps(fab, order, coll.kind, k, size, idx))), "ring")
    if k % 2:
        raise InvalidInput("a bidirectional ring needs an even number of chunks per rank", field="chunks")
    fw = _ring_steps(fab, order, coll.kind, k // 2, size, idx, 1, 0, 1)
    bw = _ring_steps(fab, order, coll.kind, k // 2, size, idx, -1, 0, 1)
    # remap: forward uses chunks piece*k + j, backward piece*k + k/2 + j
    def remap(steps: list[list[Transfer]], off: int) -> list[list[Transfer]]:
        return [[Transfer(t.src, t.dst, (t.chunk // (k // 2)) * k + off + t.chunk % (k // 2), t.bytes_, t.reduce,
                          t.path) for t in st] for st in steps]
    steps = [a + b for a, b in zip(remap(fw, 0), remap(bw, k // 2))]
    return Schedule(coll, chunks, tuple(map(tuple, steps)), "biring")


def direct(fab: Fabric, coll: Collective, chunks: int) -> Schedule:
    """One step per phase, every chunk straight from its source to its destination on its own path: the
    rounded balanced routing with rip-up and reroute (:mod:`solvers.chunk_routing`), which spreads a rank's
    chunks over all of its circuits and relays through the rest of the fabric. All-to-all: chunk (s, d, j)
    s -> d; all-gather: rank s's chunks to every other rank; reduce-scatter: every rank's contribution to
    the owner's chunks (reduced there); all-reduce: both. All-gather style groups beyond 64 ranks use one
    shortest path per pair (the quadratic transfer count makes the other constructions better there)."""
    return direct_groups(fab, [coll], chunks)[0]


def direct_groups(fab: Fabric, colls: list[Collective], chunks: int) -> list[Schedule]:
    """:func:`direct` for several groups that run at the same time (same kind, size and bytes), their
    chunks routed together so that the groups' relays share the circuits evenly."""
    from .chunk_routing import route_chunks
    coll = colls[0]
    n = len(coll.ranks)
    if coll.kind not in (A2A, AG, RS, AR):
        raise InvalidInput(f"direct does not do {coll.kind.value}", field="algorithm")
    size = chunk_bytes(Schedule(coll, chunks, ()))
    k = chunks // (n * n) if coll.kind == A2A else chunks // n
    s_idx, d_idx = np.nonzero(~np.eye(n, dtype=bool))
    s_rep, d_rep = np.repeat(s_idx, k), np.repeat(d_idx, k)
    j_rep = np.tile(np.arange(k), s_idx.size)
    R = np.asarray([c.ranks for c in colls])                  # groups x n
    src, dst = R[:, s_rep].ravel(), R[:, d_rep].ravel()
    if coll.kind == A2A or n <= 64:
        paths = route_chunks(fab.network(), fab.adjacency, src, dst, size, fab.port_bytes_per_s,
                             fab.link_latency_us * 1e-6, rounds=24 if n * len(colls) > 64 else 60,
                             time_limit_s=20.0)
    else:
        paths = [fab.path(int(a), int(b)) for a, b in zip(src.tolist(), dst.tolist())]
    out = []
    per = s_rep.size
    for g, c in enumerate(colls):
        r = R[g]
        triples = list(zip(s_rep.tolist(), d_rep.tolist(), j_rep.tolist(), paths[g * per:(g + 1) * per]))
        if coll.kind == A2A:
            step = [Transfer(int(r[a]), int(r[b]), (a * n + b) * k + j, size, False, p) for a, b, j, p in triples]
            out.append(Schedule(c, chunks, (tuple(step),), "direct"))
            continue
        rs = tuple(Transfer(int(r[a]), int(r[b]), b * k + j, size, True, p) for a, b, j, p in triples)
        ag = tuple(Transfer(int(r[a]), int(r[b]), a * k + j, size, False, p) for a, b, j, p in triples)
        out.append(Schedule(c, chunks, {RS: (rs,), AG: (ag,), AR: (rs, ag)}[c.kind], "direct"))
    return out


def joint_time_us(fab: Fabric, scheds: list[Schedule]) -> float:
    """Analytical time of schedules that run at the same time (:func:`synth.schedule.joint_time_us`)."""
    from synth.schedule import joint_time_us as joint
    return joint(scheds, fab.adjacency, fab.port_bytes_per_s, fab.alpha_us, fab.link_latency_us)


def recursive(fab: Fabric, coll: Collective, chunks: int) -> Schedule:
    """Recursive doubling (all-gather) / halving (reduce-scatter), both for all-reduce; n a power of two."""
    n, ranks = len(coll.ranks), coll.ranks
    if n & (n - 1) or coll.kind not in (AG, RS, AR):
        raise InvalidInput("recursive doubling needs a power-of-two group and AG / RS / AR", field="algorithm")
    k = chunks // n
    size = chunk_bytes(Schedule(coll, chunks, ()))
    logn = n.bit_length() - 1
    rs_steps, ag_steps = [], []
    for t in reversed(range(logn)):            # halving: exchange the half the partner will own
        bit = 1 << t
        step = []
        for i in range(n):
            p = i ^ bit
            # pieces whose owner agrees with p on bits >= t (p's side of the split), among i's current block
            mask = ~((bit << 1) - 1) & (n - 1)
            for q in range(n):
                if (q & mask) == (i & mask) and (q & bit) == (p & bit):
                    step += [_t(fab, ranks[i], ranks[p], q * k + j, size, True) for j in range(k)]
        rs_steps.append(step)
    for t in range(logn):                      # doubling: exchange everything held so far
        bit = 1 << t
        step = []
        for i in range(n):
            p = i ^ bit
            low = (bit - 1)
            for q in range(n):
                if (q & ~low) == (i & ~low):
                    step += [_t(fab, ranks[i], ranks[p], q * k + j, size) for j in range(k)]
        ag_steps.append(step)
    steps = {RS: rs_steps, AG: ag_steps, AR: rs_steps + ag_steps}[coll.kind]
    return Schedule(coll, chunks, tuple(map(tuple, steps)), "recursive")


def bruck(fab: Fabric, coll: Collective, chunks: int) -> Schedule:
    """Bruck all-to-all: ceil(log2 n) steps; in step b every rank sends, to the rank 2^b ahead, every chunk
    whose remaining distance (destination - current holder, mod n) has bit b set (store-and-forward through
    intermediate ranks, each hop on a shortest path)."""
    n, ranks = len(coll.ranks), coll.ranks
    if coll.kind != A2A:
        raise InvalidInput("Bruck is an all-to-all algorithm", field="algorithm")
    k = chunks // (n * n)
    size = chunk_bytes(Schedule(coll, chunks, ()))
    at = {}                                             # chunk -> rank index holding it now
    for s_ in range(n):
        for d in range(n):
            if s_ != d:
                for j in range(k):
                    at[(s_ * n + d) * k + j] = s_
    steps = []
    b = 0
    while (1 << b) < n:
        step = []
        for c, cur in list(at.items()):
            d = (c // k) % n
            if ((d - cur) % n) >> b & 1:
                nxt = (cur + (1 << b)) % n
                step.append(_t(fab, ranks[cur], ranks[nxt], c, size))
                at[c] = nxt
        steps.append(tuple(step))
        b += 1
    return Schedule(coll, chunks, tuple(steps), "bruck")


def disjoint_rings(fab: Fabric, ranks: tuple[int, ...], limit: int = 4, time_limit_s: float | None = None,
                   restarts: int = 16) -> list[list[int]]:
    """Edge-disjoint Hamiltonian cycles among the ranks: find one, remove its circuits, repeat; restarted
    with seeded random tie-breaks, keeping the attempt with the most cycles."""
    t0 = time.perf_counter()
    if time_limit_s is None:
        time_limit_s = max(1.0, len(ranks) / 32)
    best: list[list[int]] = []
    for attempt in range(restarts):
        adj = fab.adjacency.copy()
        out: list[list[int]] = []
        for _ in range(limit):
            f = Fabric(adj, fab.port_bytes_per_s, fab.alpha_us, fab.link_latency_us)
            order = hamiltonian_order(f, ranks, time_limit_s / restarts, seed=attempt if attempt else None)
            if order is None or len(order) < 3 or any(adj[a, b] <= 0 for a, b in zip(order, order[1:] + order[:1])):
                break
            out.append(order)
            for a, b in zip(order, order[1:] + order[:1]):
                adj[a, b] -= 1
                adj[b, a] -= 1
        if len(out) > len(best):
            best = out
        if len(best) == limit or time.perf_counter() - t0 > time_limit_s:
            break
    return best


def multiring(fab: Fabric, coll: Collective, chunks: int) -> Schedule:
    """Chunks split over both directions of every edge-disjoint Hamiltonian cycle found among the ranks."""
    n = len(coll.ranks)
    rings = disjoint_rings(fab, coll.ranks)
    k = chunks // n
    lanes = 2 * len(rings)
    if not rings or k % lanes:
        raise InvalidInput(f"multi-ring needs chunks per rank divisible by {max(lanes, 2)}", field="chunks")
    idx = {a: i for i, a in enumerate(coll.ranks)}
    size = chunk_bytes(Schedule(coll, chunks, ()))
    per = k // lanes
    merged: list[list[Transfer]] = []
    lane = 0
    for order in rings:
        for direction in (1, -1):
            st = _ring_steps(fab, order, coll.kind, per, size, idx, direction)
            st = [[Transfer(t.src, t.dst, (t.chunk // per) * k + lane * per + t.chunk % per, t.bytes_, t.reduce,
                            t.path) for t in s_] for s_ in st]
            merged = st if not merged else [a + b for a, b in zip(merged, st)]
            lane += 1
    return Schedule(coll, chunks, tuple(map(tuple, merged)), f"multiring({len(rings)})")


def trees(fab: Fabric, coll: Collective, chunks: int) -> Schedule:
    """All-gather by broadcast trees: every chunk of every rank goes down its own shortest-path tree of the
    ranks' induced graph (store-and-forward, one level per step), each node taking as parent the
    previous-level neighbour whose circuit is least loaded in that step so far, so the chunks of all roots
    spread over all circuits. Reduce-scatter is the reverse, all-reduce both. Needs the ranks' induced
    subgraph connected."""
    ranks, n = coll.ranks, len(coll.ranks)
    if coll.kind not in (AG, RS, AR):
        raise InvalidInput("broadcast trees do all-gather, reduce-scatter and all-reduce", field="algorithm")
    sub = fab.adjacency[np.ix_(ranks, ranks)]
    dist = shortest_path(sp.csr_matrix(sub > 0), method="D", unweighted=True, directed=False)
    if not np.isfinite(dist).all():
        raise InvalidInput("the ranks' circuits among themselves do not connect them", field="ranks")
    k = chunks // n
    size = chunk_bytes(Schedule(coll, chunks, ()))
    depth = int(dist.max())
    nbrs = [np.flatnonzero(sub[v] > 0) for v in range(n)]
    load = np.zeros((depth + 1, n, n))
    steps: list[list[Transfer]] = [[] for _ in range(depth)]
    order = sorted(((r, j) for r in range(n) for j in range(k)), key=lambda rj: (rj[1], rj[0]))
    for r, j in order:
        c = r * k + j
        for v in np.argsort(dist[r], kind="stable"):
            t = int(dist[r, v])
            if t == 0:
                continue
            cand = [u for u in nbrs[v] if dist[r, u] == t - 1]
            u = min(cand, key=lambda x: (load[t, x, v] / sub[x, v], x))
            load[t, u, v] += 1
            steps[t - 1].append(Transfer(ranks[u], ranks[int(v)], c, size))
    ag = Schedule(Collective(AG, coll.ranks, coll.bytes_), chunks, tuple(map(tuple, steps)), "trees")
    return compose(coll, ag)


def double_binary_tree(fab: Fabric, coll: Collective, chunks: int) -> Schedule:
    """All-reduce on two complementary binary trees (NCCL's double binary tree): half the chunks reduce up
    tree A (heap order over the ranks) and are broadcast back down it, the other half use tree B, the same
    heap over the ranks in reverse order, so a rank that is an inner node of one tree is mostly a leaf of
    the other. One tree level per step; tree edges are circuits or forwarded shortest paths."""
    n, ranks = len(coll.ranks), coll.ranks
    if coll.kind != AR:
        raise InvalidInput("the double binary tree is an all-reduce algorithm", field="algorithm")
    if chunks % 2:
        raise InvalidInput("the double binary tree needs an even number of chunks", field="chunks")
    size = chunk_bytes(Schedule(coll, chunks, ()))
    depth = np.floor(np.log2(np.arange(n) + 1)).astype(int)
    D = int(depth.max())
    up: list[list[Transfer]] = [[] for _ in range(D)]
    down: list[list[Transfer]] = [[] for _ in range(D)]
    for tree, order in ((0, list(range(n))), (1, list(range(n))[::-1])):
        half = range(tree * chunks // 2, (tree + 1) * chunks // 2)
        for i in range(1, n):
            child, parent = ranks[order[i]], ranks[order[(i - 1) // 2]]
            level = int(depth[i])
            for c in half:
                up[D - level].append(_t(fab, child, parent, c, size, True))
                down[level - 1].append(_t(fab, parent, child, c, size))
    return Schedule(coll, chunks, tuple(map(tuple, up + down)), "double-tree")


def pairwise(fab: Fabric, coll: Collective, chunks: int) -> Schedule:
    n, ranks = len(coll.ranks), coll.ranks
    if coll.kind != A2A:
        raise InvalidInput("pairwise exchange is an all-to-all algorithm", field="algorithm")
    k = chunks // (n * n)
    size = chunk_bytes(Schedule(coll, chunks, ()))
    steps = [tuple(_t(fab, ranks[s], ranks[(s + o) % n], (s * n + (s + o) % n) * k + j, size)
                   for s in range(n) for j in range(k)) for o in range(1, n)]
    return Schedule(coll, chunks, tuple(steps), "pairwise")


# --------------------------------------------------------------------------------------------------
# Lower bounds
# --------------------------------------------------------------------------------------------------
def min_cut_ratio(fab: Fabric, ranks: tuple[int, ...], tol: float = 1e-6) -> float:
    """min over node sets S holding at least one rank of B_in(S) / |ranks outside S| (bytes/s per rank),
    by binary search on lambda with one parametric min-cut per rank (networkx max-flow)."""
    import networkx as nx
    adj = fab.adjacency
    n = len(ranks)
    i_idx, j_idx = np.nonzero(adj)
    base = nx.DiGraph()
    for a, b in zip(i_idx.tolist(), j_idx.tolist()):
        base.add_edge(a, b, capacity=float(adj[a, b]) * fab.port_bytes_per_s)
    hi = min(float(adj[:, r].sum()) * fab.port_bytes_per_s / (n - 1) for r in ranks)   # single-rank cuts
    lo = 0.0

    def feasible(lam: float) -> bool:   # every S holding a rank has B_in(S) + lam |ranks in S| >= lam n
        for t in ranks:
            g = base.copy()
            for r in ranks:
                g.add_edge("src", r, capacity=lam)
            g.add_edge(t, "sink", capacity=float("inf"))
            if nx.maximum_flow_value(g, "src", "sink") < lam * n * (1 - 1e-12):
                return False
        return True
    if feasible(hi):
        return hi
    for _ in range(60):
        mid = (lo + hi) / 2
        if feasible(mid):
            lo = mid
        else:
            hi = mid
        if hi - lo <= tol * hi:
            break
    return lo


@dataclass(frozen=True)
class Bounds:
    steps: int
    bandwidth_us: float
    time_us: float
    named: dict[str, float] = field(default_factory=dict)


def lower_bounds(fab: Fabric, coll: Collective, exact_cut_max: int = 64) -> Bounds:
    """Step and time lower bounds (see the module doc); time = steps x alpha + the bandwidth bound."""
    n, ranks, M = len(coll.ranks), coll.ranks, coll.bytes_
    d = fab.dist[np.ix_(ranks, ranks)]
    deg = int((fab.adjacency > 0).sum(axis=1).max())
    diameter = int(d.max())
    log_steps = math.ceil(math.log(n) / math.log(deg + 1)) if deg > 0 else n
    named: dict[str, float] = {"diameter_steps": diameter, "log_steps": log_steps}
    steps = max(diameter, log_steps)
    ingress = min(float(fab.adjacency[:, r].sum()) for r in ranks) * fab.port_bytes_per_s
    one_step = None    # the bandwidth + hop-latency part of a schedule doing each phase in one step
    if coll.kind in (AG, RS, AR):
        factor = 2 if coll.kind == AR else 1
        if coll.kind == AR:
            steps = max(steps, 2 * diameter)
        named["ingress_us"] = factor * (n - 1) / n * M / ingress * 1e6
        if fab.adjacency.shape[0] <= exact_cut_max:
            lam = min_cut_ratio(fab, ranks)
            named["cut_us"] = factor * (M / n) / lam * 1e6
        bw = max(v for k, v in named.items() if k.endswith("_us"))
        # a phase done in one step is n (n - 1) unicast flows of M / n (only the owner holds a chunk before
        # it); a phase in two or more steps pays another alpha
        lp, best = _one_step_us(fab, ranks, M / n, diameter) if n <= 64 else (None, None)
        if lp is not None:
            named["one_step_flow_lp_us"] = factor * lp
        if best is not None:
            one_step = factor * best
    elif coll.kind == A2A:
        per_pair = M / (n - 1)
        named["ingress_us"] = M / ingress * 1e6
        # every byte crosses at least dist(s, d) circuits; all circuits together move sum(adj) * B per second
        named["hops_us"] = per_pair * float(d.sum()) / (float(fab.adjacency.sum()) * fab.port_bytes_per_s) * 1e6
        lp, best = _one_step_us(fab, ranks, per_pair, diameter)
        if lp is not None:
            named["flow_lp_us"] = lp
        if best is not None:
            one_step = best
        bw = max(v for k, v in named.items() if k.endswith("_us"))
    else:
        bw = 0.0
    # `steps` bounds store-and-forward schedules (one circuit per transfer and step); a forwarded transfer
    # crosses several circuits in one step, so the time bound charges one alpha and the hop latency of the
    # longest distance instead.
    alphas = fab.alpha_us * (2 if coll.kind == AR else 1)
    latency = alphas + diameter * fab.link_latency_us
    time_us = latency + bw
    if one_step is not None:      # min(one step per phase, two or more)
        named["one_step_us"] = alphas + max(one_step, bw + diameter * fab.link_latency_us)
        named["more_steps_us"] = latency + fab.alpha_us + bw
        time_us = min(named["one_step_us"], named["more_steps_us"])
    return Bounds(int(steps), bw, time_us, named)


SAFE = 1 - 1e-6   # interior-point LP values (no crossover) are optimal to ~1e-8: shaved before use as bounds


def _one_step_us(fab: Fabric, ranks: tuple[int, ...], per_pair: float,
                 diameter: int) -> tuple[float | None, float | None]:
    """(max-concurrent-flow LP time of per_pair bytes between every ordered pair of ranks over the whole
    fabric, min over hop limits h of h x hop latency + the LP on paths of at most h hops), in us; a one-step
    phase pays both its busiest circuit and its longest path. Either is None when its LPs are too large or
    do not finish in time (then the bound is left out, never wrong)."""
    from synth.network import hop_limited_routing, optimal_routing
    n = len(ranks)
    if not (fab.adjacency.shape[0] <= 48 or n * int((fab.adjacency > 0).sum()) <= 400_000):
        return None, None
    N = fab.adjacency.shape[0]
    dem = np.zeros((N, N))
    dem[np.ix_(ranks, ranks)] = per_pair
    dem[ranks, ranks] = 0
    net = fab.network()
    try:   # a bound we cannot compute in time is left out, never fatal
        lp = optimal_routing(net, dem, time_limit_s=10.0, crossover=False)[0] * 1e6 * SAFE
    except InvalidInput:
        lp = None
    lat = fab.link_latency_us
    if lat <= 0 or n * n * int((fab.adjacency > 0).sum()) > 2_000_000:
        return lp, None if lp is None else diameter * lat + lp
    # every hop limit h from the diameter up, while h x latency + a bandwidth floor can still win
    ingress = min(float(fab.adjacency[:, r].sum()) for r in ranks) * fab.port_bytes_per_s
    floor = max(lp or 0.0, (n - 1) * per_pair / ingress * 1e6)
    best = float("inf")
    for h in range(max(1, diameter), N):
        if h * lat + floor >= best:
            break
        try:
            best = min(best, h * lat + hop_limited_routing(net, dem, h, time_limit_s=20.0) * 1e6 * SAFE)
        except InvalidInput:     # every limit from h up costs at least h x latency + the floor
            best = min(best, h * lat + floor)
            break
    if not np.isfinite(best):
        return lp, None if lp is None else diameter * lat + lp
    return lp, best


# --------------------------------------------------------------------------------------------------
# CP-SAT synthesis (all-gather; reduce-scatter by reversal)
# --------------------------------------------------------------------------------------------------
def _reverse_to_rs(ag: Schedule, coll: Collective) -> Schedule:
    steps = tuple(tuple(Transfer(t.dst, t.src, t.chunk, t.bytes_, True, tuple(reversed(t.path))) for t in st)
                  for st in reversed(ag.steps))
    return Schedule(coll, ag.chunks, steps, ag.algorithm)


def cpsat_allgather(fab: Fabric, coll: Collective, chunks: int, steps: int, rounds: int | None = None,
                    time_limit_s: float = 10.0, seed: int = 0) -> tuple[Schedule | None, str, int | None]:
    """All-gather in exactly `steps` steps, each directed circuit carrying at most r_t chunks per circuit in
    step t; minimize sum of r_t (or require sum = `rounds`). Returns (schedule or None, status, rounds)."""
    from ortools.sat.python import cp_model
    ranks = coll.ranks
    n = len(ranks)
    k = chunks // n
    sub = fab.adjacency[np.ix_(ranks, ranks)]
    arcs = [(u, v) for u in range(n) for v in range(n) if sub[u, v] > 0]
    m = cp_model.CpModel()
    C, S = chunks, steps
    have = {(c, v, t): m.NewBoolVar("") for c in range(C) for v in range(n) for t in range(S + 1)}
    send = {(c, a, t): m.NewBoolVar("") for c in range(C) for a in range(len(arcs)) for t in range(1, S + 1)}
    rmax = C
    r = [m.NewIntVar(0, rmax, f"r{t}") for t in range(S + 1)]
    for c in range(C):
        owner = c // k
        for v in range(n):
            m.Add(have[(c, v, 0)] == (1 if v == owner else 0))
            m.Add(have[(c, v, S)] == 1)
    for t in range(1, S + 1):
        for c in range(C):
            for ai, (u, v) in enumerate(arcs):
                m.AddImplication(send[(c, ai, t)], have[(c, u, t - 1)])
            for v in range(n):
                inc = [send[(c, ai, t)] for ai, (u, w) in enumerate(arcs) if w == v]
                m.Add(have[(c, v, t)] <= have[(c, v, t - 1)] + sum(inc))
                m.Add(have[(c, v, t)] >= have[(c, v, t - 1)])
        for ai, (u, v) in enumerate(arcs):
            m.Add(sum(send[(c, ai, t)] for c in range(C)) <= r[t] * int(sub[u, v]))
    if rounds is None:
        m.Minimize(sum(r[1:]))
    else:
        m.Add(sum(r[1:]) <= rounds)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit_s
    solver.parameters.num_workers = 2
    solver.parameters.random_seed = seed
    from .ctrl_c import CpsatCtrlC
    st = CpsatCtrlC(solver).solve_or_raise(m)
    status = solver.StatusName(st)
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, status, None
    size = chunk_bytes(Schedule(coll, chunks, ()))
    out = []
    for t in range(1, S + 1):
        step = []
        for c in range(C):
            for ai, (u, v) in enumerate(arcs):
                if solver.Value(send[(c, ai, t)]) and not solver.Value(have[(c, v, t - 1)]):
                    step.append(Transfer(ranks[u], ranks[v], c, size))
        out.append(tuple(step))
    total = int(sum(solver.Value(x) for x in r[1:]))
    return Schedule(coll, chunks, tuple(out), f"cpsat(steps={S},rounds={total})"), status, total


def pareto(fab: Fabric, coll: Collective, chunks: int, max_extra_steps: int = 2, time_limit_s: float = 20.0,
           seed: int = 0) -> list[dict[str, Any]]:
    """Steps-vs-rounds Pareto set of all-gather (or reduce-scatter / all-reduce built from it) by CP-SAT:
    the fewest steps first (latency optimum), then the fewest rounds for that and a few more steps."""
    base = Collective(AG, coll.ranks, coll.bytes_ if coll.kind != AR else coll.bytes_)
    lb = lower_bounds(fab, base)
    out: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    s = lb.steps
    first = None
    while time.perf_counter() - t0 < time_limit_s and s <= lb.steps + 2 * len(coll.ranks):
        sch, status, rounds = cpsat_allgather(fab, base, chunks, s, None,
                                              max(1.0, time_limit_s - (time.perf_counter() - t0)), seed)
        if sch is not None:
            first = s
            out.append({"steps": s, "rounds": rounds, "status": status, "schedule": sch})
            break
        s += 1
    if first is not None:
        for s in range(first + 1, first + 1 + max_extra_steps):
            left = time_limit_s - (time.perf_counter() - t0)
            if left <= 0.5:
                break
            sch, status, rounds = cpsat_allgather(fab, base, chunks, s, None, left, seed)
            if sch is not None and rounds < out[-1]["rounds"]:
                out.append({"steps": s, "rounds": rounds, "status": status, "schedule": sch})
    for p in out:
        p["schedule"] = compose(coll, p["schedule"])
    return out


def compose(coll: Collective, ag: Schedule) -> Schedule:
    """The collective `coll` from an all-gather schedule on the same ranks: itself, reversed with
    reductions (reduce-scatter), or both back to back (all-reduce)."""
    if coll.kind == RS:
        return _reverse_to_rs(ag, coll)
    if coll.kind == AR:
        rs = _reverse_to_rs(ag, coll)
        return Schedule(coll, ag.chunks, rs.steps + ag.steps, ag.algorithm + "+ar")
    return Schedule(coll, ag.chunks, ag.steps, ag.algorithm)


# --------------------------------------------------------------------------------------------------
def candidates(fab: Fabric, coll: Collective, chunks: int) -> dict[str, Schedule]:
    out: dict[str, Schedule] = {}
    n = len(coll.ranks)
    # a one-step all-gather beyond 64 ranks is n^2 unicast flows each paying its whole distance: never the
    # best there, and its million transfers cost seconds to build and check
    builders = {"direct": direct} if coll.kind == A2A or n <= 64 else {}
    if coll.kind in (AG, RS, AR):
        rings = disjoint_rings(fab, coll.ranks) if n <= 256 else []
        # beyond 64 ranks the forwarded fallbacks (a ring in rank order without a Hamiltonian cycle,
        # recursive doubling without the hypercube's circuits) are never competitive and cost seconds each
        small = n <= 64
        if small or rings:
            builders["ring"] = ring
            if (chunks // n) % 2 == 0:
                builders["biring"] = lambda f, c, k: ring(f, c, k, bidirectional=True)
        if n & (n - 1) == 0:
            sub = fab.adjacency[np.ix_(coll.ranks, coll.ranks)] > 0
            cube = all(sub[i, i ^ (1 << b)] for i in range(n) for b in range(n.bit_length() - 1))
            if small or cube:
                builders["recursive"] = recursive
        builders["trees"] = trees
        if n <= 256:
            from .saturate import saturating_allgather
            builders["saturate"] = saturating_allgather
        if coll.kind == AR and chunks % 2 == 0:
            builders["double-tree"] = double_binary_tree
        if len(rings) > 1 and (chunks // n) % (2 * len(rings)) == 0:
            builders["multiring"] = multiring
    from .dimensional import dimension_ordered, hierarchical
    builders["dim-ordered"] = dimension_ordered
    builders["hierarchical"] = hierarchical
    if coll.kind == A2A and n > 2:
        builders["pairwise"] = pairwise
        builders["bruck"] = bruck
    for name, b in builders.items():
        try:
            out[name] = b(fab, coll, chunks)
        except InvalidInput:     # not applicable to this group (e.g. its ranks' own circuits do not connect it)
            continue
    return out


def default_chunks(fab: Fabric, coll: Collective) -> int:
    """Chunks for a collective when none are asked for: per rank (all-to-all: per pair) enough that a
    rank's n - 1 peers' chunks cover its in-circuits 8 times, so one-step routings can spread every rank's
    data evenly over all of its circuits; at least 2 per rank (all-to-all: 4 per pair up to 16 ranks, else
    1)."""
    n = len(coll.ranks)
    degree = int(fab.adjacency[:, list(coll.ranks)].sum(axis=0).max())
    need = math.ceil(8 * degree / max(1, n - 1))
    if coll.kind != A2A:
        return n * max(2, need)
    return n * n * max(4 if n <= 16 else 1, need)


def best_schedule(fab: Fabric, coll: Collective, chunks: int | None = None, synthesize: bool = True,
                  time_limit_s: float = 20.0, seed: int = 0, forwarding: bool = True) -> dict[str, Any]:
    """Every candidate (constructions, and CP-SAT for groups of up to 16 ranks), checked, timed by the
    analytical model; the fastest wins (with `forwarding=False`, the fastest whose transfers all go straight
    over a circuit: what a collective library without relays, e.g. an MSCCL XML, can run). Returns the
    schedule, its time, bounds, gap and the table."""
    n = len(coll.ranks)
    if chunks is None:
        chunks = default_chunks(fab, coll)
    validate_group(fab, coll, chunks)
    bounds = lower_bounds(fab, coll)
    table: dict[str, dict[str, Any]] = {}
    scheds = candidates(fab, coll, chunks)
    if synthesize and coll.kind in (AG, RS, AR) and n <= 16:
        for p in pareto(fab, coll, chunks, time_limit_s=time_limit_s, seed=seed):
            scheds[p["schedule"].algorithm] = p["schedule"]
        if n <= 8:   # time-expanded MILP: the analytical time itself, for the fewest steps
            base = Collective(AG, coll.ranks, coll.bytes_)
            sch, status, _, _ = milp_allgather(fab, base, chunks, lower_bounds(fab, base).steps,
                                               time_limit_s=time_limit_s, seed=seed)
            if sch is not None:
                scheds[sch.algorithm] = compose(coll, sch)
    # time every candidate, then run the checker from the fastest down until one passes: the returned
    # schedule is always checked, the slower ones are not (their "verified" is None)
    for name, s in scheds.items():
        table[name] = {"steps": len(s.steps), "time_us": fab.time_us(s), "verified": None,
                       "forwarded": any(tr.path for st in s.steps for tr in st)}
    best = None
    for name in sorted(table, key=lambda x: table[x]["time_us"]):
        if table[name]["forwarded"] and not forwarding:
            continue
        chk = check_schedule(scheds[name], fab.adjacency)
        table[name]["verified"] = chk.ok
        if not chk.ok:
            table[name]["violation"] = chk.violations[0]
            continue
        best = (scheds[name], table[name]["time_us"])
        break
    if best is None:
        if not forwarding:
            raise InvalidInput("no schedule runs on direct circuits only between these ranks (every candidate "
                               "forwards through other accelerators)", field="ranks")
        raise RuntimeError("no candidate schedule passed the checker")
    sched, t = best
    return {"schedule": sched, "time_us": t, "lower_bound_us": bounds.time_us, "bounds": bounds,
            "gap": max(0.0, (t - bounds.time_us) / t) if t > 0 else 0.0, "table": table}


# --------------------------------------------------------------------------------------------------
# Time-expanded MILP synthesis (PuLP: HiGHS or CBC)
# --------------------------------------------------------------------------------------------------
def milp_allgather(fab: Fabric, coll: Collective, chunks: int, steps: int, time_limit_s: float = 20.0,
                   backend: str = "highs", seed: int = 0) -> tuple[Schedule | None, str, float | None, float | None]:
    """All-gather in `steps` store-and-forward steps minimizing completion time on the time-expanded graph:
    have[c, v, t] / send[c, u->v, t] binaries as in the CP-SAT model, and a duration per step
    d_t >= alpha + hop latency + chunk bytes x (chunks on u->v in step t) / (circuits(u, v) x B) for every
    directed circuit, minimizing sum_t d_t (the analytical model's time, so the optimum is exact for it).
    Returns (schedule, status, time_us, dual bound us)."""
    import pulp
    from .exact import _quiet_stdout
    ranks = coll.ranks
    n = len(ranks)
    k = chunks // n
    sub = fab.adjacency[np.ix_(ranks, ranks)]
    arcs = [(u, v) for u in range(n) for v in range(n) if sub[u, v] > 0]
    size = chunk_bytes(Schedule(coll, chunks, ()))
    prob = pulp.LpProblem("allgather", pulp.LpMinimize)
    have = {(c, v, t): prob.add_variable(f"h_{c}_{v}_{t}", 0, 1, cat="Binary")
            for c in range(chunks) for v in range(n) for t in range(steps + 1)}
    send = {(c, a, t): prob.add_variable(f"s_{c}_{a}_{t}", 0, 1, cat="Binary")
            for c in range(chunks) for a in range(len(arcs)) for t in range(1, steps + 1)}
    dur = [prob.add_variable(f"d_{t}", 0) for t in range(steps + 1)]
    for c in range(chunks):
        for v in range(n):
            prob += have[(c, v, 0)] == (1 if v == c // k else 0)
            prob += have[(c, v, steps)] == 1
    per_chunk_us = {a: size / (sub[u, v] * fab.port_bytes_per_s) * 1e6 for a, (u, v) in enumerate(arcs)}
    for t in range(1, steps + 1):
        for c in range(chunks):
            for a, (u, v) in enumerate(arcs):
                prob += send[(c, a, t)] <= have[(c, u, t - 1)]
            for v in range(n):
                inc = [send[(c, a, t)] for a, (u, w) in enumerate(arcs) if w == v]
                prob += have[(c, v, t)] <= have[(c, v, t - 1)] + pulp.lpSum(inc)
                prob += have[(c, v, t)] >= have[(c, v, t - 1)]
        for a in range(len(arcs)):
            prob += dur[t] >= fab.alpha_us + fab.link_latency_us + per_chunk_us[a] * \
                pulp.lpSum(send[(c, a, t)] for c in range(chunks))
    prob += pulp.lpSum(dur[1:])
    from .highs import pulp_highs, threads
    t0 = time.perf_counter()
    solver = pulp_highs(t0 + time_limit_s, msg=False, threads=threads(2), random_seed=seed) if backend == "highs" \
        else pulp.PULP_CBC_CMD(msg=False, timeLimit=time_limit_s, threads=2)
    with _quiet_stdout():
        prob.solve(solver)
    wall = time.perf_counter() - t0
    if prob.sol_status not in (pulp.LpSolutionOptimal, pulp.LpSolutionIntegerFeasible):
        return None, "INFEASIBLE" if prob.status == pulp.LpStatusInfeasible else "NO_SOLUTION", None, None
    proven = prob.sol_status == pulp.LpSolutionOptimal and wall < time_limit_s * 0.98
    out = []
    for t in range(1, steps + 1):
        step = []
        for c in range(chunks):
            for a, (u, v) in enumerate(arcs):
                if round(send[(c, a, t)].value() or 0) and not round(have[(c, v, t - 1)].value() or 0):
                    step.append(Transfer(ranks[u], ranks[v], c, size))
        out.append(tuple(step))
    objective = float(pulp.value(prob.objective))
    bound = objective if proven else None
    if not proven and backend == "highs":
        db = prob.solverModel.getInfo().mip_dual_bound
        bound = float(db) if np.isfinite(db) else None
    sched = Schedule(coll, chunks, tuple(out), f"milp(steps={steps})")
    return sched, "OPTIMAL" if proven else "FEASIBLE", objective, bound


def select_for_workload(wl, wiring, port_bytes_per_s: float, alpha_us: float, link_latency_us: float = 0.0,
                        time_limit_s: float = 10.0, progress=None) -> list[tuple[Schedule, ...]]:
    """The selected schedules of every distinct communication op of a decode step on a wiring: one per
    group of the op, so each entry is a tuple of schedules that run together. Each group's schedule is
    chosen alone; when every group chose the one-step schedule, their chunks are also routed together
    (:func:`direct_groups`, relays sharing the circuits evenly) and that is kept when it is faster for the
    groups together (:func:`joint_time_us`, as the evaluator times them). CP-SAT / MILP synthesis joins in for single-group ops of up to
    16 ranks, constructions only otherwise. All-to-all-v ops get an all-to-all schedule of their mean
    per-rank bytes; P2P and background ops keep the model's algorithm. Every schedule passed the checker in
    :func:`best_schedule`."""
    fab = Fabric(wiring.adjacency(), port_bytes_per_s, alpha_us, link_latency_us)
    out: list[tuple[Schedule, ...]] = []
    seen: set = set()
    for op in wl.comm_ops():
        if op.background or op.collective not in (AG, RS, AR, A2A, CollectiveKind.ALLTOALLV):
            continue
        kind = A2A if op.collective == CollectiveKind.ALLTOALLV else op.collective
        key = (kind, op.group_size, op.groups.shape[0])
        if key in seen:
            continue
        seen.add(key)
        msg = float(op.pattern.sum()) / op.group_size if kind == A2A else op.message_bytes
        if progress:
            progress(f"schedules for {op.name} ({kind.value}, {op.groups.shape[0]} x {op.group_size} ranks)")
        single = op.groups.shape[0] == 1
        colls = [Collective(kind, tuple(int(r) for r in g), msg) for g in op.groups]
        chosen = [best_schedule(fab, c, synthesize=single and op.group_size <= 16,
                                time_limit_s=time_limit_s)["schedule"] for c in colls]
        if not single and chosen[0].algorithm == "direct" and all(s.chunks == chosen[0].chunks for s in chosen):
            joint = direct_groups(fab, colls, chosen[0].chunks)   # route the groups' chunks together
            if all(check_schedule(s, fab.adjacency).ok for s in joint) and \
                    joint_time_us(fab, joint) < joint_time_us(fab, chosen):
                chosen = joint
        out.append(tuple(chosen))
    return out
