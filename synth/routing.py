"""Balanced multi-path routing by multiplicative weights (min-max link utilization, i.e. max concurrent
flow). Each round routes every demand on its shortest path under link lengths that grow exponentially with
the utilization the previous rounds put on each link; the answer is the average of the rounds' routings,
a feasible fractional routing, so its max utilization is an achieved time (an upper bound on the optimum).
This is the zero-sum-game view of max concurrent flow (router vs. link adversary, Garg-Koenemann /
Fleischer style), converging like O(sqrt(log links / rounds)).

Two things make a round worth more (moe5t-576's searched wiring, 225 rounds: 0.7138 -> 0.7107 ms; kimi-k2-288,
300 rounds: 1.3224 -> 1.3122 ms; BENCHMARKS.md): the sources are taken in MWU_BLOCKS blocks (a seeded
partition) and the lengths grow after each block, as in Fleischer's commodity-by-commodity rounds, so a
block's paths see the load the blocks before it placed in the same round (the all-sources Dijkstra is split,
not repeated: the same work); and round k weighs k^AVERAGE_POWER in the average, since later rounds route
under better lengths.

Vectorized: one Dijkstra (scipy.sparse.csgraph) per block of sources, and path loads accumulated hop by hop
for all the block's demands at once through the predecessor matrix.
"""
from __future__ import annotations

import atexit
import os
import subprocess
import sys
import threading
import time
from typing import Callable

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import dijkstra

from .network import Network, highs_threads

MWU_BLOCKS = 8          # source blocks per round, the lengths updated after each
AVERAGE_POWER = 0.5     # round k weighs k ** AVERAGE_POWER in the averaged routing
PATH_LP_TOLERANCE = 1e-6   # the path LP's interior-point gap (HiGHS: 1e-8): its value is its routing's (an upper
                           # bound whatever the gap); pd-96's 40,566 paths: 16.8 s -> 7.6 s, the time within 1e-8
PATH_LP_IPM_MAX_LINKS = 3000   # links up to which the path LP is solved by interior point, beyond by PDLP: the
                               # capacity rows' block of IPM's normal equations fills in as links^2 (kimi-k2-288's
                               # 5,184 links, 122k paths: 26 s, PDLP 3.5 s; deepseek-v3-144's 2,592: 1.3 s, PDLP 18 s)
PATH_BUILD_SHARE = 0.5   # of the path LP's clock at most for MWU's rounds and collecting their paths
PDLP_SHARE = 0.6         # of the time left, for a PDLP path LP when MWU may go on after it (kimi-k2-288: 3 s)
HELPER_MIN_WORK = 1_000_000   # sources x links from which a helper process runs half of every block (its start: 0.7 s)
PDLP_RETRY_SHARE = 0.9   # of MWU's paths (its latest rounds) in a PDLP path LP again after one left no point
PDLP_RETRY_MIN_S = 0.5   # the least clock left for that retry
MWU_ON_MIN_S = 0.1    # the least clock left on which MWU goes on after a path LP that did not beat it (or had no time to run)


def _path_loads(links: int, rows: np.ndarray, r: np.ndarray, s: np.ndarray, d: np.ndarray, amount: np.ndarray,
                eid: np.ndarray) -> np.ndarray:
    """Loads of the demands s -> d (`amount`) along the shortest-path trees `rows` (predecessors; source
    s's tree is row r). Accumulated hop by hop, not through _path_links: the MWU hot path (13% faster on
    moe5t-576)."""
    loads = np.zeros(links)
    cur = d.copy()
    alive = cur != s
    while alive.any():
        prev = rows[r[alive], cur[alive]]
        e = eid[prev, cur[alive]]
        loads += np.bincount(e, weights=amount[alive], minlength=links)
        cur[alive] = prev
        alive = cur != s
    return loads


