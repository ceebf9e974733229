"""Independent checks of every artifact the tool produces. This module never imports `solvers`: a checker
that shares code with what it checks checks nothing. It re-derives each rule from the wiring itself."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidInput
from .model import Wiring


@dataclass(frozen=True)
class Violation:
    rule: str        # machine-readable: port-budget, port-reused, self-loop, cross-switch, radix, ...
    message: str

    def to_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "message": self.message}


def wiring_violations(w: Wiring, instance: Any | None = None) -> list[Violation]:
    """Every broken rule of a wiring, in circuit order:

    - port-budget: a circuit uses a port index >= ports_per_accelerator;
    - unattached: a circuit uses a port that is not attached to any OCS;
    - switch-range: a circuit names a switch the layout does not have;
    - cross-switch: a circuit joins ports that are not both attached to its switch;
    - self-loop: both ends on the same accelerator;
    - port-reused: a port is in more than one circuit;
    - radix: a switch holds more circuits than radix / 2;
    - instance: the wiring's size differs from the instance's, or a circuit is not realizable on the instance's
      OCS layout (its ports on other switches there, or past a switch's radix there); where the instance
      leaves the fibre plan to the wiring (`fibre_plan = "fit"`), the wiring's layout is not a plan of its
      OCSes (an OCS with fibres of two planes, more OCSes on a plane or more ports on one than it has).
    """
    out: list[Violation] = []
    n, p, lay = w.accelerators, w.ports_per_accelerator, w.layout
    if instance is not None:
        if instance.accelerators != n:
            out.append(Violation("instance", f"wiring has {n} accelerators, instance has {instance.accelerators}"))
        if instance.hardware.ports != p:
            out.append(Violation("instance", f"wiring has {p} ports per accelerator, instance has "
                                 f"{instance.hardware.ports}"))
        split = instance.fibre_fit() if not out else None
        if split is not None:           # the plan is the wiring's to choose: it must be one on these OCSes
            misfit = _plan_misfit(lay, instance.ocs_layout(), split)
            if misfit:
                out.append(Violation("instance", f"the wiring's fibre plan does not fit the instance's OCSes: "
                                     f"{misfit}"))
        elif not out and lay != (own := instance.ocs_layout()):
            # the file's layout may differ in ports no circuit uses; its circuits must fit the instance's switches
            bad = [v for v in wiring_violations(Wiring(n, p, w.circuits, own))
                   if v.rule in ("unattached", "switch-range", "cross-switch", "radix")]
            if bad:         # one line: a wiring made for other switches breaks the rule at most of its circuits
                more = f" ({len(bad) - 1} more like it)" if len(bad) > 1 else ""
                out.append(Violation("instance", f"the circuits do not fit the instance's OCS switches: "
                                     f"{bad[0].message}{more}"))
    owner: dict[tuple[int, int], int] = {}
    per_switch = np.zeros(lay.switches, dtype=np.int64)
    for i, c in enumerate(w.circuits):
        where = f"circuit {i} (switch {c.switch}: {c.a}:{c.a_port} - {c.b}:{c.b_port})"
        if c.a == c.b:
            out.append(Violation("self-loop", f"{where} joins accelerator {c.a} to itself"))
        if c.switch >= lay.switches:
            out.append(Violation("switch-range", f"{where} names switch {c.switch}; the layout has "
                                 f"{lay.switches} switches"))
        else:
            per_switch[c.switch] += 1
        for acc, port in ((c.a, c.a_port), (c.b, c.b_port)):
            if port >= p:
                out.append(Violation("port-budget", f"{where} uses port {port} of accelerator {acc}, which "
                                     f"has {p} ports (0..{p - 1})"))
                continue
            attached = int(lay.switch_of_port[acc, port])
            if attached < 0:
                out.append(Violation("unattached", f"{where}: port {acc}:{port} is not attached to an OCS"))
            elif attached != c.switch:
                out.append(Violation("cross-switch", f"{where}: port {acc}:{port} is attached to switch "
                                     f"{attached}, not {c.switch}"))
            if (acc, port) in owner:
                out.append(Violation("port-reused", f"{where}: port {acc}:{port} is already in circuit "
                                     f"{owner[(acc, port)]}"))
            else:
                owner[(acc, port)] = i
    for s in np.flatnonzero(per_switch * 2 > np.array(lay.switch_radix)):
        out.append(Violation("radix", f"switch {s} holds {per_switch[s]} circuits ({2 * per_switch[s]} ports), "
                             f"radix is {lay.switch_radix[s]}"))
    return out


def _plan_misfit(lay: Any, planes: Any, split: Any) -> str:
    """Why the layout `lay` is not a fibre plan of the instance's split planes (`planes`, one switch per plane,
    each cabled onto `split.switches[j]` OCSes of `split.radix` ports), or "": every fibre of an OCS from
    one plane, no more OCSes on a plane than it has, none with more fibres or a larger radix than it has."""
    a, k = np.nonzero(lay.switch_of_port >= 0)
    s, j = lay.switch_of_port[a, k], planes.switch_of_port[a, k]
    if (j < 0).any():
        i = int(np.flatnonzero(j < 0)[0])
        return f"port {a[i]}:{k[i]} is on switch {s[i]}, and on no OCS in the instance"
    pairs = np.unique(np.stack([s, j], axis=1), axis=0)         # (OCS, plane), each OCS once if it is whole
    twice = np.flatnonzero(np.diff(pairs[:, 0]) == 0)
    if twice.size:
        i = int(twice[0])
        return f"switch {pairs[i, 0]} takes fibres of planes {pairs[i, 1]} and {pairs[i + 1, 1]}"
    used = np.bincount(pairs[:, 1], minlength=planes.switches)
    over = np.flatnonzero(used > np.array(split.switches))
    if over.size:
        return f"plane {over[0]} is on {used[over[0]]} switches, the instance has {split.switches[over[0]]} for it"
    fibres = np.bincount(s, minlength=lay.switches)
    radix = np.where(fibres > 0, np.maximum(fibres, lay.switch_radix), 0)
    if (radix > split.radix).any():
        o = int(np.flatnonzero(radix > split.radix)[0])
        return f"switch {o} has {fibres[o]} fibres and radix {lay.switch_radix[o]}; the OCSes have {split.radix} ports"
    return ""


def require_valid_wiring(w: Wiring, instance: Any | None = None, *, source: str = "<wiring>") -> Wiring:
    """Raise InvalidInput with the first violation (for commands that consume a wiring)."""
    bad = wiring_violations(w, instance)
    if bad:
        more = f" (and {len(bad) - 1} more; run `ocs-synth verify`)" if len(bad) > 1 else ""
        raise InvalidInput(bad[0].message + more, field=bad[0].rule, source=source)
    return w
