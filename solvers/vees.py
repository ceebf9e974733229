"""Relay V's: a tensor-parallel phase relayed over shared neighbours, beside an all-to-all (phases objective).

Under the phases objective the TP all-reduce runs alone, on the circuits the all-to-all uses too. With g
accelerators per TP group, k circuits per TP pair and p ports, each accelerator has e = p - (g - 1) k ports
outside its group, and the TP phase's bytes beyond its k direct circuits are relayed. A relay over an
accelerator x outside the group takes two hops only when x has a circuit to both ends of the pair (a "V"
centred at x); the search's wirings pair the outside ports at random, with few such x, so most relayed
bytes take three hops or more (qwen3-235b-64: its TP phase 7.5% above what two-hop relays allow).

Construction. Every accelerator centres c = e // 4 V's (2c of its ports) and is an end of 2c of them (2c
ports): the ends in a group form a 2c-regular multigraph on its members (circulant, offsets 1, 2, ... mod g),
so every pair of the group gets its share of V's (g = 4, c = 3: two per pair, and with k = 2 each pair's
bytes have four circuits' worth of one- and two-hop paths). The e - 4c ports left are paired at random
across groups. Which V end goes to which centre is the all-to-all's side: a swap search over that
assignment (a swap keeps every V, so the TP phase keeps its relays) lowers the other phases' bytes x hops
between groups (inside a group every accelerator is one circuit from every other, so only the hops between
groups spend the all-to-all's scarce circuits) and, among equals, their bytes x hops. qwen3-235b-64 under
phases: 0.000917-0.000921 s, against 0.000943 s for the searched heavy-pairs wiring (BENCHMARKS.md).
"""
from __future__ import annotations

import time

import numpy as np

from synth.errors import Infeasible
from synth.model import Circuit, Wiring

from .bounds import group_phase, relay_count_bound, relay_count_circuits

VEE_MOVES = 3000      # swaps of V ends tried at most (the clock is a ceiling): the same seed, the same wiring
COLOUR_MIN_S = 5.0    # the colouring's clock at least (deepseek-v3-144 with TP 4: 1.3-2.8 s of CP-SAT's local
                      # search)
REALIZE_RESTARTS = 100000   # the Kempe-chain colouring's restarts at most (its deadline ends them first)
LS_SHARE = 0.8        # of the colouring's clock for CP-SAT's local search, the rest for the Kempe chains
MIN_RANK_S = 1.0      # the short routing that ranks the V's of each k gets at least this clock
BUILD_SHARE = 0.4     # of the clock for building the V's of the three k's (their swap searches)
RANK_SHARE = 0.3      # of the clock for ranking them; the colouring of the fastest has the rest


def relay_vees(problem, seed: int = 0, time_limit_s: float = 5.0, moves: int = VEE_MOVES) -> Wiring | None:
    """The module doc's wiring for a phases problem, or None when it does not apply (no TP-like phase, fixed
    circuits, the direct policy, accelerators with different port counts, fewer than four ports left per
    accelerator, or a multigraph that does not colour onto the switches). k is the relay count's, one more
    (fewer relayed TP bytes) and one less (its circuits inside a group leave the all-to-all more ports). The
    V's of each are built in BUILD_SHARE of the clock and ranked by a short multi-path routing of their
    multigraphs in RANK_SHARE (the routing does not depend on the switches); the fastest is coloured onto
    the switches with the rest of the clock, the next one if it does not colour and COLOUR_MIN_S is left.
    qwen3-235b-64 with TP 8: k = 2 leaves 4 ports outside a group, 0.00112 s; k = 1 leaves 11, 0.00064 s.
    With TP 4: k = 2 0.00094 s, k = 1 0.00096 s. deepseek-v3-144 with TP 4: k = 1 (the relay count's)
    0.00185 s, k = 2 0.00179 s, k = 3 0.00207 s (its all-to-all is held by the hottest accelerators' ports,
    so circuits inside a group cost it little)."""
    if problem.objective != "phases" or problem.policy == "direct" or problem.fixed_circuits:
        return None
    found = group_phase(problem)
    if found is None or np.ptp(problem.layout.capacity.sum(axis=1)):
        return None
    t0 = time.perf_counter()
    k = _circuits_per_pair(problem, found[1])
    ks = [x for x in (k, k + 1, k - 1) if x >= 1]
    graphs = []
    for i, x in enumerate(ks):
        left = BUILD_SHARE * time_limit_s - (time.perf_counter() - t0)
        pairs = _vee_pairs(problem, found, x, seed, max(0.0, left / (len(ks) - i)), moves)
        if pairs is not None:
            graphs.append(pairs)
    if len(graphs) > 1:
        rank_s = max(MIN_RANK_S, ((BUILD_SHARE + RANK_SHARE) * time_limit_s - (time.perf_counter() - t0))
                     / len(graphs))
        times = [problem.score(_uncoloured(problem.layout, pairs), "mwu", rank_s)[0] for pairs in graphs]
        graphs = [graphs[i] for i in np.argsort(times, kind="stable")]
    for i, pairs in enumerate(graphs):     # the fastest gets at least COLOUR_MIN_S, the next ones what is left
        left = time_limit_s - (time.perf_counter() - t0)
        if i and left < COLOUR_MIN_S:
            break
        w = _coloured(problem.layout, pairs, seed, max(COLOUR_MIN_S, left))
        if w is not None:
            return w
    return None


