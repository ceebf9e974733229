"""Routing and flow models on a network graph (accelerators and switches as nodes, directed links with
capacities). Shared by the evaluator and by solvers (as objectives); vectorized with numpy and
scipy.sparse.csgraph, no per-flow Python loops.

- :func:`ecmp_loads`: link loads of a demand matrix under ECMP with per-hop splitting in proportion to link
  capacity over all shortest (hop-count) paths: exact fluid split, processed level by level for all
  destinations at once.
- :func:`sample_paths`: each flow's sub-flows on shortest paths chosen hop by hop (seeded), as a sparse
  flow x link incidence matrix.
- :func:`maxmin_rates`: max-min fair rates by progressive filling; :func:`completion_time`: when the last
  flow finishes under max-min sharing that is recomputed whenever flows finish.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import shortest_path

from .errors import InvalidInput

_highs_last = threading.local()


def highs_threads(n: int) -> int:
    """Make the calling thread's HiGHS scheduler fit `n` threads (0: HiGHS's own count, the cores here); returns
    n for the model's `threads` option. HiGHS keeps one task scheduler per calling thread, sized by the first
    solve's `threads`; a later solve on that thread asking for another count fails at once (HighsStatus kError,
    model status not set; HiGHS.jl#130, one scheduler per thread since HiGHS#818). So every model of the project
    sets its count through here, and the scheduler is reset whenever the count changes or was not set here:
    a model left at HiGHS's default (2 threads on 2 cores) had sized it, and the Moore bound's b-matching LP
    (1 thread) then failed on every call, leaving kimi-k2-288's bound 0.52% lower after a moe5t-576 solve in
    the same process."""
    n = int(n)
    if getattr(_highs_last, "n", None) != n:
        import highspy
        highspy.Highs.resetThreadScheduler(True)
    _highs_last.n = n
    return n

UNREACHABLE = np.iinfo(np.int32).max
ECMP_BLOCK = 1_000_000   # (link, destination) entries per block of destinations in `ecmp_loads` (cache-sized)


@dataclass(frozen=True, eq=False)
class Network:
    """Directed links `src[e] -> dst[e]` with `capacity_bps[e]` (bytes/s) and `latency_us[e]`. Nodes
    0..accelerators-1 are accelerators; the rest are switches with `node_latency_us`. `forwards[v]` says
    whether traffic may pass through node v (switches always; accelerators in direct networks)."""

    name: str
    accelerators: int
    nodes: int
    src: np.ndarray
    dst: np.ndarray
    capacity_bps: np.ndarray
    latency_us: np.ndarray
    node_latency_us: np.ndarray
    forwards: np.ndarray
    meta: dict = field(default_factory=dict)

    @classmethod
    def from_pairs(cls, name: str, accelerators: int, nodes: int, pairs: np.ndarray, capacity_bps: np.ndarray,
                   latency_us: np.ndarray | float, node_latency_us: np.ndarray | float = 0.0,
                   forwards: np.ndarray | None = None, meta: dict | None = None) -> "Network":
        """Build from undirected (u, v) pairs (duplex links: one directed link each way); parallel pairs
        merge into one link with the summed capacity."""
        pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
        cap = np.broadcast_to(np.asarray(capacity_bps, dtype=np.float64), (len(pairs),))
        lat = np.broadcast_to(np.asarray(latency_us, dtype=np.float64), (len(pairs),))
        s = np.concatenate([pairs[:, 0], pairs[:, 1]])
        d = np.concatenate([pairs[:, 1], pairs[:, 0]])
        c = np.concatenate([cap, cap])
        la = np.concatenate([lat, lat])
        key = s * nodes + d
        uniq, inv = np.unique(key, return_inverse=True)
        capm = np.bincount(inv, weights=c, minlength=len(uniq))
        latm = np.zeros(len(uniq))
        np.maximum.at(latm, inv, la)
        node_lat = np.broadcast_to(np.asarray(node_latency_us, dtype=np.float64), (nodes,)).copy()
        fw = np.ones(nodes, dtype=bool) if forwards is None else np.asarray(forwards, dtype=bool)
        return cls(name, accelerators, nodes, uniq // nodes, uniq % nodes, capm, latm, node_lat, fw, meta or {})

    @property
    def links(self) -> int:
        return int(len(self.src))

    @cached_property
    def adjacency(self) -> sp.csr_matrix:
        return sp.csr_matrix((np.ones(self.links), (self.src, self.dst)), shape=(self.nodes, self.nodes))

    @cached_property
    def link_id(self) -> np.ndarray:
        """`link_id[u, v]`: the index of the link u -> v (links are distinct pairs), -1 where there is none
        (nodes x nodes)."""
        eid = np.full((self.nodes, self.nodes), -1, dtype=np.int64)
        eid[self.src, self.dst] = np.arange(self.links)
        return eid

    @cached_property
    def dist(self) -> np.ndarray:
        """Hop distances (nodes x nodes); UNREACHABLE where there is no path. Paths pass only through
        nodes that forward."""
        if not self.forwards.all():
            return self._dist_endpoints()
        d = shortest_path(self.adjacency, method="D", unweighted=True, directed=True)
        return np.where(np.isfinite(d), d, UNREACHABLE).astype(np.int32)

    def _dist_endpoints(self) -> np.ndarray:
        fw_links = self.forwards[self.src]
        g = sp.csr_matrix((np.ones(int(fw_links.sum())), (self.src[fw_links], self.dst[fw_links])),
                          shape=(self.nodes, self.nodes))
        d_fw = shortest_path(g, method="D", unweighted=True, directed=True)
        # from a non-forwarding node v: 1 + min over its out-neighbours u of d_fw[u, :]
        out = d_fw.copy()
        for v in np.flatnonzero(~self.forwards):
            nb = self.dst[self.src == v]
            row = np.full(self.nodes, np.inf)
            if nb.size:
                row = 1 + d_fw[nb].min(axis=0)
            row[v] = 0
            out[v] = row
        return np.where(np.isfinite(out), out, UNREACHABLE).astype(np.int32)

    @cached_property
    def path_latency_us(self) -> np.ndarray:
        """Latency of the lowest-latency shortest-hop path between accelerators (links plus the nodes
        passed through), accelerators x accelerators."""
        n = self.accelerators
        w = self.latency_us + np.where(self.dst < n, 0.0, self.node_latency_us[self.dst])
        big = 1e6  # hop-shortest first, latency as the tie-break: weight = hops * big + latency
        g = sp.csr_matrix((big + w, (self.src, self.dst)), shape=(self.nodes, self.nodes))
        d = shortest_path(g, method="D", directed=True, indices=np.arange(n))[:, :n]
        return np.where(np.isfinite(d), np.mod(d, big), np.inf)

    def unserved(self, demand: np.ndarray) -> np.ndarray:
        """(accelerators x accelerators) where `demand` has bytes but the fabric no path."""
        n = self.accelerators
        return (demand[:n, :n] > 0) & (self.dist[:n, :n] >= UNREACHABLE)

    def check_connected(self, demand: np.ndarray) -> None:
        """Raise InvalidInput naming the first pair with demand but no path."""
        bad = self.unserved(demand)
        if bad.any():
            i, j = np.argwhere(bad)[0]
            raise InvalidInput(f"accelerators {i} and {j} exchange {demand[i, j]:.3g} bytes but the {self.name} "
                               "fabric has no path between them", field="wiring")


def ecmp_loads(net: Network, demand: np.ndarray) -> np.ndarray:
    """Bytes on each link when `demand` (accelerators x accelerators, bytes) is routed on all shortest paths,
    split at every hop in proportion to the capacity of the next-hop links.

    >>> import numpy as np
    >>> ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    >>> dem = np.zeros((4, 4)); dem[0, 2] = 8.0
    >>> sorted(ecmp_loads(ring, dem)[ecmp_loads(ring, dem) > 0].tolist())
    [4.0, 4.0, 4.0, 4.0]
    """
    n = net.accelerators
    demand = np.asarray(demand, dtype=np.float64)
    dests = np.flatnonzero(demand.sum(axis=0) > 0)
    loads = np.zeros(net.links)
    if dests.size == 0:
        return loads
    net.check_connected(demand)
    src, dst, cap = net.src, net.dst, net.capacity_bps
    # destinations in blocks of ECMP_BLOCK (link, destination) entries, laid out destination-major: rows of the
    # transposed distances and demand are contiguous (4,608-accelerator expander: 8.3 s -> 3.6 s with the
    # level sort below on int16 keys and the blocks a quarter of the old size)
    block = max(1, int(ECMP_BLOCK // max(net.links, 1)))
    fw = net.forwards
    dist_to = np.ascontiguousarray(net.dist.T)                   # row j: every node's hops to j
    dem_to = np.ascontiguousarray(demand[:n, :n].T)
    key = np.int16 if int(dist_to.max(initial=0)) < 2 ** 15 else np.int64
    for start in range(0, dests.size, block):
        ds = dests[start:start + block]
        k = ds.size
        D = dist_to[ds]                                          # k x nodes
        Ds, Dd = D[:, src], D[:, dst]                            # k x links
        # next hop must be closer; it must forward unless it is the destination itself
        at = np.flatnonzero((Dd == Ds - 1) & (fw[dst] | (Dd == 0)))
        c, e = np.divmod(at, net.links)
        # each (link, destination) of the shortest-path DAGs passes its tail's share on once, the farthest
        # level first: work in the DAGs' links, not in levels x links (TopoOpt-style on a 2,304-accelerator
        # all-to-all, 105 hops across: 30 s -> 2 s; the expander at 576: 0.6 -> 0.12 s)
        lvl = Ds.ravel()[at]
        order = np.argsort((lvl.max(initial=0) - lvl).astype(key), kind="stable")
        e, c, lvl = e[order], c[order], lvl[order]
        at_src, at_dst = c * net.nodes + src[e], c * net.nodes + dst[e]
        # the tail's capacity toward each destination, over its DAG links: the split of its bytes
        frac = cap[e] / np.bincount(at_src, cap[e], k * net.nodes)[at_src]
        F = np.zeros((k, net.nodes))                             # bytes at each node toward each destination
        F[:, :n] = dem_to[ds]
        F = F.ravel()
        cuts = np.flatnonzero(np.diff(lvl)) + 1
        for a, b in zip(np.r_[0, cuts], np.r_[cuts, lvl.size]):
            contrib = F[at_src[a:b]] * frac[a:b]
            loads += np.bincount(e[a:b], contrib, net.links)
            F += np.bincount(at_dst[a:b], contrib, F.size)
    return loads


def padded_neighbours(nodes: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(nbr, eid): nbr[v, i] the i-th out-neighbour of v and eid[v, i] that link's index in (src, dst);
    -1 where v has fewer links."""
    deg = np.bincount(src, minlength=nodes)
    order = np.argsort(src, kind="stable")
    starts = np.concatenate([[0], np.cumsum(deg)])
    nbr = np.full((nodes, max(1, int(deg.max()) if deg.size else 1)), -1, dtype=np.int64)
    eid = np.full(nbr.shape, -1, dtype=np.int64)
    pos = np.arange(len(src)) - starts[src[order]]
    nbr[src[order], pos] = dst[order]
    eid[src[order], pos] = order
    return nbr, eid


