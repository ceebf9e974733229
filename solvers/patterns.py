"""Small identical groups joined by uniform traffic: a CP-SAT proof of the time objective by a case split on
the circuits inside each group.

Why. groups12 on whole planes (four groups of three accelerators, 4 MB between the two of a group each way,
0.1 MB between any two of different groups, three ports): CP-SAT's metric-inequality probes on the whole
instance (solvers/benders.py) stall 1.6% short of the optimum for 900 s, and the net test
(solvers/stages.py), which prices each group alone, stops at 0.00032 s, 11% short (a group's triangle,
without what the groups' traffic costs it). HiGHS proves the optimum, 0.00036 s, by branch and bound on its
flows in 30-80 s; CP-SAT sees flows only through the rows its proposals earn, one wiring at a time, and the
whole instance has too many wirings for that.

Symmetry. When every accelerator sits on the same switches, the demand inside every group is the same per
ordered pair and the demand between any two accelerators of different groups is one value, every
relabelling inside a group and every permutation of the groups maps the instance onto itself. So every
wiring has a relabelled copy of the same time in which each group's internal circuits form a canonical
pattern (a multigraph on the group's positions, the least of its relabellings: `group_patterns`) and the
groups come in order of their patterns. The cases are the multisets of k patterns; each fixes the circuits
inside every group and leaves those between the groups free.

Probes. First each pattern alone, fixed in the first group with the others free, for QUICK_S: a pattern no
wiring at T gives that group no group has (relabel the groups), so every case holding it is closed
(groups12: 3-4 of its 8 patterns, 260-295 of its 330 cases, in 9-12 s). Then each case left is a
metric-inequality probe at T with its circuits fixed and its own symmetry rows (the fixed circuits join
each pair's kind, so the rows hold for the relabellings that keep the case; without them groups12's cases
with a triangle or a path in every group stay open for minutes, with them each closes in 1-10 s). Metric
rows are valid for every wiring, so those one case earns serve the next. Two passes while the clock lasts:
every case for QUICK_S (most close at once: a group with too few circuits inside cannot relay its own bytes
in time), then the cases left, each on an even share of what is left (a case settled early leaves its time
to the rest): the metric probe again, then for FLOW_SHARE of the share CP-SAT's integer flows
(`benders.flow_rows`, a relaxation of fractional routing whose INFEASIBLE is a proof, which settles some
cases the metric rows stall on). A probe that finds a wiring at T returns it (the caller asks again at its
time; a pattern or case with no wiring at T has none below it either, so verdicts are kept). Every case
infeasible: no wiring reaches T.

Both cores. The probes run params.threads at a time in worker threads, each CP-SAT search on one worker
(`_each`): a second worker inside a search did not shorten these small models, and two searches side by side
take groups12's split from 46-58 s to 25-35 s, so CP-SAT proves it at a 60 s limit. Ctrl-C reaches the main
thread only, which then stops the searches running (`solvers.stages.Live`).

Applies to groups of at most PATTERN_MAX_GROUP accelerators, at most ENUM_MAX multigraphs to enumerate per
group and CASES_MAX cases; anything else gets None from `pattern_split` and nothing here runs.
"""
from __future__ import annotations

import itertools
import math
import time
from contextlib import closing
from dataclasses import dataclass

import numpy as np

from synth.model import SolveParams
from synth.problem import WiringProblem

PATTERN_MAX_GROUP = 4   # accelerators per group
ENUM_MAX = 200_000      # multigraphs on a group's positions to enumerate
CASES_MAX = 2_000       # multisets of patterns
QUICK_S = 2.0           # the first pass, per case
FLOW_SHARE = 0.5        # of the second pass's seconds per case, for the integer flows after the metric probe


def position_pairs(s: int) -> list[tuple[int, int]]:
    return list(itertools.combinations(range(s), 2))


