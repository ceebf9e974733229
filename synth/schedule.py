"""Collective schedules: chunk layout, the semantic checker that simulates their data, timing, and the
schedule file format (JSON ``ocs-synth/schedule`` v1).

Chunks. A collective on ranks g[0..n-1] moves `chunks` chunks (sizes: the collective's message split
evenly). All-gather: chunk c starts at rank c // k (k = chunks / n) and must reach every rank.
Reduce-scatter: every rank starts with its contribution to every chunk; rank c // k must end with chunk c
reduced over all n ranks, each contribution counted once. All-reduce: the same, every rank ends with every
chunk fully reduced. All-to-all: chunk (s * n + d) * k + j starts at s and must reach d. Broadcast: the root
holds every chunk, every rank must end with all.

A step is a set of concurrent transfers; a transfer reads the sender's value from before the step and
copies it to the receiver or reduces it into the receiver's value. The checker simulates this from the
precondition and asserts the postcondition, that each sender holds what it sends, that no reduction counts
a contribution twice and no copy discards one, that every hop is a circuit of the wiring, and that no
directed circuit carries more chunks in a step than `chunks_per_circuit_step` x its circuits (when set).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import InvalidInput
from .model import Collective, CollectiveKind, Schedule, Transfer

SCHEDULE_FORMAT = "ocs-synth/schedule"
SCHEDULE_VERSION = 1
REDUCING = (CollectiveKind.REDUCESCATTER, CollectiveKind.ALLREDUCE)


def chunk_bytes(schedule: Schedule) -> float:
    coll, n = schedule.collective, len(schedule.collective.ranks)
    if coll.kind in (CollectiveKind.ALLTOALL, CollectiveKind.ALLTOALLV):   # M = what a rank sends its n-1 peers
        k = schedule.chunks // (n * n)
        return coll.bytes_ / ((n - 1) * k) if k else 0.0
    return coll.bytes_ / schedule.chunks


def _initial(kind: CollectiveKind, n: int, C: int, root_idx: int) -> list[dict[int, int]]:
    """Per rank index: chunk -> bitmask of contributions held."""
    full = (1 << n) - 1
    if kind == CollectiveKind.ALLGATHER:
        k = C // n
        return [{c: 1 << r for c in range(r * k, (r + 1) * k)} for r in range(n)]
    if kind in REDUCING:
        return [{c: 1 << r for c in range(C)} for r in range(n)]
    if kind in (CollectiveKind.ALLTOALL, CollectiveKind.ALLTOALLV):
        k = C // (n * n)
        return [{(r * n + d) * k + j: 1 << r for d in range(n) for j in range(k)} for r in range(n)]
    if kind == CollectiveKind.BROADCAST:
        return [{c: full for c in range(C)} if r == root_idx else {} for r in range(n)]
    raise InvalidInput(f"no chunk model for {kind.value}", field="collective")


def _final_ok(kind: CollectiveKind, n: int, C: int, state: list[dict[int, int]], root_idx: int) -> str | None:
    full = (1 << n) - 1
    if kind == CollectiveKind.ALLGATHER or kind == CollectiveKind.BROADCAST:
        for r in range(n):
            missing = [c for c in range(C) if c not in state[r]]
            if missing:
                return f"rank {r} lacks chunk {missing[0]} at the end"
        return None
    if kind == CollectiveKind.REDUCESCATTER:
        k = C // n
        for c in range(C):
            r = c // k
            if state[r].get(c, 0) != full:
                return f"rank {r} holds chunk {c} reduced over {bin(state[r].get(c, 0)).count('1')} of {n} ranks"
        return None
    if kind == CollectiveKind.ALLREDUCE:
        for r in range(n):
            for c in range(C):
                if state[r].get(c, 0) != full:
                    return f"rank {r} holds chunk {c} reduced over {bin(state[r].get(c, 0)).count('1')} of {n} ranks"
        return None
    k = C // (n * n)
    for s in range(n):
        for d in range(n):
            for j in range(k):
                c = (s * n + d) * k + j
                if c not in state[d]:
                    return f"rank {d} never receives chunk {c} from rank {s}"
    return None


@dataclass(frozen=True)
class ScheduleCheck:
    ok: bool
    violations: tuple[str, ...]
    steps: int
    max_chunks_per_circuit_step: int

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "violations": list(self.violations), "steps": self.steps,
                "max_chunks_per_circuit_step": self.max_chunks_per_circuit_step}


def check_schedule(schedule: Schedule, adjacency: np.ndarray, chunks_per_circuit_step: int | None = None,
                   max_violations: int = 20) -> ScheduleCheck:
    """Simulate a schedule on a wiring (its circuit-count adjacency, accelerator ids) and check it."""
    coll = schedule.collective
    ranks = list(coll.ranks)
    n, C = len(ranks), schedule.chunks
    idx = {a: i for i, a in enumerate(ranks)}
    bad: list[str] = []
    N = adjacency.shape[0]
    if max(ranks) >= N:
        return ScheduleCheck(False, (f"rank {max(ranks)} is not an accelerator of the wiring (0..{N - 1})",), 0, 0)
    if coll.kind in (CollectiveKind.ALLTOALL, CollectiveKind.ALLTOALLV):
        if C % (n * n):
            return ScheduleCheck(False, (f"all-to-all needs chunks divisible by n^2 = {n * n}, got {C}",), 0, 0)
    elif coll.kind != CollectiveKind.BROADCAST and C % n:
        return ScheduleCheck(False, (f"chunks ({C}) must be a multiple of the {n} ranks",), 0, 0)
    root_idx = idx.get(coll.root, 0) if coll.root is not None else 0
    state = _initial(coll.kind, n, C, root_idx)
    size = chunk_bytes(schedule)
    worst = 0
    for si, step in enumerate(schedule.steps):
        updates: list[tuple[int, int, int, bool, int]] = []
        use: dict[tuple[int, int], int] = {}
        for ti, t in enumerate(step):
            where = f"step {si} transfer {ti} ({t.src} -> {t.dst}, chunk {t.chunk})"
            if t.src not in idx or t.dst not in idx:
                bad.append(f"{where}: endpoint is not a rank of the collective")
                continue
            if not 0 <= t.chunk < C:
                bad.append(f"{where}: chunk outside 0..{C - 1}")
                continue
            if abs(t.bytes_ - size) > 1e-9 * max(size, 1.0):
                bad.append(f"{where}: {t.bytes_:g} bytes, chunks are {size:g}")
            hops = [t.src, *t.path, t.dst]
            for a, b in zip(hops, hops[1:]):
                if not (0 <= a < N and 0 <= b < N) or adjacency[a, b] <= 0:
                    bad.append(f"{where}: no circuit between {a} and {b}")
                    break
                use[(a, b)] = use.get((a, b), 0) + 1
            val = state[idx[t.src]].get(t.chunk, 0)
            if not val:
                bad.append(f"{where}: sender does not hold the chunk")
                continue
            updates.append((idx[t.dst], t.chunk, val, t.reduce, ti))
        for (a, b), cnt in use.items():
            per = cnt / max(1, adjacency[a, b])
            worst = max(worst, int(np.ceil(per)))
            if chunks_per_circuit_step is not None and cnt > chunks_per_circuit_step * adjacency[a, b]:
                bad.append(f"step {si}: circuit {a} -> {b} carries {cnt} chunks, allowed "
                           f"{chunks_per_circuit_step * adjacency[a, b]}")
        for d, c, val, red, ti in updates:
            cur = state[d].get(c, 0)
            if red:
                if cur & val:
                    bad.append(f"step {si} transfer {ti}: reducing chunk {c} into rank {ranks[d]} counts "
                               f"contributions twice")
                    continue
                state[d][c] = cur | val
            else:
                if cur & ~val:
                    bad.append(f"step {si} transfer {ti}: copying chunk {c} to rank {ranks[d]} discards "
                               "contributions it holds")
                    continue
                state[d][c] = val
        if len(bad) >= max_violations:
            break
    if not bad:
        msg = _final_ok(coll.kind, n, C, state, root_idx)
        if msg:
            bad.append("postcondition: " + msg)
    return ScheduleCheck(not bad, tuple(bad[:max_violations]), len(schedule.steps), worst)


def schedule_time_us(schedule: Schedule, adjacency: np.ndarray, port_bytes_per_s: float, alpha_us: float,
                     link_latency_us: float = 0.0) -> float:
    """Analytical time: per step alpha + the longest path's hop latency + the most loaded directed
    circuit's bytes / its bandwidth (circuits x B)."""
    return joint_time_us((schedule,), adjacency, port_bytes_per_s, alpha_us, link_latency_us)


