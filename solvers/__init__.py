"""Wiring solvers: each takes a validated :class:`~synth.problem.WiringProblem` and returns a
:class:`~synth.model.SolveResult` whose artifact is a realizable :class:`~synth.model.Wiring`; no file I/O,
no printing (progress goes through ``SolveParams.progress``).

``wire(problem, solver, params)`` dispatches:

- ``milp`` (PuLP: HiGHS, or CBC with ``backend="cbc"``) and ``cpsat``: exact models (:mod:`solvers.exact`);
  above SEED_FROM accelerators they start from ``search``'s wiring (a fifth of the time, at most a minute;
  the coupled groups' wiring is one of its starts; :func:`_seeded`);
- ``lp-round``: LP relaxation (fractional circuits and routing), rounded to a degree-feasible multigraph,
  coloured onto the switches, then improved by local search (up to 40 accelerators, else it starts from the
  expander); the quick baselines start instead where they score better;
- ``search``: the best baseline (greedy only off a near-uniform all-to-all) as a start, degree-preserving local search inside switch planes
  (:mod:`solvers.local_search`: on dense wirings, where two hops reach most pairs, it maximizes
  demand-weighted two-hop coverage with an O(N) incremental update per move, then refines the hop
  objective by BFS), scored with balanced multi-path routing; the second core (a helper process,
  `synth.routing.Beside`) searches under the next seed beside it, or the second start, and scores the
  wirings offered beside the search while the starts are scored;
- ``expander``, ``torus``, ``topoopt``, ``greedy``: the baselines (:mod:`solvers.baselines`);
- ``auto``: ``milp`` up to 16 accelerators (with the best heuristic as a fallback), else ``search``; for the
  ``step`` objective (the evaluator's model, which no exact model encodes) up to 16 accelerators the MILP
  of its communication (the ``phases`` objective), timed by the evaluator, else ``search``.

When the demand splits into several identical, independent parallel groups (TP or DP replicas with the same
demand and port layout), one group is wired and its circuits copied onto the others (``extra.symmetry``).
When identical groups are tied by lighter traffic (the TP groups of a pipeline), one group is wired with the
ports its crossing traffic needs held back (and, tried in turn, up to three more), copied, and joined on
those ports (:mod:`solvers.coupled`, a quarter of the time); the best of those wirings starts the solver's
own run on the whole instance.
Under the direct policy, where greedy leaves a demand pair without a circuit, :func:`direct_cover` assigns
every pair a circuit by CP-SAT and starts the solver from it, or proves no direct wiring exists (INFEASIBLE).
An exact solve that ends without a wiring, or is interrupted, returns the expander baseline as a FEASIBLE
incumbent rather than nothing.

Where the fibre plan is the tool's to choose (``problem.fibre_fit``: planes split over OCSes smaller than a
plane, `fibre_plan = "fit"`), every solver wires the whole planes (the envelope, whose bound holds for every
plan) and the answer is cabled onto the OCSes afterwards (:mod:`solvers.fibre_plan`).

Every answer carries the best valid lower bound (:mod:`solvers.bounds`) and its gap; a run stopped by its
time limit or by Ctrl-C with a wiring in hand is FEASIBLE, never OPTIMAL (unless a bound proves it).
"""
from __future__ import annotations

import time

import numpy as np

from synth.errors import InvalidInput
from synth.model import Limit, OCSLayout, SolveParams, SolveResult, SolveStatus, Wiring
from synth.problem import EXACT_ROUTING_MAX, WiringProblem
from synth.routing import Beside

from . import baselines, fibre_plan
from .structured import MOST_S, embedded, heavy_pairs, hub_mask, near_moore, placed, relabelled, relay_hubs
from .vees import relay_vees
from .bounds import LP_BOUND_MAX, ProblemCache, best_bound, final_bound, instant_bound

COUPLED_SHARE = 0.25   # of the time limit, for wiring one of the coupled groups (solvers/coupled.py)
SWITCHES_SHARE = 0.1  # of the clock for placing the heavy pairs by a model where the switches bind (at most 10 s)
HUB_TRIES = 32        # relay-hubs and heavy-pairs draws, the one with the fewest byte-hops is the candidate
ASIDE_SHARE = 0.25    # of the time limit, for scoring exactly the wirings offered beside the search
START_SHARE = 0.3     # of the time limit at most, for scoring the search's starts (a tenth each)
RIVAL_CLOSE = 0.03     # wirings scored beside the search this close to the best, their routing unfinished: ranked by floor
QUICK_SHARE = 0.04    # of the time limit, for ranking two searched wirings by a short routing
MIN_SCORE_S = 0.5     # the shortest clock a wiring is scored on (ECMP first, then the multi-path routing)
PLACE_SHARE = 0.1     # of the time limit at most, for placing skewed demand on the near-Moore wiring
EMBED_SHARE = 0.05    # ... and for putting it on OCSes smaller than its planes (`structured.embedded`, MOST_S at most)
VEE_SHARE = 0.2       # of the time limit at most, for the relay V's: three k's built and ranked, one coloured (deepseek-v3-144 TP 4: 10 s)
UNIFORM_CV = 0.1       # demand spread up to which the geometric near-Moore starts are offered (_near_uniform)
SCORED_STARTS_MAX = 256   # accelerators up to which the search's starts are ranked by a routing, beyond by byte-hops
REPLICA_SCORE_SHARE = 0.25   # of the clock left, held back to score a replicated wiring under the step objective
REPLICA_SHARE = 0.5    # of the clock left, for the group where an exact solver goes on to the whole instance
AUTO_EXACT_MAX = 16    # accelerators up to which `auto` picks the exact models (the step objective: its phases')
LOAD_MOVES_SHARE = 0.3   # of the search's clock for the byte-hop moves when load-aware swaps follow them ...
LOAD_SEARCH_MIN_S = 30.0   # ... from this much search clock (below it the moves keep their share)
LOAD_SCORE_S = 4.0     # the searched wiring's scoring clock at most when they follow (they route it again)
LOAD_MIN_S = 6.0       # left of the clock for the load-aware swaps after the search (three routings)
SEED_FROM = 16         # exact solves above this many accelerators start from the search's wiring (_seeded)
BOUND_SHARE = 0.25     # of the time limit, for the LP relaxation's bound (solved once per problem)
EXACT_MIN_S = 1.0      # left of the clock after the seeding search for an exact model to run at all
LP_ROUND_SHARE = 0.5   # ... under lp-round, whose start is its rounding
SEED_SHARE = 0.2       # of the time limit, for that search
SEED_MAX_S = 60.0      # and at most this (on up to 64 accelerators its moves level off within seconds)
NET_BESIDE_MIN_S = 20.0   # the search's clock from which coupled groups get the net test beside it (_NetBeside)
NET_BESIDE_FIRST = (0.3,)  # its first test's place between the bound and the best start (then it bisects)
SOLVERS = ("auto", "milp", "cpsat", "lp-round", "search", "expander", "torus", "topoopt", "greedy")
BASELINES = ("expander", "torus", "topoopt", "greedy")


def _say(params: SolveParams, message: str) -> None:
    if params.progress:
        params.progress(message)


def _result(problem: WiringProblem, solver: str, wiring: Wiring, params: SolveParams, t0: float,
            limit: Limit = Limit.NONE, extra: dict | None = None, score_s: float | None = None,
            score: tuple[float, str] | None = None, quick_bound: bool = False) -> SolveResult:
    """The answer for `wiring`, scored (unless `score` already holds its objective and routing) and bounded.
    The bound comes first and its time is taken from `score_s` (it does not depend on the wiring; at 576
    accelerators the relay count takes 0.7 s), so the answer is ready within the clock it was given."""
    t = time.perf_counter()
    if quick_bound:         # after a Ctrl-C that may have cut the bounds' first run short: the instant one
        (bound, named), cut = instant_bound(problem), True
    else:
        bound, named, cut = final_bound(problem)
    if score is None:
        score_s = score_s if score_s is not None else max(5.0, params.time_limit_s / 3)
        objective, routing, hit = problem.score_or_quick(wiring, "best", max(0.5, score_s - (time.perf_counter() - t)))
        cut = cut or hit
    else:
        objective, routing = score
    if cut:                 # Ctrl-C while bounding or scoring: the answer stands, on the quick figures
        limit = Limit.INTERRUPT
    bound = min(bound, objective)
    extra = {**(extra or {}), "routing": routing, "bounds": named}
    gap = 0.0 if not objective else 1.0 if not np.isfinite(objective) else (objective - bound) / objective
    status = SolveStatus.OPTIMAL if gap <= params.rel_gap else SolveStatus.FEASIBLE
    if not np.isfinite(objective):
        status = SolveStatus.FEASIBLE
    limit = limit.settled(status)
    wall = time.perf_counter() - t0
    solve = {"status": status.value, "objective": objective, "bound": bound, "gap": gap, "wall_s": round(wall, 3),
             "solver": solver, "seed": params.seed, "objective_kind": problem.objective, "limit": limit.value,
             **extra}
    return SolveResult(status, objective, bound, wall, solver, "", params.seed, limit,
                       wiring.with_meta(solve=solve, instance=problem.instance), extra=extra)


def baseline_wiring(problem: WiringProblem, name: str, seed: int = 0) -> Wiring:
    """The baseline `name`'s wiring for `problem`, its fixed circuits kept: the expander and greedy are built on
    the ports they leave (:func:`baselines.around`; greedy under the direct policy gives every pair its first
    circuit first and swaps nothing after); the torus and TopoOpt-style, structures that colour themselves on
    a uniform layout, are built whole and the fixed circuits swapped in (:func:`baselines.impose`: at 576
    accelerators TopoOpt-style on the ports 8 fixed circuits leave took 128 s to colour). Built once per problem, kind
    and seed (`_BASELINES`): a solve asks for them several times (the search's starts, the exact models' starts,
    the direct policy's check), and on a 2-port layout with one switch per port TopoOpt-style took 2 s each time."""
    return _baseline_built(problem, name, seed)[0]


