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
from synth.network import highs_threads
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


MOST_S = 5.0          # `most_on_switches`: its clock at most (kimi-k2-288's placed polarity graph on 96-port OCSes:
                      # its best within 0.5 s)
MOST_NODES = 2000     # ... and its branch-and-bound nodes. On the large plans the clock binds first, inside the root
                      # (TopoOpt-style and the relabelled biaffine plane: the root LP unsolved at 40 s), so the count
                      # can vary with the machine's speed; it did not between 0.5 and 5 s on the plans measured


def most_on_switches(layout: OCSLayout, a: np.ndarray, b: np.ndarray, seed: int = 0,
                     time_limit_s: float = MOST_S, weight: np.ndarray | None = None) -> np.ndarray:
    """The OCS of each circuit (a[e], b[e]) in as large a set of them as `layout` holds (-1: left out): a
    circuit can sit only on an OCS both ends reach, with a port free at each, and OCS s holds at most radix /
    2. A b-matching of circuits onto OCSes: a HiGHS MIP (one integer column per distinct pair and OCS it may
    take, one row per pair, per accelerator and OCS, per OCS) from a greedy start (circuits with the fewest OCSes first,
    each on the OCS with the most ports left at its ends; ties by `seed`), stopped after MOST_NODES nodes or
    `time_limit_s`. Where every circuit fits it is an edge colouring, as :func:`colour_or_proof`'s, but
    one that keeps the most where they do not (the whole 3D torus is no wiring of split planes: kimi-k2-288
    on 96-port OCSes keeps 2,109 of its 2,592 circuits, the optimum, in 4 s; 2,083 at 1 s). With `weight` (per
    circuit, a pair's circuits alike) the MIP keeps the most weight instead: lp-round's rounding weighs its
    heavier pairs, as dropping its smallest remainders first did."""
    import highspy
    import scipy.sparse as sps

    from synth.formats import quiet_stdout
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    n, S = layout.accelerators, layout.switches
    cap = layout.capacity                                   # ports of each accelerator on each OCS
    radix = np.asarray(layout.switch_radix, dtype=np.int64) // 2
    out = np.full(len(a), -1, dtype=np.int64)
    ok = (cap[a] > 0) & (cap[b] > 0) & (a != b)[:, None]   # circuit x OCS: both ends reach it
    E, O = np.nonzero(ok)
    if not len(E):
        return out
    free, made = cap.copy(), np.zeros(S, dtype=np.int64)
    rng = np.random.default_rng(seed)
    for e in np.lexsort((rng.random(len(a)), ok.sum(axis=1))).tolist():
        room = np.minimum(free[a[e]], free[b[e]]) * (made < radix)
        if room.max() > 0:
            s = int(np.argmax(room + rng.random(room.size) * 0.5 * (room > 0)))
            out[e] = s
            free[a[e], s] -= 1
            free[b[e], s] -= 1
            made[s] += 1
    if (out >= 0).all():
        return out
    # one integer column per distinct pair and OCS it may take (a pair's parallel circuits are alike: the
    # torus's three per neighbour pair took 13.9 s at the root as one column each, kimi-k2-288 on 96-port OCSes)
    key = np.minimum(a, b) * n + np.maximum(a, b)
    uniq, first, which, mult = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    P = len(uniq)
    pa, pb = a[first], b[first]
    w = np.ones(P) if weight is None else np.zeros(P)
    if weight is not None:
        np.maximum.at(w, which, np.asarray(weight, dtype=np.float64))
    E, O = np.nonzero(ok[first])
    m = len(E)
    col = np.arange(m)
    rows = np.concatenate([E, P + pa[E] * S + O, P + pb[E] * S + O, P + n * S + O])
    A = sps.csc_matrix((np.ones(4 * m), (rows, np.tile(col, 4))), shape=(P + (n + 1) * S, m))
    upper = np.concatenate([mult, cap.ravel(), radix]).astype(np.float64)
    with quiet_stdout():                                   # HiGHS's banner, at a process's first model
        H = highspy.Highs()
    H.setOptionValue("output_flag", False)
    H.setOptionValue("threads", highs_threads(0))
    H.setOptionValue("time_limit", float(max(0.1, time_limit_s)))
    H.setOptionValue("mip_max_nodes", MOST_NODES)
    H.setOptionValue("random_seed", int(seed))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = m, A.shape[0]
    lp.col_cost_ = -w[E]
    lp.col_lower_ = np.zeros(m)
    lp.col_upper_ = np.minimum(mult[E], np.minimum(cap[pa[E], O], cap[pb[E], O])).astype(np.float64)
    lp.row_lower_, lp.row_upper_ = np.full(A.shape[0], -highspy.kHighsInf), upper
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    lp.integrality_ = [highspy.HighsVarType.kInteger] * m
    H.passModel(lp)
    start = np.zeros((P, S), dtype=np.int64)               # the greedy start, counted per pair and OCS
    np.add.at(start, (which[out >= 0], out[out >= 0]), 1)
    sol = highspy.HighsSolution()
    sol.col_value = start[E, O].astype(np.float64).tolist()
    sol.value_valid = True
    H.setSolution(sol)
    H.run()
    if H.getInfo().primal_solution_status == 2:
        x = np.rint(np.asarray(H.getSolution().col_value)).astype(np.int64)
        if w[E] @ x > w[which[out >= 0]].sum() + 1e-9:     # better than its start: the pair's circuits in order
            count = np.zeros((P, S), dtype=np.int64)
            count[E, O] = x
            per = count.sum(axis=1)
            ocs = np.repeat(np.tile(np.arange(S), P), count.ravel())   # each pair's OCSes, pair by pair
            order = np.argsort(which, kind="stable")                    # the circuits, pair by pair
            rank = np.arange(len(a)) - np.repeat(np.cumsum(mult) - mult, mult)
            taken = rank < per[which[order]]
            out[:] = -1
            out[order[taken]] = ocs[(np.cumsum(per) - per)[which[order[taken]]] + rank[taken]]
    return out