def _vee_pairs(problem, found, k: int, seed: int, time_limit_s: float, moves: int) -> list[tuple[int, int]] | None:
    """The circuits (pairs of accelerators) of the V's with k circuits per pair of each group, their ends
    searched for at most `moves` swaps within `time_limit_s`; None when fewer than four ports are left
    outside a group or no assignment of the V ends repairs."""
    t0 = time.perf_counter()
    which, label = found
    p, n = int(problem.layout.capacity.sum(axis=1)[0]), problem.accelerators
    groups = [np.flatnonzero(label == c) for c in range(int(label.max()) + 1)]
    g = len(groups[0])
    c = (p - (g - 1) * k) // 4
    if c < 1:
        return None
    rng = np.random.default_rng(seed)
    intra = [(int(a), int(b)) for grp in groups for x, a in enumerate(grp) for b in grp[x + 1:] for _ in range(k)]
    centres = np.repeat(np.arange(n), c)
    # each group's V ends: offsets 1, 2, ... (mod g, skipping 0) of its members, one 2-regular layer each
    offs = [1 + s % (g - 1) for s in range(c)]
    ends = np.array([(int(grp[x]), int(grp[(x + o) % g])) for grp in groups for o in offs for x in range(g)])
    other = sum(ph.weight * ph.bytes_ for i, ph in enumerate(problem.phases) if i != which)
    state = _Vees(n, label, centres, ends, other, intra, rng)
    if not state.repair():
        return None
    state.search(moves, t0 + time_limit_s)
    return intra + state.pairs() + _leftover(n, label, p - (g - 1) * k - 4 * c, state.adj, rng)


def _uncoloured(layout, pairs) -> Wiring:
    """`pairs` as a wiring with every circuit at switch 0, port 0: for routing it (which sees only which
    accelerators are joined, and how often), never to be returned or written."""
    return Wiring(layout.accelerators, layout.ports, tuple(Circuit(0, a, 0, b, 0) for a, b in pairs), layout)


def _circuits_per_pair(problem, label: np.ndarray) -> int:
    """The circuits the relay count gives a TP pair when the step's bytes go at once (its fewest-relays
    allocation at its own bound): the most common count over the group's pairs, at least 1."""
    shape = problem.as_time()
    T = relay_count_bound(shape)
    alloc = relay_count_circuits(shape, T) if T > 0 else None
    if alloc is None:
        return 1
    iu, ju, cnt = alloc
    inside = label[iu] == label[ju]
    if not inside.any():
        return 1
    return max(1, int(np.bincount(cnt[inside]).argmax()))


