"""The `ocs-synth` command line. The only module that reads arguments, prints and chooses files; it calls
the library. Every error a user can cause prints one line naming the file and field and exits 2
(`--debug` shows the traceback)."""
from __future__ import annotations

import functools
import json
import os
import sys
from typing import Any, Callable

import click

from . import __version__
from .errors import InvalidInput, SynthError

EXIT_INVALID = 1   # verify: the artifact breaks a rule
EXIT_USAGE = 2     # bad input of any kind


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


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ocs-synth")
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.pass_context
def main(ctx: click.Context, debug: bool) -> None:
    """ocs-synth: design the OCS interconnect of an LLM-inference deployment.

    Instance files (TOML) describe a deployment; traffic files (.npy, .csv) are raw matrices in bytes;
    wiring files (JSON) are circuits on OCS switches. See README.md for the formats.
    """
    ctx.obj = {"debug": debug or bool(os.environ.get("OCS_SYNTH_DEBUG"))}


# --------------------------------------------------------------------------------------------------
@main.command()
@click.argument("source", type=click.Path(dir_okay=False, path_type=str))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=str),
              help="Write the matrix to FILE.npy or FILE.csv (src,dst,bytes rows).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--top", default=10, show_default=True, type=click.IntRange(0), help="Largest entries shown.")
@click.option("--context", "context_tokens", type=click.IntRange(1), help="Context length (instance only).")
@set_option
@handles_errors
def traffic(source: str, output: str | None, as_json: bool, top: int, context_tokens: int | None,
            sets: tuple[str, ...]) -> None:
    """Summarize the traffic of one decode step of an INSTANCE (.toml), or of a raw matrix (.npy/.csv).

    Prints accelerators, total bytes per step, bytes per collective kind, the largest entries and the
    peers per accelerator (the fewest ports a direct-only wiring would need).
    """
    from .formats import check_output_path, load_traffic, save_traffic
    if output:
        check_output_path(output)
    if source.endswith(".toml"):
        from .instance import load_instance
        from .workload import build_workload
        overrides = parse_sets(sets)
        if context_tokens:
            overrides["workload.context_tokens"] = context_tokens
        wl = build_workload(load_instance(source, overrides))
        tm, summary = wl.traffic, wl.summary(top)
    else:
        if sets or context_tokens:
            raise InvalidInput("--set and --context apply to instance files only", field="--set", source=source)
        tm = load_traffic(source)
        nz = tm.row_nonzeros()
        summary = {"source": source, "accelerators": tm.accelerators, "total_bytes": tm.total_bytes,
                   "bytes_by_kind": tm.kind_totals() or {"traffic": tm.total_bytes},
                   "max_row_nonzeros": int(nz.max()), "mean_row_nonzeros": float(nz.mean()),
                   "max_row_bytes": float(tm.bytes_.sum(axis=1).max()),
                   "nonzeros": int(((tm.bytes_) > 0).sum()),
                   "largest": [{"src": i, "dst": j, "bytes": b} for i, j, b in tm.largest(top)]}
    if output:
        save_traffic(tm, output)
        summary["written"] = output
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
    if summary["largest"]:
        click.echo("largest entries")
        for e in summary["largest"]:
            click.echo(f"  {e['src']:>5} -> {e['dst']:<5} {human_bytes(e['bytes'])}")
    if output:
        click.echo(f"wrote {output}")


# --------------------------------------------------------------------------------------------------
@main.command()
@click.argument("wiring", type=click.Path(dir_okay=False, path_type=str))
@click.option("--instance", "instance_path", type=click.Path(dir_okay=False, path_type=str),
              help="Check the wiring against this instance's accelerators and ports too.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@handles_errors
def verify(wiring: str, instance_path: str | None, as_json: bool) -> None:
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
    sys.exit(EXIT_INVALID if bad else 0)


if __name__ == "__main__":  # pragma: no cover
    main()
