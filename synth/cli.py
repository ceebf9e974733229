"""The `ocs-synth` command line. The only module that reads arguments, prints and chooses files; it calls
the library. Every error a user can cause prints one line naming the file and field and exits 2
(`--debug` shows the traceback)."""
from __future__ import annotations

import functools
import math
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable

import click

from . import __version__
from .errors import Infeasible, InvalidInput, SynthError
from .instance import FIBRE_PLANS
from .model import MAX_LATENCY_US

EXIT_INVALID = 1   # verify: the artifact breaks a rule
EXIT_USAGE = 2     # bad input of any kind
# `wire --time-limit` is the whole command's clock: loading the problem comes off the solver's share, and so
# does a reserve for the interpreter's start before the clock (0.5 s), verifying and writing: START_S plus
# WRAP_UP_SHARE of the limit, at most WRAP_UP_S
START_S, WRAP_UP_SHARE, WRAP_UP_S = 0.5, 0.025, 1.5


def _fail(message: str) -> None:
    click.echo(f"ocs-synth: error: {message}", err=True)
    sys.exit(EXIT_USAGE)


def handles_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn SynthError into a one-line message and exit 2 (or re-raise under --debug)."""
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = bool((ctx.find_root().obj or {}).get("debug"))
        try:
            return fn(*args, **kwargs)
        except SynthError as exc:
            if debug:
                raise
            _fail(str(exc))
        except KeyboardInterrupt:
            click.echo("ocs-synth: interrupted", err=True)
            sys.exit(130)
        except (MemoryError, RecursionError) as exc:
            if debug:
                raise
            _fail(f"{type(exc).__name__} (run with --debug for details)")
    return wrapper


def stamped(started: float) -> Callable[[str], None]:
    """Progress lines on stderr, each with the seconds since the command started."""
    return lambda msg: click.echo(f"[{time.perf_counter() - started:6.1f} s] {msg}", err=True)


def echo_json(obj: Any) -> None:
    from .formats import json_dumps
    click.echo(json_dumps(obj), nl=False)


def human_bytes(b: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(b) >= scale:
            return f"{b / scale:.3f} {unit}"
    return f"{b:.0f} B"


def parse_sets(values: tuple[str, ...]) -> dict[str, Any]:
    from .instance import parse_override
    return dict(parse_override(v) for v in values)


set_option = click.option("--set", "sets", multiple=True, metavar="KEY=VALUE",
                          help="Override an instance field, e.g. --set workload.context_tokens=1048576.")


class Real(click.ParamType):
    """A finite real number, optionally bounded below: click's FLOAT takes 'nan' and 'inf', which reached the
    solvers and the schedule models (tracebacks instead of the one-line message)."""
    name = "number"

    def __init__(self, gt: float | None = None, ge: float | None = None, le: float | None = None,
                 lt: float | None = None) -> None:
        from .schema import MAX_FLOAT
        self.gt, self.ge, self.lt = gt, ge, lt
        self.le = MAX_FLOAT if le is None else le     # 1e308 passed and overflowed in the schedule models

    def convert(self, value: Any, param: Any, ctx: Any) -> float:
        try:
            v = float(value)
        except (TypeError, ValueError):
            self.fail(f"{value!r} is not a number", param, ctx)
        if not math.isfinite(v):
            self.fail(f"must be a finite number, got {value!r}", param, ctx)
        if self.gt is not None and not v > self.gt:
            self.fail(f"must be > {self.gt:g}, got {value!r}", param, ctx)
        if self.ge is not None and not v >= self.ge:
            self.fail(f"must be >= {self.ge:g}, got {value!r}", param, ctx)
        if not v <= self.le:
            self.fail(f"must be at most {self.le:g}, got {value!r}", param, ctx)
        if self.lt is not None and not v < self.lt:
            self.fail(f"must be < {self.lt:g}, got {value!r}", param, ctx)
        return v


POSITIVE, NONNEGATIVE = Real(gt=0), Real(ge=0)
LATENCY = Real(ge=0, le=MAX_LATENCY_US)


class OneLineErrors(click.Group):
    """Click reports a usage error (unknown option, bad choice, out-of-range value) with the usage text and
    a blank line; ocs-synth keeps every bad-input message to one line naming the option, exit status 2."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        kwargs.pop("standalone_mode", None)
        try:
            code = super().main(*args, standalone_mode=False, **kwargs)
        except click.UsageError as exc:
            where = exc.ctx.command_path if exc.ctx is not None else "ocs-synth"
            click.echo(f"{where}: error: {exc.format_message()}", err=True)
            sys.exit(2)
        except click.ClickException as exc:        # e.g. a file option that cannot be opened
            click.echo(f"ocs-synth: error: {exc.format_message()}", err=True)
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("ocs-synth: interrupted", err=True)
            sys.exit(1)
        sys.exit(code if isinstance(code, int) else 0)