class _Halves:
    """The work of one MWU round split into blocks of sources, each block in two halves: half h of block k
    is a Dijkstra from its sources under the current lengths and its demands' loads along the paths. A
    block's loads are always half 0 + half 1, in that order, so a round gives the same bits whether the
    halves run one after another or in two processes (`_Helper`). Built from arrays alone: links `src -> dst`
    on `nodes` nodes and `work[k][h]` = (the half's sources, each demand's row among them, its source,
    destination and amount), as `split_work` makes it (a helper process is sent only its halves)."""

    def __init__(self, nodes: int, src: np.ndarray, dst: np.ndarray, work: list) -> None:
        self.links = int(src.size)
        self.eid = np.full((nodes, nodes), -1, dtype=np.int32 if self.links < 2 ** 31 else np.int64)
        self.eid[src, dst] = np.arange(self.links)
        # one CSR structure; each Dijkstra gets the current lengths in its order (the links are distinct pairs)
        self.g = sp.csr_matrix((np.arange(1, self.links + 1, dtype=np.float64), (src, dst)), shape=(nodes, nodes))
        self.order = self.g.data.astype(np.int64) - 1
        self.work = work

    @staticmethod
    def split_work(nodes: int, s: np.ndarray, d: np.ndarray, amount: np.ndarray, blocks: list[np.ndarray]) -> list:
        """Each block's two halves of sources with their demands, in the demands' order (`s` ascending, as
        np.nonzero gives them: each half's demands are slices of the source-sorted arrays, not a mask over
        all of them; 4,608 accelerators' 21M demands: 4.5 s of np.isin -> 0.3 s); indices as int32."""
        if s.size > 1 and (np.diff(s) < 0).any():
            o = np.argsort(s, kind="stable")
            s, d, amount = s[o], d[o], amount[o]
        first = np.searchsorted(s, np.arange(nodes + 1))
        idx = np.int32 if nodes < 2 ** 31 else np.int64
        row = np.zeros(nodes, dtype=idx)
        work = []
        for b in blocks:
            halves = []
            for half in np.array_split(b, 2):
                ordered = np.sort(half)
                lo, hi = first[ordered], first[ordered + 1]
                size = hi - lo
                at = np.repeat(lo - np.cumsum(size) + size, size) + np.arange(int(size.sum()))
                row[half] = np.arange(half.size)
                halves.append((half, row[s[at]], s[at].astype(idx), d[at].astype(idx), amount[at]))
            work.append(halves)
        return work

    def run(self, k: int, h: int, length: np.ndarray, want_rows: bool = False):
        """(loads, the half's predecessor rows or None) of half `h` of block `k` under link lengths `length`."""
        half, r, s, d, amount = self.work[k][h]
        self.g.data = length[self.order]
        _, rows = dijkstra(self.g, directed=True, indices=half, return_predecessors=True)
        return _path_loads(self.links, rows, r, s, d, amount, self.eid), (rows if want_rows else None)


def _helper_main() -> None:
    """A helper process's loop over pickled messages on stdin: ("setup", the arguments of `_Halves`), then ("run",
    k, lengths, want rows) -> (loads, rows) of half 1 of block k on stdout; ("call", module, function, args)
    -> ("ok", its value) or ("error", what it raised) (`Beside`); ("ping",) -> "ready"; until stdin closes."""
    import importlib
    import pickle
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    halves = None
    _Helper._lock.acquire()      # never a helper of its own: what it is asked runs here alone
    while True:
        try:
            msg = pickle.load(inp)
        except (EOFError, OSError):
            return
        if msg[0] == "setup":
            halves = _Halves(*msg[1:])
            continue
        if msg[0] == "call":
            try:
                answer = ("ok", getattr(importlib.import_module(msg[1]), msg[2])(*msg[3]))
            except Exception as exc:        # the caller computes it itself
                answer = ("error", f"{type(exc).__name__}: {exc}")
        else:
            answer = "ready" if msg[0] == "ping" else halves.run(msg[1], 1, msg[2], msg[3])
        pickle.dump(answer, out, protocol=pickle.HIGHEST_PROTOCOL)
        out.flush()


