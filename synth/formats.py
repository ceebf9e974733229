"""File formats: traffic matrices (.npy, CSV), a step's phases (TOML listing one matrix per phase), wiring
files (JSON), OCS cross-connect tables (CSV), and atomic writes. Every reader names the file and the field
in its errors; every writer writes a temporary file beside the target and renames it, so a crash never
leaves a half-written file.
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import math
import os
import stat
import tempfile
import threading
from typing import Any, Mapping

import numpy as np

from .errors import InvalidInput
from .model import MAX_ACCELERATORS, MAX_PORTS, Circuit, OCSLayout, ProofLog, TrafficMatrix, TrafficPhase, Wiring

WIRING_FORMAT = "ocs-synth/wiring"
WIRING_VERSION = 1
PHASES_FORMAT = "ocs-synth/phases"
PHASE_KEYS = ("name", "matrix", "weight")


# --------------------------------------------------------------------------------------------------
# Plain I/O
# --------------------------------------------------------------------------------------------------
def read_bytes(path: str | os.PathLike) -> bytes:
    path = os.fspath(path)
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise InvalidInput("no such file", source=path) from None
    except IsADirectoryError:
        raise InvalidInput("is a folder, expected a file", source=path) from None
    except OSError as exc:
        raise InvalidInput(f"cannot read: {exc.strerror}", source=path) from None


def read_text(path: str | os.PathLike) -> str:
    data = read_bytes(path)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"not UTF-8 text (byte {exc.start})", source=os.fspath(path)) from None


def check_output_path(path: str | os.PathLike) -> str:
    """Fail early, before any work, when an output cannot be written there."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InvalidInput(f"folder {folder} does not exist", source=path)
    if os.path.isdir(path):
        raise InvalidInput("is a folder, expected a file name", source=path)
    return path