def joint_time_us(schedules, adjacency: np.ndarray, port_bytes_per_s: float, alpha_us: float,
                  link_latency_us: float = 0.0) -> float:
    """The analytical time of schedules that run at the same time, step by step (their loads add up)."""
    total = 0.0
    for si in range(max((len(s.steps) for s in schedules), default=0)):
        load: dict[tuple[int, int], float] = {}
        hops_max = 0
        for s in schedules:
            for t in (s.steps[si] if si < len(s.steps) else ()):
                hops = [t.src, *t.path, t.dst]
                hops_max = max(hops_max, len(hops) - 1)
                for a, b in zip(hops, hops[1:]):
                    load[(a, b)] = load.get((a, b), 0.0) + t.bytes_
        worst = max((v / (adjacency[a, b] * port_bytes_per_s) for (a, b), v in load.items()), default=0.0)
        total += alpha_us + hops_max * link_latency_us + worst * 1e6
    return total


# --------------------------------------------------------------------------------------------------
def schedule_to_dict(s: Schedule, extra: dict | None = None) -> dict[str, Any]:
    c = s.collective
    return {"format": SCHEDULE_FORMAT, "version": SCHEDULE_VERSION,
            "collective": {"kind": c.kind.value, "ranks": list(c.ranks), "bytes": c.bytes_, "root": c.root},
            "chunks": s.chunks, "algorithm": s.algorithm,
            "steps": [[{"src": t.src, "dst": t.dst, "chunk": t.chunk, "bytes": t.bytes_, "reduce": t.reduce,
                        **({"path": list(t.path)} if t.path else {})} for t in step] for step in s.steps],
            **(extra or {})}