class _Helper:
    """A second process for the second half of every block (scipy's Dijkstra holds the GIL, so threads
    would not run at once): a Python started on `_helper_main` in a session of its own (a Ctrl-C at the
    terminal reaches only this process, which stops it; multiprocessing's spawn would re-run the caller's
    main script in it). Started on first use and kept for the next routings; one caller at a time, others run
    both halves themselves. A helper that fails, or whose answer an exception left unread, is stopped, and the
    caller does the half itself (the next routing starts a new one)."""
    _lock = threading.Lock()
    _proc = None

    def __init__(self) -> None:
        self.ok = True
        self.pending = False      # asked, answer not read yet

    @classmethod
    def _started(cls) -> bool:
        """The process is running (started now if not); the caller holds the lock."""
        if cls._proc is None or cls._proc.poll() is not None:
            try:
                # it imports this package from where the caller did, installed or not
                root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
                path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
                cls._proc = subprocess.Popen(
                    [sys.executable, "-c", "from synth.routing import _helper_main; _helper_main()"],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True,
                    env={**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": path})
            except OSError:                        # no processes here: the caller runs alone
                cls._proc = None
        return cls._proc is not None

    @classmethod
    def warm(cls) -> bool:
        """Start the helper and wait until it answers (a benchmark times the routings without its start);
        False if it cannot."""
        with cls._lock:
            if not cls._started():
                return False
            helper = cls()
            helper._send(("ping",))
            helper.pending = helper.ok
            return helper.ok and helper.answer() == "ready"

    @classmethod
    def acquire(cls, arrays: tuple | None) -> "_Helper | None":
        """The helper, set up for `_Halves(*arrays)` (unless None), or None (busy, or no process could be
        started)."""
        if not cls._lock.acquire(blocking=False):
            return None
        if not cls._started():
            cls._lock.release()
            return None
        helper = cls()
        if arrays is not None:
            helper._send(("setup", *arrays))
        return helper if helper.ok else helper.release()

    def _send(self, msg) -> None:
        import pickle
        try:
            pickle.dump(msg, self._proc.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            self._proc.stdin.flush()
        except OSError:
            self.ok = False

    def ask(self, k: int, length: np.ndarray, want_rows: bool) -> bool:
        """Start half 1 of block `k` in the helper; False when it cannot take it."""
        if self.ok:
            self._send(("run", k, length, want_rows))
            self.pending = self.ok
        return self.ok

    def answer(self):
        """What the helper computed, or None when it failed (the caller computes it)."""
        import pickle
        try:
            out = pickle.load(self._proc.stdout)
        except (EOFError, OSError, pickle.UnpicklingError):
            self.ok = False
            return None
        self.pending = False
        return out

    def release(self) -> None:
        """Let the next caller have the helper; one that failed or has an answer unread (an exception between
        `ask` and `answer`) is stopped."""
        cls = type(self)
        try:
            if not self.ok or self.pending:
                cls.stop()
        finally:
            cls._lock.release()

    @classmethod
    def stop(cls) -> None:
        if cls._proc is not None:
            cls._proc.kill()
            cls._proc.wait()
            for f in (cls._proc.stdin, cls._proc.stdout):
                try:
                    f.close()
                except OSError:           # a message still buffered for the dead process: dropped
                    pass
            cls._proc = None


atexit.register(_Helper.stop)


class Beside:
    """`fn(*args)` computed in the helper process (`_Helper`) while this process does other work: `start`
    sends it (a module-level function, by its module and name; picklable arguments) and returns at once,
    `result` waits for its value. The search's moves run this way on the second core (`solvers._search`).
    While it runs the helper is taken, so an MWU routing meanwhile runs alone."""

    def __init__(self, helper: _Helper) -> None:
        self._helper = helper
        self._open = True          # the helper still held for this job

    @classmethod
    def start(cls, fn: Callable, *args) -> "Beside | None":
        """Started, or None: one core, the helper busy, or no process could be started (the caller then
        computes it itself)."""
        if _cores() < 2:
            return None
        helper = _Helper.acquire(None)
        if helper is None:
            return None
        helper._send(("call", fn.__module__, fn.__name__, args))
        helper.pending = helper.ok
        if not helper.ok:
            helper.release()
            return None
        return cls(helper)

    def result(self):
        """Its value, waited for; None when the helper failed or the function raised (the caller computes it
        itself). Either way the helper is free again."""
        try:
            out = self._helper.answer()      # a Ctrl-C while waiting leaves it unread: the helper is stopped
        finally:
            self._open = False
            self._helper.release()
        return out[1] if isinstance(out, tuple) and out[0] == "ok" else None

    def cancel(self) -> None:
        """Give it up (a Ctrl-C in the caller): the helper is stopped, and the next user starts another.
        Nothing to do once `result` has returned or raised."""
        if self._open:
            self._open = False
            self._helper.pending = True    # an answer unread: `release` stops the process
            self._helper.release()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:         # not on Linux
        return os.cpu_count() or 1


def mwu_routing(net: Network, demand: np.ndarray, rounds: int = 60, time_limit_s: float = 30.0,
                eta: float = 1.0, progress: Callable[[str], None] | None = None,
                lengths_out: list | None = None, preds_out: list | None = None, jitter: float = 1e-3,
                seed: int = 0, blocks: int = MWU_BLOCKS, workers: int | None = None,
                resume: dict | None = None, rounds_out: list | None = None) -> tuple[float, np.ndarray, int]:
    """(time, link loads in bytes, rounds run) of the averaged MWU routing of `demand`.

    `resume`: a dict that carries the run across calls on the same network and demand; empty, the run starts
    afresh and leaves its state there, and a later call with it goes on from the round it stopped at (the
    same rounds as one longer run: a second clock on a wiring adds to the first).

    `rounds_out`: a list each round's own link loads are appended to (a routing each, for `best_mix`).

    `workers`: 2 runs the second half of every block in a helper process (`_Helper`), 1 runs alone, None
    picks 2 when this process has two cores and the routing is big enough to repay the helper's start
    (HELPER_MIN_WORK); the answer is the same bits either way.

    >>> import numpy as np
    >>> ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    >>> dem = np.zeros((4, 4)); dem[0, 1] = 3.0
    >>> 1.5 <= mwu_routing(ring, dem, rounds=200)[0] < 1.6     # optimum 1.5: half direct, half around
    True
    """
    t0 = time.perf_counter()
    n = net.accelerators
    s, d = np.nonzero(demand[:n, :n] > 0)
    amount = demand[s, d]
    cap = net.capacity_bps
    # Equal lengths make every round's shortest paths follow Dijkstra's tie order, which on a structured
    # graph (many equal shortest paths) piles the first rounds onto the same links; a tiny seeded jitter
    # spreads the ties without changing which paths are shortest.
    rng = np.random.default_rng(seed)
    length = (1.0 + jitter * rng.random(net.links)) / cap
    total, weights = np.zeros(net.links), 0.0
    best = (np.inf, None)
    srcs = np.unique(s)
    parts = np.array_split(rng.permutation(srcs), min(blocks, max(srcs.size, 1)))
    scale = None         # a whole round's largest utilization (the last round's), which normalizes the steps
    first = 1
    if resume:           # go on from where the last call on this routing stopped
        length, total, weights, best, scale = (resume[k] for k in ("length", "total", "weights", "best", "scale"))
        first = resume["run"] + 1
    halves = _Halves(net.nodes, net.src, net.dst, _Halves.split_work(net.nodes, s, d, amount, parts))
    if workers is None:
        workers = 2 if _cores() >= 2 and srcs.size * net.links >= HELPER_MIN_WORK and rounds >= 10 else 1
    # the helper is sent its halves alone (4,608 accelerators: 250 MB of them, 510 MB of all the demands)
    arrays = (net.nodes, net.src, net.dst, [(None, w[1]) for w in halves.work])
    helper = _Helper.acquire(arrays) if workers >= 2 and srcs.size >= 2 and first <= rounds else None
    pred = np.empty((net.nodes, net.nodes), dtype=np.int64) if preds_out is not None else None
    want = pred is not None
    run = first - 1
    try:
        for run in range(first, rounds + 1):
            began = time.perf_counter()
            loads = np.zeros(net.links)
            for k, blk in enumerate(halves.work):
                asked = helper is not None and helper.ask(k, length, want)
                part, rows0 = halves.run(k, 0, length, want)
                answer = helper.answer() if asked else None
                part1, rows1 = answer if answer is not None else halves.run(k, 1, length, want)
                part = part + part1
                if want:
                    pred[blk[0][0]], pred[blk[1][0]] = rows0, rows1
                loads += part
                if scale is None:        # the first block: its share of a round, scaled up
                    scale = max(float((part / cap).max()) * len(halves.work), 1e-300)
                length = length * np.exp(eta * (part / cap) / scale)
                length /= length.min() * cap.min()  # keep numbers in range; only ratios matter
            if want:                    # every round's shortest-path trees: sampling one per demand rounds the average
                preds_out.append(pred[:n, :n].astype(np.int16 if net.nodes < 2 ** 15 else np.int32))
            scale = max(float((loads / cap).max()), 1e-300)
            if rounds_out is not None:
                rounds_out.append(loads)
            w = run ** AVERAGE_POWER
            total += w * loads
            weights += w
            avg_theta = float((total / weights / cap).max())
            if avg_theta < best[0]:
                best = (avg_theta, total / weights)
            if progress and run % 10 == 0:
                progress(f"routing round {run}: {avg_theta:.4g} s")
            now = time.perf_counter()
            if now - t0 + (now - began) > time_limit_s:    # another round like this one would end past the clock
                break
    finally:
        if helper is not None:
            helper.release()
    if resume is not None:
        resume.update(length=length, total=total, weights=weights, best=best, scale=scale, run=run)
    if lengths_out is not None:   # the final congestion-aware link lengths, for callers that need paths
        lengths_out.append(length)
    return best[0], best[1], run


MIX_TAIL_S = 0.1       # of best_mix's clock kept for reading and re-evaluating the weights
MIX_RATE = 1.9 / (150 ** 1.5 * 10364)   # s per links x columns^1.5 of the mix's LP (moe5t-576: 150 rounds in 1.9 s)
MIX_LEARN_MIN = 50     # columns from which a mix's LP time tells this machine's speed (below, its set-up dominates)
_mix_speed = [1.0]     # this machine's mix LP time over MIX_RATE's, as this process's mixes measured it


def _rate() -> float:
    return MIX_RATE * _mix_speed[0]


def mix_columns(links: int, time_limit_s: float) -> int:
    """The routings `best_mix` takes on `links` links within `time_limit_s` (its LP's time grows as columns^1.5,
    MIX_RATE times this machine's speed as the process's earlier mixes measured it; three fifths of the clock,
    for the machine's noise)."""
    return int((0.6 * time_limit_s / (_rate() * max(links, 1))) ** (2 / 3)) if time_limit_s > 0 else 0


def mix_time(links: int, columns: int) -> float:
    """The clock `mix_columns` would ask for `columns` routings on `links` links."""
    return _rate() * max(links, 1) * max(columns, 0) ** 1.5 / 0.6


def _learn_speed(links: int, columns: int, took: float, finished: bool) -> None:
    """Record what a mix's LP took against MIX_RATE's prediction: its ratio when it finished, at least that when
    the clock stopped it (an Intel Xeon 1.75x slower than the AMD EPYC MIX_RATE was measured on: moe5t-576's
    300-round mix ran into its clock and the whole score 1 s past its own)."""
    if columns < MIX_LEARN_MIN:
        return
    ratio = took / (MIX_RATE * links * columns ** 1.5)
    _mix_speed[0] = min(max(ratio if finished else max(ratio, _mix_speed[0]), 0.25), 8.0)


def best_mix(routings: list[np.ndarray], cap: np.ndarray, time_limit_s: float) -> tuple[float, np.ndarray | None]:
    """(time, weights) of the best convex combination of whole routings (each a vector of link loads in bytes): a
    combination routes each demand by the same weights over theirs, so it is a routing, and its time is
    re-evaluated exactly whatever the LP's tolerance. min t s.t. sum_r w_r u_r <= t, sum w = 1, w >= 0 (HiGHS
    interior point, the utilizations scaled to about 1). MWU's average weighs its rounds by a fixed rule; the
    LP's weights took moe5t-576's 300 rounds from 0.70802 to 0.70419 ms (the bound 0.70220: the gap 0.83% ->
    0.28%), where 1,000 rounds averaged give 0.7058. Columns beyond what `time_limit_s` fits (MIX_RATE) are
    averaged in adjacent groups (the weights are then the groups'); (inf, None) when the LP gives no answer in
    time."""
    import highspy
    t0 = time.perf_counter()
    if not routings:
        return np.inf, None
    U = np.stack(routings, axis=1) / cap[:, None]                    # links x columns
    n, k = U.shape
    fits = mix_columns(n, time_limit_s)
    if fits < 2:
        return np.inf, None
    if k > fits:                 # adjacent columns averaged (the last ones, ECMP's and the average's, kept)
        groups = np.array_split(np.arange(k - 2), max(1, fits - 2))
        U = np.column_stack([U[:, g].mean(axis=1) for g in groups] + [U[:, -2], U[:, -1]])
        k = U.shape[1]
    scale = float(U.max(axis=0).min())
    if not scale > 0:
        return np.inf, None
    from .formats import quiet_stdout
    with quiet_stdout():                          # HiGHS's banner, at a process's first model
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", highs_threads(0))
    h.setOptionValue("solver", "ipm")
    inf = highspy.kHighsInf
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = k + 1, n + 1
    lp.col_cost_ = np.r_[np.zeros(k), 1.0]
    lp.col_lower_, lp.col_upper_ = np.zeros(k + 1), np.full(k + 1, inf)
    lp.row_lower_, lp.row_upper_ = np.r_[np.full(n, -inf), 1.0], np.r_[np.zeros(n), 1.0]
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_ = np.r_[np.arange(k + 1) * (n + 1), k * (n + 1) + n]
    lp.a_matrix_.index_ = np.r_[np.tile(np.arange(n + 1), k), np.arange(n)]
    lp.a_matrix_.value_ = np.r_[np.c_[U.T / scale, np.ones(k)].ravel(), -np.ones(n)]
    h.passModel(lp)
    # the clock less what building the LP took (moe5t-576, 300 rounds: 0.4-0.6 s), so the mix ends within it
    left = time_limit_s - (time.perf_counter() - t0) - MIX_TAIL_S
    if left <= 0:
        return np.inf, None
    h.setOptionValue("time_limit", float(left))
    ran = time.perf_counter()
    with quiet_stdout():
        h.run()
    _learn_speed(n, k, time.perf_counter() - ran, h.getModelStatus() == highspy.HighsModelStatus.kOptimal)
    w = np.clip(np.asarray(h.getSolution().col_value, dtype=np.float64)[:k], 0.0, None)
    if w.size != k or not w.sum() > 0:
        return np.inf, None
    w /= w.sum()
    return float((U @ w).max()), w


def _path_links(net: Network, pred: np.ndarray, s: np.ndarray, d: np.ndarray, eid: np.ndarray) -> np.ndarray:
    """The links of each demand's path in a shortest-path forest (demands x hops, destination first,
    padded with -1)."""
    cols = []
    cur = d.copy()
    alive = cur != s
    while alive.any():
        col = np.full(s.size, -1, dtype=np.int32)
        prev = pred[s[alive], cur[alive]]
        col[alive] = eid[prev, cur[alive]]
        cols.append(col)
        cur[alive] = prev
        alive = cur != s
    return np.stack(cols, axis=1) if cols else np.full((s.size, 1), -1, dtype=np.int32)


class _PathSet:
    """Distinct paths (rows: demand index, then link ids padded with -1), deduplicated by a 64-bit hash of
    the row. A collision can only drop a path, never invent one, so the LP stays a real routing."""

    def __init__(self, nodes: int) -> None:
        # one odd multiplier per row position: a demand index and at most nodes - 1 hops
        self.mult = np.random.default_rng(12345).integers(1, 2 ** 63, size=nodes + 1, dtype=np.uint64) | np.uint64(1)
        self.keys = np.empty(0, dtype=np.uint64)
        self.parts: list[np.ndarray] = []

    def _hash(self, rows: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore"):
            return ((rows.astype(np.int64) + 1).astype(np.uint64) * self.mult[:rows.shape[1]]).sum(axis=1)

    def add(self, rows: np.ndarray) -> int:
        """Add the rows not seen yet; returns how many were new."""
        keys = self._hash(rows)
        keys, first = np.unique(keys, return_index=True)
        pos = np.minimum(np.searchsorted(self.keys, keys), max(self.keys.size - 1, 0))
        fresh = (self.keys[pos] != keys) if self.keys.size else np.ones(keys.size, dtype=bool)
        if fresh.any():
            self.parts.append(rows[first[fresh]])
            self.keys = np.sort(np.concatenate([self.keys, keys[fresh]]))
        return int(fresh.sum())

    @property
    def size(self) -> int:
        return int(self.keys.size)

    def rows(self) -> np.ndarray:
        width = max(p.shape[1] for p in self.parts)
        return np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1])), constant_values=-1) for p in self.parts])