def _file_mode(path: str) -> int:
    """The mode a plain write would leave at `path`: the file's own when it exists, else 0o666 less the
    umask (a temporary file is created 0o600, which an OCS controller running as another user cannot read)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mask = os.umask(0o022)
        os.umask(mask)
        return 0o666 & ~mask


def atomic_write(path: str | os.PathLike, data: bytes | str) -> str:
    """Write `data` to `path` through a temporary file in the same folder and a rename; the file gets the
    mode a plain write would give it."""
    path = check_output_path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=os.path.basename(path), dir=folder)
    try:
        with os.fdopen(fd, "wb") as fh:
            os.fchmod(fh.fileno(), _file_mode(path))
            fh.write(payload)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def json_dumps(obj: Any) -> str:
    """JSON with NaN/inf as null and numpy scalars as numbers."""
    def fix(v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): fix(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [fix(x) for x in v]
        if isinstance(v, np.generic):
            v = v.item()
        if isinstance(v, float) and not math.isfinite(v):
            return None
        return v
    return json.dumps(fix(obj), indent=1, sort_keys=False) + "\n"


# --------------------------------------------------------------------------------------------------
# Traffic matrices
# --------------------------------------------------------------------------------------------------
def _parse_number(text: str, source: str, where: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise InvalidInput(f"{text.strip()!r} is not a number", field=where, source=source) from None


def load_traffic(path: str | os.PathLike, accelerators: int | None = None) -> TrafficMatrix:
    """Read a traffic matrix (bytes): `.npy` (N x N), or CSV as a square matrix or as `src,dst,bytes`
    rows (a header line is allowed; repeated pairs add up). `accelerators` fixes N (and is checked)."""
    source = os.fspath(path)
    if source.endswith(".npy"):
        raw = read_bytes(source)
        try:
            arr = np.load(io.BytesIO(raw), allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise InvalidInput(f"not a valid .npy file ({exc})", source=source) from None
        if arr.dtype.kind not in "iuf":
            raise InvalidInput(f"dtype {arr.dtype} is not numeric", field="traffic", source=source)
    elif source.endswith(".csv"):
        arr = _load_csv_matrix(read_text(source), source, accelerators)
    else:
        raise InvalidInput("unknown traffic format (expected .npy or .csv)", source=source)
    try:
        tm = TrafficMatrix(arr, name=os.path.basename(source))
    except InvalidInput as exc:
        raise exc.located(source) from None
    if accelerators is not None and tm.accelerators != accelerators:
        raise InvalidInput(f"matrix is {tm.accelerators} x {tm.accelerators}, the instance has "
                           f"{accelerators} accelerators", field="traffic", source=source)
    return tm


def _load_csv_matrix(text: str, source: str, accelerators: int | None) -> np.ndarray:
    rows = [r for r in csv.reader(io.StringIO(text)) if r and any(c.strip() for c in r)]
    if not rows:
        raise InvalidInput("empty CSV", source=source)
    header = [c.strip().lower() for c in rows[0]]
    if header[:3] == ["src", "dst", "bytes"]:
        return _edge_rows(rows[1:], source, accelerators, first_line=2)
    try:
        [float(c) for c in rows[0]]
    except ValueError:
        raise InvalidInput(f"line 1: header {rows[0]!r} is neither numbers nor src,dst,bytes",
                           source=source) from None
    if len(rows[0]) == 3 and len(rows) != 3:
        return _edge_rows(rows, source, accelerators, first_line=1)
    n = len(rows)
    out = np.zeros((n, n))
    for i, r in enumerate(rows):
        if len(r) != n:
            raise InvalidInput(f"line {i + 1} has {len(r)} columns, expected {n} (a square matrix)",
                               field="traffic", source=source)
        out[i] = [_parse_number(c, source, f"line {i + 1}") for c in r]
    return out


def _edge_rows(rows: list[list[str]], source: str, accelerators: int | None, first_line: int) -> np.ndarray:
    if not rows:
        raise InvalidInput("no src,dst,bytes rows", source=source)
    src, dst, val = [], [], []
    for i, r in enumerate(rows):
        line = f"line {i + first_line}"
        if len(r) != 3:
            raise InvalidInput(f"has {len(r)} columns, expected src,dst,bytes", field=line, source=source)
        s, d = _parse_number(r[0], source, f"{line} src"), _parse_number(r[1], source, f"{line} dst")
        if not (s.is_integer() and d.is_integer() and s >= 0 and d >= 0):
            raise InvalidInput("src and dst must be accelerator ids (integers >= 0)", field=line, source=source)
        b = _parse_number(r[2], source, f"{line} bytes")
        if not math.isfinite(b) or b < 0:
            raise InvalidInput(f"bytes {r[2].strip()} must be finite and >= 0", field=line, source=source)
        if s == d and b > 0:
            raise InvalidInput(f"src = dst = {int(s)}: an accelerator does not send to itself", field=line,
                               source=source)
        src.append(int(s)); dst.append(int(d)); val.append(b)
    n = accelerators if accelerators is not None else max(max(src), max(dst)) + 1
    if accelerators is None and n > MAX_ACCELERATORS:
        k = int(np.argmax(np.maximum(src, dst)))
        raise InvalidInput(f"names accelerator {max(src[k], dst[k])}: more than the {MAX_ACCELERATORS} a matrix may "
                           "have", field=f"line {k + first_line}", source=source)
    if max(max(src), max(dst)) >= n:
        raise InvalidInput(f"names accelerator {max(max(src), max(dst))}, the instance has {n}",
                           field="src/dst", source=source)
    out = np.zeros((n, n))
    np.add.at(out, (np.array(src), np.array(dst)), np.array(val))
    return out


def load_switch_layout(path: str | os.PathLike, accelerators: int, ports: int | None = None,
                       radix: int | None = None) -> OCSLayout:
    """Read a fibre plan: the switch of each accelerator's port, an integer matrix of `accelerators` rows and
    one column per port (-1: not on an OCS), `.npy` or CSV (no header). Switches are numbered from 0; each has
    `radix` ports (default: the most fibres on one switch). `ports`, when given, must be the column count."""
    source = os.fspath(path)
    if source.endswith(".npy"):
        try:
            arr = np.load(io.BytesIO(read_bytes(source)), allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise InvalidInput(f"not a valid .npy file ({exc})", source=source) from None
        if arr.dtype.kind not in "iu" or arr.ndim != 2:
            raise InvalidInput(f"must be a 2-D integer matrix, got {arr.ndim}-D {arr.dtype}", field="switch_of_port",
                               source=source)
    elif source.endswith(".csv"):
        rows = [r for r in csv.reader(io.StringIO(read_text(source))) if r and any(c.strip() for c in r)]
        if not rows:
            raise InvalidInput("empty CSV", source=source)
        for i, r in enumerate(rows):
            if len(r) != len(rows[0]):
                raise InvalidInput(f"line {i + 1} has {len(r)} columns, line 1 has {len(rows[0])}",
                                   field="switch_of_port", source=source)
            bad = [c for c in r if not c.strip().lstrip("-").isdigit()]
            if bad:
                raise InvalidInput(f"line {i + 1}: {bad[0].strip()!r} is not a switch number (an integer, -1 for "
                                   "none)", field="switch_of_port", source=source)
        arr = np.array([[int(c) for c in r] for r in rows], dtype=np.int64)
    else:
        raise InvalidInput("unknown fibre plan format (expected .npy or .csv)", source=source)
    if arr.shape[0] != accelerators:
        raise InvalidInput(f"has {arr.shape[0]} rows, the traffic has {accelerators} accelerators",
                           field="switch_of_port", source=source)
    if arr.shape[1] > MAX_PORTS:
        raise InvalidInput(f"has {arr.shape[1]} columns (ports), more than {MAX_PORTS}", field="switch_of_port",
                           source=source)
    if ports is not None and arr.shape[1] != ports:
        raise InvalidInput(f"has {arr.shape[1]} columns, --ports is {ports}", field="switch_of_port", source=source)
    if arr.size and arr.min() < -1:
        raise InvalidInput(f"switch {int(arr.min())} (switches are numbered from 0; -1 = no OCS)",
                           field="switch_of_port", source=source)
    if not (arr >= 0).any():
        raise InvalidInput("no port is on an OCS", field="switch_of_port", source=source)
    if radix is None:                  # the most fibres on one switch
        radix = int(np.bincount(arr[arr >= 0]).max())
    try:
        return OCSLayout(arr, (int(radix),) * (int(arr.max()) + 1))
    except InvalidInput as exc:
        raise exc.located(source) from None


def save_traffic(tm: TrafficMatrix, path: str | os.PathLike) -> str:
    """Write a matrix as `.npy` or as CSV `src,dst,bytes` rows (nonzeros only)."""
    path = os.fspath(path)
    if path.endswith(".npy"):
        buf = io.BytesIO()
        np.save(buf, np.asarray(tm.bytes_, dtype=np.float64), allow_pickle=False)
        return atomic_write(path, buf.getvalue())
    if path.endswith(".csv"):
        i, j = np.nonzero(tm.bytes_)
        vals = tm.bytes_[i, j].tolist()
        lines = ["src,dst,bytes"] + [f"{a},{b},{v!r}" for a, b, v in zip(i.tolist(), j.tolist(), vals)]
        last = tm.accelerators - 1
        if not ((i == last).any() or (j == last).any()):  # pin N with an explicit zero entry
            lines.append(f"{last},0,0.0")
        return atomic_write(path, "\n".join(lines) + "\n")
    raise InvalidInput("unknown traffic format (expected .npy or .csv)", source=path)


def is_phases_file(path: str | os.PathLike) -> bool:
    """Is this TOML file a phases file (format = "ocs-synth/phases"), not an instance?"""
    import tomllib
    if not os.fspath(path).endswith(".toml"):
        return False
    text = read_text(path)
    try:
        return tomllib.loads(text).get("format") == PHASES_FORMAT
    except tomllib.TOMLDecodeError:   # malformed: whichever reader it was meant for reports it
        return PHASES_FORMAT in text


def load_phases(path: str | os.PathLike) -> tuple[str, tuple[TrafficPhase, ...]]:
    """Read a phases file: (name, phases). TOML with `format = "ocs-synth/phases"`, an optional `name`, and
    one `[[phase]]` table per phase: `name`, `matrix` (a .npy or .csv file, relative to this one) and
    `weight` (executions per step, > 0). Every matrix must have the same size."""
    import tomllib

    from .errors import unknown_key_message
    source = os.fspath(path)
    try:
        doc = tomllib.loads(read_text(source))
    except tomllib.TOMLDecodeError as exc:
        raise InvalidInput(f"malformed TOML: {exc}", source=source) from None
    if doc.get("format") != PHASES_FORMAT:
        raise InvalidInput(f"expected {PHASES_FORMAT!r}, got {doc.get('format')!r}", field="format", source=source)
    for k in doc:
        if k not in ("format", "version", "name", "phase"):
            raise InvalidInput(unknown_key_message(k, ("format", "version", "name", "phase")), field=k, source=source)
    if doc.get("version", 1) != 1:
        raise InvalidInput(f"unsupported version {doc.get('version')!r} (this reads 1)", field="version", source=source)
    tables = doc.get("phase")
    if not isinstance(tables, list) or not tables:
        raise InvalidInput("no [[phase]] tables", field="phase", source=source)
    folder = os.path.dirname(os.path.abspath(source))
    out: list[TrafficPhase] = []
    n = None
    for i, t in enumerate(tables):
        where = f"phase[{i}]"
        if not isinstance(t, dict):
            raise InvalidInput(f"must be a [[phase]] table, got {t!r}", field=where, source=source)
        for k in t:
            if k not in PHASE_KEYS:
                raise InvalidInput(unknown_key_message(k, PHASE_KEYS), field=f"{where}.{k}", source=source)
        for k in ("matrix", "weight"):
            if k not in t:
                raise InvalidInput("missing required key", field=f"{where}.{k}", source=source)
        name = t.get("name", f"phase{i}")
        if not isinstance(name, str) or not name or name in {p.name for p in out}:
            raise InvalidInput(f"must be a unique non-empty string, got {name!r}", field=f"{where}.name",
                               source=source)
        weight = t["weight"]
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not (math.isfinite(weight)
                                                                                    and weight > 0):
            raise InvalidInput(f"must be a number > 0, got {weight!r}", field=f"{where}.weight", source=source)
        if not isinstance(t["matrix"], str):
            raise InvalidInput(f"must be a file name, got {t['matrix']!r}", field=f"{where}.matrix", source=source)
        try:
            tm = load_traffic(os.path.join(folder, t["matrix"]))
        except InvalidInput as exc:
            raise InvalidInput(f"{t['matrix']}: {exc.rule}", field=f"{where}.matrix", source=source) from None
        if n is not None and tm.accelerators != n:
            raise InvalidInput(f"matrix is {tm.accelerators} x {tm.accelerators}, the first phase's is {n} x {n}",
                               field=f"{where}.matrix", source=source)
        if not (tm.bytes_ > 0).any():
            raise InvalidInput("the matrix has no bytes", field=f"{where}.matrix", source=source)
        if not math.isfinite(float(weight) * float(tm.bytes_.max()) * len(tables)):
            raise InvalidInput(f"{weight!r} x the matrix's largest entry overflows", field=f"{where}.weight",
                               source=source)
        n = tm.accelerators
        out.append(TrafficPhase(name, tm.bytes_, float(weight)))
    return str(doc.get("name", os.path.basename(source))), tuple(out)


def load_phases_traffic(path: str | os.PathLike) -> tuple[TrafficMatrix, tuple[TrafficPhase, ...]]:
    """A phases file as (the step's traffic matrix: the weighted sum, split by phase; the phases)."""
    from .model import phases_traffic
    name, phases = load_phases(path)
    return phases_traffic(phases, name), phases


def save_phases(phases: tuple[TrafficPhase, ...], path: str | os.PathLike, name: str = "") -> list[str]:
    """Write a phases file and one .npy matrix per phase beside it (`<stem>.<phase>.npy`); returns the paths
    written, the TOML last (so a reader never finds it pointing at a missing matrix)."""
    path = os.fspath(path)
    if not path.endswith(".toml"):
        raise InvalidInput("a phases file ends in .toml", source=path)
    stem = os.path.basename(path)[:-len(".toml")]
    folder = os.path.dirname(os.path.abspath(path))
    written, lines = [], [f'format = "{PHASES_FORMAT}"', "version = 1", f"name = {json.dumps(name or stem)}"]
    for k, p in enumerate(phases):
        safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in p.name) or f"phase{k}"
        fname = f"{stem}.{k}-{safe}.npy"
        written.append(save_traffic(TrafficMatrix(p.bytes_), os.path.join(folder, fname)))
        lines += ["", "[[phase]]", f"name = {json.dumps(p.name)}", f"matrix = {json.dumps(fname)}",
                  f"weight = {p.weight!r}"]
    written.append(atomic_write(path, "\n".join(lines) + "\n"))
    return written