def random_shortest_walk(nbr: np.ndarray, dist: np.ndarray, src: np.ndarray, dst: np.ndarray,
                         rng: np.random.Generator, forwards: np.ndarray | None = None, chunk: int = 50_000):
    """Walk every (src[i], dst[i]) along a shortest path, each hop drawn uniformly among the neighbours one
    step closer to dst (and, with `forwards`, able to forward unless it is dst), vectorized over all walks.
    Yields (walk indices, current nodes, chosen neighbour columns) once per hop."""
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    for c0 in range(0, src.size, chunk):
        cur = src[c0:c0 + chunk].copy()
        dd = dst[c0:c0 + chunk]
        idx = np.arange(c0, c0 + cur.size)
        alive = cur != dd
        while alive.any():
            cu, de, ix = cur[alive], dd[alive], idx[alive]
            cand = nbr[cu]
            ok = cand >= 0
            safe = np.where(ok, cand, 0)
            ok &= dist[safe, de[:, None]] == dist[cu, de][:, None] - 1
            if forwards is not None:
                ok &= forwards[safe] | (cand == de[:, None])
            pick = np.floor(rng.random(cu.size) * ok.sum(axis=1)).astype(np.int64)
            col = np.argmax(np.cumsum(ok, axis=1) > pick[:, None], axis=1)
            yield ix, cu, col
            cur[alive] = nbr[cu, col]
            alive = cur != dd


