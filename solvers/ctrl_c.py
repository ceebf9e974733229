"""Ctrl-C for solvers that run in C++, where Python's KeyboardInterrupt cannot reach them until they return.

Both keep the answer so far: the caller sees `hit` and returns its best wiring marked Limit.INTERRUPT (or
raises KeyboardInterrupt where there is nothing to keep, e.g. a colouring). Main thread only; elsewhere the
solve runs to its limit.
"""
from __future__ import annotations


class HighsCtrlC:
    """Ctrl-C for HiGHS, which runs in C++ where Python's KeyboardInterrupt cannot reach it: while a solve
    runs, SIGINT only sets a flag, and HiGHS's interrupt callbacks (called between nodes and iterations)
    tell it to stop. The solve then returns what it has, marked Limit.INTERRUPT. Main thread only.

    The flag is set from two places: the Python handler (when the main thread runs Python) and a watcher
    thread woken through the signal wakeup fd, which CPython writes the moment the signal lands. HiGHS's
    MIP calls its callbacks from its worker threads too, and Python runs signal handlers only in the main
    thread, which sits inside HiGHS's run: with the handler alone the flag could stay unset and the solve
    run to its limit (a test's 300 s solve once did)."""

    def __init__(self) -> None:
        self.hit = False
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
                if not data:                      # the write end closed: the solve is over
                    return
                if signal.SIGINT in data:
                    self.hit = True

        self._watcher = threading.Thread(target=watch, daemon=True)
        self._watcher.start()
        self._prev = signal.signal(signal.SIGINT, self._on_sigint)
        self._prev_fd = signal.set_wakeup_fd(w)
        return self

    def _on_sigint(self, signum, frame) -> None:
        self.hit = True

    def __exit__(self, *exc) -> bool:
        import os
        import signal
        if self._pipe is None:
            return False
        signal.set_wakeup_fd(self._prev_fd)
        if self._prev is not None:
            signal.signal(signal.SIGINT, self._prev)
        r, w = self._pipe
        os.close(w)
        self._watcher.join()
        os.close(r)
        self._pipe = self._watcher = None
        return False

    def callback(self, kind, message, data_out, data_in, user_data) -> None:
        if self.hit:
            data_in.user_interrupt = True


class CpsatCtrlC:
    """Ctrl-C for CP-SAT: run `solve(model)` so that a SIGINT stops the search and is reported (`hit`), instead
    of being inferred. CP-SAT's own SIGINT catching is turned off; Python's handler only sets a flag, and its
    wakeup fd (written from C the moment the signal lands, while the main thread is inside the C++ solve)
    wakes a watcher thread that calls StopSearch. Off the main thread the search runs to its limit."""

    def __init__(self, solver) -> None:
        self.solver = solver
        self.hit = False
        self._w: int | None = None

    def solve(self, model):
        import os
        import signal
        import threading
        self.solver.parameters.catch_sigint_signal = False
        if threading.current_thread() is not threading.main_thread():
            return self.solver.Solve(model)
        r, w = os.pipe()
        os.set_blocking(w, False)
        self._w = w
        prev_handler = signal.signal(signal.SIGINT, self._on_sigint)
        prev_fd = signal.set_wakeup_fd(w)

        done = threading.Event()

        def watch() -> None:
            while True:
                data = os.read(r, 64)
                if not data:                      # the write end closed: the solve is over
                    return
                if signal.SIGINT in data:
                    self.hit = True
                    break
            # a stop requested while Solve is still copying the model can be lost: repeat until it returns
            while not done.wait(0.05):
                self.solver.StopSearch()

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            return self.solver.Solve(model)
        finally:
            done.set()
            signal.set_wakeup_fd(prev_fd)
            signal.signal(signal.SIGINT, prev_handler)
            self._w = None
            os.close(w)
            watcher.join()
            os.close(r)

    def _on_sigint(self, signum, frame) -> None:
        # a SIGINT that lands between installing this handler and the wakeup fd reaches Python (here, before
        # Solve starts) but not the pipe: wake the watcher from here too, or the search runs to its limit
        self.hit = True
        if self._w is not None:
            import os
            try:
                os.write(self._w, bytes([signum]))
            except OSError:
                pass

    def solve_or_raise(self, model):
        """`solve`, raising KeyboardInterrupt when Ctrl-C stopped it (for searches with no answer to keep)."""
        status = self.solve(model)
        if self.hit:
            raise KeyboardInterrupt
        return status
