"""Realize a multigraph of accelerator pairs on OCS switches.

Each OCS is a matching between the ports attached to it, so putting circuits on switches is an edge
colouring in which accelerator a may take colour (switch) s as often as it has ports on s. Greedy colouring
leaves a few edges; each is fixed by flipping an alternating two-colour (Kempe) path, the classic argument
behind König's and Vizing's theorems generalized to port capacities. A bipartite multigraph within the
degree budget always colours (König); a general one may not (an odd cycle on 2 ports), and then
:class:`~synth.errors.Infeasible` is raised: a wiring that cannot be realized is never returned.
"""
from __future__ import annotations

import time
from typing import Iterable

import numpy as np

from .errors import Infeasible, InvalidInput


def realize(layout, pairs: Iterable[tuple[int, int]], *, seed: int = 0, max_tries: int = 64, restarts: int = 64,
            deadline: float | None = None):
    """Assign each (a, b) pair a switch and a port at each end. Returns a tuple of Circuits. `deadline` (a
    `time.perf_counter()` value): no restart begins after it (the first attempt always runs).

    >>> from synth.model import OCSLayout
    >>> cs = realize(OCSLayout.uniform(4, 2), [(0, 1), (1, 2), (2, 3), (3, 0)])
    >>> sorted((c.switch, c.a, c.b) for c in cs)
    [(0, 0, 1), (0, 2, 3), (1, 0, 3), (1, 1, 2)]
    """
    edges = np.asarray(list(pairs), dtype=np.int64).reshape(-1, 2)
    last: Infeasible | None = None
    for attempt in range(restarts):
        if attempt and deadline is not None and time.perf_counter() > deadline:
            break
        try:
            return _realize_once(layout, edges, seed=seed + 7919 * attempt, max_tries=max_tries,
                                 shuffle=attempt > 0)
        except Infeasible as exc:
            if "OCS ports" in str(exc):
                raise
            last = exc
    assert last is not None
    raise last


def _realize_once(layout, edges: np.ndarray, *, seed: int, max_tries: int, shuffle: bool):
    n, switches = layout.accelerators, layout.switches
    cap = layout.capacity
    radix_circuits = np.array([r // 2 for r in layout.switch_radix], dtype=np.int64)
    if edges.size and (edges.min() < 0 or edges.max() >= n):
        raise InvalidInput(f"pair names an accelerator outside 0..{n - 1}", field="pairs")
    loops = np.flatnonzero(edges[:, 0] == edges[:, 1])
    if loops.size:
        raise InvalidInput(f"self-loop at accelerator {edges[loops[0], 0]}", field="pairs")
    deg = np.bincount(edges.ravel(), minlength=n)
    over = np.flatnonzero(deg > cap.sum(axis=1))
    if over.size:
        a = over[0]
        raise Infeasible(f"accelerator {a} needs {deg[a]} circuits but has {cap[a].sum()} OCS ports")

    rng = np.random.default_rng(seed)
    m = len(edges)
    colour = np.full(m, -1, dtype=np.int64)
    used = np.zeros((n, switches), dtype=np.int64)
    on_switch = np.zeros(switches, dtype=np.int64)
    at: list[list[list[int]]] = [[[] for _ in range(switches)] for _ in range(n)]

    def free(v: int) -> np.ndarray:
        return used[v] < cap[v]

    def assign(e: int, s: int) -> None:
        u, v = edges[e]
        colour[e] = s
        used[u, s] += 1
        used[v, s] += 1
        on_switch[s] += 1
        at[u][s].append(e)
        at[v][s].append(e)

    def unassign(e: int) -> None:
        u, v = edges[e]
        s = colour[e]
        used[u, s] -= 1
        used[v, s] -= 1
        on_switch[s] -= 1
        at[u][s].remove(e)
        at[v][s].remove(e)
        colour[e] = -1

    # Greedy: highest-degree endpoints first, each edge on the common free switch with most room.
    tie = rng.permutation(m) if shuffle else np.arange(m)
    order = np.lexsort((tie, -(deg[edges[:, 0]] + deg[edges[:, 1]])))
    pending = []
    for e in order:
        u, v = edges[e]
        ok = free(u) & free(v) & (on_switch < radix_circuits)
        if ok.any():
            room = (cap[u] - used[u]) + (cap[v] - used[v])
            assign(int(e), int(np.argmax(np.where(ok, room, -1))))
        else:
            pending.append(int(e))

    for e in pending:
        u, v = (int(x) for x in edges[e])
        for _ in range(max_tries):
            ok = free(u) & free(v) & (on_switch < radix_circuits)
            if ok.any():
                assign(e, int(np.flatnonzero(ok)[0]))
                break
            fu, fv = np.flatnonzero(free(u)), np.flatnonzero(free(v))
            if fu.size == 0 or fv.size == 0:
                break
            alpha, beta = int(rng.choice(fu)), int(rng.choice(fv))
            # Flip the alpha/beta path that starts at v with an alpha edge: frees alpha at v.
            path, cur, col, seen = [], v, alpha, set()
            while True:
                cand = [x for x in at[cur][col] if x not in seen]
                if not cand:
                    break
                x = cand[0]
                seen.add(x)
                path.append(x)
                a, b = edges[x]
                cur = int(b if a == cur else a)
                other = beta if col == alpha else alpha
                if used[cur, other] < cap[cur, other]:
                    break
                col = other
            old = [(x, int(colour[x])) for x in path]
            for x, c in old:
                unassign(x)
            for x, c in old:
                assign(x, beta if c == alpha else alpha)
            if (used > cap).any() or (on_switch > radix_circuits).any():
                for x, _ in old:
                    unassign(x)
                for x, c in old:
                    assign(x, c)
        if colour[e] < 0:
            raise Infeasible(f"cannot put circuit ({u}, {v}) on any switch: the multigraph is not "
                             f"{switches}-edge-colourable within the port layout")

    return assign_ports(layout, edges.tolist(), colour.tolist())


def assign_ports(layout, pairs, switch_of) -> tuple:
    """Circuits for (a, b) pairs on the given switches: the k-th circuit of accelerator a on switch s takes
    a's k-th port on s (in port order)."""
    from .model import Circuit
    ports_on: dict[tuple[int, int], list[int]] = {}
    for a, k in zip(*np.nonzero(layout.switch_of_port >= 0)):
        ports_on.setdefault((int(a), int(layout.switch_of_port[a, k])), []).append(int(k))
    nxt: dict[tuple[int, int], int] = {}
    circuits = []
    for (u, v), s in zip(pairs, switch_of):
        u, v, s = int(u), int(v), int(s)
        pu = ports_on[(u, s)][nxt.get((u, s), 0)]
        nxt[(u, s)] = nxt.get((u, s), 0) + 1
        pv = ports_on[(v, s)][nxt.get((v, s), 0)]
        nxt[(v, s)] = nxt.get((v, s), 0) + 1
        circuits.append(Circuit(s, u, pu, v, pv))
    return tuple(circuits)
