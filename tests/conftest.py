from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
INSTANCES = ROOT / "instances"


@pytest.fixture(autouse=True)
def _run_from_root(monkeypatch):
    """Doctests and tests name shipped files relative to the project root."""
    monkeypatch.chdir(ROOT)


@pytest.fixture(autouse=True)
def _mix_speed_as_shipped(monkeypatch):
    """Each test starts from MIX_RATE as shipped: the speed a mix learns (synth.routing._learn_speed) would
    otherwise carry from one test to the next, so how many MWU rounds a later test mixes would hang on the order
    and on how busy the machine was."""
    from synth import routing
    monkeypatch.setattr(routing, "_mix_speed", [1.0])


@pytest.fixture
def ctrl_c_on():
    """Ctrl-C as in a terminal: Python's default SIGINT handler, restored after. A process started in the
    background by a non-interactive shell inherits SIGINT ignored (POSIX), and Python then keeps it ignored:
    a test sending itself SIGINT outside the solvers' own handlers would see nothing happen.

    The garbage collector's callbacks are set aside meanwhile: hypothesis's pytest plugin installs one (it
    times collections), and a KeyboardInterrupt raised while it runs is printed as "Exception ignored" and
    lost, so a SIGINT landing there (PuLP's model building collects often) left a 300 s solve running to its
    limit (CI, 2026-12-05). A terminal's Ctrl-C in the command has no such callback to land in."""
    import gc
    import signal
    prev = signal.signal(signal.SIGINT, signal.default_int_handler)
    callbacks, gc.callbacks[:] = list(gc.callbacks), []
    try:
        yield
    finally:
        gc.callbacks[:] = callbacks
        signal.signal(signal.SIGINT, prev)


def write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)