@click.group(cls=OneLineErrors, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ocs-synth")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """ocs-synth: design the OCS interconnect of an LLM-inference deployment.

    Instance files (TOML) describe a deployment; traffic files (.npy, .csv) are raw matrices in bytes;
    wiring files (JSON) are circuits on OCS switches. See README.md for the formats.
    """
    ctx.obj = {"debug": debug or bool(os.environ.get("OCS_SYNTH_DEBUG")), "started": time.perf_counter()}


# --------------------------------------------------------------------------------------------------
@main.command()
@click.argument("source", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str),
              help="Write the matrix to FILE.npy or FILE.csv (src,dst,bytes rows).")
@click.option("--phases", "phases_out", type=click.Path(dir_okay=False, path_type=str),
              help="Write the step's phases to FILE.toml (one .npy matrix per phase beside it), for "
                   "`wire --objective phases`.")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(0), help="Largest entries shown.")
@click.option("--context", "context_tokens", type=click.IntRange(1), help="Context length (instance only).")
@set_option
@handles_errors
def traffic(source: str, output: str | None, phases_out: str | None, as_json: bool, top: int,
            context_tokens: int | None, sets: tuple[str, ...]) -> None:
    """Summarize the traffic of one decode step of an INSTANCE (.toml), of a raw matrix (.npy/.csv) or of a
    phases file.

    Prints accelerators, total bytes per step, bytes per collective kind (per phase: bytes per execution
    and executions per step), the largest entries and the peers per accelerator (the fewest ports a
    direct-only wiring would need).
    """
    from .formats import (check_output_path, is_phases_file, load_phases_traffic, load_traffic, save_phases,
                          save_traffic)
    for out in (output, phases_out):
        if out:
            check_output_path(out)
    if phases_out and not phases_out.endswith(".toml"):
        raise InvalidInput("a phases file ends in .toml", field="--phases", source=phases_out)
    phases: tuple = ()
    if source.endswith(".toml") and not is_phases_file(source):
        from .instance import load_instance
        from .workload import build_workload, step_phases
        overrides = parse_sets(sets)
        if context_tokens:
            overrides["workload.context_tokens"] = context_tokens
        wl = build_workload(load_instance(source, overrides))
        tm, summary = wl.traffic, wl.summary(top)
        phases = step_phases(wl)
    else:
        if sets or context_tokens:
            raise InvalidInput("--set and --context apply to instance files only", field="--set", source=source)
        if is_phases_file(source):
            tm, phases = load_phases_traffic(source)
        else:
            tm = load_traffic(source)
        nz = tm.row_nonzeros()
        summary = {"source": source, "accelerators": tm.accelerators, "total_bytes": tm.total_bytes,
                   "bytes_by_kind": tm.kind_totals() or {"traffic": tm.total_bytes},
                   "max_row_nonzeros": int(nz.max()), "mean_row_nonzeros": float(nz.mean()),
                   "max_row_bytes": float(tm.bytes_.sum(axis=1).max()),
                   "nonzeros": int(((tm.bytes_) > 0).sum()),
                   "largest": [{"src": i, "dst": j, "bytes": b} for i, j, b in tm.largest(top)]}
    if phases:
        summary["phases"] = [{"name": p.name, "bytes_per_execution": float(p.bytes_.sum()), "executions": p.weight}
                             for p in phases]
    elif phases_out:
        raise InvalidInput("a single matrix has no phases (an instance or a phases file has)", field="--phases",
                           source=source)
    if output:
        save_traffic(tm, output)
        summary["written"] = output
    if phases_out:
        save_phases(phases, phases_out, tm.name)
        summary["phases_written"] = phases_out
    if as_json:
        echo_json(summary)
        return
    click.echo(f"accelerators        {summary['accelerators']}")
    click.echo(f"total per step      {human_bytes(summary['total_bytes'])}")
    for k, v in summary["bytes_by_kind"].items():
        click.echo(f"  {k:<18}{human_bytes(v)}")
    click.echo(f"busiest sender      {human_bytes(summary['max_row_bytes'])}")
    click.echo(f"peers per accel.    max {summary['max_row_nonzeros']}, mean {summary['mean_row_nonzeros']:.1f}"
               "  (ports a direct-only wiring needs)")
    for key in ("context_tokens", "kvp", "batch_per_accelerator", "sequences_per_step"):
        if key in summary:
            click.echo(f"{key.replace('_', ' '):<24}{summary[key]}")
    for p in summary.get("phases", []):
        click.echo(f"  phase {p['name']}: {human_bytes(p['bytes_per_execution'])} x {p['executions']:g} per step")
    if summary["largest"]:
        click.echo("largest entries")
        for e in summary["largest"]:
            click.echo(f"  {e['src']:>5} -> {e['dst']:<5} {human_bytes(e['bytes'])}")
    if output:
        click.echo(f"wrote {output}")
    if phases_out:
        click.echo(f"wrote {phases_out}")


# --------------------------------------------------------------------------------------------------
@main.command()
@click.argument("wiring", type=click.Path(dir_okay=False, path_type=str))
@click.option("--instance", "instance_path", type=click.Path(dir_okay=False, path_type=str),
              help="Check the wiring against this instance too: its accelerators, ports and OCS switches.")
@click.option("--schedule", "schedule_path", type=click.Path(dir_okay=False, path_type=str),
              help="Also check a schedule file on this wiring (simulates its data).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def verify(wiring: str, instance_path: str | None, schedule_path: str | None, as_json: bool) -> None:
    """Check a WIRING file: ports within budget, each port in at most one circuit, circuits only between
    ports on the same switch, switch radix respected, no self-loops.

    Exit status: 0 valid, 1 invalid (violations listed), 2 unreadable input.
    """
    from .formats import load_wiring
    from .verify import wiring_violations
    inst = None
    if instance_path:
        from .instance import load_instance
        inst = load_instance(instance_path)
    w = load_wiring(wiring)
    bad = wiring_violations(w, inst)
    if schedule_path:
        from .schedule import check_schedule, load_schedule
        from .verify import Violation
        sched = load_schedule(schedule_path)
        chk = check_schedule(sched, w.adjacency())
        bad += [Violation("schedule", f"{schedule_path}: {v}") for v in chk.violations[:1]]
    result = {"wiring": wiring, "valid": not bad, "accelerators": w.accelerators,
              "ports_per_accelerator": w.ports_per_accelerator, "circuits": len(w.circuits),
              "violations": [v.to_dict() for v in bad]}
    if as_json:
        echo_json(result)
    elif bad:
        click.echo(f"{wiring}: INVALID ({len(bad)} violations)")
        for v in bad:
            click.echo(f"  [{v.rule}] {v.message}")
    else:
        click.echo(f"{wiring}: valid ({len(w.circuits)} circuits on {w.layout.switches} switches, "
                   f"{w.accelerators} accelerators x {w.ports_per_accelerator} ports)")
        if schedule_path:
            click.echo(f"{schedule_path}: valid {sched.collective.kind.value} on {len(sched.collective.ranks)} ranks "
                       f"({len(sched.steps)} steps; every rank ends with the right data, every hop a circuit)")
    sys.exit(EXIT_INVALID if bad else 0)


@main.command("fibre-plan")
@click.argument("wirings", nargs=-1, required=True, type=click.Path(dir_okay=False, path_type=str))
@click.option("--switch-radix", "radix", type=int, required=True, help="Ports of every OCS the planes are cabled onto.")
@click.option("--planes", type=int, default=None,
              help="OCS planes: port k of every accelerator on plane k mod PLANES (default: one per port index).")
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False, path_type=str),
              help="Existing folder for the plan and each wiring on it.")
@click.option("--time-limit", type=float, default=10.0, show_default=True,
              help="Seconds for CP-SAT's packing of a plane, where first-fit fails.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def fibre_plan(wirings: tuple[str, ...], radix: int, planes: int | None, out_dir: str, time_limit: float,
               as_json: bool) -> None:
    """One fibre plan (cabling onto OCSes of --switch-radix ports) that hosts every one of WIRINGS: modes of a
    deployment that re-use the same ports (MoSE's templates, a failover re-wire), so that moving between
    them only re-programs the OCSes. Writes into the folder: fibre-plan.csv and fibres.csv (the cabling),
    and for each wiring NAME.json on the plan (verified) with its cross-connect tables in NAME/.

    Exit status: 0 written, 1 no plan of those OCSes hosts them all (nothing written), 2 bad input.
    """
    from solvers.fibre_plan import common

    from .formats import atomic_write, cabling_tables, load_wiring, save_wiring, write_xconnect
    from .verify import wiring_violations
    if not os.path.isdir(out_dir):
        raise InvalidInput("folder does not exist", field="--output", source=out_dir)
    if not time_limit > 0:
        raise InvalidInput(f"must be > 0, got {time_limit}", field="--time-limit")
    names = [Path(w).stem for w in wirings]
    if len(set(names)) < len(names):
        dup = next(n for n in names if names.count(n) > 1)
        raise InvalidInput(f"two wirings are named {dup}: their files in the folder would collide", field="WIRINGS")
    outs = [os.path.join(out_dir, f"{n}.json") for n in names]
    mine = {os.path.realpath(w) for w in wirings}
    for o in outs:
        if os.path.realpath(o) in mine:
            raise InvalidInput(f"would overwrite the input {o}: write the plan into another folder", field="--output")
        if os.path.exists(o[:-5]) and not os.path.isdir(o[:-5]):
            raise InvalidInput(f"{o[:-5]} is a file, where the cross-connect tables' folder goes", field="--output")
    loaded = []
    for path in wirings:
        w = load_wiring(path)
        bad = wiring_violations(w)
        if bad:
            raise InvalidInput(f"not a valid wiring: {bad[0].message}", source=path)
        loaded.append(w)
    try:
        plan = common(loaded, radix, planes, time_limit, names=list(wirings))
    except InvalidInput as exc:             # the hardware's fields are the options here
        option = {"switch_radix": "--switch-radix", "planes": "--planes"}.get(exc.field or "")
        if option is None:
            raise
        raise InvalidInput(exc.rule, field=option) from None
    if plan.layout is None:
        click.echo(f"ocs-synth: no fibre plan hosts them all: {plan.detail}; nothing written. Re-wire one of them on "
                   "the other's plan (wire ... --switch-layout DIR/fibre-plan.csv)", err=True)
        sys.exit(EXIT_INVALID)
    for path, w in zip(wirings, plan.wirings):
        bad = wiring_violations(w)
        if bad:                             # never write an artifact the verifier rejects
            raise InvalidInput(f"internal error: {path} on the plan fails verify: {bad[0].message}", field="WIRINGS")
    for name, text in cabling_tables(plan.layout).items():
        atomic_write(os.path.join(out_dir, name), text)
    for name, out, w in zip(names, outs, plan.wirings):
        save_wiring(w, out)
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        write_xconnect(w, os.path.join(out_dir, name))
    result = {"wirings": list(wirings), "written": outs, "switches": plan.layout.switches, "switch_radix": radix,
              "blocks": {str(k): v for k, v in plan.blocks.items()}}
    if as_json:
        echo_json(result)
        return
    largest = max((v[0] for v in plan.blocks.values() if v), default=0)
    click.echo(f"fibre plan: {len(wirings)} wirings on {plan.layout.switches} OCSes of {radix} ports (largest block "
               f"of fibres their circuits join: {largest}); wrote {out_dir}/fibre-plan.csv, fibres.csv and "
               + ", ".join(f"{n}.json" for n in names))


# --------------------------------------------------------------------------------------------------
def _load_instance_opts(path: str, sets: tuple[str, ...], context_tokens: int | None):
    from .instance import load_instance
    overrides = parse_sets(sets)
    if context_tokens:
        overrides["workload.context_tokens"] = context_tokens
    return load_instance(path, overrides)


def _wiring_for(inst, fabric: str, wiring_path: str | None, cache: dict):
    """The wiring an ocs or hybrid fabric runs on: the file given, verified, or the default."""
    from .fabric import parse_fabric
    fab = parse_fabric(fabric)
    if fab.kind not in ("ocs", "hybrid"):
        return None
    if wiring_path:
        if "file" not in cache:
            from .formats import load_wiring
            from .verify import require_valid_wiring
            cache["file"] = require_valid_wiring(load_wiring(wiring_path), inst, source=wiring_path)
        return cache["file"]
    return default_wiring(inst, fab.ocs_ports if fab.kind == "hybrid" else None)


def default_wiring(inst, ocs_ports: int | None = None):
    """Default wiring when none is given: the random expander baseline (one random perfect matching per
    OCS switch, seeded by workload.seed), on the first `ocs_ports` ports for a hybrid fabric."""
    from solvers.baselines import expander
    from .model import OCSLayout
    lay = inst.ocs_layout()
    if ocs_ports is not None:
        sop = lay.switch_of_port.copy()
        sop[:, ocs_ports:] = -1
        lay = OCSLayout(sop, lay.switch_radix)
    w = expander(lay, seed=inst.workload.seed)
    split = inst.fibre_fit()
    if split is not None:                      # whole planes, cabled onto the OCSes as `wire` would
        from solvers.fibre_plan import fit
        w = fit(w, split)
    return w.with_meta(
        solve={"solver": "expander (default)", "seed": inst.workload.seed}, instance=inst.summary())


fidelity_option = click.option("--fidelity", type=click.Choice(["analytical", "flow"]), default="analytical",
                               show_default=True, help="Analytical (alpha-beta, ECMP loads) or flow (max-min).")
routing_option = click.option("--routing", type=click.Choice(["ecmp", "balanced"]), default="ecmp", show_default=True,
                              help="ocs / hybrid: ECMP, or balanced multi-path routing as `wire` scores wirings.")


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False, path_type=str))
@click.option("--fabric", "fabric", default="ocs", show_default=True,
              help="ocs, eps:R, torus3d[:AxBxC], fullmesh3d[:AxBxC], scaleup, scaleout, hybrid:K.")
@click.option("--wiring", "wiring_path", type=click.Path(dir_okay=False, path_type=str),
              help="Wiring file for ocs / hybrid (default: the random expander baseline).")
@fidelity_option
@routing_option
@click.option("--schedule", "schedule_paths", multiple=True, type=click.Path(dir_okay=False, path_type=str),
              help="Schedule file(s) from `ocs-synth schedule`: ops of the same collective and group size run "
                   "its steps and routes (repeatable); `auto` synthesizes and selects one per op on the wiring.")
@click.option("--context", "context_tokens", type=click.IntRange(1), help="Context length in tokens.")
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def evaluate(instance: str, fabric: str, wiring_path: str | None, fidelity: str, routing: str,
             schedule_paths: tuple[str, ...], context_tokens: int | None, sets: tuple[str, ...],
             as_json: bool) -> None:
    """Evaluate one decode step of INSTANCE on a fabric: step time, tokens/s per user and per accelerator,
    energy and cost per token, and the time of every communication op."""
    from .evaluate import evaluate as run
    from .fabric import parse_fabric
    parse_fabric(fabric)
    inst = _load_instance_opts(instance, sets, context_tokens)
    scheds = []
    auto = "auto" in schedule_paths
    for path in schedule_paths:
        if path == "auto":
            continue
        from .schedule import load_schedule
        scheds.append(load_schedule(path))
    wiring_obj = _wiring_for(inst, fabric, wiring_path, {})
    if auto:
        if wiring_obj is None:
            raise InvalidInput("--schedule auto needs an ocs or hybrid fabric (schedules run on circuits)",
                               field="--schedule")
        from solvers.schedules import select_for_workload
        from .workload import build_workload
        scheds += select_for_workload(build_workload(inst), wiring_obj, inst.hardware.port_bytes_per_s,
                                      inst.hardware.step_latency_us, inst.hardware.link_latency_us,
                                      progress=None if as_json else (lambda m: click.echo(m, err=True)))
    ev = run(inst, fabric, wiring_obj, fidelity, seed=inst.workload.seed, schedules=tuple(scheds), routing=routing)
    if as_json:
        echo_json(ev.to_dict())
        return
    rows = [("step time (TPOT)", f"{ev.step_time_us:,.1f} us"), ("tokens/s per user", f"{ev.tokens_per_s_per_user:,.2f}"),
            ("tokens/s per accelerator", f"{ev.tokens_per_s_per_accelerator:,.1f}"),
            ("compute on critical path", f"{ev.compute_time_us:,.1f} us"),
            ("communication on critical path", f"{ev.comm_time_us:,.1f} us"),
            ("exposed communication", f"{100 * ev.exposed_comm_share:.1f} %"),
            ("busiest link utilization", f"{100 * ev.max_link_utilization:.1f} %"),
            ("energy per token", f"{ev.energy_per_token_j:.4f} J"),
            ("cost per million tokens", f"${ev.cost_per_million_tokens_usd:,.3f}"),
            ("capex (network)", f"${ev.capex_usd / 1e6:,.2f}M (${ev.network_capex_usd / 1e6:,.2f}M)")]
    click.echo(f"{inst.name} on {ev.fabric} ({ev.fidelity}), {ev.sequences_per_step} sequences per step")
    for k, v in rows:
        click.echo(f"  {k:<32}{v}")
    click.echo("  communication ops (per execution)")
    for o in ev.ops:
        click.echo(f"    {o.name:<18}{o.algorithm:<10}{o.time_us:>12,.2f} us  x{o.count}")


COMPARE_COLUMNS = (("step_time_us", "step us", "{:,.1f}"), ("tokens_per_s_per_user", "tok/s/user", "{:,.2f}"),
                   ("tokens_per_s_per_accelerator", "tok/s/acc", "{:,.1f}"), ("comm_time_us", "comm us", "{:,.1f}"),
                   ("max_link_utilization", "max util", "{:.2f}"), ("energy_per_token_j", "J/token", "{:.4f}"),
                   ("cost_per_million_tokens_usd", "$/Mtok", "{:.3f}"), ("network_capex_usd", "net capex $M", "{:,.2f}"))


@main.command()
@click.argument("instance", type=click.Path(dir_okay=False, path_type=str))
@click.option("--fabrics", default="ocs,eps:4,eps:1,torus3d,fullmesh3d,scaleup", show_default=True,
              help="Comma-separated fabrics.")
@click.option("--baseline", default="eps:4", show_default=True, help="Fabric the ratios are taken against.")
@click.option("--wiring", "wiring_path", type=click.Path(dir_okay=False, path_type=str),
              help="Wiring file for ocs / hybrid (default: the random expander baseline).")
@fidelity_option
@routing_option
@click.option("--context", "context_tokens", type=click.IntRange(1), help="Context length in tokens.")
@set_option
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False, path_type=str),
              help="PNG: interactivity vs energy efficiency and vs throughput per cost.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def compare(instance: str, fabrics: str, baseline: str, wiring_path: str | None, fidelity: str, routing: str,
            context_tokens: int | None, sets: tuple[str, ...], plot_path: str | None, as_json: bool) -> None:
    """Evaluate INSTANCE on several fabrics; one table with ratios against the baseline fabric."""
    from .evaluate import evaluate_workload
    from .fabric import parse_fabric
    from .formats import check_output_path
    from .workload import build_workload
    names = [f.strip() for f in fabrics.split(",") if f.strip()]
    for f in names + [baseline]:
        parse_fabric(f)
    if baseline not in names:
        names.append(baseline)
    if plot_path:
        check_output_path(plot_path)
    inst = _load_instance_opts(instance, sets, context_tokens)
    wl = build_workload(inst)
    cache: dict = {}
    results = {}
    for i, f in enumerate(names):
        click.echo(f"[{i + 1}/{len(names)}] {f}", err=True)
        results[f] = evaluate_workload(wl, f, _wiring_for(inst, f, wiring_path, cache), fidelity,
                                       seed=inst.workload.seed, routing=routing)
    base = results[baseline]
    out = {"baseline": baseline, "instance": inst.name, "fidelity": fidelity,
           "fabrics": {f: {**r.to_dict(ops=False),
                           "speedup_vs_baseline": base.step_time_us / r.step_time_us,
                           "energy_ratio_vs_baseline": r.energy_per_token_j / base.energy_per_token_j,
                           "cost_ratio_vs_baseline": r.cost_per_token / base.cost_per_token}
                       for f, r in results.items()}}
    if plot_path:
        from .report import compare_plot
        compare_plot(out, plot_path)
        out["plot"] = plot_path
    if as_json:
        echo_json(out)
        return
    head = f"{'fabric':<16}" + "".join(f"{h:>14}" for _, h, _ in COMPARE_COLUMNS) + f"{'speedup':>9}{'J ratio':>9}{'$ ratio':>9}"
    click.echo(f"{inst.name}: {wl.sequences} sequences per step, {fidelity}; ratios against {baseline}")
    click.echo(head)
    for f, r in out["fabrics"].items():
        vals = [r[k] / (1e6 if k == "network_capex_usd" else 1) for k, _, _ in COMPARE_COLUMNS]
        click.echo(f"{f:<16}" + "".join(f"{fmt.format(v):>14}" for (_, _, fmt), v in zip(COMPARE_COLUMNS, vals))
                   + f"{r['speedup_vs_baseline']:>9.3f}{r['energy_ratio_vs_baseline']:>9.3f}{r['cost_ratio_vs_baseline']:>9.3f}")
    if plot_path:
        click.echo(f"wrote {plot_path}")


# --------------------------------------------------------------------------------------------------
def _wiring_problem(source: str, ports: int | None, bandwidth: float | None, radix: int | None,
                    objective: str, policy: str, fixed: str | None, sets: tuple[str, ...],
                    context_tokens: int | None, spare: int = 0, switch_layout: str | None = None,
                    fibre_plan: str | None = None):
    """The wiring problem of an instance (its decode traffic) or of a raw matrix (+ hardware options)."""
    from .formats import is_phases_file, load_phases_traffic, load_switch_layout, load_traffic, load_wiring
    from .model import MAX_PORTS, OCSLayout
    from .problem import WiringProblem
    fixed_circuits: tuple = ()
    phases: tuple = ()
    raw_phases = is_phases_file(source)
    if source.endswith(".toml") and not raw_phases:
        for opt, val in (("--ports", ports), ("--port-bandwidth-gbps", bandwidth), ("--switch-radix", radix),
                         ("--switch-layout", switch_layout), ("--fibre-plan", fibre_plan)):
            if val is not None:
                raise InvalidInput(f"{opt} describes the hardware of a raw matrix; set it in the instance "
                                   "(or with --set)", field=opt, source=source)
        from .workload import build_workload, step_phases
        inst = _load_instance_opts(source, sets, context_tokens)
        wl = build_workload(inst)
        traffic = wl.traffic
        phases = step_phases(wl) if objective == "phases" else ()
        workload = wl if objective == "step" else None
        layout, bw, lat, name, summary = (inst.ocs_layout(), inst.hardware.port_bandwidth_gbps,
                                          inst.hardware.link_latency_us, inst.name, inst.summary())
        split = inst.fibre_fit()
    else:
        if sets or context_tokens:
            raise InvalidInput("--set and --context apply to instance files only", field="--set", source=source)
        if (ports is None and switch_layout is None) or bandwidth is None:
            raise InvalidInput("a raw matrix needs --ports (or --switch-layout) and --port-bandwidth-gbps",
                               field="--ports", source=source)
        if ports is not None and ports < 1:
            raise InvalidInput(f"port budget must be >= 1, got {ports}", field="--ports")
        if ports is not None and ports > MAX_PORTS:
            raise InvalidInput(f"port budget must be <= {MAX_PORTS}, got {ports}", field="--ports")
        if radix is not None and radix < 2:
            raise InvalidInput(f"a switch of radix {radix} cannot host a circuit (needs >= 2)",
                               field="--switch-radix")
        if objective == "step":
            raise InvalidInput("the step objective times an instance's decode step: give an instance",
                               field="--objective", source=source)
        workload = None
        if raw_phases:
            traffic, phases = load_phases_traffic(source)
            phases = phases if objective == "phases" else ()
        elif objective == "phases":
            raise InvalidInput("a single matrix has no phases: give a phases file (format = "
                               "\"ocs-synth/phases\") or an instance", field="--objective", source=source)
        else:
            traffic = load_traffic(source)
        split = None
        if switch_layout:
            if fibre_plan == "fit":
                raise InvalidInput("fit chooses the fibre plan; --switch-layout gives one (leave one of them out)",
                                   field="--fibre-plan")
            layout = load_switch_layout(switch_layout, traffic.accelerators, ports, radix)
        elif fibre_plan == "fit":
            layout, split = OCSLayout.fitted_planes(traffic.accelerators, ports, radix)
        else:
            layout = OCSLayout.planes(traffic.accelerators, ports, radix)
        bw, lat, name = bandwidth, 0.0, os.path.basename(source)
        summary = {"name": name, "path": source, "accelerators": traffic.accelerators, "ports": layout.ports,
                   "port_bandwidth_gbps": bandwidth}
    if spare:
        try:
            layout = layout.with_spare(spare)
        except InvalidInput as exc:
            raise InvalidInput(exc.rule, field="--spare-ports", source=source) from None
    if fixed and split is not None:
        raise InvalidInput("--fixed keeps circuits on the OCSes of a given fibre plan; fit chooses the plan after "
                           "the wiring", field="--fixed", source=source)
    if fixed:
        fw = load_wiring(fixed)
        if fw.accelerators != traffic.accelerators or fw.ports_per_accelerator != layout.ports:
            raise InvalidInput(f"fixed wiring is {fw.accelerators} x {fw.ports_per_accelerator}, the problem is "
                               f"{traffic.accelerators} x {layout.ports}", field="accelerators", source=fixed)
        fixed_circuits = fw.circuits
    try:
        return WiringProblem(traffic, layout, bw, objective, policy, fixed_circuits, lat, name, summary, phases,
                             workload, split)
    except (InvalidInput, Infeasible) as exc:
        if fixed and exc.field == "fixed_circuits":     # named in the file that holds them
            raise type(exc)(exc.rule, field="circuits", source=fixed) from None
        raise exc.located(source) from None


@main.command()
@click.argument("source", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False, path_type=str),
              help="Wiring file to write (JSON).")
@click.option("--solver", default="auto", show_default=True,
              type=click.Choice(["auto", "milp", "cpsat", "lp-round", "search", "expander", "torus", "topoopt",
                                 "greedy"]), help="Optimization back-end or baseline.")
@click.option("--backend", default="auto", show_default=True, type=click.Choice(["auto", "highs", "cbc"]),
              help="MILP back-end.")
@click.option("--objective", default="time", show_default=True, type=click.Choice(["time", "hops", "phases", "step"]),
              help="time: the step's bytes at once, the busiest circuit; hops: hop-weighted bytes; phases: the "
                   "step's phases (TP all-reduce, EP dispatch, ...) one after another, each routed alone, weighted "
                   "by its executions per step (an instance, or a phases file); step: the decode step's time from "
                   "the evaluator's analytical model (an instance; search and lp-round).")
@click.option("--policy", default="multihop", show_default=True, type=click.Choice(["multihop", "direct"]),
              help="direct: every demand on its own circuits, no forwarding.")
@click.option("--time-limit", "time_limit", default=60.0, show_default=True, type=POSITIVE,
              help="Seconds for the whole command: loading, solving, verifying and writing (--baselines then "
                   "scores each baseline on a clock of its own).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--gap", "rel_gap", default=1e-6, show_default=True, type=Real(ge=1e-9, lt=1),
              help="Relative gap (objective - bound) / objective at which the solve stops and reports OPTIMAL.")
@click.option("--max-moves", "max_moves", type=int,
              help="Stop the local search after this many moves instead of at the clock: the same seed then "
                   "gives the same wiring on any machine (unless the time limit comes first).")
@click.option("--ports", type=int, help="Raw matrix or phases file: OCS ports per accelerator.")
@click.option("--port-bandwidth-gbps", "bandwidth", type=POSITIVE,
              help="Raw matrix or phases file: Gbit/s per port and direction.")
@click.option("--switch-radix", "radix", type=int,
              help="Raw matrix or phases file: ports per OCS (default: accelerators); fewer than the accelerators "
                   "split each port's plane over several OCSes.")
@click.option("--switch-layout", "switch_layout", type=click.Path(dir_okay=False, path_type=str),
              help="Raw matrix or phases file: the fibre plan, the OCS of each accelerator's port (.npy or .csv: "
                   "one row per accelerator, one column per port, -1 = none); --switch-radix then gives every "
                   "switch's ports (default: the most fibres on one).")
@click.option("--fibre-plan", "fibre_plan", type=click.Choice(FIBRE_PLANS),
              help="Raw matrix or phases file, where --switch-radix splits the planes: spread (default) fixes the "
                   "fibre plan first, each OCS reaching many accelerators; fit wires whole planes and writes the plan "
                   "that hosts the wiring (instances: [fabric] fibre_plan).")
@click.option("--fixed", type=click.Path(dir_okay=False, path_type=str),
              help="Wiring file whose circuits are kept, port for port, by every solver.")
@click.option("--spare-ports", "spare", default=0, show_default=True, type=int,
              help="Ports per accelerator left dark as spares (its last ones; on a one-switch-per-port layout "
                   "whole OCS planes), held for failover or another mode's circuits.")
@click.option("--xconnect", "xconnect_dir", type=click.Path(file_okay=False, path_type=str),
              help="Also write per-switch cross-connect CSVs into this existing folder, and the cabling they "
                   "assume (fibres.csv; fibre-plan.csv, as --switch-layout reads it).")
@click.option("--proof-log", "proof_log", type=click.Path(dir_okay=False, path_type=str),
              help="Keep the verdicts of a long proof's cases (and the tables they rest on) in this file "
                   "(JSON lines, appended as each settles; created when missing) and skip those an earlier run "
                   "settled: a proof cut off by the time limit or Ctrl-C goes on where it stopped.")
@click.option("--baselines", "with_baselines", is_flag=True, help="Also score the baselines, same bound.")
@click.option("--context", "context_tokens", type=click.IntRange(1), help="Context length (instance only).")
@set_option
@click.option("--json", "as_json", is_flag=True, help="Print the solve block as JSON.")
@handles_errors
def wire(source: str, output: str, solver: str, backend: str, objective: str, policy: str, time_limit: float,
         seed: int, rel_gap: float, max_moves: int | None, ports: int | None, bandwidth: float | None,
         radix: int | None, switch_layout: str | None, fibre_plan: str | None, fixed: str | None, spare: int,
         xconnect_dir: str | None,
         proof_log: str | None, with_baselines: bool, context_tokens: int | None, sets: tuple[str, ...],
         as_json: bool) -> None:
    """Choose the OCS circuits for an INSTANCE (.toml), a raw traffic matrix (.npy/.csv) or a phases file
    (.toml with format = "ocs-synth/phases", as `ocs-synth traffic --phases` writes) and write the wiring
    file (with its solve block: status, objective, bound, gap). The wiring is verified before it is
    written."""
    from solvers import BASELINES, wire as run
    from .formats import check_output_path, open_proof_log, save_wiring, write_xconnect
    from .model import SolveParams
    from .verify import wiring_violations
    check_output_path(output)
    if xconnect_dir and not os.path.isdir(xconnect_dir):
        raise InvalidInput("folder does not exist", field="--xconnect", source=xconnect_dir)
    if seed < 0:
        raise InvalidInput(f"must be >= 0, got {seed}", field="--seed")
    if max_moves is not None and max_moves < 1:
        raise InvalidInput(f"must be >= 1, got {max_moves}", field="--max-moves")
    problem = _wiring_problem(source, ports, bandwidth, radix, objective, policy, fixed, sets, context_tokens, spare,
                              switch_layout, fibre_plan)
    if proof_log and os.path.abspath(proof_log) == os.path.abspath(output):
        raise InvalidInput("is the output file; the log needs a file of its own", field="--proof-log", source=proof_log)
    log = open_proof_log(proof_log) if proof_log else None
    started = (click.get_current_context().find_root().obj or {}).get("started", time.perf_counter())
    solve_s = time_limit - (time.perf_counter() - started) - min(WRAP_UP_S, START_S + WRAP_UP_SHARE * time_limit)
    params = SolveParams(time_limit_s=max(time_limit / 2, solve_s), rel_gap=rel_gap, seed=seed, backend=backend,
                         max_moves=max_moves, progress=None if as_json else stamped(started), proof_log=log)
    res = run(problem, solver, params)
    if res.artifact is None:     # proven INFEASIBLE under the direct policy: the policy asks too much
        raise InvalidInput(f"{res.solver} found no wiring ({res.status.value}: {res.message})",
                           field="--policy" if problem.policy == "direct" else "--solver")
    if res.objective is None or not math.isfinite(res.objective):    # a wiring that leaves demand unserved
        proven = res.bound is not None and not math.isfinite(res.bound)
        how = "on a circuit of its own" if problem.policy == "direct" else "over a path"
        raise Infeasible(f"{res.solver} found no wiring that serves every pair that exchanges bytes {how}"
                         + (" (proven: none exists on this layout)" if proven else "") + "; nothing written")
    bad = wiring_violations(res.artifact)
    if bad:  # never write an artifact the verifier rejects
        raise InvalidInput(f"internal error: {res.solver} wiring fails verify: {bad[0].message}", field="--solver")
    save_wiring(res.artifact, output)
    if xconnect_dir:
        write_xconnect(res.artifact, xconnect_dir)
    block = dict(res.artifact.solve or {})
    block["written"] = output
    if with_baselines:
        block["baselines"] = {}
        for b in BASELINES:
            if b != solver:
                r = run(problem, b, SolveParams(time_limit_s=time_limit, seed=seed))
                block["baselines"][b] = {"objective": r.objective, "gap": r.gap, "routing": r.extra.get("routing"),
                                         **({"structure": r.extra["structure"]} if "structure" in r.extra else {})}
    if as_json:
        echo_json(block)
        return
    unit = "byte-hops" if objective == "hops" else "s"
    stopped = "" if res.limit.value == "none" else f" ({res.limit.value} limit)"
    click.echo(f"{res.solver}: {res.status.value}{stopped}, objective {res.objective:.6g} {unit}, "
               f"bound {res.bound:.6g}, gap {100 * (res.gap or 0):.2f}%, {res.wall_s:.1f} s")
    click.echo(f"  {len(res.artifact.circuits)} circuits on {res.artifact.layout.switches} switches, routing "
               f"{block.get('routing')}; bounds: " + ", ".join(f"{k} {v:.6g}" for k, v in block.get("bounds", {}).items()))
    if "structure" in block:      # a torus or TopoOpt-style the switches did not hold whole (split planes)
        click.echo(f"  {_held(block['structure'])}; the other ports paired at random")
    if block.get("fibre_plan") == "fitted":
        click.echo(f"  fibre plan fitted to the wiring: {res.artifact.layout.switches} OCSes of "
                   f"{res.artifact.layout.switch_radix[0]} ports (in the wiring file; --xconnect writes the cabling)")
    for b, r in block.get("baselines", {}).items():
        if r["objective"] is None or not math.isfinite(r["objective"]):    # a demand the wiring leaves apart
            click.echo(f"  baseline {b:<9} no wiring that serves every demand on these switches")
        else:
            click.echo(f"  baseline {b:<9} objective {r['objective']:.6g}  gap {100 * (r['gap'] or 0):.1f}%"
                       + (f"  ({_held(r['structure'])})" if "structure" in r else ""))
    if log is not None:
        click.echo(f"  proof log {proof_log}: {len(log)} verdicts, {log.added} from this run")
    click.echo(f"wrote {output}" + (f" and cross-connects in {xconnect_dir}" if xconnect_dir else ""))


def _held(structure: dict) -> str:
    return f"{structure['kept']:,} of its {structure['circuits']:,} circuits kept"


# --------------------------------------------------------------------------------------------------
def parse_size(text: str) -> float:
    """'64MB', '1.5GiB', '4096' -> bytes (k/M/G/T are powers of 1000, Ki/Mi/Gi of 1024).

    >>> parse_size("64MB"), parse_size("1KiB"), parse_size("12")
    (64000000.0, 1024.0, 12.0)
    """
    import re
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([kKMGT]i?)?B?\s*", text)
    if not m:
        raise InvalidInput(f"not a size: {text!r} (e.g. 4096, 64MB, 1GiB)", field="--bytes")
    value = float(m.group(1))
    unit = m.group(2) or ""
    scale = {"": 1, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2 ** 10, "Mi": 2 ** 20,
             "Gi": 2 ** 30, "Ti": 2 ** 40, "ki": 2 ** 10}[unit]
    if not value > 0:
        raise InvalidInput(f"must be > 0, got {text!r}", field="--bytes")
    return value * scale


def parse_ranks(text: str, n: int) -> tuple[int, ...]:
    """'all', '0-7', '0,2,4' or mixes like '0-3,8' -> accelerator ids."""
    if text.strip() == "all":
        return tuple(range(n))
    out: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                a, b = (int(x) for x in part.split("-"))
                out += list(range(a, b + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise InvalidInput(f"expected all, 0-7 or 0,2,4; got {text!r}", field="--ranks") from None
    bad = [r for r in out if not 0 <= r < n]
    if bad:
        raise InvalidInput(f"rank {bad[0]} is not in the wiring (accelerators 0..{n - 1})", field="--ranks")
    if len(set(out)) != len(out):
        raise InvalidInput("names a rank twice", field="--ranks")
    if len(out) < 2:
        raise InvalidInput("a collective needs at least 2 ranks", field="--ranks")
    return tuple(out)


@main.command()
@click.argument("wiring", type=click.Path(dir_okay=False, path_type=str))
@click.option("--collective", required=True,
              type=click.Choice(["allreduce", "allgather", "reducescatter", "alltoall"]))
@click.option("--ranks", default="all", show_default=True, help="all, 0-7 or 0,2,4")
@click.option("--bytes", "size", required=True, help="Message size: 4096, 64MB, 1GiB (see README).")
@click.option("--chunks", type=int, help="Chunks (default: enough per rank, all-to-all: per pair, to cover each rank's "
              "circuits 8 times).")
@click.option("--port-bandwidth-gbps", "bandwidth", type=POSITIVE, help="Default: the wiring's instance block.")
@click.option("--alpha-us", "alpha", type=LATENCY, help="Per-step latency (default: the instance block, else 0.6).")
@click.option("--algorithm", default="best", show_default=True,
              type=click.Choice(["best", "ring", "biring", "direct", "recursive", "pairwise", "trees", "saturate",
                                 "dim-ordered", "hierarchical", "cpsat"]))
@click.option("--time-limit", "time_limit", default=20.0, show_default=True, type=POSITIVE,
              help="Seconds for CP-SAT synthesis (groups of up to 16 ranks).")
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str), help="Schedule file (JSON).")
@click.option("--msccl-xml", "xml_path", type=click.Path(dir_okay=False, path_type=str),
              help="Also write the schedule as MSCCL algorithm XML (with --algorithm best: the fastest "
                   "schedule whose transfers all go straight over a circuit).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def schedule(wiring: str, collective: str, ranks: str, size: str, chunks: int | None, bandwidth: float | None,
             alpha: float | None, algorithm: str, time_limit: float, output: str | None, xml_path: str | None,
             as_json: bool) -> None:
    """Synthesize a collective schedule on a WIRING: constructions and (small groups) CP-SAT, each checked
    by simulating its data, timed by the analytical model, with lower bounds and the gap."""
    from solvers import schedules as S
    from .formats import atomic_write, check_output_path, json_dumps, load_wiring
    from .model import Collective
    from .schedule import check_schedule, schedule_to_dict
    from .schema import MAX_FLOAT, finite_number
    from .verify import require_valid_wiring
    for path in (output, xml_path):
        if path:
            check_output_path(path)
    w = require_valid_wiring(load_wiring(wiring), source=wiring)
    inst = w.instance or {}

    def block(key: str, given: float | None, default: float | None, positive: bool = False,
              top: float = MAX_FLOAT) -> float | None:
        """An option (checked by click), else the wiring's instance block's value (null: absent), checked here."""
        if given is not None:
            return given
        v = inst.get(key)
        if v is None:
            return default
        if not finite_number(v, positive) or v > top:
            raise InvalidInput(f"must be a finite number {'> 0' if positive else '>= 0'} up to {top:g}, got "
                               f"{v!r}", field=f"instance.{key}", source=wiring)
        return float(v)

    bw = block("port_bandwidth_gbps", bandwidth, None, positive=True)
    if bw is None:
        raise InvalidInput("the wiring has no instance block; give --port-bandwidth-gbps", field="--port-bandwidth-gbps",
                           source=wiring)
    fab = S.Fabric(w.adjacency(), bw * 1e9 / 8, block("step_latency_us", alpha, 0.6, top=MAX_LATENCY_US),
                   block("link_latency_us", None, 0.0, top=MAX_LATENCY_US))
    coll = Collective(collective, parse_ranks(ranks, w.accelerators), parse_size(size))
    k = chunks if chunks is not None else S.default_chunks(fab, coll)
    S.validate_group(fab, coll, k)
    if algorithm == "best":
        res = S.best_schedule(fab, coll, k, time_limit_s=time_limit, forwarding=not xml_path)
        sched, t, table = res["schedule"], res["time_us"], res["table"]
        bounds = res["bounds"]
    else:
        if algorithm == "cpsat":
            front = S.pareto(fab, coll, k, time_limit_s=time_limit)
            if not front:
                raise InvalidInput(f"CP-SAT found no schedule in {time_limit:g} s", field="--algorithm")
            sched = min((p["schedule"] for p in front), key=fab.time_us)
        else:
            from solvers.dimensional import dimension_ordered, hierarchical
            from solvers.saturate import saturating_allgather
            builder = {"ring": S.ring, "direct": S.direct, "recursive": S.recursive, "pairwise": S.pairwise,
                       "trees": S.trees, "saturate": saturating_allgather, "dim-ordered": dimension_ordered, "hierarchical": hierarchical,
                       "biring": lambda f, c, kk: S.ring(f, c, kk, bidirectional=True)}[algorithm]
            sched = builder(fab, coll, k)
        t, table = fab.time_us(sched), {}
        bounds = S.lower_bounds(fab, coll)
    chk = check_schedule(sched, w.adjacency())
    if not chk.ok:  # never hand out a schedule the checker rejects
        raise InvalidInput(f"internal error: {sched.algorithm} schedule fails the checker: {chk.violations[0]}",
                           field="--algorithm")
    out = {"collective": collective, "ranks": len(coll.ranks), "bytes": coll.bytes_, "chunks": k,
           "algorithm": sched.algorithm, "steps": len(sched.steps), "time_us": t,
           "lower_bound_us": bounds.time_us, "gap": max(0.0, (t - bounds.time_us) / t) if t > 0 else 0.0,
           "lower_bound_steps": bounds.steps, "bounds": bounds.named, "verified": chk.ok,
           "candidates": table}
    if output:
        atomic_write(output, json_dumps(schedule_to_dict(sched, {"time_us": t, "lower_bound_us": bounds.time_us,
                                                                  "wiring": wiring})))
        out["written"] = output
    if xml_path:
        from .msccl import to_msccl_xml
        atomic_write(xml_path, to_msccl_xml(sched))
        out["msccl_xml"] = xml_path
    if as_json:
        echo_json(out)
        return
    click.echo(f"{collective} on {len(coll.ranks)} ranks, {human_bytes(coll.bytes_)}: {sched.algorithm}, {len(sched.steps)} steps, "
               f"{t:,.2f} us (lower bound {bounds.time_us:,.2f} us, gap {100 * out['gap']:.1f}%), verified")
    for name, row in table.items():
        click.echo(f"  {name:<28}{row['steps']:>5} steps {row['time_us']:>14,.2f} us" +
                   ("" if row["verified"] is not False else f"  REJECTED: {row['violation']}") +
                   ("  (relays)" if row.get("forwarded") else ""))
    for path in (output, xml_path):
        if path:
            click.echo(f"wrote {path}")


# --------------------------------------------------------------------------------------------------
@main.group()
def bench() -> None:
    """Benchmarks behind BENCHMARKS.md (speed figures; run them on the machine you report)."""


@bench.command("workload")
@click.argument("instance", type=click.Path(dir_okay=False, path_type=str),
                default="instances/decode/moe5t-576.toml")
@click.option("--repeat", default=7, show_default=True, type=click.IntRange(1))
@handles_errors
def bench_workload_cmd(instance: str, repeat: int) -> None:
    """Time building an instance's decode DAG and traffic matrix."""
    from .bench import bench_workload, machine
    echo_json({**bench_workload(instance, repeat), "machine": machine()})


@bench.command("flow")
@click.option("--nodes", default=1024, show_default=True, type=click.IntRange(4))
@click.option("--degree", default=4, show_default=True, type=click.IntRange(1))
@click.option("--flows", default=100_000, show_default=True, type=click.IntRange(1))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
@click.option("--repeat", default=3, show_default=True, type=click.IntRange(1))
@handles_errors
def bench_flow_cmd(nodes: int, degree: int, flows: int, seed: int, repeat: int) -> None:
    """Time the flow model: routing, link loads and max-min rates of random flows on an expander."""
    from .bench import bench_flow, machine
    echo_json({**bench_flow(nodes, degree, flows, seed, repeat), "machine": machine()})


@bench.command("routing")
@click.argument("instance", type=click.Path(dir_okay=False, path_type=str),
                default="instances/decode/moe5t-576.toml")
@click.option("--wiring", "wiring_path", type=click.Path(dir_okay=False, path_type=str),
              help="Wiring file (default: the expander baseline).")
@click.option("--rounds", default=60, show_default=True, type=click.IntRange(1))
@click.option("--seed", default=0, show_default=True, type=click.IntRange(0))
@handles_errors
def bench_routing_cmd(instance: str, wiring_path: str | None, rounds: int, seed: int) -> None:
    """Time multi-path (MWU) routing of an instance's traffic alone and with its helper process."""
    from .bench import bench_routing, machine
    from .instance import load_instance
    wiring = _wiring_for(load_instance(instance), "ocs", wiring_path, {}) if wiring_path else None
    echo_json({**bench_routing(instance, wiring, rounds, seed), "machine": machine()})


SUITE = "instances/wiring/suite.toml"   # from the project's root; elsewhere, the project's copy


@bench.command("wire")
@click.option("--suite", "suite", default=SUITE, show_default=True,
              type=click.Path(dir_okay=False, path_type=str))
@click.option("--solvers", default="auto", show_default=True,
              help="Comma-separated, e.g. milp:highs,milp:cbc,cpsat,search,expander,topoopt.")
@click.option("--time-limit", "time_limit", default=60.0, show_default=True, type=POSITIVE)
@click.option("--small", is_flag=True, help="Only the cases marked small.")
@click.option("--case", "cases", multiple=True, help="Only these cases (repeatable).")
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def bench_wire_cmd(suite: str, solvers: str, time_limit: float, small: bool, cases: tuple[str, ...],
                   as_json: bool) -> None:
    """Run the wiring suite: every answer verified and checked against the recorded optimum or bound."""
    from .bench import bench_wire, machine
    shipped = Path(__file__).resolve().parents[1] / SUITE
    if suite == SUITE and not os.path.exists(suite) and shipped.exists():   # run from another folder
        suite = str(shipped)
    rows = bench_wire(suite, [s.strip() for s in solvers.split(",") if s.strip()], time_limit, small,
                      list(cases) or None, progress=lambda m: click.echo(m, err=True))
    if as_json:
        echo_json({"rows": rows, "machine": machine()})
    else:
        w = max([20] + [len(r["case"]) + 2 for r in rows])       # the case names' column fits the longest
        click.echo(f"{'case':<{w}}{'solver':<12}{'status':<10}{'objective':>14}{'bound':>14}{'gap':>8}{'wall s':>8}  check")
        for r in rows:
            click.echo(f"{r['case']:<{w}}{r['solver']:<12}{r['status']:<10}{r['objective'] or float('nan'):>14.6g}"
                       f"{r['bound'] or float('nan'):>14.6g}{100 * (r['gap'] or 0):>7.2f}%{r['wall_s']:>8.1f}  {r['check']}")
    if any(r["check"] != "ok" or not r["verified"] for r in rows):
        sys.exit(EXIT_INVALID)


@bench.command("schedule")
@click.option("--topology", "names", multiple=True,
              help="biring-8, dgx1-8, torus-4x4, torus-8x8, torus-16x16, torus-4x4x4, fullmesh-3x3x3, "
                   "expander-64, expander-256 "
                   "(default: all).")
@click.option("--bytes", "size", default="64MB", show_default=True)
@click.option("--chunks", "chunks_per", type=click.IntRange(min=1),
              help="Chunks per rank (all-to-all: per pair); default 4 up to 16 ranks, else 16 (all-to-all: 1).")
@click.option("--time-limit", "time_limit", default=30.0, show_default=True, type=POSITIVE)
@click.option("--json", "as_json", is_flag=True)
@handles_errors
def bench_schedule_cmd(names: tuple[str, ...], size: str, chunks_per: int | None, time_limit: float,
                       as_json: bool) -> None:
    """Best schedules on classic topologies (100 GB/s circuits, alpha 0.6 us) against their lower bounds."""
    from .bench import bench_schedule, machine
    rows = bench_schedule(list(names) or None, parse_size(size), time_limit_s=time_limit,
                          progress=lambda m: click.echo(m, err=True), chunks_per=chunks_per)
    if as_json:
        echo_json({"rows": rows, "machine": machine()})
        return
    click.echo(f"{'topology':<13}{'collective':<11}{'algorithm':<28}{'steps':>6}{'lb':>4}{'time us':>12}"
               f"{'bound us':>12}{'gap':>8}{'wall s':>8}")
    for r in rows:
        click.echo(f"{r['topology']:<13}{r['collective']:<11}{r['algorithm']:<28}{r['steps']:>6}"
                   f"{r['steps_lower_bound']:>4}{r['time_us']:>12,.1f}{r['lower_bound_us']:>12,.1f}"
                   f"{100 * r['gap']:>7.1f}%{r['wall_s']:>8.1f}")


if __name__ == "__main__":  # pragma: no cover
    main()