# --------------------------------------------------------------------------------------------------
# Wiring files
# --------------------------------------------------------------------------------------------------
def wiring_to_dict(w: Wiring) -> dict[str, Any]:
    return {
        "format": WIRING_FORMAT, "version": WIRING_VERSION, "accelerators": w.accelerators,
        "ports_per_accelerator": w.ports_per_accelerator, "layout": w.layout.to_dict(),
        "circuits": [{"switch": c.switch, "a": [c.a, c.a_port], "b": [c.b, c.b_port]} for c in w.circuits],
        "solve": dict(w.solve) if w.solve is not None else None,
        "instance": dict(w.instance) if w.instance is not None else None,
    }


def _get(doc: Mapping[str, Any], key: str, kind: type | tuple, source: str, where: str | None = None):
    field = f"{where}.{key}" if where else key
    if key not in doc:
        raise InvalidInput("missing required key", field=field, source=source)
    v = doc[key]
    if isinstance(v, bool) and kind is not bool or not isinstance(v, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise InvalidInput(f"must be {names}, got {v!r}", field=field, source=source)
    return v


_WIRING_KEYS = ("format", "version", "accelerators", "ports_per_accelerator", "layout", "circuits", "solve",
                "instance")


def wiring_from_dict(doc: Any, *, source: str = "<wiring>") -> Wiring:
    """Read a wiring document; structural errors raise InvalidInput naming the field. The circuits are
    not checked against the rules here (that is `synth.verify`)."""
    from .errors import unknown_key_message
    if not isinstance(doc, dict):
        raise InvalidInput("must be a JSON object", source=source)
    fmt = doc.get("format")
    if isinstance(fmt, str) and fmt.startswith("ocs-synth/") and fmt != WIRING_FORMAT:
        # another of the tool's files where a wiring belongs (a schedule passed to `verify` on its own)
        raise InvalidInput(f'this is an {fmt} file, not a wiring ("{WIRING_FORMAT}")'
                           + (": verify it with `ocs-synth verify WIRING --schedule FILE`"
                              if fmt == "ocs-synth/schedule" else ""), field="format", source=source)
    for key in doc:
        if key not in _WIRING_KEYS:
            raise InvalidInput(unknown_key_message(key, _WIRING_KEYS), source=source)
    if fmt != WIRING_FORMAT:
        raise InvalidInput(f'must be "{WIRING_FORMAT}", got {fmt!r}', field="format", source=source)
    if doc.get("version") != WIRING_VERSION:
        raise InvalidInput(f"unsupported version {doc.get('version')!r} (this build reads {WIRING_VERSION})",
                           field="version", source=source)
    n = _get(doc, "accelerators", int, source)
    p = _get(doc, "ports_per_accelerator", int, source)
    if n < 1 or p < 1:
        raise InvalidInput("must be >= 1", field="accelerators" if n < 1 else "ports_per_accelerator",
                           source=source)
    if n > MAX_ACCELERATORS:       # its n x n matrices would not fit (1e9 was killed for memory)
        raise InvalidInput(f"must be <= {MAX_ACCELERATORS}, got {n}", field="accelerators", source=source)
    lay = doc.get("layout", {"kind": "by-port"})
    if not isinstance(lay, dict):
        raise InvalidInput("must be an object", field="layout", source=source)
    kind = lay.get("kind", "by-port")
    keys = ("kind", "switch_radix") + (("switch_of_port",) if kind == "explicit" else ())
    for key in lay:
        if key not in keys:
            raise InvalidInput(unknown_key_message(key, keys), field="layout", source=source)
    try:
        if kind == "by-port":
            radix = lay.get("switch_radix", n)
            if isinstance(radix, bool) or not isinstance(radix, int):
                raise InvalidInput(f"must be an integer, got {radix!r}", field="switch_radix")
            layout = OCSLayout.uniform(n, p, radix)
        elif kind == "explicit":
            sop = np.array(_get(lay, "switch_of_port", list, source, "layout"))
            if sop.shape != (n, p) or sop.dtype.kind not in "iu":
                raise InvalidInput(f"must be {n} rows of {p} integers", field="switch_of_port")
            layout = OCSLayout(sop, tuple(_get(lay, "switch_radix", list, source, "layout")))
        else:
            raise InvalidInput(f'must be "by-port" or "explicit", got {kind!r}', field="kind")
    except InvalidInput as exc:
        raise exc.located(source, "layout") from None
    circuits = []
    for i, c in enumerate(_get(doc, "circuits", list, source)):
        where = f"circuits[{i}]"
        if not isinstance(c, dict):
            raise InvalidInput("must be an object", field=where, source=source)
        extra = set(c) - {"switch", "a", "b"}
        if extra:
            raise InvalidInput(unknown_key_message(sorted(extra)[0], ["switch", "a", "b"]), field=where,
                               source=source)
        s = _get(c, "switch", int, source, where)
        ends = []
        for end in ("a", "b"):
            v = _get(c, end, list, source, where)
            if len(v) != 2 or any(isinstance(x, bool) or not isinstance(x, int) for x in v):
                raise InvalidInput(f"must be [accelerator, port], got {v!r}", field=f"{where}.{end}", source=source)
            ends.append(v)
        try:
            circuits.append(Circuit(s, ends[0][0], ends[0][1], ends[1][0], ends[1][1]))
        except InvalidInput as exc:
            raise exc.located(source, where) from None
    for key in ("solve", "instance"):
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise InvalidInput("must be an object or null", field=key, source=source)
    try:
        return Wiring(n, p, tuple(circuits), layout, solve=doc.get("solve"), instance=doc.get("instance"))
    except InvalidInput as exc:
        raise exc.located(source) from None


def read_json(path: str | os.PathLike) -> Any:
    """A JSON document; malformed JSON is an InvalidInput naming the file, line and column."""
    source = os.fspath(path)
    try:
        return json.loads(read_text(source))
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"malformed JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
                           source=source) from None


