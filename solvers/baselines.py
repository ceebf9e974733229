"""Baseline wirings: the constructions a wiring must beat, and the default wiring of the evaluator.

- :func:`expander`: union of p random perfect matchings, one per OCS switch (a random p-regular multigraph,
  realizable by construction: matching k goes on switch k).
- :func:`torus3d`: the 3D torus as circuits, ports split evenly over the 6 directions.
"""
from __future__ import annotations

import numpy as np

from synth.errors import InvalidInput
from synth.model import Circuit, OCSLayout, Wiring


def expander(layout: OCSLayout, seed: int = 0) -> Wiring:
    """One random (near-)perfect matching per switch over the accelerators with a port on it.

    >>> from synth.model import OCSLayout
    >>> w = expander(OCSLayout.uniform(8, 3), seed=1)
    >>> len(w.circuits), sorted(set(w.degree().tolist()))
    (12, [3])
    """
    rng = np.random.default_rng(seed)
    n, sop = layout.accelerators, layout.switch_of_port
    circuits = []
    for s in range(layout.switches):
        a, k = np.nonzero(sop == s)               # every (accelerator, port) on switch s
        order = rng.permutation(len(a))
        a, k = a[order], k[order]
        # pair ports of different accelerators; a port whose partner would be its own accelerator waits
        limit = layout.switch_radix[s] // 2
        stack_a: list[int] = []
        stack_k: list[int] = []
        made = 0
        for x, y in zip(a.tolist(), k.tolist()):
            j = next((i for i in range(len(stack_a) - 1, -1, -1) if stack_a[i] != x), None)
            if j is not None and made < limit:
                circuits.append(Circuit(s, stack_a.pop(j), stack_k.pop(j), x, y))
                made += 1
            else:
                stack_a.append(x)
                stack_k.append(y)
    return Wiring(n, layout.ports, tuple(circuits), layout, solve=None)


def torus3d(layout: OCSLayout, dims: tuple[int, int, int], seed: int = 0) -> Wiring:
    """The 3D torus a x b x c as circuits: each accelerator's ports split over its +/- neighbours in each
    dimension of size > 1 (as evenly as the ports allow), realized on the switches by edge colouring."""
    n, p = layout.accelerators, layout.ports
    if int(np.prod(dims)) != n:
        raise InvalidInput(f"{'x'.join(map(str, dims))} is not {n} accelerators", field="dims")
    coords = np.array(np.unravel_index(np.arange(n), dims)).T
    live = [k for k, L in enumerate(dims) if L > 1]
    dirs = [(k, +1) for k in live] + [(k, -1) for k in live]
    pairs: list[tuple[int, int]] = []
    # ports per direction: p // len(dirs), the remainder to the first directions (same for every node,
    # so + and - links pair up)
    per = [p // len(dirs) + (1 if i < p % len(dirs) else 0) for i in range(len(dirs))]
    for (k, sign), cnt in zip(dirs, per):
        if sign < 0:
            continue
        L = dims[k]
        nb = coords.copy()
        nb[:, k] = (nb[:, k] + 1) % L
        other = np.ravel_multi_index(nb.T, dims)
        minus = per[dirs.index((k, -1))]
        c = min(cnt, minus)
        for a, b in zip(range(n), other.tolist()):
            if L == 2 and a > b:
                continue
            pairs += [(a, b)] * (c if L > 2 else cnt + minus)
    return Wiring.from_pairs(n, p, pairs, layout, seed=seed)
