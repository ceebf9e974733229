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
cost on the step (BENCHMARKS.md). `common` cables several wirings (modes re-using the same ports) onto one
plan where one exists: each block of fibres their circuits join together on one OCS (`ocs-synth fibre-plan`).
"""
from __future__ import annotations

from dataclasses import dataclass

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


@dataclass(frozen=True)
class CommonPlan:
    """One fibre plan for several wirings (`common`): `layout` the cabling (None when no plan hosts them all),
    `wirings` each input on it (empty when None); `status` "found" (by first-fit or CP-SAT), "none" (proven: a
    plane's blocks do not pack) or "unknown" (CP-SAT out of time); `detail` says which plane and why."""

    layout: OCSLayout | None
    wirings: tuple[Wiring, ...]
    status: str
    detail: str
    blocks: dict          # plane -> the sizes of its blocks of fibres the wirings' circuits join (largest first)


def common(wirings: list[Wiring], radix: int, planes: int | None = None, time_limit_s: float = 10.0,
           names: list[str] | None = None) -> CommonPlan:
    """One cabling of the accelerators' fibres onto OCSes of `radix` ports that hosts every one of `wirings`
    (modes of one deployment that re-use the same ports, e.g. MoSE's prefill-decode and training templates,
    or a wiring and its failover re-wire), so that moving between them only re-programs the OCSes.

    Port k of every accelerator is on plane k mod `planes` (default: one plane per port index, as
    `OCSLayout.planes`), and each plane is cabled onto as many OCSes as `OCSLayout.planes` splits it over.
    Each wiring's circuits on a plane are a matching of its fibres, so a plan hosts them all exactly when
    every block of fibres the wirings' circuits join together (a connected component of the union of the
    matchings) sits on one OCS: a bin packing of the blocks per plane, by first-fit decreasing and, where
    that fails, CP-SAT (which proves when no packing exists). The fibres no circuit uses fill the OCSes up
    to even counts. Each wiring keeps its circuits (accelerators and ports); only their switches change.
    `names` (the wirings' files) name the wiring an error is about (InvalidInput's source).

    >>> from synth.model import OCSLayout
    >>> from solvers.baselines import expander
    >>> whole = OCSLayout.planes(8, 2)
    >>> plan = common([expander(whole, seed=0), expander(whole, seed=1)], radix=8)
    >>> plan.status, plan.layout.switches, len(plan.wirings)
    ('found', 2, 2)
    >>> common([expander(whole, seed=0), expander(whole, seed=1)], radix=4).status
    'none'
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    from synth.model import _plane_switches
    first = wirings[0]
    names = names or [f"wiring {i}" for i in range(len(wirings))]
    n, p = first.accelerators, first.ports_per_accelerator
    planes = p if planes is None else int(planes)
    if not 1 <= planes <= p:
        raise InvalidInput(f"must be 1..{p} (the ports), got {planes}", field="planes")
    OCSLayout.planes(n, p, radix, planes)        # the radix's checks: a circuit, an accelerator's ports on a plane
    attached = first.layout.switch_of_port >= 0
    for i, w in enumerate(wirings):
        if (w.accelerators, w.ports_per_accelerator) != (n, p):
            raise InvalidInput(f"{w.accelerators} accelerators x {w.ports_per_accelerator} ports, {names[0]} has "
                               f"{n} x {p}", field="accelerators", source=names[i])
        if not np.array_equal(w.layout.switch_of_port >= 0, attached):
            raise InvalidInput(f"attaches other ports to OCSes than {names[0]}", field="layout", source=names[i])
        arr = w.circuit_array
        off = np.flatnonzero(arr[:, 2] % planes != arr[:, 4] % planes)
        if off.size:
            _, a, ap, b, bp = arr[off[0]].tolist()
            raise InvalidInput(f"circuit {a}:{ap} - {b}:{bp} joins ports on planes {ap % planes} and {bp % planes}",
                               field="circuits", source=names[i])
    plane = np.arange(p) % planes
    per = np.bincount(plane, minlength=planes)
    blocks = _plane_switches(n, per, radix)                          # OCSes on each plane
    first_ocs = np.concatenate(([0], np.cumsum(blocks)[:-1]))
    fibre = np.arange(n * p).reshape(n, p)                           # fibre id of (accelerator, port)
    arrs = [w.circuit_array for w in wirings]
    ends = np.concatenate([np.stack([fibre[a[:, 1], a[:, 2]], fibre[a[:, 3], a[:, 4]]], axis=1) for a in arrs])
    union = coo_matrix((np.ones(len(ends)), (ends[:, 0], ends[:, 1])), shape=(n * p, n * p))
    _, comp = connected_components(union, directed=False)
    sop = np.full((n, p), -1, dtype=np.int64)
    sizes_of: dict = {}
    for j in range(planes):                                          # planes <= MAX_PORTS
        mine = (plane[None, :] == j) & attached
        ids, size = np.unique(comp[fibre[mine]], return_counts=True)
        joined = size >= 2
        order = np.argsort(-size[joined], kind="stable")
        sizes_of[j] = size[joined][order].tolist()
        where, status = _packed(size[joined][order], int(blocks[j]), radix, time_limit_s)
        if where is None:
            detail = (f"plane {j}: the wirings' circuits join {int(size.max())} of its fibres into one block; an OCS "
                      f"has {radix} ports" if size.max() > radix else
                      f"plane {j}: its blocks of fibres ({', '.join(map(str, sizes_of[j]))}) do not pack onto "
                      f"{int(blocks[j])} OCSes of {radix} ports"
                      + ("" if status == "none" else " (CP-SAT: not settled in time)"))
            return CommonPlan(None, (), status, detail, sizes_of)
        ocs_of = np.full(ids.size, -1, dtype=np.int64)
        ocs_of[np.flatnonzero(joined)[order]] = where
        used = np.bincount(where, weights=size[joined][order], minlength=int(blocks[j])).astype(np.int64)
        single = np.flatnonzero(~joined)
        count = _levelled(used, single.size, radix)
        ocs_of[single] = np.repeat(np.arange(int(blocks[j])), count - used)
        sop[mine] = first_ocs[j] + ocs_of[np.searchsorted(ids, comp[fibre[mine]])]
    layout = OCSLayout(sop, (radix,) * int(blocks.sum()))
    out = tuple(Wiring(n, p, tuple(Circuit(int(sop[a, ap]), int(a), int(ap), int(b), int(bp))
                                   for _, a, ap, b, bp in arr.tolist()),
                       layout, {**w.solve, "fibre_plan": "common"} if w.solve else w.solve, w.instance)
                for w, arr in zip(wirings, arrs))
    return CommonPlan(layout, out, "found", f"{len(wirings)} wirings on one plan", sizes_of)


def _packed(sizes: np.ndarray, bins: int, radix: int, time_limit_s: float) -> tuple[np.ndarray | None, str]:
    """The OCS of each block (sizes in decreasing order) on `bins` OCSes of `radix` ports: first-fit
    decreasing, else CP-SAT's bin packing. (None, "none") when none exists (a block past the radix, more
    fibres than the OCSes hold, or CP-SAT's proof), (None, "unknown") when CP-SAT found none in time."""
    if sizes.size == 0:
        return np.zeros(0, dtype=np.int64), "found"
    if sizes[0] > radix or sizes.sum() > bins * radix:
        return None, "none"
    room = np.full(bins, radix, dtype=np.int64)
    where = np.empty(sizes.size, dtype=np.int64)
    for i, s in enumerate(sizes.tolist()):                           # first fit: blocks <= fibres / 2 of a plane
        fits = np.flatnonzero(room >= s)
        if not fits.size:
            break
        where[i] = fits[0]
        room[fits[0]] -= s
    else:
        return where, "found"
    from ortools.sat.python import cp_model
    m = cp_model.CpModel()
    x = [[m.NewBoolVar("") for _ in range(bins)] for _ in sizes]
    for i, row in enumerate(x):
        m.AddExactlyOne(row[:min(bins, i + 1)])                      # block i on one of the first i + 1 OCSes
        for b in range(i + 1, bins):
            m.Add(row[b] == 0)
    for b in range(bins):
        m.Add(sum(int(s) * x[i][b] for i, s in enumerate(sizes.tolist())) <= radix)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = 1                                # the same plan on every run
    st = solver.Solve(m)
    if st in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return np.array([next(b for b in range(bins) if solver.Value(x[i][b])) for i in range(sizes.size)]), "found"
    return None, "none" if st == cp_model.INFEASIBLE else "unknown"
