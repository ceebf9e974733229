"""Fabrics: what joins the accelerators, as a :class:`~synth.network.Network` for the routing and flow
models, and as an inventory of parts (switches, optics, OCS ports, NICs) for cost and energy.

All fabrics get the same accelerators with the same ports and per-port bandwidth B unless the instance
says otherwise. Names on the command line:

- ``ocs``: a wiring (multigraph of circuits, B per circuit and direction); pairs without a circuit are
  reached by forwarding through accelerators.
- ``eps:R``: a leaf-spine packet fabric per port plane (port k of every accelerator on plane k): leaves use
  half their ``eps_switch_ports`` for accelerators and 1/R of that for uplinks (R = 1, 2, 4: down:up = R:1);
  the p identical planes are modelled as one network with p-fold capacities and ECMP over the spines (a
  non-blocking core node). Up to half a switch's ports of accelerators share one leaf, with no core.
- ``torus3d[:AxBxC]``: 3D torus, the p ports split evenly over the dimensions and their two directions
  (fractional ports are breakout lanes); a dimension of size 2 has one neighbour with both directions' ports.
- ``fullmesh3d[:AxBxC]``: every pair along each dimension joined, a dimension's ports split over its L-1
  neighbours.
- ``scaleup``: one non-blocking switched domain (NVLink-like): p x B per accelerator, one switch hop.
- ``scaleout``: NIC + Ethernet: ``scaleout_nic_gbps`` per accelerator into a 1:1 leaf-spine.
- ``hybrid:K``: K ports per accelerator on OCS (the wiring), the other p - K on a 1:1 leaf-spine.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .errors import InvalidInput
from .instance import Instance
from .model import Wiring
from .network import Network

FABRICS = ("ocs", "eps", "torus3d", "fullmesh3d", "scaleup", "scaleout", "hybrid")


@dataclass(frozen=True)
class FabricChoice:
    kind: str
    oversubscription: float = 1.0
    dims: tuple[int, ...] = ()
    ocs_ports: int | None = None
    label: str = ""


def parse_fabric(text: str) -> FabricChoice:
    """'eps:4' -> leaf-spine 4:1; 'torus3d:8x8x9'; 'hybrid:12'; 'ocs'.

    >>> parse_fabric("eps:4").oversubscription
    4.0
    """
    kind, _, arg = text.strip().partition(":")
    if kind not in FABRICS:
        raise InvalidInput(f"unknown fabric {text!r}; valid: ocs, eps:R (R = oversubscription, e.g. eps:4), "
                           "torus3d[:AxBxC], fullmesh3d[:AxBxC], scaleup, scaleout, hybrid:K", field="fabric")
    try:
        if kind == "eps":
            r = float(arg or 1)
            if not math.isfinite(r) or r < 1:
                raise ValueError
            return FabricChoice("eps", oversubscription=r, label=f"eps:{arg or 1}")
        if kind in ("torus3d", "fullmesh3d"):
            dims = tuple(int(x) for x in arg.split("x")) if arg else ()
            if dims and (len(dims) != 3 or min(dims) < 1):
                raise ValueError
            return FabricChoice(kind, dims=dims, label=text.strip())
        if kind == "hybrid":
            k = int(arg)
            if k < 0:
                raise ValueError
            return FabricChoice("hybrid", ocs_ports=k, label=text.strip())
        if arg:
            raise ValueError
    except ValueError:
        raise InvalidInput(f"bad parameter in fabric {text!r} (eps:R with R >= 1, torus3d:AxBxC, hybrid:K)",
                           field="fabric") from None
    return FabricChoice(kind, label=kind)


def near_cubic_dims(n: int, even: bool = False) -> tuple[int, int, int]:
    """The factorization a x b x c = n with the smallest spread (a <= b <= c); with `even`, only even
    factors (a torus of even rings is bipartite, so its circuits always fit on the switches), falling back
    to any factors when there is none.

    >>> near_cubic_dims(576), near_cubic_dims(576, even=True), near_cubic_dims(64)
    ((8, 8, 9), (6, 8, 12), (4, 4, 4))
    """
    best = None
    for a in range(1, n + 1):
        if a ** 3 > n:
            break
        if n % a:
            continue
        m = n // a
        for b in range(a, int(math.isqrt(m)) + 1):
            c = m // b
            if m % b or c < b or (even and (a % 2 or b % 2 or c % 2)):
                continue
            if best is None or c - a < best[2] - best[0]:
                best = (a, b, c)
    if best is None:
        return near_cubic_dims(n) if even else (1, 1, n)
    return best


@dataclass(frozen=True)
class Inventory:
    """Parts of a fabric, for cost and power."""

    optics_ports: float = 0.0        # transceivers, in units of one accelerator port (rate B)
    eps_switches: float = 0.0
    ocs_ports: float = 0.0
    scaleup_ports: float = 0.0
    nics: float = 0.0
    fibers: float = 0.0

    def capex_usd(self, inst: Instance) -> float:
        c, rate = inst.costs, inst.hardware.port_bandwidth_gbps / 800.0
        return (self.optics_ports * c.optics_usd_per_800g * rate + self.eps_switches * c.eps_switch_usd
                + self.ocs_ports * c.ocs_usd_per_port + self.scaleup_ports * c.scaleup_usd_per_port
                + self.nics * c.scaleout_nic_usd + self.fibers * c.fiber_usd_per_link)

    def power_w(self, inst: Instance) -> float:
        c, rate = inst.costs, inst.hardware.port_bandwidth_gbps / 800.0
        return (self.optics_ports * c.optics_w_per_800g * rate + self.eps_switches * c.eps_switch_w
                + self.ocs_ports * c.ocs_w_per_port + self.scaleup_ports * c.scaleup_w_per_port
                + self.nics * c.scaleout_nic_w)


def _leaf_spine(n: int, first_node: int, ports: float, port_bytes_per_s: float, port_gbps: float,
                oversub: float, inst: Instance):
    """Pairs, capacities, latencies and inventory of a leaf-spine with `ports` planes of one port each."""
    c = inst.costs
    radix = max(2, int(c.eps_switch_ports * 800.0 / port_gbps))       # ports of this rate per switch
    down = max(1, radix // 2)      # same leaves at every ratio; oversubscription removes uplinks
    leaves = math.ceil(n / down)
    acc = np.arange(n)
    leaf = first_node + acc // down
    pairs = [np.stack([acc, leaf], axis=1)]
    caps = [np.full(n, ports * port_bytes_per_s)]
    nodes = first_node + leaves
    spines = 0
    if leaves > 1:
        core = nodes
        nodes += 1
        per_leaf = np.bincount(acc // down, minlength=leaves)
        up_ports = per_leaf / oversub
        pairs.append(np.stack([first_node + np.arange(leaves), np.full(leaves, core)], axis=1))
        caps.append(up_ports * ports * port_bytes_per_s)
        spines = math.ceil(up_ports.sum() / radix)
        switch_ports_up = up_ports.sum() * 2
    else:
        switch_ports_up = 0.0
    inv = Inventory(optics_ports=ports * (2 * n + switch_ports_up), eps_switches=ports * (leaves + spines),
                    fibers=ports * (n + switch_ports_up / 2))
    return np.concatenate(pairs), np.concatenate(caps), nodes, inv, acc // down


def wiring_pairs(wiring: Wiring, inst: Instance) -> tuple[np.ndarray, np.ndarray]:
    n = inst.accelerators
    if wiring.accelerators != n:
        raise InvalidInput(f"wiring has {wiring.accelerators} accelerators, the instance has {n}",
                           field="wiring.accelerators")
    if wiring.ports_per_accelerator != inst.hardware.ports:
        raise InvalidInput(f"wiring has {wiring.ports_per_accelerator} ports per accelerator, the instance has "
                           f"{inst.hardware.ports}", field="wiring.ports_per_accelerator")
    adj = np.triu(wiring.adjacency(), 1)
    i, j = np.nonzero(adj)
    return np.stack([i, j], axis=1), adj[i, j].astype(np.float64)


def build_network(inst: Instance, fabric: FabricChoice | str, wiring: Wiring | None = None) -> tuple[Network, Inventory]:
    """The network and parts inventory of `fabric` for the instance's accelerators."""
    fab = parse_fabric(fabric) if isinstance(fabric, str) else fabric
    hw, c, n, p = inst.hardware, inst.costs, inst.accelerators, inst.hardware.ports
    bps, gbps = hw.port_bytes_per_s, hw.port_bandwidth_gbps
    if fab.kind in ("ocs", "hybrid") and wiring is None:
        raise InvalidInput(f"the {fab.label} fabric needs a wiring (--wiring FILE)", field="wiring")
    if fab.kind == "ocs":
        pairs, count = wiring_pairs(wiring, inst)
        net = Network.from_pairs("ocs", n, n, pairs, count * bps, hw.link_latency_us + c.ocs_latency_us,
                                 meta={"fabric": fab.label})
        used = count.sum()
        return net, Inventory(optics_ports=n * p, ocs_ports=n * p, fibers=used)
    if fab.kind == "eps":
        pairs, caps, nodes, inv, leaf = _leaf_spine(n, n, p, bps, gbps, fab.oversubscription, inst)
        fw = np.arange(nodes) >= n
        net = Network.from_pairs(fab.label, n, nodes, pairs, caps, 0.0, np.where(fw, c.eps_switch_latency_us, 0.0),
                                 fw, meta={"fabric": fab.label, "leaf_of": leaf})
        return net, inv
    if fab.kind == "scaleout":
        nic_bps = c.scaleout_nic_gbps * 1e9 / 8
        pairs, caps, nodes, inv, leaf = _leaf_spine(n, n, 1, nic_bps, c.scaleout_nic_gbps, 1.0, inst)
        fw = np.arange(nodes) >= n
        net = Network.from_pairs("scaleout", n, nodes, pairs, caps, c.scaleout_latency_us / 2,
                                 np.where(fw, c.eps_switch_latency_us, 0.0), fw,
                                 meta={"fabric": "scaleout", "leaf_of": leaf})
        scale = c.scaleout_nic_gbps / gbps   # optics counted in accelerator-port units
        return net, Inventory(optics_ports=inv.optics_ports * scale, eps_switches=inv.eps_switches, nics=n,
                              fibers=inv.fibers)
    if fab.kind == "scaleup":
        pairs = np.stack([np.arange(n), np.full(n, n)], axis=1)
        fw = np.arange(n + 1) >= n
        net = Network.from_pairs("scaleup", n, n + 1, pairs, p * bps, 0.0,
                                 np.where(fw, c.scaleup_latency_us, 0.0), fw, meta={"fabric": "scaleup"})
        return net, Inventory(scaleup_ports=n * p, fibers=n * p)
    if fab.kind in ("torus3d", "fullmesh3d"):
        dims = fab.dims or c.torus_dims or near_cubic_dims(n)
        if math.prod(dims) != n:
            raise InvalidInput(f"{'x'.join(map(str, dims))} is not {n} accelerators", field="fabric")
        coords = np.array(np.unravel_index(np.arange(n), dims)).T      # n x 3
        live = [k for k, L in enumerate(dims) if L > 1]
        per_dim = p / max(1, len(live))
        pairs, caps = [], []
        for k in live:
            L = dims[k]
            if fab.kind == "torus3d":
                nb = coords.copy()
                nb[:, k] = (nb[:, k] + 1) % L
                other = np.ravel_multi_index(nb.T, dims)
                pairs.append(np.stack([np.arange(n), other], axis=1))
                caps.append(np.full(n, per_dim / 2 * bps))   # L = 2: both directions merge onto one pair
            else:
                for off in range(1, L):
                    nb = coords.copy()
                    nb[:, k] = (nb[:, k] + off) % L
                    other = np.ravel_multi_index(nb.T, dims)
                    keep = np.arange(n) < other
                    pairs.append(np.stack([np.arange(n)[keep], other[keep]], axis=1))
                    caps.append(np.full(int(keep.sum()), per_dim / (L - 1) * bps))
        label = f"{fab.kind}:{'x'.join(map(str, dims))}"
        net = Network.from_pairs(label, n, n, np.concatenate(pairs), np.concatenate(caps), hw.link_latency_us,
                                 meta={"fabric": label, "dims": dims})
        return net, Inventory(optics_ports=n * p, fibers=n * p / 2)
    # hybrid: K ports on OCS (the wiring, which must use only those), p - K on a 1:1 leaf-spine
    k = fab.ocs_ports if fab.ocs_ports is not None else (inst.fabric.ocs_ports or p // 2)
    if k > p:
        raise InvalidInput(f"hybrid:{k} exceeds the {p} ports", field="fabric")
    pairs, count = wiring_pairs(wiring, inst)
    deg = np.bincount(pairs.ravel(), weights=np.repeat(count, 2), minlength=n)
    if deg.max() > k:
        a = int(np.argmax(deg))
        raise InvalidInput(f"accelerator {a} has {int(deg[a])} circuits, hybrid:{k} allows {k}", field="wiring")
    eps_pairs, eps_caps, nodes, inv, _ = _leaf_spine(n, n, p - k, bps, gbps, 1.0, inst) if k < p else \
        (np.zeros((0, 2), dtype=np.int64), np.zeros(0), n, Inventory(), None)
    net = Network.from_pairs(f"hybrid:{k}", n, nodes, np.concatenate([pairs, eps_pairs]),
                             np.concatenate([count * bps, eps_caps]),
                             np.concatenate([np.full(len(pairs), hw.link_latency_us), np.zeros(len(eps_pairs))]),
                             np.where(np.arange(nodes) >= n, c.eps_switch_latency_us, 0.0),
                             meta={"fabric": f"hybrid:{k}"})
    return net, Inventory(optics_ports=n * k + inv.optics_ports, ocs_ports=n * k, eps_switches=inv.eps_switches,
                          fibers=count.sum() + inv.fibers)