def sample_paths(net: Network, s: np.ndarray, d: np.ndarray, paths_per_flow: int = 1, seed: int = 0,
                 chunk: int = 50_000) -> tuple[sp.csr_matrix, np.ndarray, np.ndarray]:
    """Route flow i (s[i] -> d[i]) on `paths_per_flow` shortest paths, each chosen hop by hop uniformly
    among the next hops that are closer to d (seeded). Returns (incidence: subflows x links, flow index of
    each subflow, hop count of each subflow)."""
    s = np.asarray(s, dtype=np.int64)
    d = np.asarray(d, dtype=np.int64)
    if s.size == 0:
        return sp.csr_matrix((0, net.links)), np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    dm = np.zeros((net.accelerators, net.accelerators))
    dm[s, d] = 1.0
    net.check_connected(dm)
    nbr, eid = padded_neighbours(net.nodes, net.src, net.dst)
    flow_of = np.repeat(np.arange(s.size), paths_per_flow)
    S, Dn = s[flow_of], d[flow_of]
    rows, cols = [], []
    for ix, cu, col in random_shortest_walk(nbr, net.dist, S, Dn, np.random.default_rng(seed), net.forwards,
                                            chunk):
        rows.append(ix)
        cols.append(eid[cu, col])
    r = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
    c = np.concatenate(cols) if cols else np.zeros(0, dtype=np.int64)
    inc = sp.csr_matrix((np.ones(r.size), (r, c)), shape=(S.size, net.links))
    return inc, flow_of, net.dist[S, Dn].astype(np.int64)


