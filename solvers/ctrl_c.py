"""Ctrl-C for solvers that run in C++, where Python's KeyboardInterrupt cannot reach them until they return.

Both keep the answer so far: the caller sees `hit` and returns its best wiring marked Limit.INTERRUPT (or
raises KeyboardInterrupt where there is nothing to keep, e.g. a colouring). Main thread only; elsewhere the
solve runs to its limit.
"""
from __future__ import annotations


class _SigintWatch:
    """While open (main thread only): SIGINT sets `hit` through a Python handler and, through the signal
    wakeup fd that CPython writes the moment the signal lands, wakes a watcher thread that sets `hit` too and
    calls `on_hit` (e.g. to stop a C++ search). The watcher is what reaches code running in C++ threads while
    the main thread sits inside a solver's run: Python runs signal handlers only in the main thread."""

    def __init__(self, on_hit=None) -> None:
        self.hit = False
        self._on_hit = on_hit
        self._prev = None
        self._prev_fd = -1
        self._pipe: tuple[int, int] | None = None
        self._watcher = None

    def __enter__(self):
        import os
        import signal
        import threading
        if threading.current_thread() is not threading.main_thread():
            return self
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._pipe = (r, w)

        def watch() -> None:
            while True:
                data = os.read(r, 64)
                if not data:                      # the write end closed: the block is over
                    return
                if signal.SIGINT in data:
                    self.hit = True
                    if self._on_hit is not None:
                        self._on_hit()
                    return

        self._watcher = threading.Thread(target=watch, daemon=True)
        self._watcher.start()
        self._prev = signal.signal(signal.SIGINT, self._on_sigint)
        self._prev_fd = signal.set_wakeup_fd(w)
        return self

    def _on_sigint(self, signum, frame) -> None:
        # a SIGINT that lands between installing this handler and the wakeup fd reaches Python but not the
        # pipe: wake the watcher from here too
        self.hit = True
        if self._pipe is not None:
            import os
            try:
                os.write(self._pipe[1], bytes([signum]))
            except OSError:
                pass

    def __exit__(self, *exc) -> bool:
        import os
        import signal
        if self._pipe is None:
            return False
        signal.set_wakeup_fd(self._prev_fd)
        if self._prev is not None:
            signal.signal(signal.SIGINT, self._prev)
        r, w = self._pipe
        self._pipe = None
        os.close(w)
        self._watcher.join()
        os.close(r)
        self._watcher = None
        return False


class HighsCtrlC(_SigintWatch):
    """Ctrl-C for HiGHS, which runs in C++ where Python's KeyboardInterrupt cannot reach it: while a solve
    runs (``with ctrl_c:``), SIGINT only sets `hit`, and HiGHS's interrupt callbacks (called between nodes
    and iterations) tell it to stop. The solve then returns what it has, marked Limit.INTERRUPT. The MIP
    may call them from its worker threads, while the main thread sits in its run (GIL released), where Python
    runs no signal handler: the wakeup-fd watcher of `_SigintWatch` sets the flag all the same. Main thread
    only."""

    def callback(self, kind, message, data_out, data_in, user_data) -> None:
        if self.hit:
            data_in.user_interrupt = True


class CpsatCtrlC:
    """Ctrl-C for CP-SAT: run `solve(model)` so that a SIGINT stops the search and is reported (`hit`), instead
    of being inferred. CP-SAT's own SIGINT catching is turned off; the watcher of `_SigintWatch` calls
    StopSearch. Off the main thread the search runs to its limit."""

    def __init__(self, solver) -> None:
        self.solver = solver
        self.hit = False

    def solve(self, model):
        import threading
        self.solver.parameters.catch_sigint_signal = False
        done = threading.Event()

        def stop() -> None:
            # a stop requested while Solve is still copying the model can be lost: repeat until it returns
            while True:
                self.solver.StopSearch()
                if done.wait(0.05):
                    return

        watch = _SigintWatch(stop)
        try:
            with watch:
                try:
                    return self.solver.Solve(model)
                finally:
                    done.set()
        finally:
            self.hit = watch.hit

    def solve_or_raise(self, model):
        """`solve`, raising KeyboardInterrupt when Ctrl-C stopped it (for searches with no answer to keep)."""
        status = self.solve(model)
        if self.hit:
            raise KeyboardInterrupt
        return status
