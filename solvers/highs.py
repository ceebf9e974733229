"""HiGHS keeps one task scheduler per calling thread, sized by the first solve's `threads` option; a later
solve on the same thread asking for another count stops at once, "Not Solved" (HiGHS.jl#130; one scheduler
per thread since HiGHS#818). `threads(n)` before a solve resets the calling thread's scheduler when the
count changes, so one process can mix counts (`--threads`, the schedule MILP's 2, the case split's 1)."""
from __future__ import annotations

import threading

_last = threading.local()


def threads(n: int) -> int:
    """Make the calling thread's HiGHS scheduler fit `n` threads; returns n (for the solver's option)."""
    n = int(n)
    if getattr(_last, "n", n) != n:
        import highspy
        highspy.Highs.resetThreadScheduler(True)
    _last.n = n
    return n
