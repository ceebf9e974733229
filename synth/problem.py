"""The OCS wiring problem: what the wiring solvers take, and how a wiring is scored.

Objectives (all minimized):

- ``time``: the step's communication time, max over directed circuits of load / bandwidth, under the best
  routing of every demand over the wiring (direct or through accelerators): the optimal multi-commodity
  routing (an LP, :func:`synth.network.optimal_routing`) up to ``EXACT_ROUTING_MAX`` accelerators, else
  multiplicative-weights multi-path routing (or ECMP when that is better), and for a solver's final answer
  on up to ``PATH_LP_MAX_LINKS`` links the LP over the paths MWU used, grown by column generation
  (`routing="best"`, :func:`synth.routing.path_lp_routing`). Every value is that of a routing that exists,
  so an upper bound on the wiring's optimum.
- ``hops``: hop-weighted bytes, sum over demands of bytes x shortest-path hops (seconds-free; 1 = every
  byte on a direct circuit).
- ``phases``: the step's communication as phases run one after another (``phases``: the TP all-reduce, the
  EP dispatch, ..., each with its executions per step): sum over phases of weight x that phase's ``time``
  alone (its own best routing, the whole fabric to itself). The ``time`` objective instead scores the
  step's total bytes at once, the busiest circuit over the whole step: never more than ``phases``, so its
  bounds hold for ``phases`` too.
- ``step``: the decode step's time from the evaluator's analytical model (:mod:`synth.evaluate`: each op's
  best collective algorithm on the wiring with balanced routing, alpha and latency per phase, the critical
  path with compute and dual-batch overlap, the busiest link over the step), for an instance's workload.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import Infeasible, InvalidInput
from .model import Circuit, FibreFit, OCSLayout, TrafficMatrix, TrafficPhase, Wiring
from .network import Network, ecmp_loads, optimal_routing

OBJECTIVES = ("time", "hops", "phases", "step")
POLICIES = ("multihop", "direct")
EXACT_ROUTING_MAX = 48    # accelerators: the routing LP always (a few seconds at most)
ARC_LP_MAX_COLUMNS = 100_000   # destinations x links: below this the arc LP certifies a path LP that did not
PATH_LP_MAX_LINKS = 6000  # directed links: final answers get MWU + path LP + column generation (by PDLP beyond
                          # routing.PATH_LP_IPM_MAX_LINKS); beyond, the path set outgrows the LP (moe5t-576's 10,368
                          # links: over a million paths in 20 MWU rounds, which PDLP does not solve in 120 s)
MIN_UNIT_S = 1e-12        # the largest entry over one port takes at least this: the models' times keep their
                          # digits (1e-6 bytes at 100 Gbit/s, 8e-17 s, broke the MILP; 1e-3 bytes, 8e-14 s, still solved)
AUTO_LP_MIN_S = 1.0      # the shortest clock the routing LP gets under routing="auto"
MWU_SCORE_ROUNDS = 1000   # rounds at most of a score by MWU alone (beyond PATH_LP_MAX_LINKS): the clock decides
MIX_SHARE = 0.4           # of such a score's clock for the LP that mixes MWU's rounds (`routing.best_mix`)
MIX_MIN_S = 2.0           # the least clock on which the rounds are mixed
MIX_ON_SHARE = 0.1        # MWU goes on before the mix while the LP leaves more than this share of the clock


def even_clocks(count: int, time_limit_s: float, since: float | None = None):
    """The clocks of `count` jobs run one after another within `time_limit_s` (counted from `since`, else from
    the first): each an even share of what is left then, so the time one leaves goes to the rest."""
    t0 = time.perf_counter() if since is None else since
    for at in range(count):
        yield max(0.0, (time_limit_s - (time.perf_counter() - t0)) / (count - at))


def _floor_on(net: Network, dem: np.ndarray) -> float:
    """`WiringProblem.time_floor` of the demand `dem` on `net`: the byte-hops over all capacity, and each
    accelerator's bytes over its own circuits; inf when a demand has no path."""
    n = dem.shape[0]
    dist = net.dist[:n, :n]
    if net.unserved(dem).any():
        return float("inf")
    out = np.bincount(net.src, weights=net.capacity_bps, minlength=net.nodes)[:n]
    inn = np.bincount(net.dst, weights=net.capacity_bps, minlength=net.nodes)[:n]
    sent, received = dem.sum(axis=1), dem.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ends = max(float(np.nanmax(np.where(sent > 0, sent / out, 0.0))),
                   float(np.nanmax(np.where(received > 0, received / inn, 0.0))))
    return max(float((dem * dist).sum()) / float(net.capacity_bps.sum()), ends)