def _routed_time(flow: np.ndarray, demand_of: np.ndarray, on_link: sp.csr_matrix, amount: np.ndarray,
                 cap: np.ndarray) -> float:
    """The time of the routing an LP's path flows describe (`on_link`: links x paths incidence), each
    demand's flows scaled to carry exactly its amount: a value that holds whatever the LP's tolerances (an
    interior point is feasible only to them)."""
    flow = np.maximum(flow, 0.0)
    sent = np.bincount(demand_of, weights=flow, minlength=amount.size)
    if not (sent > 0).all():
        return float("inf")
    flow = flow * (amount / sent)[demand_of]
    return float((on_link @ flow / cap).max())


def _without(paths: np.ndarray, demands: int, lo: int, hi: int) -> np.ndarray:
    """`paths` less rows lo to hi - 1, but for the first of them of each demand that has no other path."""
    keep = np.ones(paths.shape[0], dtype=bool)
    keep[lo:hi] = False
    covered = np.zeros(demands, dtype=bool)
    covered[paths[keep, 0]] = True
    _, first = np.unique(paths[lo:hi, 0], return_index=True)
    keep[lo + first[~covered[paths[lo + first, 0]]]] = True
    return paths[keep]


def _path_lp(paths: np.ndarray, a: np.ndarray, cap: np.ndarray, time_limit_s: float, method: str = "ipm",
             duals_out: list | None = None) -> tuple[str, float]:
    """(status, time) of the max-concurrent-flow LP over `paths` (rows: demand index, then link ids padded
    with -1) for the demands `a` on links of capacity `cap` (both scaled): the time of the routing its flows
    describe, also PDLP's last iterate when it stopped short; inf when the LP gave no point."""
    from .network import _solve_lp
    P, E, m = paths.shape[0], cap.size, a.size
    links = paths[:, 1:]
    pi, hi = np.nonzero(links >= 0)
    A_ub = sp.csr_matrix((np.concatenate([np.ones(pi.size), -cap]),
                          (np.concatenate([links[pi, hi], np.arange(E)]), np.concatenate([pi, np.full(E, P)]))),
                         shape=(E, P + 1))
    A_eq = sp.csr_matrix((np.ones(P), (paths[:, 0], np.arange(P))), shape=(m, P + 1))
    c = np.zeros(P + 1)
    c[-1] = 1.0
    status, _, x = _solve_lp(c, A_ub, np.zeros(E), A_eq, a, np.zeros(P + 1), np.full(P + 1, np.inf), time_limit_s,
                             False, duals_out, PATH_LP_TOLERANCE, method)
    if status != "optimal" and not x.size:
        return status, float("inf")
    return status, _routed_time(x[:P], paths[:, 0], A_ub[:, :P], a, cap)


