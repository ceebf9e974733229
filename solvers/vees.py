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
groups spend the all-to-all's scarce circuits) and, among equals, their bytes x hops.

On the switches. Such a multigraph must still be edge-coloured onto the switches (each a matching), which
is NP-hard in general and took CP-SAT's local search seconds (deepseek-v3-144 with TP 4) to tens of seconds
(kimi-k2-288 with TP 4). Where every accelerator has one port on each of p planes (switches joining any two),
the V's are built coloured instead: the group's circuits are k one-factorizations of it, one plane per
round, and the V's come in 2c layers of two planes each, a V's centre to its first end on the layer's first
plane and to its second end on the second. In each layer half the accelerators are ends (directed cycles
inside their groups: each the first end of one V and the second of another) and the other half centres
(one V each), so every accelerator meets every plane once. Groups of four or more split into halves for
this, so every group has ends and centres in every layer; groups of two end whole, half the groups in each
layer. The swap search keeps a V in its layer. Where that does not apply (another layout, groups of odd
size, an odd number of groups of two, groups of four with c < 3) or no assignment of the layered ends is
found, the V's are built as above and coloured by search. qwen3-235b-64 under phases: the V's
0.000914-0.000919 s over seeds 0-7 (coloured by search: 0.000916-0.000920 s), against 0.000943 s for the
searched heavy-pairs wiring (BENCHMARKS.md).
"""
from __future__ import annotations

import itertools
import time

import numpy as np

from synth.errors import Infeasible
from synth.model import Circuit, Wiring

from .bounds import group_phase, relay_count_bound, relay_count_circuits

VEE_MOVES = 3000      # swaps of V ends tried at most (the clock is a ceiling): the same seed, the same wiring
COLOUR_MIN_S = 5.0    # the colouring's clock at least (deepseek-v3-144 with TP 4: 1.3-2.8 s of CP-SAT's local
                      # search)
COLOUR_RETRY_S = 1.0  # ... of the next ones' after one did not colour (32 accelerators, 14 ports, k = 1: 13 of
                      # 400 move counts give V's CP-SAT colours in neither 5 s nor 60 s; k = 2 and 3 in 0.1 s)
LAYERED_REPAIRS = 20000   # swaps the layered V's repair tries before CP-SAT assigns them
LAYERED_CPSAT_S = 2.0     # CP-SAT's clock for them at least (32 accelerators: 0.05 s)
REALIZE_RESTARTS = 100000   # the Kempe-chain colouring's restarts at most (its deadline ends them first)
LS_SHARE = 0.8        # of the colouring's clock for CP-SAT's local search, the rest for the Kempe chains
MIN_RANK_S = 0.2      # the short routing that ranks the V's of each k gets at least this clock
BUILD_SHARE = 0.4     # of the clock the three k's V's take to build (their swaps), about: the ranking's share follows
PERM_TRIES = 60       # orders of a group tried for each pair of V layers (groups of 4 or more on planes)
RANK_SHARE = 0.3      # of the clock for ranking them; the colouring of the fastest has the rest
SPARSE_PAIRS = 16     # demand pairs per accelerator at most of a phase the ranking routes by its two-hop path LP


def relay_vees(problem, seed: int = 0, time_limit_s: float = 5.0, moves: int = VEE_MOVES) -> Wiring | None:
    """The module doc's wiring for a phases problem, or None when it does not apply (no TP-like phase, fixed
    circuits, the direct policy, accelerators with different port counts, or fewer than four ports left per
    accelerator). k is the relay count's, one more (fewer relayed TP bytes) and one less (its circuits inside
    a group leave the all-to-all more ports). The
    V's of each are built on `moves` swaps (about BUILD_SHARE of a 5 s clock on an Intel Xeon; the clock left,
    split among them, only caps them: capped at BUILD_SHARE of it, a build there stopped short of its moves and
    the same seed gave another wiring) and ranked by a short routing of their multigraphs in RANK_SHARE
    (`_rank_time`; the routing does not depend on the switches); the fastest is coloured onto
    the switches with the rest of the clock (COLOUR_MIN_S at least), the next ones if it does not colour, each
    with what is left (COLOUR_RETRY_S at least: a wiring a moment over the clock beats none).
    V's built on their planes need no colouring: then the ranking has the rest of the clock. On OCSes smaller
    than a plane, and wherever none colours, the best ranked keeps as many of its circuits as the switches hold
    (`baselines._realized`), its other ports paired at random.
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
    for i, x in enumerate(ks):     # each on its budget of moves; the clock left, split evenly, only caps it
        left = time_limit_s - (time.perf_counter() - t0)
        built = _vee_pairs(problem, found, x, seed, max(0.0, left / (len(ks) - i)), moves)
        if built is not None:
            graphs.append(built)
    # OCSes smaller than a plane (its fibres split over several): the V's seldom colour (qwen3-235b-64 on 16-port
    # OCSes: none of the three in 8.6 s), so the best ranked keeps the most of its circuits the OCSes hold
    small = int(np.max(problem.layout.switch_radix)) < problem.accelerators
    if len(graphs) > 1:     # with no V's to colour, the colouring's share goes to the ranking too
        share = 1.0 if small or all(b[1] is not None for b in graphs) else BUILD_SHARE + RANK_SHARE
        rank_s = max(MIN_RANK_S, (share * time_limit_s - (time.perf_counter() - t0)) / len(graphs))
        times = [_rank_time(problem, _uncoloured(problem.layout, pairs), rank_s) for pairs, _ in graphs]
        graphs = [graphs[i] for i in np.argsort(times, kind="stable")]
    for i, built in enumerate([] if small else graphs):
        left = time_limit_s - (time.perf_counter() - t0)
        w = _wired(problem.layout, built, seed, max(COLOUR_RETRY_S if i else COLOUR_MIN_S, left))
        if w is not None:
            return w
    if graphs:      # none coloured: as much of the best as the switches hold, the ports left paired at random
        from .baselines import _realized, connect, fill_spare_ports
        return connect(fill_spare_ports(_realized(problem.layout, graphs[0][0], seed), seed))
    return None