def load_wiring(path: str | os.PathLike) -> Wiring:
    return wiring_from_dict(read_json(path), source=os.fspath(path))


def save_wiring(w: Wiring, path: str | os.PathLike) -> str:
    return atomic_write(path, json_dumps(wiring_to_dict(w)))


# --------------------------------------------------------------------------------------------------
# Proof logs
# --------------------------------------------------------------------------------------------------
PROOF_LOG_FORMAT = "ocs-synth/proof-log"


def open_proof_log(path: str | os.PathLike) -> ProofLog:
    """The proof log at `path` (JSON lines: a header {"format": "ocs-synth/proof-log", "version": 1}, then
    one entry per line: {"problem", "case", "verdict", "T", "clock_s"}, and "value" when the verdict is
    "bound"), created when missing or empty;
    every entry added later is appended and flushed at once, so a run killed at any point keeps what it
    settled. A torn last line (no newline: a kill mid-write) is cut off; nothing else is ever rewritten."""
    source = check_output_path(path)
    log = ProofLog()
    data = read_text(source) if os.path.exists(source) else ""
    whole = data[:data.rfind("\n") + 1]            # up to the last full line
    header = json.dumps({"format": PROOF_LOG_FORMAT, "version": 1}) + "\n"
    if data and not whole and not header.startswith(data):      # one line, and not a torn header: not ours
        raise InvalidInput("not a proof log (no header line)", field="format", source=source)
    if whole:
        for no, line in enumerate(whole.split("\n")[:-1], 1):
            if not line.strip():
                continue
            try:
                doc = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInput(f"malformed JSON: {exc.msg} at line {no}", source=source) from None
            if no == 1:
                if not isinstance(doc, dict) or doc.get("format") != PROOF_LOG_FORMAT or doc.get("version") != 1:
                    raise InvalidInput(f'line 1 is not a proof log header ({{"format": "{PROOF_LOG_FORMAT}", '
                                       '"version": 1})', field="format", source=source)
                continue
            where = f"line {no}"
            if not isinstance(doc, dict):
                raise InvalidInput("expected an object", field=where, source=source)
            problem, case = _get(doc, "problem", str, source, where), _get(doc, "case", str, source, where)
            verdict = _get(doc, "verdict", str, source, where)
            if verdict not in ProofLog.VERDICTS:
                raise InvalidInput(f"must be one of {', '.join(ProofLog.VERDICTS)}, got {verdict!r}",
                                   field=f"{where}.verdict", source=source)
            entry: dict = {"verdict": verdict}
            for key in ("T", "clock_s"):
                v = _get(doc, key, (int, float), source, where)
                if not math.isfinite(v) or v < 0:
                    raise InvalidInput(f"must be a number >= 0, got {v!r}", field=f"{where}.{key}", source=source)
                entry[key] = float(v)
            if verdict == "bound":      # a table's lower bound; +-inf when its model is infeasible / unbounded
                v = _get(doc, "value", (int, float), source, where)
                if math.isnan(v):
                    raise InvalidInput("must be a number, got NaN", field=f"{where}.value", source=source)
                entry["value"] = float(v)
            log.add(problem, case, entry)
    if len(whole) < len(data):         # a torn last line: cut it off, the next entry starts a line of its own
        os.truncate(source, len(whole.encode("utf-8")))
    if not whole:
        with open(source, "w", encoding="utf-8") as fh:
            fh.write(header)

    def append(problem: str, case: str, entry: dict) -> None:
        with open(source, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"problem": problem, "case": case, **entry}, separators=(",", ":")) + "\n")

    return ProofLog(log.entries, sink=append)