def two_hop_routing(net: Network, demand: np.ndarray, time_limit_s: float = 30.0) -> tuple[float, str]:
    """(time, how) of the best routing of `demand` over each demand's direct link and its two-hop paths (the
    max-concurrent-flow LP over them, HiGHS interior point): a routing, so an upper bound on the optimum,
    which it meets where no demand gains from a third hop; inf when a demand has no such path (or the LP no
    answer within the clock). Quick on a sparse demand, where MWU is slowest: a TP all-reduce in groups of 4
    on kimi-k2-288's relay V's (864 pairs, 4,600 paths) in 0.1 s, exact with two circuits per pair and
    1.290 us against the optimum's 1.207 with one (its relays' third hops), where MWU stood at 1.39 us
    after 0.8 s. The same value as `network.hop_limited_routing(net, demand, 2)`, whose arc LP aggregates by
    destination: destinations x 2 x links columns, 3 million on kimi-k2-288, where this takes one column per
    path."""
    n = net.accelerators
    s, d = np.nonzero(demand[:n, :n] > 0)
    if s.size == 0:
        return 0.0, "two-hop lp"
    amount = demand[s, d]
    E, eid = net.links, net.link_id
    # every demand's direct link, then through each neighbour x of its source that has a link on to it
    out = sp.csr_matrix((np.arange(E) + 1, (net.src, net.dst)), shape=(net.nodes, net.nodes))
    direct = eid[s, d]
    one = np.flatnonzero(direct >= 0)
    deg = np.diff(out.indptr)[s]
    j = np.repeat(np.arange(s.size), deg)
    at = np.repeat(out.indptr[s], deg) + np.arange(deg.sum()) - np.repeat(np.cumsum(deg) - deg, deg)
    x, first = out.indices[at], out.data[at] - 1
    second = eid[x, d[j]]
    two = second >= 0
    paths = np.concatenate([np.stack([one, direct[one], np.full(one.size, -1)], axis=1),
                            np.stack([j[two], first[two], second[two]], axis=1)])
    if np.unique(paths[:, 0]).size < s.size:
        return float("inf"), "two-hop lp (a demand beyond two hops)"
    d_scale, c_scale = float(amount.max()), float(net.capacity_bps.max())
    status, value = _path_lp(paths, amount / d_scale, net.capacity_bps / c_scale, time_limit_s)
    return value * d_scale / c_scale, f"two-hop lp ({paths.shape[0]} paths" + \
        ("" if status == "optimal" else f", {status}") + ")"