@dataclass(frozen=True, eq=False)
class WiringProblem:
    traffic: TrafficMatrix
    layout: OCSLayout
    port_bandwidth_gbps: float
    objective: str = "time"
    policy: str = "multihop"
    fixed_circuits: tuple[Circuit, ...] = ()
    link_latency_us: float = 0.0
    name: str = ""
    instance: dict | None = None
    phases: tuple[TrafficPhase, ...] = ()
    workload: Any = None          # the instance's Workload, for the step objective
    fibre_fit: FibreFit | None = None   # the layout is an envelope; answers are cabled onto these OCSes

    def __post_init__(self) -> None:
        n = self.traffic.accelerators
        if self.fibre_fit is not None:
            if self.fixed_circuits:
                raise InvalidInput("fixed circuits name the switches of a given fibre plan; a fitted plan is "
                                   "chosen after the wiring", field="fixed_circuits")
            if len(self.fibre_fit.switches) != self.layout.switches:
                raise InvalidInput(f"the fibre plan splits {len(self.fibre_fit.switches)} planes, the layout has "
                                   f"{self.layout.switches}", field="fibre_fit")
        if self.objective == "step":
            if self.workload is None:
                raise InvalidInput("the step objective needs an instance (the evaluator times its decode step)",
                                   field="objective")
            if not np.allclose(self.workload.traffic.bytes_, self.traffic.bytes_, rtol=1e-9, atol=1e-6):
                raise InvalidInput("the workload's traffic differs from the problem's", field="traffic")
        if self.phases:
            empty = [p.name for p in self.phases if not (p.bytes_ > 0).any()]
            if empty:
                raise InvalidInput(f"phase {empty[0]!r} has no bytes", field="phases")
            if any(p.bytes_.shape != (n, n) for p in self.phases) or not np.allclose(
                    sum(p.weight * p.bytes_ for p in self.phases), self.traffic.bytes_, rtol=1e-9, atol=1e-6):
                raise InvalidInput("phases (weight x bytes) do not sum to the traffic matrix", field="phases")
        elif self.objective == "phases":
            raise InvalidInput("the phases objective needs the step's phases (an instance, or a phases file)",
                               field="objective")
        if self.objective not in OBJECTIVES:
            raise InvalidInput(f"must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}", field="objective")
        if self.policy not in POLICIES:
            raise InvalidInput(f"must be one of {', '.join(POLICIES)}, got {self.policy!r}", field="policy")
        if not (self.port_bandwidth_gbps > 0 and np.isfinite(self.port_bandwidth_gbps)):
            raise InvalidInput(f"must be > 0, got {self.port_bandwidth_gbps!r}", field="port_bandwidth_gbps")
        if self.layout.accelerators != n:
            raise InvalidInput(f"layout has {self.layout.accelerators} accelerators, traffic has {n}",
                               field="traffic")
        top = float(self.traffic.bytes_.max())
        if top == 0:
            raise InvalidInput("every entry is 0: there is nothing to wire", field="traffic")
        if top / self.port_bytes_per_s < MIN_UNIT_S:
            raise InvalidInput(f"the largest entry, {top:g} bytes, crosses one {self.port_bandwidth_gbps:g} Gbit/s "
                               f"port in {top / self.port_bytes_per_s:.2g} s; below {MIN_UNIT_S:g} s the solvers' "
                               "tolerances swamp the times (entries are bytes per step)", field="traffic")
        if self.layout.ports < 1 or (self.layout.switch_of_port < 0).all():
            raise InvalidInput("port budget is zero: no port is attached to an OCS", field="ports")
        hosts = (self.layout.capacity > 0).sum(axis=0)
        if not ((hosts >= 2) & (np.array(self.layout.switch_radix) >= 2)).any():
            raise InvalidInput("no switch can host a circuit (each needs ports of two accelerators and "
                               "radix >= 2)", field="layout")
        from .verify import wiring_violations
        fixed = Wiring(n, self.layout.ports, tuple(self.fixed_circuits), self.layout)
        bad = wiring_violations(fixed)
        if bad:
            raise Infeasible(f"fixed circuits are infeasible: {bad[0].message}", field="fixed_circuits")
        if self.policy == "direct":
            peers = ((self.traffic.bytes_ > 0) | (self.traffic.bytes_.T > 0)).sum(axis=1)
            ports = self.layout.capacity.sum(axis=1)
            over = np.flatnonzero(peers > ports)
            if over.size:
                rows = ", ".join(f"{r} ({peers[r]} peers, {ports[r]} ports)" for r in over[:5])
                more = f" and {over.size - 5} more" if over.size > 5 else ""
                raise Infeasible(f"direct-only wiring cannot serve rows {rows}{more}", field="policy")
            talks = (self.traffic.bytes_ > 0) | (self.traffic.bytes_.T > 0)
            u, v = np.nonzero(np.triu(talks & ~self.layout.shares_switch(), 1))
            if u.size:
                raise Infeasible(f"direct-only wiring cannot serve accelerators {u[0]} and {v[0]}: they exchange "
                                 "bytes but have ports on no common switch", field="policy")
            # each pair that exchanges bytes holds a circuit of its own, and so does each fixed circuit elsewhere
            pairs = int(np.triu(talks, 1).sum())
            extra = sum(1 for c in self.fixed_circuits if not talks[c.a, c.b])
            if pairs + extra > self.circuits_available():
                raise Infeasible(f"direct-only wiring needs {pairs + extra} circuits (one per pair that exchanges "
                                 f"bytes{f', {extra} fixed beside them' if extra else ''}), the switches take "
                                 f"{self.circuits_available()}", field="policy")
        else:
            self._check_connectable()

    def circuits_available(self) -> int:
        """The most circuits the layout holds: a switch holds at most radix / 2, and each joins two
        accelerators (a matching of its ports with no two of one accelerator, at most min(ports / 2, ports -
        the most one accelerator has))."""
        cap = self.layout.capacity
        attached = cap.sum(axis=0)
        radix = np.array(self.layout.switch_radix)
        return int(np.minimum(np.minimum(attached, radix) // 2, attached - cap.max(axis=0)).sum())

    def _check_connectable(self) -> None:
        """Refuse demand no wiring within the port budgets can connect. Every group of accelerators joined by
        demand must lie in one connected piece of the wiring, which contains a tree spanning the group whose
        other nodes relay (degree >= 2 in the tree): with d_v <= p_v circuits at each node, sum over the
        group of d_v = 2 (|group| - 1) - sum over relays of (d_u - 2), so the group's ports plus every other
        accelerator's p_u - 2 must reach 2 (|group| - 1) (one port each at least). Switches are not looked
        at beyond how many circuits they take (radix, and ports of two accelerators): the groups' spanning
        trees need sum (|group| - 1) of them. Necessary conditions (ports = 1 everywhere, a hub's peers with
        one port between them, switches too small for a tree)."""
        import scipy.sparse as sp
        from scipy.sparse.csgraph import connected_components
        t = self.traffic.bytes_
        lay = self.layout
        ports = lay.capacity.sum(axis=1)
        talks = (t > 0) | (t.T > 0)
        dark = np.flatnonzero(talks.any(axis=1) & (ports == 0))
        if dark.size:
            raise Infeasible(f"accelerator {dark[0]} has demand but no OCS port", field="layout")
        k, label = connected_components(talks, directed=False)
        sizes = np.bincount(label, minlength=k)
        attached = lay.capacity.sum(axis=0)
        radix = np.array(lay.switch_radix)
        # a circuit joins two accelerators on one switch: only accelerators linked by a chain of shared
        # switches (that can host a circuit) can ever reach each other
        a, s = np.nonzero((lay.capacity > 0) & ((attached >= 2) & (radix >= 2))[None, :])
        n = self.accelerators
        g = sp.coo_matrix((np.ones(a.size), (a, n + s)), shape=(n + lay.switches,) * 2)
        _, reach = connected_components(g, directed=False)
        u, v = np.nonzero(talks & (reach[:n, None] != reach[None, :n]))
        if u.size:
            raise Infeasible(f"accelerators {u[0]} and {v[0]} exchange bytes, but no chain of shared switches "
                             "joins their ports: no wiring on this layout connects them", field="layout")
        slack = np.maximum(ports - 2, 0)
        for c in np.flatnonzero(sizes >= 2):
            members = np.flatnonzero(label == c)
            have = int(ports[members].sum() + slack.sum() - slack[members].sum())
            if have < 2 * (members.size - 1):
                raise Infeasible(f"no wiring within the port budget connects the {members.size} accelerators "
                                 f"that exchange bytes with accelerator {members[0]}: a connected wiring needs "
                                 f"{2 * (members.size - 1)} port ends among them (plus relays' ports beyond two), "
                                 f"they have {have}", field="ports")
        circuits = self.circuits_available()
        need = int((sizes - 1).sum())
        if circuits < need:
            raise Infeasible(f"no wiring within the switches' radix connects the demand: its groups need {need} "
                             f"circuits, the switches take {circuits}", field="layout.switch_radix")

    @classmethod
    def from_instance(cls, inst: Any, traffic: TrafficMatrix, objective: str = "time", policy: str = "multihop",
                      fixed_circuits: tuple[Circuit, ...] = (), phases: tuple[TrafficPhase, ...] = (),
                      workload: Any = None) -> "WiringProblem":
        return cls(traffic, inst.ocs_layout(), inst.hardware.port_bandwidth_gbps, objective, policy,
                   tuple(fixed_circuits), inst.hardware.link_latency_us, inst.name, inst.summary(), tuple(phases),
                   workload, inst.fibre_fit())

    @property
    def accelerators(self) -> int:
        return self.traffic.accelerators

    def as_time(self) -> "WiringProblem":
        """The same problem under the ``time`` objective (the step's bytes at once): a relaxation of
        ``phases`` (its optimum and bounds are lower bounds) and what structure-based starts look at."""
        from dataclasses import replace
        if self.objective == "time":
            return self
        if "_as_time" not in self.__dict__:   # one object per problem: the solvers' caches key on identity
            object.__setattr__(self, "_as_time", replace(self, objective="time", phases=(), workload=None))
        return self.__dict__["_as_time"]

    def phase_problems(self) -> list[tuple[float, "WiringProblem"]]:
        """(weight, the ``time`` problem of that phase alone) for every phase (the same objects on every call,
        as :meth:`as_time`)."""
        from dataclasses import replace
        if "_phase_problems" not in self.__dict__:
            object.__setattr__(self, "_phase_problems", [
                (p.weight, replace(self, traffic=TrafficMatrix(p.bytes_, name=p.name), objective="time", phases=(),
                                   workload=None)) for p in self.phases])
        return list(self.__dict__["_phase_problems"])

    def restricted(self, idx: np.ndarray, layout: OCSLayout) -> "WiringProblem":
        """The problem on the accelerators `idx` only (their demand, each phase's too: phases without bytes
        there are dropped, and with none left it is the ``time`` problem; the ``step`` objective times a
        whole instance, so a part of it is the ``time`` problem), on `layout`."""
        sub = np.ix_(idx, idx)
        phases = tuple(TrafficPhase(p.name, p.bytes_[sub], p.weight) for p in self.phases if (p.bytes_[sub] > 0).any())
        objective = "time" if (self.objective == "phases" and not phases) or self.objective == "step" \
            else self.objective
        return WiringProblem(TrafficMatrix(self.traffic.bytes_[sub]), layout, self.port_bandwidth_gbps,
                             objective, self.policy, (), self.link_latency_us, self.name,
                             phases=phases if objective == "phases" else ())

    def demand_colours(self) -> np.ndarray:
        """A matrix whose entries (i, j) and (k, l) are equal exactly when every phase has the same bytes at
        both (> 0 where any phase has bytes): what a relabelling of accelerators must preserve to be a
        symmetry of the problem (the total alone can have more)."""
        if not self.phases:
            return self.traffic.bytes_
        stack = np.stack([p.bytes_ for p in self.phases], axis=-1).reshape(-1, len(self.phases))
        _, code = np.unique(stack, axis=0, return_inverse=True)
        code = code.reshape(self.traffic.bytes_.shape).astype(np.float64)
        return np.where(self.traffic.bytes_ > 0, code + 1, 0.0)

    @property
    def ports(self) -> int:
        return self.layout.ports

    @property
    def port_bytes_per_s(self) -> float:
        return self.port_bandwidth_gbps * 1e9 / 8

    def network(self, wiring: Wiring) -> Network:
        adj = np.triu(wiring.adjacency(), 1)
        i, j = np.nonzero(adj)
        return Network.from_pairs("ocs", self.accelerators, self.accelerators, np.stack([i, j], axis=1),
                                  adj[i, j] * self.port_bytes_per_s, self.link_latency_us)

    def time_floor(self, wiring: Wiring) -> float:
        """A lower bound (s) on `wiring`'s time under any routing: every byte crosses at
        least its pair's hop distance of links, so the busiest link carries at least the byte-hops over all
        capacity, and each accelerator's bytes leave (and arrive) over its own circuits; under the phases
        objective (each phase routed alone) the phases' floors, weighted. 0 where it does not apply (hops
        and step objectives, direct policy); inf when a demand has no path."""
        if self.objective not in ("time", "phases") or self.policy == "direct":
            return 0.0
        net = self.network(wiring)
        if self.objective == "phases":
            return float(sum(p.weight * _floor_on(net, p.bytes_) for p in self.phases))
        return _floor_on(net, self.traffic.bytes_)

    def score_or_quick(self, wiring: Wiring, routing: str = "best", time_limit_s: float = 20.0) -> tuple[float, str, bool]:
        """`score` for a final answer: a Ctrl-C while it runs (its LPs and multi-path routing can take tens of
        seconds) falls back to ECMP's routing, a valid time for the wiring that takes a second, so the answer
        is never lost. Returns (objective, routing used, interrupted)."""
        try:
            return (*self.score(wiring, routing, time_limit_s), False)
        except KeyboardInterrupt:
            objective, how = self.score(wiring, "ecmp", time_limit_s)
            return objective, f"{how} (Ctrl-C while scoring)", True

    def score(self, wiring: Wiring, routing: str = "auto", time_limit_s: float = 20.0,
              resume: dict | None = None) -> tuple[float, str]:
        """(objective value, routing used) of a wiring; inf when a demand has no path. `routing` for the
        time objective: "optimal" (LP), "mwu" (multiplicative-weights multi-path, large instances),
        "ecmp", "auto" (optimal up to EXACT_ROUTING_MAX accelerators when the LP ends within the clock,
        else mwu) or "best" (auto, but on up to
        PATH_LP_MAX_LINKS links the path LP over MWU's paths with column generation, 300 MWU rounds alone
        staying 3-7% above the optimum on 64-144 accelerators; when its column generation stops short of a
        proof on degenerate duals and the arc LP fits in ARC_LP_MAX_COLUMNS, the arc LP gets the clock left
        and the better answer stands). Beyond EXACT_ROUTING_MAX the answer is ready within `time_limit_s`
        (ECMP first, the heuristic gets the rest). `resume` (a dict kept by the caller, one per wiring) lets
        MWU go on across calls (alone, or before the path LP): a second clock on the same wiring adds rounds to
        the first. Under the phases objective each phase is routed alone on an even share of the clock left,
        so what one leaves goes to the rest, and `resume` keeps a state per phase."""
        start = time.perf_counter()
        dem = self.traffic.bytes_
        net = self.network(wiring)
        n = self.accelerators
        if net.unserved(dem).any():
            return float("inf"), "disconnected"
        if self.objective == "step":
            from .evaluate import evaluate_workload
            ev = evaluate_workload(self.workload, "ocs", wiring, routing="balanced")
            return ev.step_time_us * 1e-6, "evaluator (analytical, balanced)"
        if self.objective == "phases":
            # an even share of the clock left each, the phases with the fewest demand pairs first: their path
            # LPs tend to end early and leave the rest to the all-to-alls (kimi-k2-288 with TP 4 at 7.5 s: its
            # TP phases take 1.0 s of their 1.9 s)
            total, how, subs = 0.0, set(), self.phase_problems()
            order = np.argsort([np.count_nonzero(p.bytes_) for p in self.phases], kind="stable")
            for i, clock in zip(order, even_clocks(len(order), time_limit_s, start)):
                w, sub = subs[i]
                theta, r = sub.score(wiring, routing, clock,
                                     resume=None if resume is None else resume.setdefault(int(i), {}))
                total += w * theta
                how.add(r)
            return total, ", ".join(sorted(how))
        if self.policy == "direct":
            adj = wiring.adjacency()
            if ((dem > 0) & (adj == 0)).any():       # a demand with no circuit of its own: never served
                return float("inf"), "direct"
            if self.objective == "hops":             # every byte one hop
                return float(dem.sum()), "direct"
        if self.objective == "hops":
            return float((dem * net.dist[:n, :n]).sum()), "shortest"
        if self.policy == "direct":
            with np.errstate(divide="ignore"):
                t = np.where(dem > 0, dem / (np.maximum(adj, 1e-300) * self.port_bytes_per_s), 0.0)
            return float(t.max()), "direct"
        t0 = start      # the clock counts the hop distances the check above computed (2.5 s at 4,608 accelerators)
        if routing == "best" and EXACT_ROUTING_MAX >= n or routing == "optimal":
            return optimal_routing(net, dem)[0], "optimal"
        if routing == "auto" and EXACT_ROUTING_MAX >= n:
            # on the clock (a search's starts are ranked on a tenth of it each; at 47 accelerators the LP takes
            # 2-3 s: four starts took 9.5 s of an 8 s solve); out of it, ECMP and MWU on what is left
            try:
                return optimal_routing(net, dem, time_limit_s=max(AUTO_LP_MIN_S, time_limit_s))[0], "optimal"
            except InvalidInput:
                pass
        # the heuristic routings are held to ECMP's answer, which comes first so that they get the rest of
        # `time_limit_s` (ECMP takes 0.6 s at 576 accelerators)
        ecmp_l = ecmp_loads(net, dem)
        ecmp = float((ecmp_l / net.capacity_bps).max())
        left = max(0.1, time_limit_s - (time.perf_counter() - t0))
        if routing not in ("auto", "best", "mwu"):
            return ecmp, "ecmp"
        if routing == "best" and net.links <= PATH_LP_MAX_LINKS:
            # the path LP first: on deepseek-v3-72 and qwen3-235b-64 it meets the arc LP's optimum in 3.7 and
            # 2.5 s where the arc LP takes 9.6 and 8.4 s (and at a 20 s limit did not finish: MWU, +0.7%)
            from .routing import path_lp_routing
            arc = n * net.links <= ARC_LP_MAX_COLUMNS
            theta, how = path_lp_routing(net, dem, time_limit_s=left, mwu_rounds=MWU_SCORE_ROUNDS, resume=resume)
            rest = time_limit_s - (time.perf_counter() - t0)
            if arc and not how.endswith("optimal)") and rest > 1.0:
                try:
                    lp = optimal_routing(net, dem, time_limit_s=rest)[0]
                    if lp <= theta:
                        theta, how = lp, "optimal"
                except InvalidInput:         # not within the clock: the path LP's answer stands
                    pass
            return (theta, how) if theta <= ecmp else (ecmp, "ecmp")
        from .routing import best_mix, mix_columns, mix_time, mwu_routing
        # the rounds' best mix (beside ECMP's routing and MWU's average) on the last MIX_SHARE of the clock, MWU
        # stopped at the rounds that LP takes in it: moe5t-576's main job, 1,000 rounds averaged 0.7058 ms, 300
        # rounds mixed 0.7042 ms (where 600 rounds mixed in pairs gave 0.7046: the early rounds' spread counts)
        mix_s = MIX_SHARE * left if left >= MIX_MIN_S else 0.0
        columns = mix_columns(net.links, mix_s)
        kept: list | None = [] if columns > 2 else None
        cap = MWU_SCORE_ROUNDS if kept is None else min(MWU_SCORE_ROUNDS, (resume or {}).get("run", 0) + columns - 2)
        state = resume if resume is not None else {}          # the mix's MWU may go on below
        theta, avg, rounds = mwu_routing(net, dem, rounds=cap, time_limit_s=left - mix_s if kept is not None else left,
                                         resume=state, rounds_out=kept)
        while kept is not None and rounds < cap:
            # rounds slower than the share assumed (2,304 accelerators: 53 rounds in 30 s, then 3 s of the LP's
            # 20): MWU goes on in half of what the LP on the rounds so far leaves, until that is a tenth of the clock
            spare = time_limit_s - (time.perf_counter() - t0) - mix_time(net.links, len(kept) + 2)
            if spare < MIX_ON_SHARE * left:
                break
            theta, avg, rounds = mwu_routing(net, dem, rounds=cap, time_limit_s=spare / 2, resume=state,
                                             rounds_out=kept)
        how = f"mwu ({rounds} rounds)"
        if kept:
            mixed, _ = best_mix(kept + [ecmp_l] + ([] if avg is None else [avg]), net.capacity_bps,
                                time_limit_s - (time.perf_counter() - t0))
            if mixed < min(theta, ecmp):
                theta, how = mixed, f"mwu ({rounds} rounds, their best mix)"
        return (theta, how) if theta <= ecmp else (ecmp, "ecmp")   # said as the path LP's
