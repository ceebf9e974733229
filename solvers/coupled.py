"""Coupled identical groups: wire one group with the ports its crossing traffic needs held back, copy it onto
the others, and join the groups on the held ports.

A decode step's demand is usually a few identical heavy groups tied by light traffic: the tensor-parallel
groups of a pipeline (each stage all-reduces inside its group and hands a small activation to the next
stage). `identical_groups` only replicates groups with no traffic between them; here the groups are the
components of the demand at the highest level where it splits into identical groups (same internal demand
in accelerator order, same port layout) whose crossing bytes are below their internal bytes.

Construction (`coupled_start`):

1. The crossing bytes between groups i and j need about h_ij = ceil(bytes / (B T)) circuits, T the group's
   own bound; each group holds back H = max_i sum_j h_ij ports, one per accelerator at the positions with
   the most crossing bytes (a position's last port first; the same port of every group, so on the same
   switch). A switch holds floor(f / 2) circuits inside a group with f fibres on it, so a port goes on a
   switch where the group's fibres left are odd when the position has one: groups of 3 on whole planes hold
   one port per plane and keep a triangle (groups12: the K4 of groups at its optimum, 0.00036 s, where the
   same port held everywhere left a path per group), groups of 8 hold the same port at every position.
2. The group is wired alone on its remaining ports by the requested solver (exact for small groups) and the
   circuits are copied onto every group, position by position.
3. Each held position joins the groups in pairs on its switch: a matching that serves the largest unmet
   h_ij first, then pairs any groups left (spare capacity, e.g. closing a pipeline into a ring).

How many circuits join the groups is a trade: each costs its accelerator a port inside its group, and more
of them carry the crossing bytes sooner (the phases objective times the hand-off apart, on the circuits
across alone) or relay a group's own bytes. `coupled_best` tries the ports the crossing bytes need and up to
MORE_HELD more, and keeps the best: on llama405b-tp8pp2-16 two circuits across instead of one give the time
objective's proven optimum (0.0027958666 s against 0.0027963707 s) and 0.0028472935 s under phases
(0.0028997287 s with one), each group wired by the MILP in seconds.

The answer is a start for the solver's own run on the whole instance (its probes, or the local search), and
the better of the two is returned. It is a wiring, not a bound: circuits between groups could also relay
internal bytes, which only the whole-instance solvers can weigh.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from synth.errors import Infeasible, InvalidInput
from synth.model import Circuit, OCSLayout, SolveParams, SolveResult, Wiring
from synth.problem import WiringProblem

MAX_LEVELS = 32     # demand levels tried when looking for the groups
MORE_HELD = 3       # held ports per group tried beyond what the crossing bytes need (`coupled_best`)


def coupled_groups(problem: WiringProblem) -> list[np.ndarray] | None:
    """The coupled identical groups (accelerators of each, in order), or None (see the module doc)."""
    from scipy.sparse.csgraph import connected_components
    t = problem.traffic.bytes_
    n = problem.accelerators
    if problem.fixed_circuits or problem.policy == "direct" or not (t > 0).any():
        return None
    from .bounds import demand_levels
    sop = problem.layout.switch_of_port
    for th in demand_levels(t, MAX_LEVELS)[::-1]:
        k, lab = connected_components(t >= th, directed=True, connection="weak")
        if k < 2:
            return None                  # lower levels only merge further
        sizes = np.bincount(lab)
        if sizes.min() != sizes.max() or sizes[0] < 2:
            continue
        groups = [np.flatnonzero(lab == c) for c in range(k)]
        g0 = groups[0]
        inner = t[np.ix_(g0, g0)]
        if not all(np.array_equal(t[np.ix_(g, g)], inner) and np.array_equal(sop[g], sop[g0]) for g in groups[1:]):
            continue
        same = lab[:, None] == lab[None, :]
        crossing = t[~same].sum()
        if crossing <= 0 or crossing >= t[same].sum():
            return None
        return groups if len(groups) * len(g0) == n else None
    return None


def group_labels(groups, n: int) -> np.ndarray:
    """Each of the n accelerators' group index (groups of equal size, as `coupled_groups` gives them)."""
    lab = np.empty(n, dtype=np.int64)
    lab[np.asarray(groups, dtype=np.int64)] = np.arange(len(groups))[:, None]
    return lab


def _crossing(t: np.ndarray, groups: list[np.ndarray]) -> np.ndarray:
    """Bytes between each pair of groups (the larger direction): block sums P^T t P, P the membership matrix."""
    P = np.zeros((t.shape[0], len(groups)))
    for c, g in enumerate(groups):
        P[g, c] = 1.0
    blocks = P.T @ t @ P
    M = np.maximum(blocks, blocks.T)
    np.fill_diagonal(M, 0.0)
    return M


def _held_ports(problem: WiringProblem, groups: list[np.ndarray], M: np.ndarray,
                bt: float, more: int = 0) -> tuple[list[tuple[int, int]], np.ndarray]:
    """[(position, port)] each group holds back, and h (circuits wanted between each pair of groups)."""
    t = problem.traffic.bytes_
    size = len(groups[0])
    h = np.where(M > 0, np.ceil(M / bt - 1e-9), 0).astype(np.int64)
    H = int(h.sum(axis=1).max()) + more
    G = np.stack(groups)                     # groups x positions
    lab = group_labels(G, problem.accelerators)
    cross = np.where(lab[:, None] != lab[None, :], t + t.T, 0.0).sum(axis=1)
    by_pos = cross[G].sum(axis=0)
    order = np.argsort(-by_pos, kind="stable")
    sop = problem.layout.switch_of_port
    ports_of = {int(pos): [int(q) for q in np.flatnonzero(sop[groups[0][pos]] >= 0)[::-1]] for pos in order}
    # the group's fibres left on each switch: a held port goes where they are odd first (module doc)
    left = np.bincount(sop[groups[0]][sop[groups[0]] >= 0], minlength=problem.layout.switches)
    held = []
    for r in range(H):
        pos = int(order[r % size])
        if not ports_of[pos]:
            break
        a = int(groups[0][pos])
        odd = [q for q in ports_of[pos] if left[sop[a, q]] % 2]
        q = odd[0] if odd else ports_of[pos][0]
        ports_of[pos].remove(q)
        left[sop[a, q]] -= 1
        held.append((pos, q))
    return held, h