def _rank_time(problem, wiring: Wiring, time_limit_s: float) -> float:
    """The ranking's time of V's `wiring`: a phase with at most SPARSE_PAIRS demand pairs per accelerator
    (a TP all-reduce) by its one- and two-hop path LP (`routing.two_hop_routing`, a tenth of a second), the
    others by MWU, the clock shared among them. MWU alone converges slowest where most TP bytes are relayed,
    so it favoured more circuits per pair: kimi-k2-288 with TP 4 at 2.4 s, k = 1 0.000583 s and k = 2
    0.000576 s by MWU, 0.000545 and 0.000551 s this way, 0.000528 and 0.000548 s routed for 20 s."""
    from synth.problem import even_clocks
    from synth.routing import two_hop_routing
    subs, n = problem.phase_problems(), problem.accelerators
    net = problem.network(wiring)         # every phase's: the same circuits
    times = {}
    for i, (_, sub) in enumerate(subs):
        if np.count_nonzero(sub.traffic.bytes_) <= SPARSE_PAIRS * n:
            times[i] = two_hop_routing(net, sub.traffic.bytes_, time_limit_s)[0]
    rest = [i for i in range(len(subs)) if not np.isfinite(times.get(i, np.inf))]
    for i, clock in zip(rest, even_clocks(len(rest), time_limit_s)):
        times[i] = subs[i][1].score(wiring, "mwu", clock)[0]
    return float(sum(w * times[i] for i, (w, _) in enumerate(subs)))


def _wired(layout, built, seed: int, time_limit_s: float) -> Wiring | None:
    """The wiring of `_vee_pairs`'s (pairs, switches): on the switches it was built on, else coloured onto
    them (`_coloured`) within `time_limit_s`; None when it does not colour."""
    from .baselines import _from_switch_pairs
    pairs, switch_of = built
    if switch_of is None:
        return _coloured(layout, pairs, seed, time_limit_s)
    return _from_switch_pairs(layout, pairs, switch_of)