def path_lp_routing(net: Network, demand: np.ndarray, time_limit_s: float = 30.0, rounds: int = 300,
                    max_columns: int = 1_000_000, seed: int = 0,
                    progress: Callable[[str], None] | None = None, mwu_rounds: int | None = None,
                    resume: dict | None = None, lengths_out: list | None = None) -> tuple[float, str]:
    """(time, how) of the best routing found by MWU, then the max-concurrent-flow LP restricted to the paths
    the MWU rounds used (a path LP, HiGHS interior point or PDLP), then column generation: a shortest path under the
    LP's capacity duals joins when its reduced cost is negative, until none does (then the answer is the
    optimum over all paths: the routing LP's optimum), progress stalls or time runs out. The MWU average is
    a mix of its rounds' paths, so the path LP is never worse (seeding it with fewer rounds made it worse than
    MWU, and column generation from there adds a path or two per LP on max-concurrent-flow's degenerate
    duals); 300 rounds of MWU alone stay 3-7% above the optimum on 64-144 accelerators, whose paths
    already hold an optimal routing. Paths are deduplicated exactly (rows of link ids); beyond
    `max_columns` paths the MWU answer stands; they are collected from the last round back, until
    PATH_BUILD_SHARE of the clock (kimi-k2-288: 20 ms a round, as long as the round itself). On more than
    PATH_LP_IPM_MAX_LINKS links the LPs are solved by PDLP (relative KKT tolerance PATH_LP_TOLERANCE): its
    duals are that accurate, so "no improving path" there is not claimed as the optimum, and PDLP gets
    PDLP_SHARE of the time left when `mwu_rounds` is given. A PDLP LP that leaves no point (at its clock: its
    convergence on these LPs is erratic) is solved again without MWU's earliest rounds' paths (all but
    PDLP_RETRY_SHARE of them; every demand keeps one). When no LP beat MWU (PDLP did not
    converge: deepseek-v3-144 under PDLP at 15 s), MWU goes on from its last round up to `mwu_rounds` rounds
    in the rest, so the answer is not worse than MWU alone's by much more than the LP's time. `resume` (as
    `mwu_routing`'s) lets a later call go on: its MWU adds up to `rounds` rounds to the last call's, and its
    LP takes the paths of the new rounds. `lengths_out` receives the capacity rows' duals (one length per link,
    >= 0) of the LP whose routing is the answer; nothing when MWU's answer stands.

    >>> ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    >>> dem = np.zeros((4, 4)); dem[0, 1] = 3.0
    >>> t, how = path_lp_routing(ring, dem); round(t, 6), how.split(" ")[0]
    (1.5, 'path-lp')
    """
    t0 = time.perf_counter()
    n = net.accelerators
    preds: list = []
    state: dict = {} if resume is None else resume
    theta, _, run = mwu_routing(net, demand, rounds=state.get("run", 0) + rounds, time_limit_s=time_limit_s / 3,
                                preds_out=preds, seed=seed, resume=state)
    mwu_how = f"mwu ({run} rounds)"
    s, d = np.nonzero(demand[:n, :n] > 0)
    if s.size == 0 or not preds:
        return theta, mwu_how
    amount = demand[s, d]
    m, E, eid = s.size, net.links, net.link_id
    dem_col = np.arange(m, dtype=np.int32)[:, None]
    pset = _PathSet(net.nodes)
    for pred in reversed(preds):         # the last rounds first: they weigh most in MWU's average
        pset.add(np.concatenate([dem_col, _path_links(net, pred.astype(np.int64), s, d, eid)], axis=1))
        if pset.size > max_columns:
            return _mwu_on(net, demand, theta, mwu_how, mwu_how, state, mwu_rounds,
                           time_limit_s - (time.perf_counter() - t0), seed)
        if time.perf_counter() - t0 > time_limit_s * PATH_BUILD_SHARE:
            break                        # the LP gets the rest with the rounds' paths so far
    preds.clear()
    d_scale, c_scale = float(amount.max()), float(net.capacity_bps.max())
    a, cap = amount / d_scale, net.capacity_bps / c_scale
    best, how, gens, last, stale = theta, mwu_how, 0, np.inf, 0
    method = "pdlp" if E > PATH_LP_IPM_MAX_LINKS else "ipm"
    tag = ", pdlp" if method == "pdlp" else ""

    rounds_paths = pset.size          # MWU's paths, its latest rounds first; column generation's come after
    note = ""

    def solve(paths: np.ndarray) -> tuple[str, float, np.ndarray | None, np.ndarray | None]:
        """(status, time, link lengths, demand rows' duals) of the path LP over `paths` in the clock left; the
        best answer kept."""
        nonlocal best, how
        left = time_limit_s - (time.perf_counter() - t0)
        duals: list = []
        status, value = _path_lp(paths, a, cap, left * PDLP_SHARE if tag and mwu_rounds else left, method, duals)
        value *= d_scale / c_scale
        y = np.maximum(-duals[0][:E], 0.0) if duals else None       # the capacity rows' duals: link lengths
        if value < best:
            best, how = value, f"path-lp ({paths.shape[0]} paths, {gens} generations{tag}{note}" + \
                ("" if status == "optimal" else ", unconverged") + ")"
            if lengths_out is not None and y is not None:
                lengths_out[:] = [y]
        return status, value, y, duals[0][E:] if duals else None

    while True:
        if time_limit_s - (time.perf_counter() - t0) < 0.5:
            break
        paths = pset.rows()
        status, value, y, u = solve(paths)
        if tag and not np.isfinite(value) and time_limit_s - (time.perf_counter() - t0) >= PDLP_RETRY_MIN_S:
            # PDLP's convergence on these degenerate LPs is erratic, and at its clock it leaves no point
            # (kimi-k2-288, one LP: 113,082 paths unconverged after 6.7 s, without MWU's earliest tenth optimal
            # in 0.4 s; on a 3.6 s clock MWU's answer, 2.1% above the LP's, stood): again without those. An
            # unconverged point stands as it is (the clock a retry takes is the next phases' under `phases`)
            paths = _without(paths, a.size, int(rounds_paths * PDLP_RETRY_SHARE), rounds_paths)
            note = ", retried"
            status, value, y, u = solve(paths)
        if status != "optimal" or not np.isfinite(value):
            break
        P = paths.shape[0]
        # column generation: a demand's shortest path under the capacity duals prices out when its length is
        # below the demand row's dual (reduced cost < 0). When none does, the LP is optimal over all paths.
        stale = stale + 1 if value > last * (1 - 1e-6) else 0
        last = min(last, value)
        eps = 1e-9 * max(float(y.max()), 1e-300)      # csgraph drops zero-length links; ties stay shortest
        g = sp.csr_matrix((y + eps, (net.src, net.dst)), shape=(net.nodes, net.nodes))
        srcs = np.unique(s)
        dist, pred_rows = dijkstra(g, directed=True, indices=srcs, return_predecessors=True)
        row_of = np.full(net.nodes, -1)
        row_of[srcs] = np.arange(srcs.size)
        new = np.flatnonzero(dist[row_of[s], d] < u * (1 - 1e-7) - 1e-12)
        if new.size == 0:
            if value <= best:
                how = f"path-lp ({P} paths, {gens} generations, " + \
                      (f"pdlp{note}, no improving path)" if tag else "optimal)")
            break
        if stale >= 1 or time.perf_counter() - t0 > time_limit_s:   # degenerate duals: ties, no progress
            break
        pred = np.empty((net.nodes, net.nodes), dtype=np.int64)
        pred[srcs] = pred_rows
        added = pset.add(np.concatenate([dem_col[new], _path_links(net, pred, s[new], d[new], eid)], axis=1))
        if added == 0 or pset.size > max_columns:
            break
        if progress:
            progress(f"path LP {value:.6g} s, {added} new paths")
        gens += 1
    return _mwu_on(net, demand, best, how, mwu_how, state, mwu_rounds, time_limit_s - (time.perf_counter() - t0), seed)


def _mwu_on(net: Network, demand: np.ndarray, best: float, how: str, mwu_how: str, state: dict,
            mwu_rounds: int | None, left: float, seed: int) -> tuple[float, str]:
    """`path_lp_routing`'s answer: when no LP beat MWU, MWU goes on from `state` up to `mwu_rounds` rounds in
    the `left` seconds (if given)."""
    if how != mwu_how or not mwu_rounds or left < MWU_ON_MIN_S:
        return best, how
    theta, _, run = mwu_routing(net, demand, rounds=mwu_rounds, time_limit_s=left, seed=seed, resume=state)
    return (theta, f"mwu ({run} rounds)") if theta < best else (best, how)
