"""Evaluate one decode step of a deployment on a fabric: step time, tokens/s per user and per accelerator,
energy and cost per token.

Analytical fidelity: each communication op runs the best of its collective algorithms
(:mod:`synth.collectives`: direct one-shot, ring, recursive doubling/halving, binary tree, pairwise; on a
torus or full-mesh the dimension-ordered algorithm, on a leaf-spine the hierarchical one); a phase costs ``step_latency_us`` (alpha) + the largest path latency among its
transfers + the bytes on the most loaded link / that link's bandwidth, with every group of the op running
at once and traffic split over all shortest paths (ECMP, :func:`~synth.network.ecmp_loads`). On a ring of n
ranks with neighbour links of bandwidth B this gives ring all-reduce = 2(n-1)(alpha + hop) + 2(n-1)/n M/B.
Compute ops take their roofline time (:mod:`synth.workload`).

Flow fidelity: the same algorithm's phases are re-timed as flows: every transfer is routed on
``paths_per_flow`` shortest paths and the phase lasts until its last flow completes under max-min fair
sharing (:func:`~synth.network.completion_time`, rates recomputed at up to ``FLOW_EVENTS`` completion
events, then held: an upper bound).

Step time = the critical path of the decode DAG of one micro-batch (with dual-batch overlap: per layer the
larger of its compute and its communication), and never less than the busiest link's total busy time over
the step (all ops, all micro-batches, background transfers such as P/D KV included).

Energy per step = accelerators at ``power_w`` while computing and ``idle_power_w`` otherwise + network parts
(always on), times PUE; cost per token = (hardware capex / lifetime + energy price) per second x step time /
tokens per step.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .collectives import Phase, algorithms
from .fabric import FabricChoice, build_network, parse_fabric
from .model import CollectiveKind, Wiring
from .network import Network, completion_time, ecmp_loads, sample_paths
from .workload import CommOp, Workload, build_workload, scatter

SECONDS_PER_YEAR = 365.25 * 24 * 3600
BALANCED_ROUNDS = 100  # multiplicative-weights rounds of --routing balanced
FLOW_EVENTS = 16   # max-min recomputations per phase in the flow model (then current rates: an upper bound)
EVALUATE_KEYS = ("step_time_us", "tokens_per_s_per_user", "tokens_per_s_per_accelerator", "energy_per_token_j",
                 "cost_per_token", "comm_time_us", "compute_time_us", "max_link_utilization")


@dataclass(frozen=True)
class OpTiming:
    name: str
    kind: str
    algorithm: str
    time_us: float
    count: int
    link_loads: np.ndarray = field(repr=False, compare=False, default=None)


@dataclass(frozen=True)
class Evaluation:
    fabric: str
    fidelity: str
    step_time_us: float
    tokens_per_s_per_user: float
    tokens_per_s_per_accelerator: float
    energy_per_token_j: float
    cost_per_token: float
    comm_time_us: float
    compute_time_us: float
    max_link_utilization: float
    exposed_comm_share: float
    cost_per_million_tokens_usd: float
    tokens_per_s_per_musd: float
    capex_usd: float
    network_capex_usd: float
    power_w: float
    network_power_w: float
    sequences_per_step: int
    bandwidth_bound_us: float
    ops: tuple[OpTiming, ...] = ()
    wall_s: float = 0.0

    def to_dict(self, ops: bool = True) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in self.__dataclass_fields__ if k not in ("ops",)}
        if ops:
            d["ops"] = [{"name": o.name, "kind": o.kind, "algorithm": o.algorithm, "time_us": o.time_us,
                         "count": o.count} for o in self.ops]
        return d


def op_alpha(net: Network) -> float:
    return float(net.meta.get("alpha_us", 0.0))


def op_algorithms(op: CommOp) -> dict[str, list[Phase]]:
    """The collective algorithms any fabric offers `op` (name -> phases); all-to-alls always include
    sending the op's own pattern straight ("direct")."""
    pattern = op.pattern if op.collective in (CollectiveKind.ALLTOALLV, CollectiveKind.P2P) else None
    algs = algorithms(op.collective, op.group_size, op.message_bytes, pattern)
    if op.collective == CollectiveKind.ALLTOALL:
        algs = {"direct": [Phase(op.pattern)], **{k: v for k, v in algs.items() if k != "direct"}}
    return algs