# --------------------------------------------------------------------------------------------------
# OCS cross-connect tables
# --------------------------------------------------------------------------------------------------
XCONNECT_HEADER = "switch,port_in,port_out"


def xconnect_tables(w: Wiring) -> dict[int, str]:
    """Per switch, the CSV an OCS controller loads: one duplex cross-connect per row, OCS port numbers
    (`OCSLayout.ocs_port`: the ports attached to a switch numbered in accelerator-major order)."""
    ocs_port = w.layout.ocs_port
    rows: dict[int, list[str]] = {s: [] for s in range(w.layout.switches)}
    for c in w.circuits:
        rows[c.switch].append(f"{c.switch},{ocs_port[c.a, c.a_port]},{ocs_port[c.b, c.b_port]}")
    return {s: "\n".join([XCONNECT_HEADER] + r) + "\n" for s, r in rows.items()}


FIBRES_HEADER = "accelerator,port,switch,switch_port"


def cabling_tables(layout: OCSLayout) -> dict[str, str]:
    """The fibre plan the cross-connects assume, as two CSVs: `fibres.csv`, one row per fibre (which OCS port
    each accelerator port is plugged into: the cabling), and `fibre-plan.csv`, the switch of each
    accelerator's port (one row per accelerator, -1 = none), as `wire --switch-layout` reads it: a wiring
    made later on the same cabling (another deployment, a re-wire around a failure) starts from it."""
    a, k = np.nonzero(layout.switch_of_port >= 0)
    fibres = np.stack([a, k, layout.switch_of_port[a, k], layout.ocs_port[a, k]], axis=1)
    out = {}
    for name, arr, header in (("fibres.csv", fibres, FIBRES_HEADER), ("fibre-plan.csv", layout.switch_of_port, "")):
        buf = io.StringIO()
        np.savetxt(buf, arr, fmt="%d", delimiter=",", header=header, comments="")
        out[name] = buf.getvalue()
    return out


