"""HiGHS keeps one task scheduler per calling thread, sized by the first solve's `threads` option; a later
solve on the same thread asking for another count stops at once, "Not Solved" (HiGHS.jl#130; one scheduler
per thread since HiGHS#818). `threads(n)` (synth.network.highs_threads) before a solve resets the calling
thread's scheduler when the count changes, so one process can mix counts (`--threads`, the schedule MILP's 2,
the case split's 1, HiGHS's own count for the routing LPs)."""
from __future__ import annotations

import functools
import time

from synth.network import highs_threads

threads = highs_threads     # one record of each thread's scheduler for synth's models and the solvers'


def pulp_highs(deadline: float, **options):
    """PuLP's HiGHS solver with the model passed in bulk and a deadline instead of a time limit.

    PuLP hands HiGHS its model one column and one row at a time and collects the problem's variables from
    its constraints three times per solve (4-5 s for the 260,000 columns of a 64-accelerator flow model, all
    outside HiGHS's own clock). This subclass collects them once, passes the columns and the rows (CSR) in
    one call each, and sets HiGHS's time limit to what is left before `deadline` (a `time.perf_counter()`
    value) just before the run; when nothing is left the solve is skipped (status "Not Solved"). Columns
    and rows keep PuLP's order, so HiGHS sees the model PuLP would have given it."""
    return _pulp_highs_class()(deadline, **options)


@functools.cache
def _pulp_highs_class():
    """The class of :func:`pulp_highs`, built once (PuLP is imported only when a MILP runs)."""
    import pulp

    class _Highs(pulp.HiGHS):
        def __init__(self, deadline: float, **options):
            super().__init__(**options)
            self.deadline = deadline

        def actualSolve(self, lp):
            import highspy
            import numpy as np
            self.createAndConfigureSolver(lp)
            h = lp.solverModel
            cols = lp.variables()
            inf = highspy.kHighsInf
            mult = -1.0 if lp.sense == pulp.const.LpMaximize else 1.0
            for i, v in enumerate(cols):
                v.index = i
            cost = np.array([lp.objective.get(v, 0.0) for v in cols], dtype=float) * mult
            lower = np.array([-inf if v.lowBound is None else v.lowBound for v in cols], dtype=float)
            upper = np.array([inf if v.upBound is None else v.upBound for v in cols], dtype=float)
            h.addCols(len(cols), cost, lower, upper, 0, np.zeros(0, np.int32), np.zeros(0, np.int32),
                      np.zeros(0, float))
            ints = np.array([v.index for v in cols if v.cat == pulp.const.LpInteger], dtype=np.int32)
            if self.mip and ints.size:
                h.changeColsIntegrality(ints.size, ints, np.ones(ints.size, dtype=np.uint8))
            rows = list(lp._constraints.values())
            starts, index, value, lo, up = [0], [], [], [], []
            for i, c in enumerate(rows):
                for v, a in c.items():
                    if a != 0:
                        index.append(v.index)
                        value.append(a)
                starts.append(len(index))
                c.index = i
                lb, ub = c.getLb(), c.getUb()
                lo.append(-inf if lb is None else lb)
                up.append(inf if ub is None else ub)
            h.addRows(len(rows), np.array(lo, dtype=float), np.array(up, dtype=float), len(index),
                      np.array(starts[:-1], dtype=np.int32), np.array(index, dtype=np.int32),
                      np.array(value, dtype=float))
            left = self.deadline - time.perf_counter()
            if left > 0:
                h.setOptionValue("time_limit", float(left))
                h.run()
                lp.variables = lambda: cols        # findSolutionValues asks again: the same list
                try:
                    status, sol_status = self.findSolutionValues(lp)
                finally:
                    del lp.variables
            else:
                status, sol_status = pulp.const.LpStatusNotSolved, pulp.const.LpSolutionNoSolutionFound
            for v in cols:
                v.modified = False
            for c in rows:
                c.modifier = False
            lp.assignStatus(status, sol_status)
            return status

    return _Highs