def phase_time_us(net: Network, groups: np.ndarray, phase: Phase, alpha_us: float, fidelity: str = "analytical",
                  paths_per_flow: int = 4, seed: int = 0, routing: str = "ecmp") -> tuple[float, np.ndarray]:
    """Time of one repetition of a phase run by all groups at once, and its link loads (bytes). `routing`
    "balanced" routes the phase by multiplicative weights (multi-path, min-max utilization) instead of
    ECMP; the better of the two is kept (analytical fidelity)."""
    dem = scatter(net.accelerators, groups, phase.pattern)
    loads = ecmp_loads(net, dem)
    if routing == "balanced" and fidelity == "analytical" and loads.any():
        from .routing import mwu_routing
        theta, mloads, _ = mwu_routing(net, dem, rounds=BALANCED_ROUNDS, time_limit_s=60.0)
        if theta < float((loads / net.capacity_bps).max()):
            loads = mloads
    lat = net.path_latency_us
    has = dem > 0
    latency = float(lat[has].max()) if has.any() else 0.0
    if fidelity == "flow":
        s, d = np.nonzero(has)
        inc, flow_of, _ = sample_paths(net, s, d, paths_per_flow, seed)
        sizes = dem[s, d][flow_of] / paths_per_flow
        transfer_s = completion_time(inc, net.capacity_bps, sizes, max_events=FLOW_EVENTS)
    else:
        transfer_s = float((loads / net.capacity_bps).max()) if loads.any() else 0.0
    return alpha_us + latency + transfer_s * 1e6, loads


def time_collective(net: Network, op: CommOp, alpha_us: float, fidelity: str = "analytical",
                    algorithm: str | None = None, seed: int = 0, routing: str = "ecmp") -> OpTiming:
    """Best algorithm for the op on this network (or the named one)."""
    algs = op_algorithms(op)
    from .collectives import dimension_ordered, hierarchical
    g0 = op.groups[0]
    if "dims" in net.meta and op.collective != CollectiveKind.P2P:
        coords = np.array(np.unravel_index(g0, net.meta["dims"])).T
        mean_pair = float(op.pattern.sum()) / max(1, op.group_size * (op.group_size - 1))
        dim = dimension_ordered(op.collective, coords, op.message_bytes, mean_pair)
        if dim:
            algs["dimension-ordered"] = dim
    if "leaf_of" in net.meta and op.collective in (CollectiveKind.ALLREDUCE, CollectiveKind.ALLGATHER,
                                                   CollectiveKind.REDUCESCATTER):
        hier = hierarchical(op.collective, net.meta["leaf_of"][g0], op.message_bytes)
        if hier:
            algs["hierarchical"] = hier
    if algorithm:
        algs = {algorithm: algs[algorithm]}
    best: OpTiming | None = None
    for name, phases in algs.items():
        total, loads = 0.0, np.zeros(net.links)
        cache: dict[int, tuple[float, np.ndarray]] = {}
        for ph in phases:
            key = id(ph.pattern)
            if key not in cache:
                cache[key] = phase_time_us(net, op.groups, ph, alpha_us, "analytical", seed=seed,
                                           routing=routing if name == "direct" else "ecmp")
            t, ld = cache[key]
            total += t * ph.repeat
            loads = loads + ld * ph.repeat
        if best is None or total < best.time_us:
            best = OpTiming(op.name, op.kind, name, total, op.count, loads)
    assert best is not None
    if fidelity == "flow":
        total = sum(phase_time_us(net, op.groups, ph, alpha_us, "flow", seed=seed)[0] * ph.repeat
                    for ph in algs[best.algorithm])
        best = OpTiming(op.name, op.kind, best.algorithm, total, op.count, best.link_loads)
    return best


def time_with_schedule(net: Network, op: CommOp, schedules) -> OpTiming | None:
    """Time of `op` when its groups run the given schedules together: one schedule (used by every group,
    ranks remapped, forwarded hops kept) or one per group; bytes scaled to the op's message. Per step:
    alpha + the longest route's latency + the busiest link's bytes (all groups) / capacity. None when the
    schedules do not fit the op."""
    from .model import Schedule as _S
    scheds = (schedules,) if isinstance(schedules, _S) else tuple(schedules)
    a2a = (CollectiveKind.ALLTOALL, CollectiveKind.ALLTOALLV)
    if len(scheds) not in (1, op.groups.shape[0]):
        return None
    for sc in scheds:
        same = sc.collective.kind == op.collective or (sc.collective.kind in a2a and op.collective in a2a)
        if not same or len(sc.collective.ranks) != op.group_size:
            return None
    msg = float(op.pattern.sum()) / op.group_size if op.collective in a2a else op.message_bytes
    eid = {(int(a), int(b)): e for e, (a, b) in enumerate(zip(net.src, net.dst))}
    lat = net.latency_us
    runs = [(g, scheds[i if len(scheds) > 1 else 0]) for i, g in enumerate(op.groups)]
    steps = max(len(sc.steps) for _, sc in runs)
    total, loads = 0.0, np.zeros(net.links)
    for si in range(steps):
        step_load = np.zeros(net.links)
        longest = 0.0
        for g, sc in runs:
            if si >= len(sc.steps):
                continue
            scale = msg / sc.collective.bytes_
            remap = dict(zip(sc.collective.ranks, g.tolist()))
            for t in sc.steps[si]:
                hops = [remap.get(x, x) for x in (t.src, *t.path, t.dst)]
                ids = [eid.get((a, b)) for a, b in zip(hops, hops[1:])]
                if any(e is None for e in ids):
                    return None
                step_load[ids] += t.bytes_ * scale
                longest = max(longest, float(lat[ids].sum()))
        total += op_alpha(net) + longest + float((step_load / net.capacity_bps).max()) * 1e6
        loads += step_load
    name = scheds[0].algorithm if len({sc.algorithm for sc in scheds}) == 1 else "mixed"
    return OpTiming(op.name, op.kind, f"schedule:{name}", total, op.count, loads)