def schedule_from_dict(doc: Any, *, source: str = "<schedule>") -> Schedule:
    if not isinstance(doc, dict):
        raise InvalidInput("must be a JSON object", source=source)
    if doc.get("format") != SCHEDULE_FORMAT:
        raise InvalidInput(f'must be "{SCHEDULE_FORMAT}", got {doc.get("format")!r}', field="format", source=source)
    if doc.get("version") != SCHEDULE_VERSION:
        raise InvalidInput(f"unsupported version {doc.get('version')!r}", field="version", source=source)
    try:
        c = doc["collective"]
        if not isinstance(c, dict):
            raise InvalidInput(f"must be an object, got {c!r}", field="collective")
        coll = Collective(c["kind"], tuple(c["ranks"]), float(c["bytes"]), c.get("root"))
        steps = []
        if not isinstance(doc["steps"], list):
            raise InvalidInput(f"must be a list of steps, got {doc['steps']!r}", field="steps")
        for si, step in enumerate(doc["steps"]):
            ts = []
            if not isinstance(step, list):
                raise InvalidInput(f"must be a list of transfers, got {step!r}", field=f"steps[{si}]")
            for ti, t in enumerate(step):
                if not isinstance(t, dict):
                    raise InvalidInput(f"must be an object, got {t!r}", field=f"steps[{si}][{ti}]")
                for key in ("src", "dst", "chunk"):
                    if not isinstance(t.get(key), int) or isinstance(t.get(key), bool):
                        raise InvalidInput(f"must be an integer, got {t.get(key)!r}", field=f"steps[{si}][{ti}].{key}")
                path = t.get("path", [])
                if not isinstance(path, list) or any(not isinstance(v, int) or isinstance(v, bool) for v in path):
                    raise InvalidInput(f"must be a list of accelerators, got {path!r}", field=f"steps[{si}][{ti}].path")
                ts.append(Transfer(t["src"], t["dst"], t["chunk"], float(t["bytes"]), bool(t.get("reduce", False)),
                                   tuple(path)))
            steps.append(tuple(ts))
        return Schedule(coll, int(doc["chunks"]), tuple(steps), doc.get("algorithm", ""))
    except KeyError as exc:
        raise InvalidInput("missing required key", field=str(exc.args[0]), source=source) from None
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"malformed schedule: {exc}", source=source) from None
    except InvalidInput as exc:
        raise exc.located(source) from None


def load_schedule(path) -> Schedule:
    """Read a schedule file; errors name the file and the field."""
    import os
    from .formats import read_json
    return schedule_from_dict(read_json(path), source=os.fspath(path))