def _gather_rows(m: sp.csr_matrix, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Column indices and values of the given CSR rows, concatenated (vectorized)."""
    starts, ends = m.indptr[rows], m.indptr[rows + 1]
    lens = ends - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    offs = np.repeat(starts - np.concatenate([[0], np.cumsum(lens)[:-1]]), lens)
    idx = offs + np.arange(total)
    return m.indices[idx], m.data[idx]


def maxmin_rates(inc: sp.csr_matrix, capacity: np.ndarray, active: np.ndarray | None = None,
                 tol: float = 1e-9) -> np.ndarray:
    """Max-min fair rates of the flows (rows of `inc`, entries = share of the flow on each link) on links
    of `capacity` by progressive filling: raise every unfrozen flow's rate together until links saturate,
    freeze the flows crossing them, repeat. Each round touches only the links that saturate and the flows
    they freeze, so the whole fill costs O(nonzeros + rounds x links).

    >>> import numpy as np, scipy.sparse as sp
    >>> inc = sp.csr_matrix(np.array([[1, 1], [1, 0], [0, 1]]))   # flow 0 uses both links
    >>> maxmin_rates(inc, np.array([1.0, 3.0])).tolist()
    [0.5, 0.5, 2.5]
    """
    inc = sp.csr_matrix(inc)
    nflows = inc.shape[0]
    rates = np.zeros(nflows)
    act = np.ones(nflows, dtype=bool) if active is None else np.asarray(active, dtype=bool).copy()
    act &= np.diff(inc.indptr) > 0
    inc_t = inc.T.tocsr()
    users = inc_t @ act.astype(np.float64)
    residual = np.asarray(capacity, dtype=np.float64).copy()
    level = 0.0
    live = users > tol
    while live.any():
        share = residual[live] / users[live]
        delta = float(share.min())
        level += delta
        residual[live] -= delta * users[live]
        lidx = np.flatnonzero(live)
        sat = lidx[share <= delta * (1 + 1e-9) + 1e-300]
        flows, _ = _gather_rows(inc_t, sat)
        flows = np.unique(flows)
        flows = flows[act[flows]]
        rates[flows] = level
        act[flows] = False
        cols, vals = _gather_rows(inc, flows)
        users -= np.bincount(cols, weights=vals, minlength=users.size)
        users[sat] = 0.0
        live = users > tol
    return rates


def completion_time(inc: sp.csr_matrix, capacity: np.ndarray, sizes: np.ndarray, max_events: int = 64) -> float:
    """Time until every flow of `sizes` bytes is done under max-min fair sharing, with rates recomputed each
    time flows finish (flows finishing within a relative 1e-9 of each other finish together). After
    `max_events` recomputations the remaining flows finish at their current rates, which can only
    overestimate the time (capacity freed later is not reused): symmetric collective phases finish in a
    handful of events, so the cap matters only for heterogeneous traffic.

    >>> import numpy as np, scipy.sparse as sp
    >>> inc = sp.csr_matrix(np.array([[1, 1], [1, 0], [0, 1]]))
    >>> completion_time(inc, np.array([1.0, 3.0]), np.array([1.0, 1.0, 5.0]))
    2.0
    """
    remaining = np.asarray(sizes, dtype=np.float64).copy()
    active = remaining > 0
    t = 0.0
    for _ in range(max_events):
        if not active.any():
            return t
        r = maxmin_rates(inc, capacity, active)
        if (active & (r <= 0)).any():
            raise InvalidInput("a flow has no capacity on its path", field="capacity")
        finish = np.where(active, remaining / np.where(r > 0, r, 1.0), np.inf)
        dt = float(finish.min())
        t += dt
        done = active & (finish <= dt * (1 + 1e-9))
        remaining = np.where(active, remaining - r * dt, remaining)
        remaining[done] = 0.0
        active &= ~done
    if not active.any():
        return t
    r = maxmin_rates(inc, capacity, active)
    return t + float(np.max(np.where(active, remaining / np.maximum(r, 1e-300), 0.0)))


def optimal_routing(net: Network, demand: np.ndarray, time_limit_s: float = 60.0,
                    crossover: bool = True, lengths_out: list | None = None) -> tuple[float, np.ndarray]:
    """The routing that minimizes the largest link utilization: an LP (HiGHS through scipy) over flows
    aggregated by destination. Returns (theta, loads): every demand is delivered within `theta` seconds on
    links of the given capacities (= max over links of load / capacity), and the link loads in bytes.
    Non-forwarding nodes carry no transit traffic. `crossover=False` takes the interior-point optimum
    (for bounds and values; the flows are then interior, not a vertex). `lengths_out` receives the duals of
    the link capacity rows (one length per link, >= 0, scaled so that sum length x capacity = 1): the
    metric for which theta = sum of demand x shortest distance, by LP duality (the Japanese theorem).

    >>> ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    >>> dem = np.zeros((4, 4)); dem[0, 1] = 3.0
    >>> round(optimal_routing(ring, dem)[0], 6)     # 1.5 bytes direct, 1.5 the long way round
    1.5
    """

    demand = np.asarray(demand, dtype=np.float64)
    n, V, E = net.accelerators, net.nodes, net.links
    dests = np.flatnonzero(demand.sum(axis=0) > 0)
    if dests.size == 0:
        return 0.0, np.zeros(E)
    net.check_connected(demand)
    # scale to O(1) numbers: HiGHS tolerances are absolute (1e-7)
    d_scale = float(demand.max())
    c_scale = float(net.capacity_bps.max())
    demand = demand / d_scale
    cap = net.capacity_bps / c_scale
    K = dests.size
    nv = K * E + 1                                          # f[k, e] then theta
    k_idx = np.repeat(np.arange(K), E)
    e_idx = np.tile(np.arange(E), K)
    col = np.arange(K * E)
    # conservation at every (k, v), v != dest_k: out - in = demand[v, dest_k]
    rows_out = k_idx * V + net.src[e_idx]
    rows_in = k_idx * V + net.dst[e_idx]
    A = sp.csr_matrix((np.concatenate([np.ones(K * E), -np.ones(K * E)]),
                       (np.concatenate([rows_out, rows_in]), np.concatenate([col, col]))), shape=(K * V, nv))
    b = np.zeros((K, V))
    b[:, :n] = demand[:, dests].T
    keep = np.ones((K, V), dtype=bool)
    keep[np.arange(K), dests] = False
    duals: list = []
    status, theta, f = _min_theta(net, cap, dests[k_idx], e_idx, A[keep.ravel()], b[keep], None, time_limit_s,
                                  crossover, duals if lengths_out is not None else None)
    if status != "optimal":
        raise InvalidInput(f"routing LP stopped: {status}", field="routing")
    if lengths_out is not None:            # rows "flow - theta x cap <= 0": duals <= 0, scaled like cap
        lengths_out.append(np.maximum(-duals[0][:E], 0.0) / c_scale)
    return theta * d_scale / c_scale, np.maximum(f, 0.0).reshape(K, E).sum(axis=0) * d_scale


def hop_limited_routing(net: Network, demand: np.ndarray, hops: int, time_limit_s: float = 60.0) -> float:
    """The least largest-link utilization (seconds, as :func:`optimal_routing`) when every demand travels on
    paths of at most `hops` links: flows aggregated by destination and indexed by the hops still allowed
    (a unit crossing a link at level r arrives with r - 1 left; it may only stop at its destination).
    inf when some demand is farther than `hops`.

    >>> ring = Network.from_pairs("ring", 4, 4, [(0, 1), (1, 2), (2, 3), (3, 0)], 1.0, 0.0)
    >>> dem = np.zeros((4, 4)); dem[0, 1] = 3.0
    >>> hop_limited_routing(ring, dem, 1), round(hop_limited_routing(ring, dem, 3), 6)
    (3.0, 1.5)
    """

    demand = np.asarray(demand, dtype=np.float64)
    n, V, E = net.accelerators, net.nodes, net.links
    dests = np.flatnonzero(demand.sum(axis=0) > 0)
    if dests.size == 0:
        return 0.0
    d_scale = float(demand.max())
    c_scale = float(net.capacity_bps.max())
    demand = demand / d_scale
    cap = net.capacity_bps / c_scale
    K, H = dests.size, int(hops)
    nf = K * H * E                                          # f[k, r - 1, e], r = 1..H, then theta
    k_idx = np.repeat(np.arange(K), H * E)
    r_idx = np.tile(np.repeat(np.arange(1, H + 1), E), K)
    e_idx = np.tile(np.arange(E), K * H)
    col = np.arange(nf)
    # conservation at (k, v != dest_k, r): out at level r - in at level r + 1 = demand[v, k] if r == H
    out_rows = (k_idx * V + net.src[e_idx]) * H + (r_idx - 1)
    in_rows = (k_idx * V + net.dst[e_idx]) * H + (r_idx - 2)     # arriving with r - 1 left
    arrive = r_idx >= 2
    rows = np.concatenate([out_rows, in_rows[arrive]])
    cols = np.concatenate([col, col[arrive]])
    vals = np.concatenate([np.ones(nf), -np.ones(int(arrive.sum()))])
    A = sp.csr_matrix((vals, (rows, cols)), shape=(K * V * H, nf + 1))
    b = np.zeros((K, V, H))
    b[:, :n, H - 1] = demand[:, dests].T
    keep = np.ones((K, V, H), dtype=bool)
    keep[np.arange(K), dests, :] = False
    # a unit may not be left with no hops anywhere but its destination
    stuck = (r_idx == 1) & (net.dst[e_idx] != dests[k_idx])
    status, theta, _ = _min_theta(net, cap, dests[k_idx], e_idx, A[keep.ravel()], b[keep], stuck, time_limit_s,
                                  False)
    if status == "infeasible":
        return float("inf")
    if status != "optimal":
        raise InvalidInput(f"hop-limited routing LP stopped: {status}", field="routing")
    return theta * d_scale / c_scale


def _min_theta(net: Network, cap: np.ndarray, dest_of: np.ndarray, e_idx: np.ndarray, A_eq: sp.csr_matrix,
               b_eq: np.ndarray, zero: np.ndarray | None, time_limit_s: float,
               crossover: bool, duals_out: list | None = None) -> tuple[str, float, np.ndarray]:
    """min theta over flow columns (column i: toward dest_of[i] on link e_idx[i]; A_eq has one more column,
    theta, last) with every link's flow <= theta x cap, no transit through non-forwarding nodes and the
    `zero` columns held at 0. Returns (status, theta, flows)."""
    nf, E = e_idx.size, net.links
    A_ub = sp.csr_matrix((np.concatenate([np.ones(nf), -cap]),
                          (np.concatenate([e_idx, np.arange(E)]), np.concatenate([np.arange(nf), np.full(E, nf)]))),
                         shape=(E, nf + 1))
    ub = np.full(nf + 1, np.inf)
    blocked = ~net.forwards[net.dst[e_idx]] & (net.dst[e_idx] != dest_of)
    ub[:nf][blocked if zero is None else blocked | zero] = 0.0
    c = np.zeros(nf + 1)
    c[-1] = 1.0
    status, _, x = _solve_lp(c, A_ub, np.zeros(E), A_eq, b_eq, np.zeros(nf + 1), ub, time_limit_s, crossover,
                             duals_out)
    return status, (float(x[-1]) if status == "optimal" else float("nan")), x[:-1]


def _solve_lp(c: np.ndarray, A_ub: sp.csr_matrix, b_ub: np.ndarray, A_eq: sp.csr_matrix, b_eq: np.ndarray,
              lower: np.ndarray, upper: np.ndarray, time_limit_s: float, crossover: bool,
              duals_out: list | None = None,
              optimality_tolerance: float | None = None, method: str = "ipm") -> tuple[str, float, np.ndarray]:
    """min c x s.t. A_ub x <= b_ub, A_eq x = b_eq, lower <= x <= upper, by HiGHS's interior point (highspy),
    or with `method` "pdlp" its first-order primal-dual method (PDLP: matrix-vector products only, no
    factorization; `optimality_tolerance` is then its relative KKT tolerance).
    Without crossover the answer is the interior-point optimum (primal-dual gap 1e-8): enough for a value or
    a bound, and it skips the crossover that degenerate routing LPs spend minutes in. Returns (status,
    objective, x) with status "optimal", "infeasible" or HiGHS's status name (x empty, except PDLP's last
    iterate when it stopped with one: a point only, for a value like the routing it describes); `duals_out`
    receives the row duals (the A_ub rows, then the A_eq rows). `optimality_tolerance` loosens HiGHS's IPM gap (1e-8):
    only for values that are a primal point's (a routing's time), never for a bound."""
    import highspy
    A = sp.vstack([A_ub, A_eq]).tocsc()
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = A.shape[1], A.shape[0]
    lp.col_cost_ = np.asarray(c, dtype=np.float64)
    lp.col_lower_, lp.col_upper_ = np.asarray(lower, dtype=np.float64), np.asarray(upper, dtype=np.float64)
    lp.row_lower_ = np.concatenate([np.full(A_ub.shape[0], -highspy.kHighsInf), b_eq]).astype(np.float64)
    lp.row_upper_ = np.concatenate([b_ub, b_eq]).astype(np.float64)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = A.shape[1], A.shape[0]
    from .formats import quiet_stdout
    with quiet_stdout():
        h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("threads", highs_threads(0))
    h.setOptionValue("solver", method)
    h.setOptionValue("run_crossover", "on" if crossover else "off")
    h.setOptionValue("time_limit", float(time_limit_s))
    if optimality_tolerance is not None:
        h.setOptionValue(f"{method}_optimality_tolerance", float(optimality_tolerance))
    h.passModel(lp)
    with quiet_stdout():
        h.run()
    st = h.getModelStatus()
    if st == highspy.HighsModelStatus.kInfeasible:
        return "infeasible", float("inf"), np.empty(0)
    if st != highspy.HighsModelStatus.kOptimal:
        sol = h.getSolution()      # PDLP's last iterate, when it has one: a point, not an optimum
        x = np.asarray(sol.col_value) if method == "pdlp" and sol.value_valid else np.empty(0)
        return h.modelStatusToString(st), float("nan"), x
    if duals_out is not None:
        duals_out.append(np.asarray(h.getSolution().row_dual))
    return "optimal", float(h.getInfo().objective_function_value), np.asarray(h.getSolution().col_value)