def critical_path_us(wl: Workload, comm_us_of: dict[str, float]) -> tuple[float, float, float]:
    """(critical path, communication on it, compute on it) of one micro-batch through the decode DAG, in
    us, with each communication op taking `comm_us_of[op name]` and each compute op its roofline time; with
    dual-batch overlap, per layer the larger of its communication and its compute. Monotone in every op's
    time, so op times that are lower bounds give a lower bound."""
    import networkx as nx
    g = wl.graph
    finish: dict[str, float] = {}
    comm_on: dict[str, float] = {}
    comp_on: dict[str, float] = {}
    for node in nx.topological_sort(g):
        op = g.nodes[node]["op"]
        if getattr(op, "background", False):
            continue
        dur = comm_us_of[op.name] if isinstance(op, CommOp) else op.time_s * 1e6
        preds = [p for p in g.predecessors(node)]
        start_from = max(preds, key=lambda p: finish[p], default=None)
        base = finish[start_from] if start_from else 0.0
        finish[node] = base + dur
        comm_on[node] = (comm_on[start_from] if start_from else 0.0) + (dur if isinstance(op, CommOp) else 0.0)
        comp_on[node] = (comp_on[start_from] if start_from else 0.0) + (0.0 if isinstance(op, CommOp) else dur)
    last = max(finish, key=finish.get)
    path_time, comm_us, comp_us = finish[last], comm_on[last], comp_on[last]
    if wl.instance.workload.dual_batch_overlap:
        per_layer_comm: dict[int, float] = {}
        per_layer_comp: dict[int, float] = {}
        for node in finish:
            layer = g.nodes[node]["layer"]
            op = g.nodes[node]["op"]
            if isinstance(op, CommOp):
                per_layer_comm[layer] = per_layer_comm.get(layer, 0.0) + comm_us_of[op.name]
            elif op.name != "shared_expert":
                per_layer_comp[layer] = per_layer_comp.get(layer, 0.0) + op.time_s * 1e6
        layers = set(per_layer_comm) | set(per_layer_comp)
        # two half micro-batches: communication of one hides behind compute of the other; a half batch
        # pays the alphas twice, approximated by keeping the full comm time as the floor.
        path_time = sum(max(per_layer_comm.get(l, 0.0), per_layer_comp.get(l, 0.0)) for l in layers)
    return path_time, comm_us, comp_us


def ocs_step_lower_bound_us(wl: Workload, ports: np.ndarray, port_bytes_per_s: float) -> float:
    """A lower bound on the analytical step time of `wl` on any OCS wiring with `ports` per accelerator:
    every op takes at least its cheapest algorithm with each phase at alpha + one hop's latency + its busiest
    accelerator's bytes (sent or received) over all its ports (the critical path is monotone in op times;
    the step is at least its critical path)."""
    inst = wl.instance
    alpha, hop = inst.hardware.step_latency_us, inst.hardware.link_latency_us
    cap = np.maximum(ports.astype(np.float64), 1e-300) * port_bytes_per_s
    low: dict[str, float] = {}
    n = inst.accelerators
    for op in wl.comm_ops():
        best = np.inf
        for phases in op_algorithms(op).values():
            total = 0.0
            for ph in phases:
                sent, got = np.zeros(n), np.zeros(n)   # each accelerator's bytes out and in, every group at once
                np.add.at(sent, op.groups, np.broadcast_to(ph.pattern.sum(axis=1), op.groups.shape))
                np.add.at(got, op.groups, np.broadcast_to(ph.pattern.sum(axis=0), op.groups.shape))
                busiest = float(max((sent / cap).max(), (got / cap).max()))
                total += ph.repeat * (alpha + (hop if ph.pattern.any() else 0.0) + busiest * 1e6)
            best = min(best, total)
        low[op.name] = best
    return critical_path_us(wl, low)[0]