def _baseline_built(problem: WiringProblem, name: str, seed: int) -> tuple[Wiring, dict]:
    """(`baseline_wiring`, what its answer says beside the wiring: `structure`, where the switches did not
    hold the torus's or TopoOpt-style's circuits all, {"circuits": the structure's, "kept": those the wiring
    has}; the other circuits are its left ports paired at random)."""
    memo = _BASELINES.setdefault(problem, {})
    if (name, seed) not in memo:
        memo[(name, seed)] = _baseline_wiring(problem, name, seed)
    return memo[(name, seed)]


_BASELINES = ProblemCache(8)


def _baseline_wiring(problem: WiringProblem, name: str, seed: int) -> tuple[Wiring, dict]:
    t, lay, fixed = problem.traffic.bytes_, problem.layout, problem.fixed_circuits
    direct = problem.policy == "direct"
    if name == "expander":
        return baselines.around(fixed, lay, lambda rest: baselines.expander(rest, seed)), {}
    if name == "greedy":
        return baselines.around(fixed, lay, lambda rest: baselines.greedy(t, rest, seed, direct), join=not direct), {}
    if name == "topoopt":
        structure = baselines.topoopt_pairs(t, lay)
        w, pairs = baselines.impose(baselines.topoopt(t, lay, seed, structure=structure), fixed), structure[0]
    elif name == "torus":
        dims = baselines.torus_dims(problem.accelerators, int(lay.capacity.sum(axis=1).min()))
        w, pairs = baselines.impose(baselines.torus3d(lay, dims, seed), fixed), baselines.torus_pairs(lay, dims)
    else:
        raise InvalidInput(f"unknown baseline {name!r}; valid: {', '.join(BASELINES)}", field="solver")
    kept = baselines.pairs_held(w, pairs)
    return w, ({"structure": {"circuits": len(pairs), "kept": kept}} if kept < len(pairs) else {})


COVER_SHARE = 0.1      # of the time limit (at most COVER_MAX_S), for the direct policy's cover (direct_cover)
COVER_MAX_S = 10.0


def direct_cover(problem: WiringProblem, seed: int = 0, time_limit_s: float = COVER_MAX_S) -> tuple[Wiring | None, bool]:
    """A direct-only wiring by assignment rather than greed: every pair that exchanges bytes and holds no
    fixed circuit gets one circuit on a switch where both ends have a free port, within each switch's radix
    (CP-SAT, :func:`colouring.colour_or_proof` on the ports the fixed circuits leave), then greedy gives the
    ports left to the pairs with the most demand per circuit. Greedy places first circuits one at a time and
    can strand a pair whose only common switch it filled (7-9 accelerators on random layouts: greedy, and
    lp-round and the search starting from it, inf where the MILP proves 1.5e7 byte-hops). Returns (wiring,
    False); (None, True) when no wiring gives every pair its circuit (CP-SAT's proof); (None, False) when
    none was found in the time limit."""
    from .colouring import colour_or_proof
    fixed, lay = problem.fixed_circuits, problem.layout
    t = problem.traffic.bytes_
    have = Wiring(problem.accelerators, lay.ports, tuple(fixed), lay).adjacency()
    u, v = np.nonzero(np.triu(((t > 0) | (t.T > 0)) & (have == 0), 1))
    cover, impossible = colour_or_proof(baselines.residual(lay, fixed), list(zip(u.tolist(), v.tolist())),
                                        time_limit_s, seed, threads=1)
    if cover is None:
        return None, impossible
    held = tuple(fixed) + cover
    have = Wiring(problem.accelerators, lay.ports, held, lay).adjacency()
    return baselines.around(held, lay, lambda rest: baselines.greedy(t, rest, seed, True, have), join=False), False


def baseline(problem: WiringProblem, name: str, params: SolveParams = SolveParams()) -> SolveResult:
    """The baseline `name` (:func:`baseline_wiring`), scored and bounded."""
    t0 = time.perf_counter()
    w, said = _baseline_built(problem, name, params.seed)
    return _result(problem, name, w, params, t0, extra=said)


def _lp_share(solver: str) -> float:
    """The share of the clock for the LP relaxation (solved once per problem, its bound and lp-round's
    fractional circuits): lp-round rounds it, so gets more."""
    return LP_ROUND_SHARE if solver == "lp-round" else BOUND_SHARE


def _lp_round(problem: WiringProblem, params: SolveParams) -> Wiring:
    """Round the LP relaxation's fractional circuits to a degree-feasible multigraph that colours."""
    from .bounds import lp_relaxation_solution
    sol = lp_relaxation_solution(problem.as_time() if problem.objective in ("phases", "step") else problem,
                                 _lp_share("lp-round") * params.time_limit_s)   # solved once: the bound's
    if sol is None:
        return baselines.expander(problem.layout, params.seed)
    pairs_idx, xfrac = sol
    n = problem.accelerators
    deg_cap = problem.layout.capacity.sum(axis=1)
    deg = np.zeros(n, dtype=np.int64)
    chosen: list[tuple[int, int]] = []
    of: list[int] = []                    # the LP pair of each chosen circuit
    base = np.floor(xfrac + 1e-9).astype(np.int64)
    for e, ((a, b), k) in enumerate(zip(pairs_idx, base)):
        for _ in range(int(k)):
            if deg[a] < deg_cap[a] and deg[b] < deg_cap[b]:
                chosen.append((a, b)); of.append(e); deg[a] += 1; deg[b] += 1
    for e in np.argsort(-(xfrac - base), kind="stable"):   # largest remainders first
        a, b = pairs_idx[e]
        if xfrac[e] - base[e] > 1e-6 and deg[a] < deg_cap[a] and deg[b] < deg_cap[b]:
            chosen.append((a, b)); of.append(e); deg[a] += 1; deg[b] += 1
    # where the pairs do not all colour, the most of them the switches hold, a heavier pair's first where the
    # count ties (`baselines._realized`; each weighed 1 to 1.5 by its pair's LP circuits); one pair dropped at a
    # time, each try with 64 colouring restarts, took 35 s on 22 accelerators of a scattered layout
    weight = 1 + 0.5 * xfrac[np.asarray(of, dtype=np.int64)] / max(float(np.max(xfrac, initial=0.0)), 1e-12)
    w = baselines._realized(problem.layout, chosen, params.seed, weight)
    # spare ports: pair them inside their switch so nothing stays dark
    return baselines.connect(baselines.fill_spare_ports(w, params.seed))


def _pairs_of(circuits) -> set[tuple[int, int]]:
    """The accelerator pairs (low, high) the circuits join: what the moves pin."""
    return {(min(c.a, c.b), max(c.a, c.b)) for c in circuits}


