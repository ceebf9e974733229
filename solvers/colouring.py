"""Exact edge colouring of a multigraph onto OCS switches (CP-SAT), for when the Kempe-chain heuristic of
:func:`synth.realize.realize` gives up on a graph that may still colour (a non-bipartite graph needs its
maximum degree in colours only when it is class 1, which no fast test decides).

x[e, s] = circuit e on switch s (only switches where both ends have ports); every circuit on exactly one
switch; accelerator a holds at most its ports on s; switch s at most radix / 2 circuits. The colours around
one accelerator of highest degree are fixed in order when the switches are interchangeable (uniform layout,
one radix), which removes the colour permutations.

With `ls_share` > 0 the search runs twice on the same model: first CP-SAT's local search alone (feasibility
jump and violation local search, `use_ls_only`) on one worker for that share of the time, then the full
search (`ls_share` = 1: the local search alone). The first finds colourings the full search misses for
minutes on dense multigraphs (deepseek-v3-144 with TP 4: the relay V's 18-regular multigraph, 1.3-2.8 s
against nothing in 40 s on one thread, BENCHMARKS.md), and on one worker it gives the same circuits on every
run. Beyond what CP-SAT's presolve finds, only the full search proves that no colouring exists, so where a
proof is wanted (the exact back-ends) it gets the whole clock.
"""
from __future__ import annotations

import numpy as np

from synth.model import Circuit, OCSLayout
from synth.realize import assign_ports


def colour_cpsat(layout: OCSLayout, pairs, time_limit_s: float = 30.0, seed: int = 0,
                 threads: int = 2, ls_share: float = 0.0) -> tuple[Circuit, ...] | None:
    """Circuits for the (a, b) pairs on the switches of `layout`, or None when CP-SAT proves there is no
    such assignment or finds none in the time limit."""
    return colour_or_proof(layout, pairs, time_limit_s, seed, threads, ls_share)[0]


def colour_or_proof(layout: OCSLayout, pairs, time_limit_s: float = 30.0, seed: int = 0,
                    threads: int = 2, ls_share: float = 0.0) -> tuple[tuple[Circuit, ...] | None, bool]:
    """(circuits, False) as :func:`colour_cpsat`, or (None, True) when no assignment exists (CP-SAT's proof,
    or a pair with no switch in common), (None, False) when none was found in the time limit. One thread
    gives the same circuits on every run (the model is a satisfaction problem: the first solution ends it;
    the local search before the full search always runs on one worker)."""
    from ortools.sat.python import cp_model
    edges = np.asarray(list(pairs), dtype=np.int64).reshape(-1, 2)
    cap = layout.capacity
    m = cp_model.CpModel()
    x: dict[tuple[int, int], object] = {}
    by_node_switch: dict[tuple[int, int], list] = {}
    by_switch: dict[int, list] = {}
    for e, (a, b) in enumerate(edges.tolist()):
        allowed = np.flatnonzero((cap[a] > 0) & (cap[b] > 0))
        if allowed.size == 0:
            return None, True
        for s in allowed.tolist():
            v = m.NewBoolVar(f"x_{e}_{s}")
            x[(e, s)] = v
            by_node_switch.setdefault((a, s), []).append(v)
            by_node_switch.setdefault((b, s), []).append(v)
            by_switch.setdefault(s, []).append(v)
        m.AddExactlyOne([x[(e, s)] for s in allowed.tolist()])
    for (a, s), vs in by_node_switch.items():
        if len(vs) > cap[a, s]:
            m.AddAtMostOne(vs) if cap[a, s] == 1 else m.Add(sum(vs) <= int(cap[a, s]))
    for s, vs in by_switch.items():   # the radix, where the ports on s do not already imply it
        if len(vs) > layout.switch_radix[s] // 2 and int(cap[:, s].sum()) // 2 > layout.switch_radix[s] // 2:
            m.Add(sum(vs) <= layout.switch_radix[s] // 2)
    if edges.size and layout.is_uniform() and len(set(layout.switch_radix)) == 1:
        deg = np.bincount(edges.ravel(), minlength=layout.accelerators)
        hub = int(np.argmax(deg))
        at_hub = np.flatnonzero((edges == hub).any(axis=1))
        for s, e in enumerate(at_hub.tolist()):     # distinct colours around the hub, in order
            m.Add(x[(e, s)] == 1)
    from .ctrl_c import CpsatCtrlC
    status = cp_model.UNKNOWN
    for ls_only in (True,) if ls_share >= 1.0 else (True, False) if ls_share > 0 else (False,):
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = time_limit_s * (ls_share if ls_only else 1.0 - ls_share)
        solver.parameters.num_workers = 1 if ls_only else threads
        solver.parameters.use_ls_only = ls_only
        solver.parameters.random_seed = seed
        status = CpsatCtrlC(solver).solve_or_raise(m)
        if status != cp_model.UNKNOWN:
            break
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, status == cp_model.INFEASIBLE
    switch_of = [next(s for s in range(layout.switches) if (e, s) in x and solver.Value(x[(e, s)]))
                 for e in range(len(edges))]
    return assign_ports(layout, edges.tolist(), switch_of), False