def evaluate_workload(wl: Workload, fabric: FabricChoice | str, wiring: Wiring | None = None,
                      fidelity: str = "analytical", seed: int = 0,
                      progress: Callable[[str], None] | None = None, schedules: tuple = (),
                      routing: str = "ecmp") -> Evaluation:
    """Evaluate a built workload on a fabric (see the module doc for the model). `routing` "balanced"
    routes direct phases on ocs / hybrid fabrics by multiplicative weights, as `wire` scores wirings."""
    if fidelity not in ("analytical", "flow"):
        from .errors import InvalidInput
        raise InvalidInput(f"must be analytical or flow, got {fidelity!r}", field="fidelity")
    t0 = time.perf_counter()
    fab = parse_fabric(fabric) if isinstance(fabric, str) else fabric
    inst = wl.instance
    net, inv = build_network(inst, fab, wiring)
    net.check_connected(wl.traffic.bytes_)
    alpha = inst.hardware.step_latency_us
    net.meta["alpha_us"] = alpha
    timing: dict[str, OpTiming] = {}
    for op in wl.comm_ops():
        if progress:
            progress(f"{fab.label}: {op.name}")
        if routing not in ("ecmp", "balanced"):
            from .errors import InvalidInput
            raise InvalidInput(f"must be ecmp or balanced, got {routing!r}", field="routing")
        direct_net = fab.kind in ("ocs", "hybrid")
        timing[op.name] = time_collective(net, op, alpha, fidelity, seed=seed,
                                          routing=routing if direct_net else "ecmp")
        for sch in schedules:   # given schedules replace the model's choice where they fit the op
            given = time_with_schedule(net, op, sch)
            if given is not None:
                timing[op.name] = given
                break
    path_time, comm_us, comp_us = critical_path_us(wl, {name: t.time_us for name, t in timing.items()})
    # busiest link over the whole step (all micro-batches, all layers, background included)
    busy = np.zeros(net.links)
    for op in wl.comm_ops():
        busy += timing[op.name].link_loads * op.count / max(1, 1)
    busy_us = float((busy / net.capacity_bps).max()) * 1e6 if busy.any() else 0.0
    # the DAG holds one micro-batch; pipeline stages overlap micro-batches, so per-micro-batch op counts
    # are normalized by micro_batches for the time a link is busy in one step period
    step_us = max(path_time, busy_us)
    n = inst.accelerators
    tokens = wl.sequences
    step_s = step_us * 1e-6
    hw, c = inst.hardware, inst.costs
    idle_w = hw.idle_power_w or 0.3 * hw.power_w
    busy_frac = min(1.0, comp_us / step_us) if step_us > 0 else 0.0
    acc_power = n * (hw.power_w * busy_frac + idle_w * (1 - busy_frac))
    net_power = inv.power_w(inst)
    power = (acc_power + net_power) * c.pue
    energy_per_token = power * step_s / tokens
    net_capex = inv.capex_usd(inst)
    capex = n * hw.price_usd + net_capex
    usd_per_s = capex / (c.lifetime_years * SECONDS_PER_YEAR) + power / 1000 * c.usd_per_kwh / 3600
    cost_per_token = usd_per_s * step_s / tokens
    tps = tokens / step_s
    max_util = busy_us / step_us if step_us > 0 else 0.0
    return Evaluation(
        fabric=fab.label, fidelity=fidelity, step_time_us=step_us, tokens_per_s_per_user=1e6 / step_us,
        tokens_per_s_per_accelerator=tps / n, energy_per_token_j=energy_per_token, cost_per_token=cost_per_token,
        comm_time_us=comm_us, compute_time_us=comp_us, max_link_utilization=max_util,
        exposed_comm_share=max(0.0, 1 - comp_us / step_us) if step_us > 0 else 0.0,
        cost_per_million_tokens_usd=cost_per_token * 1e6, tokens_per_s_per_musd=tps / (capex / 1e6),
        capex_usd=capex, network_capex_usd=net_capex, power_w=power, network_power_w=net_power * c.pue,
        sequences_per_step=tokens, bandwidth_bound_us=busy_us, ops=tuple(timing.values()),
        wall_s=time.perf_counter() - t0)


def evaluate(instance, fabric: FabricChoice | str, wiring: Wiring | None = None, fidelity: str = "analytical",
             seed: int = 0, progress: Callable[[str], None] | None = None, schedules: tuple = (),
             routing: str = "ecmp") -> Evaluation:
    """Build the instance's decode step and evaluate it on `fabric`.

    >>> import synth
    >>> from synth.evaluate import evaluate
    >>> ev = evaluate(synth.load_instance("instances/decode/llama405b-tp8pp2-16.toml"), "scaleup")
    >>> ev.step_time_us > ev.compute_time_us > 0
    True
    """
    return evaluate_workload(build_workload(instance), fabric, wiring, fidelity, seed, progress, schedules, routing)