def group_patterns(s: int, ports: int, most: int) -> list[tuple[int, ...]]:
    """Every multigraph on s positions with at most `most` circuits per pair and `ports` at a position, one
    per class of relabellings (the least tuple of its class), as circuits per `position_pairs(s)`.

    >>> group_patterns(3, 3, 3)
    [(0, 0, 0), (0, 0, 1), (0, 0, 2), (0, 0, 3), (0, 1, 1), (0, 1, 2), (1, 1, 1), (1, 1, 2)]
    """
    pp = position_pairs(s)
    where = {p: k for k, p in enumerate(pp)}
    # each relabelling as the slot every pair's circuits move to (the identity first)
    perms = np.array([[where[tuple(sorted((q[i], q[j])))] for i, j in pp] for q in itertools.permutations(range(s))])
    ends = np.zeros((len(pp), s), dtype=np.int64)
    for k, (i, j) in enumerate(pp):
        ends[k, i] = ends[k, j] = 1
    m = np.array(list(itertools.product(range(most + 1), repeat=len(pp))), dtype=np.int64).reshape(-1, len(pp))
    m = m[(m @ ends).max(axis=1, initial=0) <= ports]
    # a tuple's digits in base most + 1 order relabelled tuples as tuples: code[row, r] of relabelling r
    code = m @ (most + 1) ** (len(pp) - 1 - perms.T)
    return [tuple(row) for row in m[code[:, 0] == code.min(axis=1)].tolist()]


@dataclass(frozen=True)
class PatternSplit:
    groups: tuple[tuple[int, ...], ...]
    patterns: tuple[tuple[int, ...], ...]     # circuits per pair of positions (`position_pairs`)

    def cases(self) -> list[tuple[int, ...]]:
        """Each case: a pattern index per group, non-decreasing (the multisets)."""
        return list(itertools.combinations_with_replacement(range(len(self.patterns)), len(self.groups)))

    def fixed(self, case: tuple[int, ...]) -> dict[tuple[int, int], int]:
        """The circuits inside every group in a case, per pair (i < j); a shorter case fixes the first
        groups only."""
        out = {}
        pp = position_pairs(len(self.groups[0]))
        for grp, k in zip(self.groups, case):
            for (i, j), c in zip(pp, self.patterns[k]):
                a, b = grp[i], grp[j]
                out[(min(a, b), max(a, b))] = c
        return out


def pattern_split(problem: WiringProblem, ix) -> PatternSplit | None:
    """The case split of the module doc for this instance, or None where it does not apply."""
    from .coupled import group_labels
    from .stages import uniform_groups
    ug = uniform_groups(problem)
    if ug is None or ug.n > PATTERN_MAX_GROUP:
        return None
    sop = problem.layout.switch_of_port
    if not (sop == sop[0]).all():
        return None
    lab = group_labels(ug.groups, problem.accelerators)
    t = problem.traffic.bytes_
    if len(np.unique(t[lab[:, None] != lab[None, :]])) != 1:
        return None
    s, k = ug.n, len(ug.groups)
    g0 = ug.groups[0]
    most = ix.max_x.get((min(g0[0], g0[1]), max(g0[0], g0[1])), 0)
    if (most + 1) ** math.comb(s, 2) > ENUM_MAX:
        return None
    patterns = group_patterns(s, ug.ports, most)
    if math.comb(len(patterns) + k - 1, k) > CASES_MAX:
        return None
    return PatternSplit(ug.groups, tuple(patterns))


