"""Export a schedule as an MSCCL algorithm XML (the format msccl-tools emits and the MSCCL runtime loads).

Subset used: protocol Simple, one channel, one thread block per (peer, direction) on each GPU; buffers
``i`` (input), ``o`` (output) and ``s`` (scratch, unused here); step types ``s`` (send), ``r`` (receive),
``rrc`` (receive, reduce with the local chunk, copy to the output). Dependencies: a send of a chunk depends
on the last step of the same GPU that received it (``depid``/``deps``; that step gets ``hasdep="1"``).
Buffer offsets, in chunks: all-gather is in place in ``o`` (chunk c at offset c); reduce-scatter and
all-reduce reduce in place in ``i`` (all-reduce: ``o`` = ``i``); all-to-all sends ``i`` offset d*k+j to
``o`` offset s*k+j. Every transfer must be direct between two ranks of the collective (forwarded transfers
are not expressible in this subset: export a store-and-forward schedule).
"""
from __future__ import annotations

from xml.sax.saxutils import quoteattr

from .errors import InvalidInput
from .model import CollectiveKind, Schedule

_COLL = {CollectiveKind.ALLGATHER: "allgather", CollectiveKind.REDUCESCATTER: "reduce_scatter",
         CollectiveKind.ALLREDUCE: "allreduce", CollectiveKind.ALLTOALL: "alltoall"}


def to_msccl_xml(schedule: Schedule, name: str = "ocs-synth") -> str:
    coll = schedule.collective
    if coll.kind not in _COLL:
        raise InvalidInput(f"MSCCL export covers allgather, reducescatter, allreduce and alltoall, not "
                           f"{coll.kind.value}", field="collective")
    ranks = list(coll.ranks)
    n, C = len(ranks), schedule.chunks
    idx = {a: i for i, a in enumerate(ranks)}
    k = C // (n * n) if coll.kind == CollectiveKind.ALLTOALL else C // n
    for si, step in enumerate(schedule.steps):
        for t in step:
            if t.path:
                raise InvalidInput(f"step {si}: transfer {t.src} -> {t.dst} is forwarded through {list(t.path)}; "
                                   "MSCCL export needs direct transfers between ranks", field="schedule")

    def buffers(c: int, src: int, dst: int) -> tuple[str, int, str, int]:
        if coll.kind == CollectiveKind.ALLGATHER:
            return "o", c, "o", c
        if coll.kind == CollectiveKind.ALLTOALL:
            s, rest = divmod(c, n * k)
            d, j = divmod(rest, k)
            return "i", d * k + j, "o", s * k + j
        return "i", c, "i", c

    # per GPU: thread blocks keyed by (peer, 'send'|'recv'), each a list of step dicts
    tbs: list[dict[tuple[int, str], list[dict]]] = [dict() for _ in range(n)]
    last_recv: list[dict[int, tuple[tuple[int, str], int]]] = [dict() for _ in range(n)]
    for step in schedule.steps:
        pending = []
        for t in step:
            s, d = idx[t.src], idx[t.dst]
            sb, so, db, do = buffers(t.chunk, s, d)
            send_ops = tbs[s].setdefault((d, "send"), [])
            dep = last_recv[s].get(t.chunk)
            send_ops.append({"type": "s", "srcbuf": sb, "srcoff": so, "dstbuf": db, "dstoff": do, "dep": dep})
            recv_ops = tbs[d].setdefault((s, "recv"), [])
            recv_ops.append({"type": "rrc" if t.reduce else "r", "srcbuf": sb, "srcoff": so, "dstbuf": db,
                             "dstoff": do, "dep": None})
            pending.append((d, t.chunk, (s, "recv"), len(recv_ops) - 1))
        for d, c, key, pos in pending:   # receives of this step feed later sends
            last_recv[d][c] = (key, pos)
    lines = [f'<algo name={quoteattr(name + "-" + schedule.algorithm)} proto="Simple" nchannels="1" '
             f'nchunksperloop="{C}" ngpus="{n}" coll="{_COLL[coll.kind]}" inplace="1" outofplace="0" '
             f'minBytes="0" maxBytes="0">']
    for g in range(n):
        keys = sorted(tbs[g], key=lambda kv: (kv[1], kv[0]))
        tb_id = {key: i for i, key in enumerate(keys)}
        depended = {(tb_id[dep[0]], dep[1]) for ops in tbs[g].values() for op in ops if op["dep"]
                    for dep in [op["dep"]] if dep[0] in tb_id}
        i_chunks = C if coll.kind != CollectiveKind.ALLTOALL else n * k
        o_chunks = {CollectiveKind.REDUCESCATTER: k}.get(coll.kind, C if coll.kind != CollectiveKind.ALLTOALL else n * k)
        lines.append(f'  <gpu id="{g}" i_chunks="{i_chunks}" o_chunks="{o_chunks}" s_chunks="0">')
        for key in keys:
            peer, direction = key
            send, recv = (peer, -1) if direction == "send" else (-1, peer)
            lines.append(f'    <tb id="{tb_id[key]}" send="{send}" recv="{recv}" chan="0">')
            for si, op in enumerate(tbs[g][key]):
                depid, deps = (-1, -1)
                if op["dep"] and op["dep"][0] in tb_id:
                    depid, deps = tb_id[op["dep"][0]], op["dep"][1]
                hasdep = int((tb_id[key], si) in depended)
                lines.append(f'      <step s="{si}" type="{op["type"]}" srcbuf="{op["srcbuf"]}" '
                             f'srcoff="{op["srcoff"]}" dstbuf="{op["dstbuf"]}" dstoff="{op["dstoff"]}" cnt="1" '
                             f'depid="{depid}" deps="{deps}" hasdep="{hasdep}"/>')
            lines.append("    </tb>")
        lines.append("  </gpu>")
    lines.append("</algo>")
    return "\n".join(lines) + "\n"