def write_xconnect(w: Wiring, folder: str | os.PathLike) -> list[str]:
    """Write `switch-<s>.csv` for every switch into an existing folder, and the cabling they assume
    (:func:`cabling_tables`); returns the paths."""
    folder = os.fspath(folder)
    if not os.path.isdir(folder):
        raise InvalidInput("folder does not exist", source=folder)
    tables = {f"switch-{s:03d}.csv": text for s, text in xconnect_tables(w).items()} | cabling_tables(w.layout)
    return [atomic_write(os.path.join(folder, name), text) for name, text in tables.items()]


def read_xconnect(texts: Mapping[int, str], layout: OCSLayout) -> list[Circuit]:
    """Circuits back from cross-connect tables (the inverse of :func:`xconnect_tables`). A table that does not
    fit the layout (a bad header or row, a port not on that switch, a port in two cross-connects) raises
    InvalidInput naming the switch's table and the row."""
    back = {}
    a_idx, k_idx = np.nonzero(layout.switch_of_port >= 0)
    for a, k in zip(a_idx.tolist(), k_idx.tolist()):
        back[(int(layout.switch_of_port[a, k]), int(layout.ocs_port[a, k]))] = (a, k)
    out, used = [], set()
    for s, text in texts.items():
        source = f"switch-{s:03d}.csv"
        rows = list(csv.reader(io.StringIO(text)))
        if not rows or ",".join(c.strip() for c in rows[0]) != XCONNECT_HEADER:
            raise InvalidInput(f"the first row must be {XCONNECT_HEADER!r}", field="header", source=source)
        for i, row in enumerate(rows[1:], 2):
            if not row:
                continue
            where = f"row {i}"
            try:
                sw, pin, pout = (int(x) for x in row)
            except ValueError:
                raise InvalidInput(f"expected three integers (switch, port_in, port_out), got {row!r}",
                                   field=where, source=source) from None
            if sw != s:
                raise InvalidInput(f"names switch {sw} in the table of switch {s}", field=f"{where}.switch",
                                   source=source)
            ends = []
            for name, port in (("port_in", pin), ("port_out", pout)):
                if (sw, port) not in back:
                    raise InvalidInput(f"switch {sw} has no port {port} in this layout", field=f"{where}.{name}",
                                       source=source)
                if (sw, port) in used:
                    raise InvalidInput(f"port {port} is already cross-connected", field=f"{where}.{name}",
                                       source=source)
                used.add((sw, port))
                ends.append(back[(sw, port)])
            (a, ap), (b, bp) = ends
            if a == b:
                raise InvalidInput(f"joins two ports of accelerator {a}", field=where, source=source)
            out.append(Circuit(sw, a, ap, b, bp))
    return out


_QUIET_LOCK = threading.Lock()
_QUIET = {"depth": 0, "saved": -1}    # blocks open, in any thread, and the descriptor 1 they will restore


@contextlib.contextmanager
def quiet_stdout():
    """HiGHS writes a banner to the process's stdout even with output off; keep it out of ours (a CLI may
    be printing JSON there): file descriptor 1 points at /dev/null inside the block. Threads share the
    descriptor, so the blocks are counted: the first to open points it away, the last to close points it
    back (two threads each saving and restoring it could leave stdout on /dev/null for good)."""
    import sys
    with _QUIET_LOCK:
        if _QUIET["depth"] == 0:
            sys.stdout.flush()
            _QUIET["saved"] = os.dup(1)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, 1)
            os.close(devnull)
        _QUIET["depth"] += 1
    try:
        yield
    finally:
        with _QUIET_LOCK:
            _QUIET["depth"] -= 1
            if _QUIET["depth"] == 0:
                os.dup2(_QUIET["saved"], 1)
                os.close(_QUIET["saved"])