def _each(items: list, run, workers: int, live):
    """(item, run(item)) for the items, `workers` at a time in threads (CP-SAT and HiGHS release the GIL),
    as each ends; `run(item, waiting)` is called when the item starts, `waiting` the items not yet started
    plus the ones running (for a fair share of the clock). When the caller stops early (returns, an
    exception, Ctrl-C while it waits; the caller closes the generator) the items not started are dropped and
    the probes running are stopped through `live` (`solvers.stages.Live`) before the close returns."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
    todo = list(items)[::-1]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        running: dict = {}
        try:
            while todo or running:
                while todo and len(running) < workers:
                    item = todo.pop()
                    running[pool.submit(run, item, len(todo) + len(running) + 1)] = item
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for f in [f for f in running if f in done]:          # in the order they were started
                    yield running.pop(f), f.result()
        finally:
            if running:                   # stopped early: stop the searches still running, then wait for them
                while not all(f.done() for f in running):
                    live.cancel()
                    wait(running, timeout=0.05)


def split_bound(problem: WiringProblem, ix, split: PatternSplit, cuts, T: float, deadline: float,
                params: SolveParams, per_switch: bool, closed: set, say=None):
    """Is there a wiring with time <= T? ("closed", None, info) when every case is infeasible (no wiring
    reaches T), ("found", (counts, time), info) when a case probe finds one, ("open", None, info) when the
    deadline comes first. `closed` holds the patterns (as 1-tuples) and cases proven infeasible at T or above
    (it gains this run's). The probes run params.threads at a time, each on one CP-SAT worker: on these small
    models a second worker inside one search did not shorten it (groups12: 46 s on one worker, 48-52 s on
    two), two searches side by side take the split from 46-52 s to 29-35 s."""
    import dataclasses

    from .benders import probe
    from .exact import _symmetry_rows_of
    from .stages import Live
    say = say or (lambda msg: None)
    workers = max(1, params.threads)
    one = dataclasses.replace(params, threads=1) if workers > 1 else params
    live = Live()
    cases = split.cases()
    info = {"cases": len(cases), "closed_before": sum(c in closed for c in cases), "passes": 0}

    def probe_case(case, seconds, flows=False):
        fixed = split.fixed(case)

        def rows(m, x):
            for p, v in fixed.items():
                m.Add(x[p] == v)
        sym = _symmetry_rows_of(problem, ix, None, seconds, pinned=fixed)
        return probe(problem, ix, cuts, T, min(deadline, time.perf_counter() + seconds), one, sym, per_switch,
                     None, rows=rows, flows=flows, live=live)

    def quick(case, waiting):
        if deadline - time.perf_counter() < 0.5:
            return "unknown", None
        return probe_case(case, QUICK_S)[:2]

    def share(case, waiting):
        """An even share of what is left, `workers` cases at a time: a case settled early leaves its time to
        the rest."""
        left = deadline - time.perf_counter()
        if left < 0.5:
            return "unknown", None
        end = time.perf_counter() + min(left, left * workers / waiting)
        verdict, found, _ = probe_case(case, (1 - FLOW_SHARE) * (end - time.perf_counter()))
        if verdict == "unknown" and end - time.perf_counter() > 0.5 and not live.stopped:
            verdict, found, _ = probe_case(case, end - time.perf_counter(), flows=True)
        return verdict, found

    # a pattern no wiring at T gives group 0 (the others free) no group has either (relabel the groups)
    with closing(_each([(k,) for k in range(len(split.patterns)) if (k,) not in closed], quick, workers,
                       live)) as results:
        for (k,), (verdict, found) in results:
            if verdict == "found":
                info.update(open=len(cases), case=[k])
                return "found", found, info
            if verdict == "infeasible":
                closed.add((k,))
    out = {k for k in range(len(split.patterns)) if (k,) in closed}
    info["patterns_out"] = len(out)
    todo = [c for c in cases if c not in closed and not out.intersection(c)]
    closed.update(c for c in cases if out.intersection(c))
    say(f"cpsat pattern split at {T:.6g} s: {len(out)} of {len(split.patterns)} patterns ruled out in every "
        f"group, {len(todo)} cases left")
    for r, run in enumerate((quick, share)):
        still = []
        with closing(_each(todo, run, workers, live)) as results:
            for case, (verdict, found) in results:
                if verdict == "infeasible":
                    closed.add(case)
                elif verdict == "found":
                    info.update(passes=r + 1, open=len(todo) - sum(c in closed for c in todo), case=list(case))
                    return "found", found, info
                else:
                    still.append(case)
        info["passes"] = r + 1
        say(f"cpsat pattern split at {T:.6g} s: pass {r + 1}, {len(cases) - len(still)} of {len(cases)} cases "
            "infeasible")
        todo = sorted(still)
        if not todo:
            break
    info["open"] = len(todo)
    return ("closed" if not todo else "open"), None, info