class _Vees:
    """The V's: centre slot i holds the V whose ends are ends[assign[i]]; `adj` counts circuits between groups."""

    def __init__(self, n, label, centres, ends, demand, intra, rng):
        self.n, self.label, self.centres, self.ends, self.rng = n, label, centres, ends, rng
        self.assign = rng.permutation(len(ends))
        self.adj = np.zeros((n, n), dtype=np.int64)
        for i, e in enumerate(self.assign):
            self._add(i, e, 1)
        m = int(label.max()) + 1
        onehot = np.zeros((n, m))
        onehot[np.arange(n), label] = 1.0
        self.onehot = onehot
        self.group_demand = onehot.T @ demand @ onehot          # bytes between groups
        np.fill_diagonal(self.group_demand, 0.0)
        self.demand = demand
        ia = np.array(intra, dtype=np.int64).reshape(-1, 2)
        self.intra = np.zeros((n, n), dtype=bool)
        self.intra[ia[:, 0], ia[:, 1]] = self.intra[ia[:, 1], ia[:, 0]] = True

    def _add(self, i, e, s):
        v = self.centres[i]
        for a in self.ends[e]:
            self.adj[v, a] += s
            self.adj[a, v] += s

    def _bad(self, i) -> bool:
        v = self.centres[i]
        a, b = self.ends[self.assign[i]]
        return bool(self.label[v] == self.label[a] or self.adj[v, a] > 1 or self.adj[v, b] > 1)

    def repair(self, tries: int = 200000) -> bool:
        """Swap V ends until no V has its centre in its own group or repeats a circuit; False if it fails."""
        bad = [i for i in range(len(self.assign)) if self._bad(i)]
        for _ in range(tries):
            if not bad:         # a swap can spoil a third V (its circuit repeated): look at them all
                bad = [i for i in range(len(self.assign)) if self._bad(i)]
                if not bad:
                    return True
            i = bad[int(self.rng.integers(len(bad)))]
            j = int(self.rng.integers(len(self.assign)))
            before = self._bad(i) + self._bad(j)
            self._swap(i, j)
            if self._bad(i) + self._bad(j) > before:
                self._swap(i, j)
            bad = [x for x in bad if self._bad(x)] + ([j] if self._bad(j) and j not in bad else [])
        return not any(self._bad(i) for i in range(len(self.assign)))

    def _swap(self, i, j):
        self._add(i, self.assign[i], -1)
        self._add(j, self.assign[j], -1)
        self.assign[i], self.assign[j] = self.assign[j], self.assign[i]
        self._add(i, self.assign[i], 1)
        self._add(j, self.assign[j], 1)

    def cost(self) -> tuple[float, float]:
        """(bytes x hops between groups, bytes x hops) of the other phases."""
        from scipy.sparse.csgraph import shortest_path
        from .local_search import _hop_bytes
        d = shortest_path((self.onehot.T @ (self.adj > 0) @ self.onehot) > 0, unweighted=True)
        across = float((self.group_demand * np.where(np.isfinite(d), d, 1e9)).sum())
        a, b = np.nonzero(np.triu((self.adj > 0) | self.intra, 1))
        return across, _hop_bytes(self.n, a, b, self.demand)[0]

    def search(self, moves: int, deadline: float) -> None:
        cur = self.cost()
        size = len(self.assign)
        for _ in range(moves):
            if time.perf_counter() > deadline:
                return
            i, j = (int(x) for x in self.rng.choice(size, 2, replace=False))
            if self.centres[i] == self.centres[j]:
                continue
            self._swap(i, j)
            new = self.cost() if not (self._bad(i) or self._bad(j)) else None
            if new is not None and (new[0] < cur[0] * (1 - 1e-12) or new[0] <= cur[0] * (1 + 1e-12) and new[1] <= cur[1]):
                cur = new
            else:
                self._swap(i, j)

    def pairs(self) -> list[tuple[int, int]]:
        return [(int(self.centres[i]), int(a)) for i, e in enumerate(self.assign) for a in self.ends[e]]


def _leftover(n, label, left, adj, rng) -> list[tuple[int, int]]:
    """The `left` ports of every accelerator not in a V, paired at random across groups and new pairs (a port
    with no such partner stays dark)."""
    if left <= 0:
        return []
    stubs = list(rng.permutation(np.repeat(np.arange(n), left)))
    seen = adj > 0
    out = []
    while stubs:
        a = int(stubs.pop())
        j = next((x for x in range(len(stubs) - 1, -1, -1)
                  if label[stubs[x]] != label[a] and not seen[a, stubs[x]]), None)
        if j is None:
            continue
        b = int(stubs.pop(j))
        seen[a, b] = seen[b, a] = True
        out.append((a, b))
    return out


def _coloured(layout, pairs, seed: int, time_limit_s: float) -> Wiring | None:
    """The circuits on the switches: CP-SAT's local search on one worker (the same circuits on every run),
    else the Kempe-chain colouring's seeded restarts until the deadline; None when neither finds one. On the
    V's multigraphs the local search is the faster (qwen3-235b-64: 0.2-0.7 s against 0.6-0.7 s of restarts,
    with two spare ports 0.4-0.9 s against 1.3-1.7 s; deepseek-v3-144 with TP 4: 1.3-2.8 s, where the
    restarts found none in 60 s and CP-SAT's full search on one thread none in 40 s)."""
    from synth.realize import realize
    from .colouring import colour_cpsat
    t0 = time.perf_counter()
    circuits = colour_cpsat(layout, pairs, LS_SHARE * time_limit_s, seed, threads=1, ls_share=1.0)
    if circuits is None:
        try:
            circuits = realize(layout, pairs, seed=seed, deadline=t0 + time_limit_s, restarts=REALIZE_RESTARTS)
        except Infeasible:
            return None
    return Wiring(layout.accelerators, layout.ports, tuple(circuits), layout)