def _moves(problem: WiringProblem, params: SolveParams, jobs: list[tuple[Wiring, set | None, int]], budget: float,
           cap: int | None, beside: bool = True, optional: bool = False) -> list[tuple | None]:
    """Degree-preserving local search (`local_search.moves`) from each job's start (wiring, pinned pairs, seed),
    never moving the circuits of its pinned pairs or fixed circuits: one (wiring, hop-weighted bytes, moves
    tried, moves kept, limit) per job. A second job runs in the helper process (`Beside`) while this one runs
    the first, both on the whole `budget` seconds; without the helper (`beside` False: the other core is
    taken; or none can be had) the two run one after the other on half the clock each -- or, when the second
    is `optional` (another seed from the same start), it is dropped (None). `cap` moves in all: half each for
    two starts, all for each of two seeds. A Ctrl-C keeps the starts."""
    from .local_search import moves, moves_by
    fixed = _pairs_of(problem.fixed_circuits) if problem.fixed_circuits else set()
    jobs = [(w, (set(pin or ()) | fixed) or None, seed) for w, pin, seed in jobs]
    p, n = int(problem.layout.capacity.sum(axis=1).max()), problem.accelerators
    dense = p + p * (p - 1) >= (n - 1) / 2      # two hops can reach most pairs: optimize that, incrementally
    t = problem.traffic.bytes_
    each = cap if cap is None or optional or len(jobs) == 1 else max(1, cap // 2)
    t1 = time.perf_counter()

    def ended(w: Wiring, hop_bytes: float, tried: int, kept: int) -> tuple:
        return w, hop_bytes, tried, kept, Limit.ITERATIONS if each is not None and tried >= each else Limit.TIME

    # the hops objective is the moves' own: they stop where they meet its bound (nothing left to gain)
    target = final_bound(problem)[0] / (1 - params.rel_gap) if problem.objective == "hops" else None

    def run(job, clock: float) -> tuple:
        return ended(*moves(job[0], t, dense, clock, job[2], each, job[1], params.progress, target))

    helper = None
    if len(jobs) > 1 and beside and params.threads >= 2:
        # on the wall clock the two share (a helper that had to start first gets less of it); with a move
        # budget, on a clock of its own, so that its moves end at the same place as they would here
        w1, pin1, seed1 = jobs[1]
        helper = Beside.start(moves_by, time.time() + budget, w1, t, dense, seed1, each, pin1, target) \
            if each is None else Beside.start(moves, w1, t, dense, budget, seed1, each, pin1, None, target)
    out: list[tuple | None] = [None] * len(jobs)
    try:
        out[0] = run(jobs[0], budget if helper is not None or len(jobs) == 1 or optional else budget / 2)
        if helper is not None:
            got = helper.result()
            if got is not None:
                out[1] = ended(*got)
                _say(params, f"local search beside it ({f'seed {seed1}' if optional else 'the second start'}): "
                             f"{got[2]} moves, {got[3]} kept, hop-bytes {got[1]:.6g}")
        if len(jobs) > 1 and out[1] is None and not optional:   # no helper, or it failed: here, on what is left
            _say(params, "the second start's search follows, on the clock left")
            out[1] = run(jobs[1], max(0.0, budget - (time.perf_counter() - t1)))
    except KeyboardInterrupt:
        if helper is not None:
            helper.cancel()
        return [(w, float("inf"), 0, 0, Limit.INTERRUPT) for w, _, _ in jobs]
    return out


def _search(problem: WiringProblem, params: SolveParams, start: Wiring, name: str, t0: float,
            extra: dict | None = None, start_score: tuple[float, str] | None = None,
            pinned: set | None = None, rival: tuple | None = None, other: tuple | None = None,
            beside: bool = True) -> SolveResult:
    """Local search from `start` (never moving the circuits of `pinned` pairs); the answer is the better of the
    improved wiring and the start under the final objective (hop count is only the search's proxy), so it is
    never worse than its start (a start ranked by byte-hops alone, beyond SCORED_STARTS_MAX, is timed by ECMP
    before the answer is scored). `rival` = (name, wiring, score, MWU state): a wiring scored
    beside the search; when the searched wiring's floor (`WiringProblem.time_floor`) shows it cannot beat the
    rival, the scoring clock goes on the rival's routing instead (kimi-k2-288: the searched expander's floor is
    0.00126 s, the placed polarity graph routes in 0.00124 s and, with the 18 s more, in 0.00123 s); when the
    rival only beat the start as built (or the start was not timed) and its routing stopped on the clock, the
    searched wiring is scored on half the clock and the rival's routing goes on in the rest unless the searched
    wiring beat the rival's floor, the better answer standing (a rival routed by a converged LP gains nothing
    from more: qwen3-235b-64 with TP 8, whose searched wiring lost 0.09% on half the clock).
    `other` = (name, wiring, score, pinned pairs): a second start, searched too (relay hubs that beat `start`
    as built, or the best other start beside the coupled groups' wiring); the two are searched at once, on the
    two cores (`_moves`; one after the other on half the clock each when `beside` is False, the net test
    holding the other core), the searched pair ranked by a short routing ("auto": the exact LP up to EXACT_ROUTING_MAX
    accelerators when it ends within the clock, else MWU; a wiring the moves left as built by its exact time)
    and the better one scored (the hop-count proxy ranks them wrong: deepseek-v3-pd-96's searched expander has
    fewer byte-hops and is 14% slower than its searched hubs; on dlrm128 p = 4 the searched expander is 9%
    faster). The answer is never worse than the better start as built: 1.7 s of MWU put llama405b-tp8pp4-32's
    coupled groups' wiring at 0.0169 s (its time: 0.012304 s), behind the searched greedy start (0.0129 s).
    With no `other`, the other core searches from `start` under the next seed, and the run with fewer
    byte-hops goes on."""
    budget = max(1.0, params.time_limit_s - (time.perf_counter() - t0))
    # the rest scores the routing: MWU, and from 49 accelerators the path LP that corrects it
    share = 0.5 if problem.accelerators > EXACT_ROUTING_MAX else 0.7
    # the load-aware swaps after the moves gain more on the clock than more moves, given the time to run
    loads_next = _load_swaps_apply(problem, params) and budget >= LOAD_SEARCH_MIN_S
    if loads_next:
        share = LOAD_MOVES_SHARE
    cap = params.max_moves
    if other is None:       # and from the same start under the next seed on the other core: the fewer byte-hops
        runs2 = _moves(problem, params, [(start, pinned, params.seed), (start, pinned, params.seed + 1)],
                       budget * share, cap, beside, optional=True)
        w, _, tried, kept, limit = min((r for r in runs2 if r is not None), key=lambda r: r[1])
        if runs2[1] is not None and runs2[1][4] != Limit.INTERRUPT:
            extra = {**(extra or {}), "beside": {"seed": params.seed + 1, "moves_tried": runs2[1][2],
                                                 "moves_kept": runs2[1][3], "won": runs2[1][1] < runs2[0][1]}}
    else:
        mine = (extra or {}).get("start", "start")
        got = _moves(problem, params, [(start, pinned, params.seed), (other[1], other[3], params.seed)],
                     budget * share, cap, beside)
        runs = {mine: got[0][:1] + got[0][2:], other[0]: got[1][:1] + got[1][2:]}
        quick = max(MIN_SCORE_S, QUICK_SHARE * params.time_limit_s)
        cut, ranks = any(r[3] == Limit.INTERRUPT for r in runs.values()), {}
        built = {mine: (start, start_score), other[0]: (other[1], other[2])}
        if not cut:
            try:
                ranks, hows = {}, set()
                for k, r in runs.items():
                    ranks[k], how = problem.score(r[0], "auto", quick)
                    hows.add(how)
                    b = built[k]         # a searched wiring the moves left as built: its exact time is known
                    if b[1] is not None and np.array_equal(r[0].circuit_array, b[0].circuit_array):
                        ranks[k] = min(ranks[k], b[1][0])
                _say(params, "searched " + ", ".join(f"{a} {v:.6g} s" for a, v in ranks.items())
                     + f" ({'/'.join(sorted(hows))} routing, {quick:.1f} s each)")
            except KeyboardInterrupt:
                cut = True
        if cut:                 # Ctrl-C: the second start as it stands (it beat the first as built)
            runs[other[0]] = (*runs.get(other[0], (other[1], 0, 0))[:3], Limit.INTERRUPT)
            ranks = {mine: 1.0, other[0]: 0.0}
        best = min(ranks, key=ranks.get)
        w, tried, kept, limit = runs[best]
        # the answer is never worse than the better start as built (the ranking's short routing may misjudge)
        fallback = min((k for k in built if built[k][1] is not None), key=lambda k: built[k][1][0], default=best)
        start, start_score = built[fallback]
        searched = {k: {"ranked_s": None if cut else v, "moves_tried": runs[k][1], "moves_kept": runs[k][2]}
                    for k, v in ranks.items()}
        extra = {**(extra or {}), "start": best, "searched": searched}
    score_s = max(1.0, params.time_limit_s - (time.perf_counter() - t0))   # the scoring ends on the clock
    moved = {**(extra or {}), "moves_tried": tried, "moves_kept": kept}     # the searched wiring's extras
    floor = 0.0          # the searched wiring's, looked at only when a rival beats the start
    if rival is not None and (start_score is None or start_score[0] >= rival[2][0]):
        floor = problem.time_floor(w)
    if rival is not None and floor >= rival[2][0]:
        _say(params, f"the searched wiring cannot beat {rival[0]} (its floor {floor:.6g} s): routing {rival[0]} on "
                     f"({score_s:.0f} s)")
        return _rival_on(problem, params, name, rival, t0, limit, score_s)
    as_built = None
    if start_score is None and not np.array_equal(w.circuit_array, start.circuit_array):
        # a start ranked by byte-hops alone (beyond SCORED_STARTS_MAX) was never timed: the start as built, by
        # ECMP (0.2 s at 576 accelerators, off the scoring's clock), so that a routing the clock cuts short
        # cannot leave the answer worse than it (moe5t-576 at 5 s: a few moves off the near-Moore wiring, MWU's
        # 5 rounds at 16% above the bound, where the wiring as built is 7.1% above it under ECMP)
        t1 = time.perf_counter()
        try:
            as_built = problem.score(start, "ecmp")
        except KeyboardInterrupt:      # the searched wiring as it stands, timed by ECMP
            return _result(problem, name, w, params, t0, Limit.INTERRUPT, moved,
                           score=problem.score(w, "ecmp"), quick_bound=True)
        score_s = max(1.0, score_s - (time.perf_counter() - t1))
    # a rival that beat the start as built (or beside a start ranked by hop-bytes alone, beyond 256
    # accelerators) whose routing stopped on the clock (`_unsettled`: MWU's answer, a PDLP path LP short of
    # convergence, or ECMP's ahead of a short MWU) and can go on: the searched wiring is scored on half the
    # clock, and the rival's routing goes on in the rest unless the searched wiring beat its floor (kimi-k2-288
    # with TP 4, phases, 60 s: the relay V's 0.000541 s after their 7.5 s beside the search, 0.000532 s after
    # the rest)
    halve = rival is not None and (start_score is None or start_score[0] >= rival[2][0]) and _resumable(rival[3]) \
        and _unsettled(rival[2])
    rival_floor = problem.time_floor(rival[1]) if halve else 0.0
    if halve and rival_floor < floor:
        # the rival's floor is the lower: its routing goes on first, on half the clock (kimi-k2-288 at 5 s: the
        # near-Moore wiring at 0.00162 s by ECMP, its 0.5 s of MWU behind, floor 0.00117 s, against the searched
        # expander's floor 0.00127 s; the searched wiring took the clock first and answered 0.00144 s, 20% above
        # the bound); the searched wiring is scored on the rest only when its floor is below the rival's new time
        _say(params, f"{rival[0]} has the lower floor ({rival_floor:.6g} s, the searched wiring's {floor:.6g} s): "
                     f"routing {rival[0]} on first ({score_s / 2:.0f} s)")
        first = _rival_on(problem, params, name, rival, t0, limit, score_s / 2)
        left = params.time_limit_s - (time.perf_counter() - t0)
        if first.limit == Limit.INTERRUPT or first.objective <= floor:
            now = (first.objective, first.extra["routing"])
            if first.limit != Limit.INTERRUPT and left >= MIN_SCORE_S and _unsettled(now):
                first = _rival_on(problem, params, name, (*rival[:2], now, rival[3]), t0, limit, left)
            res = first
        else:
            _say(params, f"scoring the searched wiring (best routing, {max(MIN_SCORE_S, left):.0f} s)")
            res = _result(problem, name, w, params, t0, limit, moved, score_s=max(MIN_SCORE_S, left))
            if res.objective >= first.objective:     # after a Ctrl-C while scoring too, the better of the two
                res = first if res.limit != Limit.INTERRUPT else _result(
                    problem, name, rival[1], params, t0, Limit.INTERRUPT, {"start": rival[0], "moves_tried": 0,
                    "moves_kept": 0}, score=(first.objective, first.extra["routing"]))
        halve = False                  # the better of the two stands, against the start below
    else:
        if loads_next and rival is None:
            # the load-aware swaps route it again: the path LP is within 1e-5 of the optimum in 1.6 s on dlrm128
            # at 4 ports, where the whole clock (25 s at 60) took 9 s
            score_s = min(score_s, LOAD_SCORE_S)
        _say(params, f"scoring the searched wiring (best routing, {score_s / (2 if halve else 1):.0f} s)")
        res = _result(problem, name, w, params, t0, limit, moved, score_s=score_s / 2 if halve else score_s)
    if halve and res.limit != Limit.INTERRUPT:
        left = params.time_limit_s - (time.perf_counter() - t0)
        if res.objective >= rival[2][0]:
            _say(params, f"{rival[0]} still beats it ({res.objective:.6g} s): routing {rival[0]} on "
                         f"({max(1.0, left):.0f} s)")
            return _rival_on(problem, params, name, rival, t0, limit, max(1.0, left))
        if res.objective > rival_floor and left >= MIN_SCORE_S:     # only the clock left here, no least clock
            # the searched wiring beat the rival's score, not its floor: the rival's routing goes on in the clock
            # left (otherwise unused), and the better answer stands
            _say(params, f"{rival[0]} may still beat it (its floor {rival_floor:.6g} s): routing {rival[0]} on "
                         f"({left:.0f} s)")
            routed = _rival_on(problem, params, name, rival, t0, limit, left)
            if routed.objective < res.objective:
                res = routed
            elif routed.limit == Limit.INTERRUPT:      # Ctrl-C while routing the rival: the searched answer stands
                res = _result(problem, name, w, params, t0, Limit.INTERRUPT, moved,
                              score=(res.objective, res.extra["routing"]))
    if start_score is None and as_built is not None and res.limit != Limit.INTERRUPT:
        start_score = as_built
    if start_score is not None and start_score[0] < res.objective:
        kept_as = {} if other is None else {"start": fallback}
        res = _result(problem, name, start, params, t0, res.limit, {**moved, **kept_as, "kept_start": True},
                      score=start_score)
    return _load_swaps(problem, params, name, res, t0)


def _load_swaps_apply(problem: WiringProblem, params: SolveParams) -> bool:
    """Whether `_load_swaps` may run on `problem` (before the answer and the clock are known): the time
    objective over multi-hop routes, up to SCORED_STARTS_MAX accelerators, on sparse wirings (two hops reach
    few pairs: there the byte-hop moves leave the routing 3-4% above the wiring's floor, dlrm128 at 4 ports;
    on deepseek-v3-pd-96's 18 ports, 60 s of swaps gained 0.03%), and no `--max-moves` (a run bounded by
    moves is repeatable; the swaps stop on the clock)."""
    p, n = int(problem.layout.capacity.sum(axis=1).max()), problem.accelerators
    return problem.objective == "time" and problem.policy != "direct" and params.max_moves is None \
        and n <= SCORED_STARTS_MAX and p + p * (p - 1) < (n - 1) / 2


def _load_swaps(problem: WiringProblem, params: SolveParams, name: str, res: SolveResult, t0: float) -> SolveResult:
    """`res` after load-aware swaps (`load_search.improve_load`) on the clock left, where they apply
    (`_load_swaps_apply`, up to PATH_LP_IPM_MAX_LINKS links: the path LP by interior point, whose duals rank the
    swaps), on an answer short of its bound with LOAD_MIN_S left. Only fixed circuits stay put: the
    search's pinned ones (relay hubs) are pinned because byte-hops misjudge them, and a swap here is kept on
    its routed time."""
    from synth.routing import PATH_LP_IPM_MAX_LINKS

    from .load_search import improve_load
    left = params.time_limit_s - (time.perf_counter() - t0)
    if not _load_swaps_apply(problem, params) or res.limit == Limit.INTERRUPT or res.status == SolveStatus.OPTIMAL \
            or res.artifact is None or not np.isfinite(res.objective) or left < LOAD_MIN_S \
            or 2 * np.count_nonzero(np.triu(res.artifact.adjacency(), 1)) > PATH_LP_IPM_MAX_LINKS:
        return res
    fixed = _pairs_of(problem.fixed_circuits) if problem.fixed_circuits else None
    _say(params, f"load-aware swaps on the clock left ({left:.0f} s)")
    w, t, how, routed, kept, cut = improve_load(problem, res.artifact, res.objective, t0 + params.time_limit_s,
                                                params.seed, fixed, params.progress)
    extra = {k: v for k, v in res.extra.items() if k not in ("routing", "bounds")}
    extra["load_swaps"] = {"routed": routed, "kept": kept}
    _say(params, f"load-aware swaps: done, {routed} routed, {kept} kept, {t:.6g} s")
    # `how` is empty when no routing here beat the answer's (w is then the answer's wiring)
    return _result(problem, name, w, params, t0, Limit.INTERRUPT if cut else Limit.TIME if kept else res.limit,
                   extra, score=(t, how) if how else (res.objective, res.extra["routing"]))


def _rival(problem: WiringProblem, aside: dict[str, Wiring], scores: dict[str, tuple[float, str]],
           states: dict[str, dict]) -> tuple:
    """`_search`'s rival among the wirings scored beside it: (name, wiring, score, MWU state) of the fastest as
    scored, unless others within RIVAL_CLOSE of it also had their routing stop on the clock: then the lowest
    floor of those, whose routing goes on (kimi-k2-288 with TP 4 under phases, 60 s: the placed near-Moore
    wiring scored 0.000548743 s and the relay V's 0.000552034 s, floors 0.000458 and 0.000427 s; routed 25 s,
    0.000546 and 0.000528 s; the answer was the near-Moore wiring, 0.000546 s, where the V's give 0.000533)."""
    k = min(scores, key=lambda a: scores[a][0])
    near = [a for a in scores if _unsettled(scores[a]) and _resumable(states[a])
            and scores[a][0] <= scores[k][0] * (1 + RIVAL_CLOSE)]
    if k in near and len(near) > 1:
        k = min(near, key=lambda a: problem.time_floor(aside[a]))
    return k, aside[k], scores[k], states[k]


def _unsettled(score: tuple[float, str]) -> bool:
    """Whether a wiring's (time, routing) came from a routing that stopped on the clock: MWU's answer, a PDLP
    path LP short of convergence, or ECMP's where the multi-path routing after it had not caught up yet
    (kimi-k2-288 at 5 s: the near-Moore wiring's 0.5 s of MWU behind its ECMP, 0.00162 s; routed on, 0.0012 s)."""
    return "mwu (" in score[1] or "unconverged" in score[1] or \
        any(part.startswith("ecmp") for part in score[1].split(", "))     # under phases, one routing per phase


def _resumable(state: dict | None) -> bool:
    """Whether a wiring's score left an MWU run (`WiringProblem.score`'s `resume`) that a later call goes on
    with: under phases, one per phase."""
    return bool(state) and ("run" in state or any(isinstance(v, dict) and "run" in v for v in state.values()))


def _rival_on(problem: WiringProblem, params: SolveParams, name: str, rival: tuple, t0: float, limit: Limit,
              clock: float) -> SolveResult:
    """The answer of `_search`'s rival (name, wiring, score, MWU state), its routing gone on for `clock` seconds
    where it can (the better score stands; Ctrl-C keeps the one in hand)."""
    other, wiring, score, state = rival
    if _resumable(state):
        try:
            more = problem.score(wiring, "best", clock, resume=state)
            score = more if more[0] < score[0] else score
        except KeyboardInterrupt:
            limit = Limit.INTERRUPT
    return _result(problem, name, wiring, params, t0, limit, {"start": other, "moves_tried": 0, "moves_kept": 0},
                   score=score)


class _NetBeside:
    """The net test of coupled groups (`solvers.stages.groups_bound`) in a thread beside the search, for the
    answer's bound: HiGHS releases the GIL, and up to EXACT_ROUTING_MAX accelerators the search and its scoring
    keep one core busy. Its first test NET_BESIDE_FIRST of the way from the bound to the best start (near the
    best a test takes minutes), then bisecting, until the clock's end. llama405b-tp8pp4-32 (four TP groups of
    8), 60 s: gap 1.14% (the relay count) -> 0.10% (four tests, 5-10 s each); 300 s: 0.026%, the net test's root."""

    def __init__(self, ug, lo: float, hi: float, deadline: float, rel_gap: float, say) -> None:
        import threading
        from .stages import Live
        self.live, self.out, self.say, self.done = Live(), None, say, threading.Event()
        threading.Thread(target=self._run, args=(ug, lo, hi, deadline, rel_gap), daemon=True).start()

    def _run(self, ug, lo: float, hi: float, deadline: float, rel_gap: float) -> None:
        from .stages import closed_bound, groups_bound
        tests: list = []
        try:
            self.out = groups_bound(ug, lo, hi, deadline, 1, rel_gap, self.say, NET_BESIDE_FIRST, self.live, tests)
        except BaseException:      # stopped (Ctrl-C) or a model failed: the tests that ended stand
            self.out = (closed_bound(tests, lo), tests)
        finally:
            self.done.set()

    @classmethod
    def start(cls, problem: WiringProblem, params: SolveParams, t0: float, best: float | None) -> "_NetBeside | None":
        from .exact import _uniform_groups
        if best is None or params.threads < 2 or problem.accelerators > EXACT_ROUTING_MAX:
            return None       # (beyond EXACT_ROUTING_MAX, MWU's helper process takes the other core)
        ug = _uniform_groups(problem, params, t0, NET_BESIDE_MIN_S)
        lo = best_bound(problem)[0]
        if ug is None or not best > lo * (1 + params.rel_gap):
            return None
        _say(params, f"net test of the {len(ug.groups)} coupled groups beside the search, from {lo:.6g} s")
        return cls(ug, lo, best, t0 + params.time_limit_s - 1.0, params.rel_gap, lambda msg: _say(params, msg))

    def stop(self) -> None:
        self.live.cancel()
        self.done.wait()     # not Thread.join: a Ctrl-C inside join leaves CPython 3.11 taking the thread for ended

    def bounded(self, res: SolveResult, params: SolveParams) -> SolveResult:
        """`res` once the net test has ended (its bisection met, or its deadline, the clock's end: the time
        limit is spent on the proof when the search ends early; Ctrl-C stops it), with its bound when that is
        better (named "groups_net"; its tests in the solve block's "groups_net" entry). An answer the search
        ended on Ctrl-C stops it at once (the test running answers with its dual bound)."""
        from dataclasses import replace
        if res.limit == Limit.INTERRUPT:       # Ctrl-C that the search took: no waiting for the proof
            self.stop()
        cut = False
        try:
            self.done.wait()
        except KeyboardInterrupt:      # the answer stands, with what the tests so far proved
            self.stop()
            cut = True
        if self.out is None or res.objective is None or res.artifact is None:
            return res
        b, tests = self.out
        bound = max(min(b, res.objective), res.bound or 0.0)
        gap = (res.objective - bound) / res.objective
        status = SolveStatus.OPTIMAL if gap <= params.rel_gap else res.status
        limit = (Limit.INTERRUPT if cut else res.limit).settled(status)
        extra = dict(res.extra)
        if tests:
            extra.update(bounds={**res.extra.get("bounds", {}), "groups_net": b},
                         groups_net=[{k: v for k, v in t.items() if k != "status"} for t in tests])
        solve = {**res.artifact.solve, "status": status.value, "bound": bound, "gap": gap, "limit": limit.value,
                 **{k: extra[k] for k in ("bounds", "groups_net") if k in extra}}
        return replace(res, status=status, bound=bound, limit=limit, extra=extra,
                       artifact=res.artifact.with_meta(solve=solve))


def _serves(problem: WiringProblem, wiring: Wiring) -> bool:
    """Does every pair that exchanges bytes have a path in `wiring` (under the direct policy, a circuit)?"""
    from scipy.sparse.csgraph import connected_components
    t = problem.traffic.bytes_
    if problem.policy == "direct":
        adj = wiring.adjacency()
        return not ((t > 0) & (adj + adj.T == 0)).any()
    _, label = connected_components(wiring.adjacency() > 0, directed=False)
    return not ((t > 0) & (label[:, None] != label[None, :])).any()


def _near_uniform(t: np.ndarray) -> bool:
    """Is the demand a near-uniform all-to-all (off-diagonal bytes within UNIFORM_CV of their mean)? Only
    there do the geometric wirings start the search (moe5t-576: 0.7% above the Moore levels, searched to
    about 1%); on skewed demand they are offered beside it, unsearched: on kimi-k2-288 (a third of the
    accelerators send and receive 1.3-1.6 times the bytes) the polarity graph already has every pair within
    two hops, so the hop proxy only walks its plateau and breaks the structure (0.00162 s after the search),
    while as built it routes in 0.00125 s and placed (`structured.placed`) in 0.00124 s, against 0.00131 s
    from the searched expander."""
    off = t[~np.eye(t.shape[0], dtype=bool)]
    return bool(off.size and off.mean() > 0 and off.std() <= UNIFORM_CV * off.mean())


def _scored_start(problem: WiringProblem, params: SolveParams, candidates: dict[str, Wiring]):
    """The best start: by the final objective when scoring is cheap (up to 256 accelerators), else by
    hop-weighted bytes. Returns (name, wiring, score or None, {name: score} of every start scored)."""
    if problem.accelerators <= SCORED_STARTS_MAX:
        # each on a tenth of the clock, all of them on at most START_SHARE of it (5 s for three starts on 57
        # accelerators took 7.5 s when each had 2 s at least); in the order of their floors (time_floor: no
        # routing is faster), and a start whose floor is no better than a time in hand is not scored
        # (dlrm128 p = 4: greedy's floor is 5x the expander's time, and scoring it took 6 s of the search's)
        each = max(MIN_SCORE_S, min(params.time_limit_s / 10, START_SHARE * params.time_limit_s / len(candidates)))
        floors = {k: problem.time_floor(w) for k, w in candidates.items()}
        scored: dict[str, tuple[float, str]] = {}
        for k in sorted(candidates, key=floors.get):
            if scored and floors[k] >= min(v[0] for v in scored.values()):
                continue
            scored[k] = problem.score(candidates[k], time_limit_s=each)
        best = min(scored, key=lambda k: scored[k][0])
        skipped = [k for k in candidates if k not in scored]
        _say(params, "starts: " + ", ".join(f"{k} {v[0]:.6g} s" for k, v in scored.items())
             + (f" ({', '.join(skipped)}: floor above that)" if skipped else "") + f"; searching from {best}")
        return best, candidates[best], scored[best], scored
    from .local_search import _hop_bytes
    t = problem.traffic.bytes_
    vals = {k: _hop_bytes(problem.accelerators, w.circuit_array[:, 1], w.circuit_array[:, 3], t + t.T,
                          dist=False)[0] / 2 for k, w in candidates.items()}
    best = min(vals, key=vals.get)
    _say(params, "starts (hop-bytes): " + ", ".join(f"{k} {v:.6g}" for k, v in vals.items()) + f"; searching from {best}")
    return best, candidates[best], None, {}


def identical_groups(problem: WiringProblem) -> list[np.ndarray] | None:
    """The accelerators of each connected component of the demand graph, when there are several and all
    carry the same demand matrix (in accelerator order) and the same port layout: parallel groups (TP or
    DP replicas) that can be wired once and replicated. None otherwise."""
    from scipy.sparse.csgraph import connected_components
    t = problem.demand_colours()      # every phase's demand must repeat, not just the total
    if problem.fixed_circuits:
        return None
    k, label = connected_components((t + t.T) > 0, directed=False)
    if k < 2:
        return None
    groups = [np.flatnonzero(label == c) for c in range(k)]
    first = groups[0]
    sop = problem.layout.switch_of_port
    for g in groups[1:]:
        if len(g) != len(first) or not np.array_equal(t[np.ix_(g, g)], t[np.ix_(first, first)]) \
                or not np.array_equal(sop[g], sop[first]):
            return None
    return groups if len(first) > 1 else None


def _replicated(problem: WiringProblem, solver: str, params: SolveParams, groups: list[np.ndarray],
                t0: float, share: float = 1.0) -> SolveResult | None:
    """Wire one group and copy its circuits (same switches and ports) onto every other group, within the clock
    left since `t0` (the whole's bound came first). The groups share no circuit, so the whole routes as each
    group does: its time and phases objectives are the group's, its byte-hops the group's times the groups',
    and only the step objective (the evaluator's model of the whole deployment) is scored again, on
    REPLICA_SCORE_SHARE of the clock held back from the group's solve (moe5t on 1,152 accelerators, two EP
    groups of 576, 60 s: 82.6 s when the group had the whole clock and the copy was routed again). `share`:
    of the clock left, for the group (an exact solver then goes on to the whole)."""
    from dataclasses import replace

    from synth.model import Circuit, OCSLayout
    from synth.verify import wiring_violations
    g0 = groups[0]
    lay = problem.layout
    sub = problem.restricted(g0, OCSLayout(lay.switch_of_port[g0], lay.switch_radix))
    left = params.time_limit_s - (time.perf_counter() - t0)
    score_s = max(2.0, REPLICA_SCORE_SHARE * left) if problem.objective == "step" else 0.0
    res = wire(sub, solver, replace(params, time_limit_s=max(1.0, share * left - score_s)))
    if res.artifact is None:
        return None
    circuits = tuple(Circuit(c.switch, int(g[c.a]), c.a_port, int(g[c.b]), c.b_port)
                     for g in groups for c in res.artifact.circuits)
    w = Wiring(problem.accelerators, problem.ports, circuits, lay)
    if wiring_violations(w):      # e.g. a switch radix the copies exceed: solve the whole instead
        return None
    extra = {**{k: v for k, v in res.extra.items() if k not in ("bounds", "routing")},
             "symmetry": f"{len(groups)} identical groups of {len(g0)} accelerators, wired once",
             "group_solver": res.solver, "group_status": res.status.value}
    score = None
    if problem.objective != "step" and res.objective is not None and np.isfinite(res.objective):
        times = len(groups) if problem.objective == "hops" else 1
        score = (res.objective * times, f"{res.extra.get('routing', 'best')} (one group's, copied)")
    # The status comes from the whole problem's bound: a group's proven optimum is optimal among wirings
    # without circuits between groups, not necessarily overall (another group's accelerators could relay).
    return _result(problem, res.solver, w, params, t0, res.limit, extra, score_s=score_s, score=score)


def _expander_instead(problem: WiringProblem, params: SolveParams, t0: float, solver: str, version: str,
                      limit: Limit, message: str, solver_bound: float | None = None) -> SolveResult:
    """The expander baseline as `solver`'s answer when it has none worth returning (FEASIBLE, marked as the
    incumbent); a bound the solver proved still holds."""
    inc = baseline(problem, "expander", params)
    bound = min(inc.objective, max(inc.bound or 0.0, solver_bound or 0.0))
    solve = {**inc.artifact.solve, "solver": solver, "status": "FEASIBLE", "limit": limit.value,
             "incumbent": "expander", "bound": bound, "gap": (inc.objective - bound) / inc.objective}
    return SolveResult(SolveStatus.FEASIBLE, inc.objective, bound, time.perf_counter() - t0, solver, version,
                       params.seed, limit, inc.artifact.with_meta(solve=solve), message=message, extra=inc.extra)


def _better_start(start: SolveResult, run: SolveResult, params: SolveParams, t0: float) -> SolveResult:
    """`start` (a construction the run began from: coupled groups, or the search's wiring for an exact
    solver) when it beat the run's answer (e.g. lp-round does not take starts, and an exact solver scoring
    the start in less time may route it worse): with the run's limit, the better of both bounds and, under
    "run", what the run ended with (the run's named bounds and net tests join the start's)."""
    from dataclasses import replace
    bound = min(start.objective, max(start.bound or 0.0, run.bound or 0.0))
    gap = (start.objective - bound) / start.objective if start.objective else 0.0
    status = SolveStatus.OPTIMAL if gap <= params.rel_gap else SolveStatus.FEASIBLE
    wall = time.perf_counter() - t0
    extra = {**start.extra, "bounds": {**start.extra.get("bounds", {}), **run.extra.get("bounds", {})},
             **{k: run.extra[k] for k in ("groups_net",) if k in run.extra}}
    solve = {**start.artifact.solve, "status": status.value, "bound": bound, "gap": gap, "limit": run.limit.value,
             "wall_s": round(wall, 3), **{k: extra[k] for k in ("bounds", "groups_net") if k in extra},
             "run": {"solver": run.solver, "status": run.status.value,
                     "objective": run.objective if run.objective is not None and np.isfinite(run.objective) else None,
                     "rounds": len(run.extra.get("rounds", ()))}}    # what the run itself ended with
    return replace(start, status=status, bound=bound, limit=run.limit, wall_s=wall, extra=extra,
                   artifact=start.artifact.with_meta(solve=solve))


def _step_by_phases(problem: WiringProblem, params: SolveParams, t0: float) -> SolveResult:
    """`auto` on the step objective up to 16 accelerators: the exact model of its communication (the phases
    objective, `auto` = the MILP) on most of the time, its wiring then timed by the evaluator (what the
    wiring changes in the step is its communication; the search's hop proxy misses what the phases see:
    llama405b-tp8pp2-16, 30 s: 37.2698 ms this way, 37.2868 ms by the search)."""
    from dataclasses import replace

    from synth.workload import step_phases
    proxy = replace(problem, objective="phases", phases=step_phases(problem.workload), workload=None, fibre_fit=None)
    score_s = min(30.0, params.time_limit_s / 4)
    res = wire(proxy, "auto", replace(params, time_limit_s=max(1.0, params.time_limit_s - score_s)))
    return _result(problem, res.solver, res.artifact, params, t0, res.limit,
                   {"proxy": f"phases objective ({res.status.value}, {res.objective:.6g} s)"})


def _seeded(problem: WiringProblem) -> bool:
    """Does an exact solve of `problem` start from the search's wiring? Above SEED_FROM accelerators on the
    time, phases and hops objectives (the exact models there take their first wiring from the best start): at 64
    the model alone takes most of a minute's limit and the quick baselines were the answer (qwen3-235b-64,
    60 s: gap 75% against the search's 0.8%); on 20 accelerators in TP groups of 4 beside an all-to-all
    (phases, 15 s) the coupled groups' wiring was 0.000832 s where the search reaches 0.000512 s. The search
    keeps fixed circuits (its starts are built around them, its moves leave them be). On the hops objective
    too: 20 accelerators, random demand, 4 ports, 15 s: milp 2.33e8 byte-hops, cpsat 2.23e8, the search 1.81e8."""
    return problem.accelerators > SEED_FROM and problem.objective in ("time", "phases", "hops") \
        and problem.policy != "direct"


def _search_from(problem: WiringProblem, params: SolveParams, t0: float, shape: WiringProblem,
                 start: Wiring | None, start_name: str = "coupled groups") -> SolveResult:
    """`search`: the best quick start (baselines, the geometric and heavy-pairs constructions, and `start`,
    the coupled groups' wiring or the direct policy's cover when there is one), improved by local search;
    relay hubs and, on skewed demand, the placed near-Moore wiring are scored beside it."""
    cands: dict[str, Wiring] = {}
    try:
        name, begin, score, scored, heavy, aside, aside_scores, states = _prepare(problem, params, shape, start,
                                                                                  cands, start_name)
    except KeyboardInterrupt:
        # Ctrl-C before the search began (bounds, starts, scoring them): the best start built so far, timed by
        # ECMP's routing (a second at most), rather than nothing
        cands = cands or {"expander": baseline_wiring(problem, "expander", params.seed)}
        if start is not None:
            cands[start_name] = baselines.impose(start, problem.fixed_circuits)
        return _ecmp_answer(problem, "search", cands, params, t0, "Ctrl-C before the search",
                            lambda k: {"start": k, "moves_tried": 0, "moves_kept": 0})
    net = _NetBeside.start(problem, params, t0, min([score[0]] + [sc[0] for sc in aside_scores.values()])
                           if score is not None else None)
    try:
        res = _searched(problem, params, t0, name, begin, score, heavy, aside, aside_scores, states, start_name,
                        cands, scored, beside=net is None)
    except BaseException:
        if net is not None:
            net.stop()
        raise
    return res if net is None else net.bounded(res, params)


def _placed_heavy(problem: WiringProblem, name: str) -> bool:
    """Whether start `name` is the heavy pairs placed by a model on switches that bind
    (`structured.on_switches`): searched with the best other start beside it, since its pinned pairs hold the
    moves back (45 accelerators of a scattered layout, two phases, 10 s: 0.00208 s from it, 0.00166 s from
    TopoOpt-style)."""
    from .bounds import switches_bind
    return name == "heavy pairs" and switches_bind(problem.layout)


def _best_other(name: str, cands: dict[str, Wiring], scored: dict) -> tuple:
    """The best scored start but `name`, as `_search`'s `other`: (name, wiring, score, no pinned pairs)."""
    k = min((a for a in scored if a != name), key=lambda a: scored[a][0])
    return k, cands[k], scored[k], None


def _proven_start(problem: WiringProblem, params: SolveParams, t0: float, solver: str, name: str, start: Wiring,
                  score: tuple[float, str] | None) -> SolveResult | None:
    """The answer `start` as built when its score meets the bound (proven: nothing for the moves to win), else
    None. A ring demand on split planes, 30 s: the search spent 21 s of moves on an optimal start, lp-round
    11-14 s of 20."""
    if score is None or score[0] * (1 - params.rel_gap) > final_bound(problem)[0]:
        return None
    res = _result(problem, solver, start, params, t0, Limit.NONE, {"start": name, "moves_tried": 0, "moves_kept": 0},
                  score=score)
    return res if res.status == SolveStatus.OPTIMAL else None


def _searched(problem: WiringProblem, params: SolveParams, t0: float, name: str, begin: Wiring, score, heavy,
              aside: dict, aside_scores: dict, states: dict, start_name: str, cands: dict, scored: dict,
              beside: bool = True) -> SolveResult:
    """`_search_from` after its starts: the search from the best (and beside it the relay hubs or the best
    other start), the wirings scored aside when they are better."""
    rival, pinned, other = None, heavy[1] if name == "heavy pairs" else None, None
    hubs = aside_scores.get("relay hubs")
    if hubs is not None and score is not None and hubs[0] < score[0]:
        # the hubs beat every start as built: searched too, their circuits pinned (the moves rewire the busy
        # accelerators' own circuits; unpinned, the hop-count proxy moves hub circuits onto busy pairs).
        # deepseek-v3-pd-96, 60 s: 0.0038194 -> 0.0038001 s (its searched expander: 0.00427 s). So also where
        # the placed near-Moore wiring beat them as built, and stays the rival (40 accelerators on 6 ports, 8 of
        # them idle: 0.00034302 s as built, the searched hubs 0.00034284 s)
        hub = hub_mask(problem.traffic.bytes_)
        other = ("relay hubs", aside["relay hubs"], hubs,
                 _pairs_of(c for c in aside["relay hubs"].circuits if hub[c.a] or hub[c.b]))
        _say(params, f"relay hubs beat the starts: searching from {name} and from them ({len(other[3])} hub pairs "
                     "pinned)")
    rest = {k: v for k, v in aside_scores.items() if other is None or k != "relay hubs"}
    if rest:
        rival = _rival(problem, aside, rest, states)
    if other is None and (name == start_name == "coupled groups" or _placed_heavy(problem, name)) and len(scored) > 1:
        # its groups are each wired whole, which the moves rarely improve: the best other start is searched
        # beside it. TP groups of 4 beside an all-to-all on 20 accelerators (phases, 8 s, 60 moves): the coupled
        # groups' wiring starts at 0.000325 s and stays there, TopoOpt-style's searched reaches 0.000304 s.
        # So the heavy pairs placed on split planes, whose pinned circuits the moves cannot touch
        other = _best_other(name, cands, scored)
        _say(params, f"{name} is the best start: searching from it and from {other[0]}")
    proven = _proven_start(problem, params, t0, "search", name, begin, score)
    if proven is not None:
        return proven
    res = _search(problem, params, begin, "search", t0, {"start": name}, score, pinned, rival, other, beside)
    for k, sc in sorted(aside_scores.items(), key=lambda kv: kv[1][0]):
        if sc[0] < res.objective:
            res = _result(problem, "search", aside[k], params, t0, res.limit,
                          {"start": k, "moves_tried": 0, "moves_kept": 0}, score=sc)
    return res


def _ecmp_answer(problem: WiringProblem, solver: str, cands: dict[str, Wiring], params: SolveParams, t0: float,
                 why: str, extra) -> SolveResult:
    """After a Ctrl-C before `solver` had an answer: the best of `cands` timed by ECMP's routing (a second at
    most), with the instant bound (the bounds' first run may have been cut short); `extra(name)` its extras."""
    scored = {k: problem.score(w, "ecmp") for k, w in cands.items()}
    best = min(scored, key=lambda k: scored[k][0])
    return _result(problem, solver, cands[best], params, t0, Limit.INTERRUPT, extra(best),
                   score=(scored[best][0], f"{scored[best][1]} ({why})"), quick_bound=True)


def _prepare(problem: WiringProblem, params: SolveParams, shape: WiringProblem, start: Wiring | None, cands: dict,
             start_name: str = "coupled groups"):
    """The search's bound and starts (into `cands` as they are built, so a Ctrl-C keeps them): returns the
    start's name, wiring and score, every start's score, the heavy-pairs answer, and the wirings scored beside
    the search."""
    bound, named = best_bound(problem)      # cached: the answer's bound later costs nothing
    _say(params, f"bound {bound:.6g} s ({max(named, key=named.get)})")
    fixed, t = problem.fixed_circuits, problem.traffic.bytes_
    # greedy too, except on a near-uniform all-to-all (every pair alike: greedy's order is arbitrary, and on
    # moe5t-576 it takes 4.6 s); under the direct policy the only start built to give every demand a circuit
    uniform = _near_uniform(t)
    greedy = problem.policy == "direct" or not uniform
    # nor TopoOpt-style and the torus on a near-uniform all-to-all beyond SCORED_STARTS_MAX, where the starts are
    # ranked by byte-hops alone: they never come near the expander there (2.6x and 5.4x its byte-hops on
    # moe5t-576, 3.9x and 33x on 4,608 accelerators, where building and ranking them took 14 s)
    grid = not (uniform and problem.accelerators > SCORED_STARTS_MAX and problem.policy != "direct")
    for name in ("expander",) + (("topoopt", "torus") if grid else ()) + (("greedy",) if greedy else ()):
        cands[name] = baseline_wiring(problem, name, params.seed)
    # whole alternatives, scored exactly but not searched (`aside`): relay hubs, where the hop-count proxy
    # only moves hub circuits onto busy pairs (pd-96: 0.00391 s start, 0.00397-0.00407 s after the moves),
    # while where hubs do not pay the search from the best baseline wins (dlrm p = 4: 0.0055 s against
    # 0.0065); and the near-Moore wiring on skewed demand (_near_uniform)
    aside = {}
    # the structured constructions are built whole, the fixed circuits swapped into them
    geometric = near_moore(problem.layout, params.seed)
    whole = None if geometric is not None else _whole_planes(problem.layout)
    if whole is not None:       # planes split over smaller OCSes: built on whole planes, then as much as fits
        geometric = near_moore(whole, params.seed)
    if geometric is not None:
        if not uniform:         # where the heavier accelerators sit decides its busiest links
            geometric = placed(geometric, t, params.seed, time_limit_s=PLACE_SHARE * params.time_limit_s)
        if whole is not None:
            clock = min(MOST_S, EMBED_SHARE * params.time_limit_s)
            if uniform:         # every relabelling keeps the demand: pick one that fits the OCSes
                geometric = relabelled(geometric, problem.layout, params.seed, clock)
            geometric = embedded(geometric, problem.layout, params.seed, clock)
    if geometric is not None:
        (cands if uniform else aside)["near-moore"] = baselines.impose(geometric, fixed)
    hubs = relay_hubs(t, problem.layout, params.seed, HUB_TRIES)
    if hubs is not None:
        aside["relay hubs"] = baselines.impose(hubs, fixed)
    # under phases, a TP phase's relays over V's beside the all-to-all (solvers/vees.py): the search's moves
    # would undo the V's, so the wiring gets its own search over their ends and is scored beside it
    vees = relay_vees(problem, params.seed, VEE_SHARE * params.time_limit_s)
    if vees is not None:
        aside["relay vees"] = vees
    # scored on the other core (`Beside`) while this one builds and scores the starts: dlrm128 p = 4, 60 s, the
    # relay hubs' 13.9 s and the starts' 9.4 s one after the other took 23 s of the search's clock. Not where
    # the starts are ranked by byte-hops (a moment's work): there MWU keeps its helper for half of every block
    # (kimi-k2-288 with TP 4 under phases, 60 s: the V's 0.000555 s on the helper's one core against 0.000536-
    # 0.000541 s on two, and the answer 0.000548 s against 0.000530-0.000532)
    clock = max(MIN_SCORE_S, ASIDE_SHARE * params.time_limit_s / max(len(aside), 1))
    job = Beside.start(score_aside, problem, aside, clock) \
        if aside and params.threads >= 2 and problem.accelerators <= SCORED_STARTS_MAX else None
    try:
        heavy = heavy_pairs(shape, params.seed, HUB_TRIES, SWITCHES_SHARE * params.time_limit_s)   # None if fixed
        if heavy is not None:
            cands["heavy pairs"] = heavy[0]
        if start is not None:
            cands[start_name] = baselines.impose(start, fixed)
        name, begin, score, scored = _scored_start(problem, params, cands)
        got = job.result() if job is not None else None
    except BaseException:
        if job is not None:
            job.cancel()
        raise
    # their MWU runs (`states`), for going on later (`_search`'s rival)
    aside_scores, states = got if got is not None else score_aside(problem, aside, clock)
    for k, sc in aside_scores.items():
        _say(params, f"{k}: {sc[0]:.6g} s (scored beside the search)")
    return name, begin, score, scored, heavy, aside, aside_scores, states


def _whole_planes(layout: OCSLayout) -> OCSLayout | None:
    """The layout of one whole OCS per port (`OCSLayout.planes`) for a layout whose OCSes are smaller than its
    planes (a spread or explicit fibre plan), when every accelerator has all its ports on OCSes: what
    `near_moore` is built on before `structured.embedded` puts it on the smaller OCSes. Else None."""
    n, p = layout.accelerators, layout.ports
    if layout.is_uniform() or (layout.switch_of_port < 0).any() or p < 2:
        return None
    return OCSLayout.planes(n, p)


def score_aside(problem: WiringProblem, aside: dict[str, Wiring], clock: float) -> tuple[dict, dict]:
    """Each wiring of `aside` scored by the best routing on `clock` seconds: ({name: (time, routing)},
    {name: its MWU state, to go on from}). Module-level, so the helper process can run it (`Beside`)."""
    states: dict[str, dict] = {k: {} for k in aside}
    return {k: problem.score(w, "best", clock, resume=states[k]) for k, w in aside.items()}, states


def wire(problem: WiringProblem, solver: str = "auto", params: SolveParams = SolveParams()) -> SolveResult:
    """Choose the circuits of `problem` with `solver`; see the module doc. Whichever path answered, the
    result and its wiring's solve block agree on status and limit, and a proven answer has limit "none"; its
    wall time is the whole call's (a start the exact models chose reported the time since the model began:
    1.2 s of a 5 s solve whose seeding search took 3)."""
    from dataclasses import replace
    t0 = time.perf_counter()
    res = _wire(problem, solver, params)
    if problem.fixed_circuits and res.artifact is not None and not baselines.holds(res.artifact, problem.fixed_circuits):
        res = _fixed_kept(problem, res, params)
    if problem.fibre_fit is not None and res.artifact is not None:    # the fibre plan, chosen for this wiring
        res = replace(res, artifact=fibre_plan.fit(res.artifact, problem.fibre_fit))
    limit = res.limit.settled(res.status)
    wall = time.perf_counter() - t0
    if res.artifact is not None and res.artifact.solve:
        res = replace(res, artifact=res.artifact.with_meta(solve={**res.artifact.solve, "status": res.status.value,
                                                                  "limit": limit.value, "wall_s": round(wall, 3),
                                                                  "rel_gap": params.rel_gap}))
    return replace(res, limit=limit, wall_s=wall)


def _fixed_kept(problem: WiringProblem, res: SolveResult, params: SolveParams) -> SolveResult:
    """`res` with the fixed circuits on their own ports (:func:`baselines.impose`). The exact models hold each
    fixed circuit's pair on its switch but number the ports their own way: renumbering keeps the circuits
    between each pair, so the answer stands as it is; a wiring that had to change (a start built without the
    fixed circuits) is scored again, keeping the bound the solver proved."""
    from dataclasses import replace
    w = baselines.impose(res.artifact, problem.fixed_circuits)
    if np.array_equal(w.adjacency(), res.artifact.adjacency()):
        return replace(res, artifact=Wiring(w.accelerators, w.ports_per_accelerator, w.circuits, w.layout,
                                            res.artifact.solve, res.artifact.instance))
    again = _result(problem, res.solver, w, params, time.perf_counter(), res.limit, res.extra)
    bound = min(again.objective, max(again.bound or 0.0, res.bound or 0.0))
    if bound == again.bound:
        return again
    gap = (again.objective - bound) / again.objective if again.objective and np.isfinite(again.objective) else 1.0
    status = SolveStatus.OPTIMAL if gap <= params.rel_gap and np.isfinite(again.objective) else SolveStatus.FEASIBLE
    solve = {**again.artifact.solve, "status": status.value, "bound": bound, "gap": gap}
    return replace(again, status=status, bound=bound, artifact=again.artifact.with_meta(solve=solve))


def _one_phase(problem: WiringProblem, solver: str, params: SolveParams) -> SolveResult:
    """A ``phases`` problem with one phase, solved as the ``time`` problem of its traffic: that traffic is the
    phase's bytes times its weight, and a demand's time scales with its bytes, so every wiring has the same
    objective under both, and the time models' bounds hold. The coupled groups' group is such a problem (its
    pipeline hand-off leaves it): the phases MILP, Kelley's tangents over a time model, proved
    llama405b-tp8pp4-32's group with four ports held in 18 s, the time MILP in 0.5 s."""
    from dataclasses import replace
    res = _wire(problem.as_time(), solver, params)
    if res.artifact is None or not res.artifact.solve:
        return res
    return replace(res, artifact=res.artifact.with_meta(solve={**res.artifact.solve, "objective_kind": "phases"}))


def _auto_exact(problem: WiringProblem) -> bool:
    """Does `auto` pick the exact models (the MILP, or CP-SAT where its case split applies)?"""
    return problem.accelerators <= AUTO_EXACT_MAX and problem.objective != "step"


def _wire(problem: WiringProblem, solver: str, params: SolveParams) -> SolveResult:
    from dataclasses import replace

    from synth.verify import wiring_violations
    if solver not in SOLVERS:
        raise InvalidInput(f"unknown solver {solver!r}; valid: {', '.join(SOLVERS)}", field="solver")
    t0 = time.perf_counter()
    if problem.objective == "phases" and len(problem.phases) == 1 and solver not in BASELINES:
        return _one_phase(problem, solver, params)
    replica = None     # identical groups, wired once and copied, where an exact solver goes on to the whole
    if solver not in BASELINES:
        try:     # the bound first, its LP relaxation on a share of the clock (then cached for every answer)
            best_bound(problem, time_limit_s=_lp_share(solver) * params.time_limit_s)
        except KeyboardInterrupt:     # the expander (the LP was cut short)
            return _ecmp_answer(problem, solver, {"expander": baseline_wiring(problem, "expander", params.seed)},
                                params, t0, "Ctrl-C while bounding", lambda k: {"incumbent": k})
        groups = identical_groups(problem)
        if groups is not None:
            # an exact solver goes on to the whole instance from the copies (their ports left over could join
            # the groups and relay: a group's optimum is not the whole's proof), so the group gets a share
            from .exact import EXACT_MAX
            whole = (solver in ("milp", "cpsat") and problem.accelerators <= EXACT_MAX) or \
                (solver == "auto" and _auto_exact(problem))
            res = _replicated(problem, solver, params, groups, t0, REPLICA_SHARE if whole else 1.0)
            if res is not None and (not whole or res.status == SolveStatus.OPTIMAL or res.limit == Limit.INTERRUPT
                                    or params.time_limit_s - (time.perf_counter() - t0) < EXACT_MIN_S):
                return res
            if res is not None:      # the rest of the limit, counted from now (as after the coupled groups)
                replica = res
                params = replace(params, time_limit_s=params.time_limit_s - (time.perf_counter() - t0))
                t0 = time.perf_counter()
    if solver == "auto" and problem.objective == "step" and problem.accelerators <= AUTO_EXACT_MAX:
        return _step_by_phases(problem, params, t0)
    if solver == "auto":
        solver = "milp" if _auto_exact(problem) else "search"
        from .exact import pattern_split_runs
        if solver == "milp" and pattern_split_runs(problem, params):
            solver = "cpsat"
    # what the structure-based starts read: the step's bytes at once (phases: their weighted sum)
    shape = problem.as_time() if problem.objective in ("phases", "step") else problem
    if problem.objective == "step" and solver in ("milp", "cpsat"):
        raise InvalidInput("the step objective is the evaluator's model, which the exact models do not encode: "
                           "use --solver search or lp-round, or --objective phases (its communication part, "
                           "exact)", field="solver")
    first = replica    # the run's start: the copies, coupled groups, or for the exact models the search's wiring
    held = None        # the coupled groups' tries: held ports per group -> objective
    if solver not in BASELINES and first is None:
        from .coupled import coupled_best, coupled_groups
        groups = coupled_groups(problem)
        if groups is not None:
            from dataclasses import replace
            try:
                # the MILP wires the group itself; the others let `auto` pick (the MILP for a group of up to
                # 16: CP-SAT's time probes need many proposals, and in its share it wired llama405b-tp8pp4-32's
                # group 2.5% worse; the start only seeds CP-SAT, whose own probes then decide and bound)
                first = coupled_best(problem, "milp" if solver == "milp" else "auto",
                                     replace(params, time_limit_s=params.time_limit_s * COUPLED_SHARE), groups, wire)
            except KeyboardInterrupt:     # Ctrl-C between solves: stop here, with a wiring
                return _expander_instead(problem, params, t0, solver, "", Limit.INTERRUPT,
                                         "interrupted; returning the expander baseline")
            held = None if first is None else first.extra.get("held_tried")
            if first is not None and first.limit == Limit.INTERRUPT:   # Ctrl-C while the group was wired
                alt = _expander_instead(problem, params, t0, first.solver, "", Limit.INTERRUPT,
                                        "interrupted; returning the expander baseline")
                return first if first.objective <= alt.objective else alt
            # the rest of the limit, counted from now: t0 restarts (from the command's start, the clocks below
            # charged the coupled start's time twice: the search on llama405b-tp8pp4-32 ended at 35 s of 60)
            params = replace(params, time_limit_s=max(1.0, params.time_limit_s - (time.perf_counter() - t0)))
            t0 = time.perf_counter()
    if solver in ("milp", "cpsat") and _seeded(problem):
        from dataclasses import replace         # the search from the best start, the coupled groups' among them
        share = min(SEED_MAX_S, params.time_limit_s * SEED_SHARE)
        try:
            first = _search_from(problem, replace(params, time_limit_s=share), time.perf_counter(), shape,
                                 None if first is None else first.artifact)
        except KeyboardInterrupt:     # Ctrl-C while the starts were built: the coupled start, or the expander
            alt = _expander_instead(problem, params, t0, solver, "", Limit.INTERRUPT,
                                    "interrupted; returning the expander baseline")
            return first if first is not None and first.objective <= alt.objective else alt
        if first.limit == Limit.INTERRUPT:       # Ctrl-C during the search: its wiring is the answer
            return first
        left = params.time_limit_s - (time.perf_counter() - t0)
        if left < EXACT_MIN_S and np.isfinite(first.objective):   # the bound and the search took the clock
            limit = Limit.NONE if first.status == SolveStatus.OPTIMAL else Limit.TIME
            return replace(first, limit=limit, message=f"the clock ended before the {solver} model could run",
                           artifact=first.artifact.with_meta(solve={**first.artifact.solve, "limit": limit.value,
                                                                    "run": {"solver": solver, "status": "NOT_RUN"}}))
        params = replace(params, time_limit_s=max(EXACT_MIN_S, left))
    start = first.artifact if first is not None else None
    start_name = "coupled groups"
    cover = None      # the direct policy where greedy strands a pair: every pair's circuit by assignment
    if problem.policy == "direct" and solver not in BASELINES and \
            not _serves(problem, baseline_wiring(problem, "greedy", params.seed)):
        try:
            cover, impossible = direct_cover(problem, params.seed, min(COVER_MAX_S, COVER_SHARE * params.time_limit_s))
        except KeyboardInterrupt:
            return _expander_instead(problem, params, t0, solver, "", Limit.INTERRUPT,
                                     "interrupted; returning the expander baseline")
        if impossible:
            return SolveResult(SolveStatus.INFEASIBLE, None, None, time.perf_counter() - t0, solver, "", params.seed,
                               Limit.NONE, None, message="no direct-only wiring exists: the pairs that exchange "
                               "bytes cannot each have a circuit on a switch both ends reach (CP-SAT)")
        if start is None:
            start, start_name = cover, "direct cover"
    if solver in BASELINES:
        res = baseline(problem, solver, params)
    elif solver in ("milp", "cpsat"):
        from .exact import solve_cpsat, solve_milp
        try:
            res = (solve_milp if solver == "milp" else solve_cpsat)(problem, params, start)
            if res.status == SolveStatus.NO_SOLUTION or (res.artifact is not None and   # never nothing
                                                         not np.isfinite(res.objective)):
                res = _expander_instead(problem, params, t0, res.solver, res.solver_version, res.limit,
                                        f"{res.message or 'no usable wiring'}; returning the expander baseline",
                                        res.bound)
        except KeyboardInterrupt:   # Ctrl-C: the best wiring we can stand behind, marked as such
            res = _expander_instead(problem, params, t0, solver, "", Limit.INTERRUPT,
                                    "interrupted; returning the expander baseline")
    elif solver == "lp-round":
        other = None
        # the LP relaxation's rounding up to LP_BOUND_MAX accelerators, beyond it the relay count's integer
        # allocation where it gives pairs several circuits (heavy pairs), else the expander; circuits that a
        # pair has several of are pinned, as the hop proxy would move them away
        heavy = heavy_pairs(shape, params.seed, HUB_TRIES, SWITCHES_SHARE * params.time_limit_s) \
            if problem.accelerators > LP_BOUND_MAX else None
        if heavy is not None and problem.accelerators > SCORED_STARTS_MAX:
            start, pinned, how, score = heavy[0], heavy[1], "heavy pairs", None
        else:
            # the rounding (or the heavy pairs) beside the quick baselines (and the direct policy's cover), the
            # best one starting: lp-round is never worse than them (random instances of 7-38 accelerators, 2 s:
            # the rounding, searched, ended 1.002-1.7x the best baseline's time or byte-hops on 14 of 40; 45
            # accelerators, two phases: heavy pairs 0.00572 s, TopoOpt-style 0.00351, and lp-round from heavy
            # pairs ended at 0.00224 s where the search from TopoOpt-style found 0.00138); a wiring leaving a
            # pair apart (a switch short of radix spent on the wrong pairs) does not start, unless none serves
            if heavy is not None:
                tries = {"heavy pairs": heavy[0]}
            else:
                tries = {("lp-relaxation" if problem.accelerators <= LP_BOUND_MAX else "rounding"):
                         baselines.impose(_lp_round(problem, params), problem.fixed_circuits)}
            tries.update({k: baseline_wiring(problem, k, params.seed)
                          for k in ("greedy", "topoopt", "expander", "torus")})
            if cover is not None:
                tries["direct cover"] = cover
            served = {k: w for k, w in tries.items() if _serves(problem, w)} or {"expander": tries["expander"]}
            how, start, score, scored = _scored_start(problem, params, served)
            if how == "heavy pairs":
                pinned = heavy[1]
                if _placed_heavy(problem, how) and score is not None and len(scored) > 1:
                    other = _best_other(how, served, scored)      # as in `_searched`
            elif how == "lp-relaxation":
                iu, ju = np.nonzero(np.triu(start.adjacency() >= 2, 1))
                pinned = set(zip(iu.tolist(), ju.tolist()))
            else:
                pinned = None
        res = _proven_start(problem, params, t0, "lp-round", how, start, score) or \
            _search(problem, params, start, "lp-round", t0, {"start": how}, score, pinned, other=other)
    else:  # search: start from the best quick baseline (or the coupled groups, or the direct cover)
        res = _search_from(problem, params, t0, shape, start, start_name)
    if first is not None and res.objective is not None and first.objective < res.objective:
        res = _better_start(first, res, params, t0)
    if held and res.artifact is not None:
        from dataclasses import replace
        tries = {str(k): v for k, v in held.items()}
        res = replace(res, artifact=res.artifact.with_meta(solve={**res.artifact.solve, "coupled_held": tries}),
                      extra={**res.extra, "coupled_held": tries})
    if res.artifact is not None:
        bad = wiring_violations(res.artifact)
        if bad:  # a solver bug, never user input: refuse to return an unrealizable wiring
            raise RuntimeError(f"{res.solver} returned an invalid wiring: {bad[0].message}")
    return res