def _vee_pairs(problem, found, k: int, seed: int, time_limit_s: float, moves: int):
    """(circuits as pairs of accelerators, the switch of each or None) of the V's with k circuits per pair of
    each group, their ends searched for at most `moves` swaps within `time_limit_s`; None when fewer than four
    ports are left outside a group or no assignment of the V ends repairs. On planes (`_planes`) the V's are
    built in the layers of `_layers`, which puts them on the switches as they are built, unless it gives
    fewer group pairs a V than the module doc's offsets or no assignment of its ends is found (the swaps'
    repair, then CP-SAT); then the switches are left to `_coloured`."""
    t0 = time.perf_counter()
    which, label = found
    p, n = int(problem.layout.capacity.sum(axis=1)[0]), problem.accelerators
    groups = [np.flatnonzero(label == c) for c in range(int(label.max()) + 1)]
    g = len(groups[0])
    c = (p - (g - 1) * k) // 4
    if c < 1:
        return None
    other = sum(ph.weight * ph.bytes_ for i, ph in enumerate(problem.phases) if i != which)
    planes = _planes(problem.layout)
    layers = _layers(groups, c, np.random.default_rng([seed, 1])) if planes is not None else None
    if layers is not None:
        built = _layered(n, label, groups, k, c, layers, planes, other, seed, t0 + time_limit_s, moves)
        if built is not None:
            return built
    rng = np.random.default_rng(seed)
    intra = [(int(a), int(b)) for grp in groups for x, a in enumerate(grp) for b in grp[x + 1:] for _ in range(k)]
    centres = np.repeat(np.arange(n), c)
    # each group's V ends: offsets 1, 2, ... (mod g, skipping 0) of its members, one 2-regular layer each
    offs = [1 + s % (g - 1) for s in range(c)]
    ends = np.array([(int(grp[x]), int(grp[(x + o) % g])) for grp in groups for o in offs for x in range(g)])
    state = _Vees(n, label, centres, ends, other, intra, rng)
    if not state.repair():
        return None
    state.search(moves, t0 + time_limit_s)
    left = np.repeat(np.arange(n), p - (g - 1) * k - 4 * c)
    return intra + state.pairs() + _paired(list(rng.permutation(left)), label, state.adj > 0), None