def _join(groups: list[np.ndarray], held: list[tuple[int, int]], h: np.ndarray,
          M: np.ndarray, sop: np.ndarray) -> list[Circuit]:
    """Circuits between groups on the held ports: per held port, a matching of the groups (largest unmet
    need first, then by crossing bytes, then any groups left). Once every need is met the needs start over,
    so held ports beyond them repeat the same pattern: a pipeline of four stages on four held ports is its
    ring twice over (each hand-off on twice the circuits), where the crossing bytes alone had put three of
    the four on the first and last hand-offs and left the middle one on a single circuit."""
    need = h.copy()
    k = len(groups)
    out = []
    for pos, port in held:
        if not need.any():
            need = h.copy()
        free = set(range(k))
        cand = sorted(((need[i, j] + need[j, i], M[i, j] + M[j, i], i, j) for i in range(k) for j in range(i + 1, k)),
                      reverse=True)
        for _, _, i, j in cand:
            if i in free and j in free:
                free -= {i, j}
                need[i, j] = max(0, need[i, j] - 1)
                need[j, i] = max(0, need[j, i] - 1)
                a, b = int(groups[i][pos]), int(groups[j][pos])
                out.append(Circuit(int(sop[a, port]), a, port, b, port))
    return out


def coupled_start(problem: WiringProblem, solver: str, params: SolveParams, groups: list[np.ndarray],
                  wire, more: int = 0) -> SolveResult | None:
    """The construction of the module doc, wired by `wire(sub_problem, solver, params)`, with `more` held
    ports per group beyond what the crossing bytes need; the result is scored on the whole problem (None when
    it does not fit, e.g. the switch radix, or a group member would keep no port of its own)."""
    import time

    from synth.verify import wiring_violations

    from . import _result
    from .bounds import best_bound
    t0 = time.perf_counter()
    t = problem.traffic.bytes_
    lay = problem.layout
    g0 = groups[0]
    sub_full = problem.restricted(g0, OCSLayout(lay.switch_of_port[g0], lay.switch_radix))
    T = best_bound(sub_full.as_time(), lp=False)[0] if problem.objective != "hops" else 0.0
    bt = problem.port_bytes_per_s * T if T > 0 else float("inf")
    M = _crossing(t, groups)
    held, h = _held_ports(problem, groups, M, bt, more)
    if not held:
        return None
    sop = lay.switch_of_port
    sub_sop = sop[g0]                     # a copy (fancy indexing)
    for pos, port in held:
        sub_sop[pos, port] = -1
    if not (sub_sop >= 0).any(axis=1).all():
        return None                       # a group member would keep no port of its own
    try:
        sub = replace(sub_full, layout=OCSLayout(sub_sop, lay.switch_radix))
    except (InvalidInput, Infeasible):    # the held ports leave the group too few to connect its own demand
        return None
    say = params.progress
    res = wire(sub, solver, replace(params, progress=(lambda m: say(f"coupled group: {m}")) if say else None))
    if res.artifact is None:
        return None
    circuits = [Circuit(c.switch, int(g[c.a]), c.a_port, int(g[c.b]), c.b_port)
                for g in groups for c in res.artifact.circuits]
    circuits += _join(groups, held, h, M, sop)
    w = Wiring(problem.accelerators, problem.ports, tuple(circuits), lay)
    if wiring_violations(w):
        return None
    extra = {"start": f"coupled groups: {len(groups)} x {len(g0)} accelerators, {len(held)} held port(s) each, "
                      f"group wired by {res.solver} ({res.status.value})", "held": len(held)}
    return _result(problem, res.solver, w, params, t0, res.limit, extra,
                   score_s=max(2.0, params.time_limit_s / 4))


def coupled_best(problem: WiringProblem, solver: str, params: SolveParams, groups: list[np.ndarray],
                 wire) -> SolveResult | None:
    """`coupled_start` with the held ports the crossing bytes need, then with 1 .. MORE_HELD more (module
    doc), each on an even share of the clock left, stopping where the ports run out; the best scored (the
    fewest held ports on a tie), with every try's objective in `extra["held_tried"]`. None when the first
    does not fit. Ctrl-C after a first wiring answers the best so far (limit INTERRUPT)."""
    import time

    from synth.model import Limit
    t0 = time.perf_counter()
    best, tried = None, {}
    for more in range(MORE_HELD + 1):
        left = params.time_limit_s - (time.perf_counter() - t0)
        if best is not None and left < 1.0:
            break
        share = max(left, 1.0) / (MORE_HELD + 1 - more)
        try:
            res = coupled_start(problem, solver, replace(params, time_limit_s=share), groups, wire, more)
        except KeyboardInterrupt:
            if best is None:
                raise
            best = replace(best, limit=Limit.INTERRUPT)
            break
        if res is None or res.extra["held"] in tried:      # the ports ran out: no more to hold
            break
        tried[res.extra["held"]] = res.objective
        if best is None or res.objective < best.objective:
            best = res
        if res.limit == Limit.INTERRUPT:
            best = replace(best, limit=Limit.INTERRUPT)
            break
    if best is None:
        return None
    return replace(best, extra={**best.extra, "held_tried": tried})
