"""A fibre plan chosen for a wiring: the circuits of a wiring made on whole OCS planes, cabled onto the smaller
OCSes each plane is split over (`OCSLayout.fitted_planes`, `[fabric] fibre_plan = "fit"`, `wire --fibre-plan
fit`).

Each plane's circuits are a matching of its fibres, so they move onto the plane's OCSes as whole pairs: the
pairs in order of their lower accelerator, in near-equal runs, one run per OCS (at most radix / 2 on one,
which the envelope's radix guarantees), then the fibres no circuit uses filled in, accelerator by accelerator,
to even the OCSes' fibre counts within the radix. The graph is the wiring's own: its step time and bound are
unchanged, on the same number of OCSes of the same radix as a fixed plan (`OCSLayout.planes`) would take.

What the plan gives up: it hosts this wiring, and any other only where the other's circuits fall inside its
OCSes. A deployment re-wired later (another model, a MoSE mode) needs its circuits inside the same blocks, or
new cabling; a plan fixed beforehand (`spread`) keeps every OCS reachable from many accelerators instead, at a
cost on the step (BENCHMARKS.md).
"""
from __future__ import annotations

import numpy as np

from synth.errors import InvalidInput
from synth.model import Circuit, FibreFit, OCSLayout, Wiring


def fit(wiring: Wiring, split: FibreFit) -> Wiring:
    """`wiring` (on the envelope: one switch per plane) with each plane cabled onto `split.switches[j]` OCSes
    of `split.radix` ports. The circuits keep their accelerators and ports; only their switch changes.

    >>> from synth.model import OCSLayout
    >>> from solvers.baselines import expander
    >>> envelope, split = OCSLayout.fitted_planes(8, 2, switch_radix=4)
    >>> w = fit(expander(envelope, seed=0), split)
    >>> w.layout.switches, sorted(set(np.bincount(w.layout.switch_of_port.ravel()).tolist()))
    (4, [4])
    """
    lay = wiring.layout
    if lay.switches != len(split.switches):
        raise InvalidInput(f"the wiring has {lay.switches} switches, the fibre plan splits {len(split.switches)} "
                           "planes", field="layout")
    radix, per_plane = split.radix, np.asarray(split.switches, dtype=np.int64)
    arr = wiring.circuit_array                       # switch, a, a_port, b, b_port; sorted by switch, then a
    sop = np.full(lay.switch_of_port.shape, -1, dtype=np.int64)
    ocs = np.empty(len(arr), dtype=np.int64)
    first = np.concatenate(([0], np.cumsum(per_plane)[:-1]))
    for j in range(lay.switches):                    # one pass per plane: planes <= MAX_PORTS
        on = np.flatnonzero(arr[:, 0] == j)
        s, m = int(per_plane[j]), on.size
        if m > s * (radix // 2):
            raise InvalidInput(f"plane {j} holds {m} circuits; its {s} OCSes of {radix} ports take "
                               f"{s * (radix // 2)}", field="switch_radix")
        pairs = m // s + (np.arange(s) < m % s)      # circuits on each of the plane's OCSes
        ocs[on] = first[j] + np.repeat(np.arange(s), pairs)
        sop[arr[on, 1], arr[on, 2]] = ocs[on]
        sop[arr[on, 3], arr[on, 4]] = ocs[on]
        free = (lay.switch_of_port == j) & (sop < 0)  # the plane's fibres no circuit uses, row-major
        count = _levelled(2 * pairs, int(free.sum()), radix)
        sop[free] = first[j] + np.repeat(np.arange(s), count - 2 * pairs)
    circuits = tuple(Circuit(int(o), int(a), int(ap), int(b), int(bp))
                     for o, (_, a, ap, b, bp) in zip(ocs.tolist(), arr.tolist()))
    solve = {**wiring.solve, "fibre_plan": "fitted"} if wiring.solve else wiring.solve
    return Wiring(wiring.accelerators, wiring.ports_per_accelerator, circuits,
                  OCSLayout(sop, (radix,) * int(per_plane.sum())), solve, wiring.instance)


def _levelled(used: np.ndarray, extra: int, radix: int) -> np.ndarray:
    """Fibres per OCS once `extra` more are spread over OCSes that hold `used`: water-filled to one level (the
    lowest that takes them all), none past `radix`; the OCSes last in order give back what overshoots."""
    levels = np.minimum(np.maximum(used[None, :], np.arange(radix + 1)[:, None]), radix)    # (level, OCS)
    total = int(used.sum()) + extra
    at = int(np.searchsorted(levels.sum(axis=1), total))
    if at > radix:
        raise InvalidInput(f"{total} fibres do not fit {used.size} OCSes of {radix} ports", field="switch_radix")
    out = levels[at].copy()
    over = int(out.sum()) - total
    if over:
        raised = np.flatnonzero((out == at) & (out > used))
        out[raised[len(raised) - over:]] -= 1
    return out