def _layered(n, label, groups, k, c, layers, planes, other, seed, deadline, moves):
    """`_vee_pairs` on planes: copy t of a group's circuits is a one-factorization (its round r on plane
    t (g - 1) + r); the V's of layer s on planes base + 2 s (centre to first end) and base + 2 s + 1 (centre
    to second end), a slot of the layer's centres taking only that layer's V's, so each accelerator meets
    each plane once; the ports left, one random matching across groups per plane. The V ends are repaired
    by LAYERED_REPAIRS swaps, else assigned by CP-SAT (`_Vees.assigned`; the swaps stall on 32 accelerators
    in groups of four at 2 seeds in 10, on 48-144 accelerators at none tried); None when neither works."""
    rng = np.random.default_rng(seed)
    g = len(groups[0])
    rounds = [[(g - 1, r)] + [((r + i) % (g - 1), (r - i) % (g - 1)) for i in range(1, g // 2)] for r in range(g - 1)]
    intra, switch_of = [], []
    for t in range(k):
        for r, rnd in enumerate(rounds):
            intra += [(int(grp[x]), int(grp[y])) for grp in groups for x, y in rnd]
            switch_of += [int(planes[t * (g - 1) + r])] * (len(rnd) * len(groups))
    ends = np.array([e for vs in layers for e in vs])
    end_layer = np.repeat(np.arange(2 * c), [len(vs) for vs in layers])
    at_end = [{a for e in vs for a in e} for vs in layers]
    centres = np.array([x for s in range(2 * c) for x in range(n) if x not in at_end[s]])
    slot_layer = np.repeat(np.arange(2 * c), [n - len(e) for e in at_end])
    state = _Vees(n, label, centres, ends, other, intra, rng, (slot_layer, end_layer))
    if not state.repair(LAYERED_REPAIRS) and \
            not state.assigned(seed, max(LAYERED_CPSAT_S, deadline - time.perf_counter())):
        return None
    state.search(moves, deadline)
    base = k * (g - 1)
    switch_of += [int(planes[base + 2 * s + side]) for s in slot_layer for side in (0, 1)]
    seen, left = state.adj > 0, []
    for s in planes[base + 4 * c:]:
        more = _paired(list(rng.permutation(n)), label, seen)
        left += more
        switch_of += [int(s)] * len(more)
    return intra + state.pairs() + left, switch_of


def _layers(groups, c: int, rng) -> list[list[tuple[int, int]]]:
    """The V's ends of each of 2c layers, as (end on the layer's first plane, end on its second), or None. In
    each layer half the accelerators are ends, each of two V's of its group (a directed cycle: first end of
    one, second end of the next), and the other half are its centres; every accelerator is an end in c
    layers. Groups of two end whole, half the groups in each layer (None for an odd number of groups), the
    groups in complementary pairs given splits of the layers as different as there are. Larger groups end by
    halves, so every group has centres in every layer: layers 2t and 2t + 1 take the two halves of one order
    of the members (the same in every group), each a cycle, the order picked from PERM_TRIES to spread the
    V's over a group's pairs; None when that leaves fewer of them with a V than the module doc's offsets do
    (groups of four with c < 3). qwen3-235b-64 with its TP 4 under phases, seeds 0-7: 0.916461 ms on
    average against 0.917898 ms for the offsets' V's coloured by search (BENCHMARKS.md)."""
    g, m = len(groups[0]), len(groups)
    layers: list[list[tuple[int, int]]] = [[] for _ in range(2 * c)]
    if g == 2:
        if m % 2:
            return None
        splits = [set(x) for x in itertools.combinations(range(2 * c), c) if 0 in x]
        pick, order = rng.permutation(len(splits)), rng.permutation(m)
        for i in range(m // 2):
            split = splits[pick[i % len(splits)]]
            for grp, ends in ((groups[order[i]], split), (groups[order[i + m // 2]], set(range(2 * c)) - split)):
                for s in ends:
                    layers[s] += [(int(grp[0]), int(grp[1])), (int(grp[1]), int(grp[0]))]
        return layers
    half = g // 2
    cover = np.zeros((g, g))
    for t in range(c):
        best, spread = None, np.inf
        for _ in range(PERM_TRIES):
            perm = rng.permutation(g)
            cyc = [(h[i], h[(i + 1) % half]) for h in (perm[:half], perm[half:]) for i in range(half)]
            new = cover.copy()
            for x, y in cyc:
                new[x, y] += 1
                new[y, x] += 1
            if (new ** 2).sum() < spread:
                best, spread, kept = cyc, (new ** 2).sum(), new
        cover = kept
        for h in (0, 1):
            ring = best[h * half:(h + 1) * half]
            layers[2 * t + h] = [(int(grp[x]), int(grp[y])) for grp in groups for x, y in ring]
    offsets = {min(1 + s % (g - 1), g - 1 - s % (g - 1)) for s in range(c)}     # the unlayered V's
    if np.count_nonzero(np.triu(cover)) < sum(half if d * 2 == g else g for d in offsets):
        return None             # fewer pairs of a group with a V than the offsets give
    return layers


def _planes(layout) -> np.ndarray | None:
    """The switches in use when every accelerator has exactly one port on each and each can join any two
    accelerators (radix >= accelerators): then any proper edge colouring with them as colours is a wiring.
    None otherwise."""
    cap = layout.capacity
    used = np.flatnonzero(cap.any(axis=0))
    if not (cap[:, used] == 1).all() or (np.array(layout.switch_radix)[used] < layout.accelerators).any():
        return None
    return used


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
    """The V's: centre slot i holds the V whose ends are ends[assign[i]]; `adj` counts circuits between groups.
    With `layers` (the layer of each slot, of each V) a slot holds only V's of its layer."""

    def __init__(self, n, label, centres, ends, demand, intra, rng, layers=None):
        self.n, self.label, self.centres, self.ends, self.rng = n, label, centres, ends, rng
        self.peers = None       # with layers (slot layer, end layer): a slot takes only ends of its layer
        self.adj = np.zeros((n, n), dtype=np.int64)
        if layers is None:
            self.assign = rng.permutation(len(ends))
        else:
            slot_layer, end_layer = layers
            self.layer = slot_layer
            self.assign = np.empty(len(ends), dtype=np.int64)
            self.peers = [np.flatnonzero(slot_layer == s) for s in range(int(slot_layer.max()) + 1)]
            for s, slots in enumerate(self.peers):
                self.assign[slots] = rng.permutation(np.flatnonzero(end_layer == s))
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
            j = self._other(i)
            before = self._bad(i) + self._bad(j)
            self._swap(i, j)
            if self._bad(i) + self._bad(j) > before:
                self._swap(i, j)
            bad = [x for x in bad if self._bad(x)] + ([j] if self._bad(j) and j not in bad else [])
        return not any(self._bad(i) for i in range(len(self.assign)))

    def assigned(self, seed: int, time_limit_s: float) -> bool:
        """The layered V's on their slots by CP-SAT (one worker: the same answer on every run), where the
        repair's swaps stall: a V per slot of its layer and a slot per V, none centred in the V's group, no
        circuit twice. False when none is found in the time limit; the assignment is then left as it was."""
        from ortools.sat.python import cp_model
        m = cp_model.CpModel()
        x: dict[tuple[int, int], object] = {}
        on_pair: dict[tuple[int, int], list] = {}
        for slots in self.peers:
            vees = self.assign[slots]           # the layer's V's, in any order
            for i in slots.tolist():
                v = int(self.centres[i])
                for e in vees.tolist():
                    a, b = (int(z) for z in self.ends[e])
                    if self.label[v] != self.label[a]:
                        x[i, e] = m.NewBoolVar("")
                        m.AddHint(x[i, e], int(self.assign[i] == e))
                        for z in (a, b):
                            on_pair.setdefault((min(v, z), max(v, z)), []).append(x[i, e])
            for i in slots.tolist():
                m.AddExactlyOne([x[i, e] for e in vees.tolist() if (i, e) in x])
            for e in vees.tolist():
                m.AddExactlyOne([x[i, e] for i in slots.tolist() if (i, e) in x])
        for held in on_pair.values():
            if len(held) > 1:
                m.AddAtMostOne(held)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = seed
        solver.parameters.max_time_in_seconds = max(0.1, time_limit_s)
        if solver.Solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return False
        for (i, e), var in x.items():
            if solver.Value(var):
                self._add(i, self.assign[i], -1)
                self.assign[i] = e
                self._add(i, e, 1)
        return True

    def _other(self, i) -> int:
        """A slot to swap with slot i: any, or one of its layer."""
        if self.peers is None:
            return int(self.rng.integers(len(self.assign)))
        peers = self.peers[self.layer[i]]
        return int(peers[self.rng.integers(len(peers))])

    def _swap(self, i, j):
        self._add(i, self.assign[i], -1)
        self._add(j, self.assign[j], -1)
        self.assign[i], self.assign[j] = self.assign[j], self.assign[i]
        self._add(i, self.assign[i], 1)
        self._add(j, self.assign[j], 1)

    def across(self) -> float:
        """Bytes x hops between groups of the other phases, on the graph of the groups."""
        from scipy.sparse.csgraph import shortest_path
        d = shortest_path((self.onehot.T @ (self.adj > 0) @ self.onehot) > 0, unweighted=True)
        return float((self.group_demand * np.where(np.isfinite(d), d, 1e9)).sum())

    def hops(self) -> float:
        """Bytes x hops of the other phases between accelerators (`across`'s tie-break; 2.4 ms of the 3.2 a
        move took on kimi-k2-288 with TP 4)."""
        from .local_search import _hop_bytes
        a, b = np.nonzero(np.triu((self.adj > 0) | self.intra, 1))
        return _hop_bytes(self.n, a, b, self.demand, dist=False)[0]

    def search(self, moves: int, deadline: float) -> None:
        """At most `moves` swaps of two V's ends, until the deadline: a swap is kept when it lowers `across`,
        or keeps it and does not raise `hops`. `hops` is computed only on such a tie (the current state's on the
        first tie since it was reached): the same swaps kept as when every move computed both, on kimi-k2-288
        with TP 4 at 40% of the moves, on deepseek-v3-144 at 20%."""
        cur, cur_hops = self.across(), None
        size = len(self.assign)
        for _ in range(moves):
            if time.perf_counter() > deadline:
                return
            if self.peers is None:
                i, j = (int(x) for x in self.rng.choice(size, 2, replace=False))
            else:
                i = int(self.rng.integers(size))
                j = self._other(i)
            if self.centres[i] == self.centres[j]:
                continue
            self._swap(i, j)
            if self._bad(i) or self._bad(j):
                self._swap(i, j)
                continue
            new = self.across()
            if new < cur * (1 - 1e-12):
                cur, cur_hops = new, None
                continue
            if new <= cur * (1 + 1e-12):
                if cur_hops is None:
                    self._swap(i, j)
                    cur_hops = self.hops()
                    self._swap(i, j)
                new_hops = self.hops()
                if new_hops <= cur_hops:
                    cur, cur_hops = new, new_hops
                    continue
            self._swap(i, j)

    def pairs(self) -> list[tuple[int, int]]:
        return [(int(self.centres[i]), int(a)) for i, e in enumerate(self.assign) for a in self.ends[e]]


def _paired(stubs: list, label, seen) -> list[tuple[int, int]]:
    """The ports in `stubs` (one entry per port, in random order) paired from the end, each to the last one
    left in another group not yet joined to it (`seen`, updated); a port with no such partner stays dark."""
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
