import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from synth.errors import Infeasible, InvalidInput
from synth.model import (Accelerator, Circuit, Collective, OCSLayout, SolveResult, SolveStatus, TrafficMatrix,
                         Wiring)
from synth.verify import wiring_violations


def test_accelerator_validates_fields():
    with pytest.raises(InvalidInput, match=r"ports: must be >= 1, got 0"):
        Accelerator(ports=0, port_bandwidth_gbps=100)
    with pytest.raises(InvalidInput, match=r"port_bandwidth_gbps: must be > 0"):
        Accelerator(ports=4, port_bandwidth_gbps=-1)
    with pytest.raises(InvalidInput, match=r"port_bandwidth_gbps: must be a finite number"):
        Accelerator(ports=4, port_bandwidth_gbps=float("nan"))
    with pytest.raises(InvalidInput, match=r"ports: must be an integer"):
        Accelerator(ports="4", port_bandwidth_gbps=100)
    a = Accelerator(ports=4, port_bandwidth_gbps=800)
    assert a.port_bytes_per_s == 100e9


def test_traffic_matrix_rules():
    with pytest.raises(InvalidInput, match="square"):
        TrafficMatrix(np.zeros((2, 3)))
    with pytest.raises(InvalidInput, match=r"entry \(0, 1\) is -1, must be >= 0"):
        TrafficMatrix(np.array([[0, -1.0], [0, 0]]))
    with pytest.raises(InvalidInput, match="must be finite"):
        TrafficMatrix(np.array([[0, np.inf], [0, 0]]))
    with pytest.raises(InvalidInput, match="diagonal"):
        TrafficMatrix(np.array([[1.0, 0], [0, 0]]))
    tm = TrafficMatrix.from_kinds({"a": np.array([[0, 2.0], [0, 0]]), "b": np.array([[0, 0], [3.0, 0]])})
    assert tm.total_bytes == 5 and tm.kind_totals() == {"a": 2.0, "b": 3.0}
    assert tm.largest(1) == [(1, 0, 3.0)]
    assert list(tm.row_nonzeros()) == [1, 1]


def test_solve_result_gap_and_status_rules():
    r = SolveResult(SolveStatus.FEASIBLE, objective=10.0, bound=8.0, wall_s=1.0, solver="x")
    assert r.gap == pytest.approx(0.2)
    with pytest.raises(InvalidInput, match="needs an objective"):
        SolveResult(SolveStatus.OPTIMAL, objective=None, bound=None, wall_s=0, solver="x")
    with pytest.raises(InvalidInput, match="exceeds objective"):
        SolveResult(SolveStatus.FEASIBLE, objective=1.0, bound=2.0, wall_s=0, solver="x")


def test_collective_rules():
    with pytest.raises(InvalidInput, match="twice"):
        Collective("allreduce", (0, 1, 1), 10)
    with pytest.raises(InvalidInput, match="unknown collective"):
        Collective("allsum", (0, 1), 10)
    with pytest.raises(InvalidInput, match="bytes"):
        Collective("allreduce", (0, 1), 0)


def test_circuit_is_canonical():
    assert Circuit(0, 5, 1, 2, 3) == Circuit(0, 2, 3, 5, 1)
    with pytest.raises(InvalidInput, match="a_port"):
        Circuit(0, 1, -1, 2, 0)


def test_layout_ocs_ports_and_capacity():
    lay = OCSLayout(np.array([[0, 1, 0], [1, 0, -1]]), (4, 4))
    assert lay.ocs_port.tolist() == [[0, 0, 1], [1, 2, -1]]
    assert lay.capacity.tolist() == [[2, 1], [1, 1]]
    assert OCSLayout.uniform(3, 2).is_uniform()


def test_planes_split_where_the_radix_is_short():
    """A plane with more fibres than the switch radix goes on several switches, none past its radix; port 0
    keeps consecutive accelerators together; the other ports' blocks mix the accelerators; the plan is fixed."""
    assert OCSLayout.planes(10, 3) == OCSLayout.uniform(10, 3)          # the radix holds every plane
    assert OCSLayout.planes(10, 3, 10) == OCSLayout.uniform(10, 3, 10)
    lay = OCSLayout.planes(10, 3, 4)
    assert lay.switches == 9 and set(lay.switch_radix) == {4}
    fibres = np.bincount(lay.switch_of_port.ravel(), minlength=9)
    assert fibres.tolist() == [4, 3, 3] * 3                            # near-equal blocks, each within 4
    assert lay.switch_of_port[:, 0].tolist() == [0, 0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert (lay.switch_of_port // 3 == np.arange(3)).all()             # port k on plane k's switches only
    # the fibre plan is hardware: the same on every run, machine and numpy version
    assert lay.switch_of_port[:, 1].tolist() == [5, 3, 5, 5, 4, 3, 3, 3, 4, 4]
    # the blocks of all ports together let every accelerator reach every other through shared switches
    from scipy.sparse.csgraph import connected_components
    assert connected_components(lay.shares_switch())[0] == 1
    big = OCSLayout.planes(576, 18, 64)
    assert big.switches == 18 * 9 and np.bincount(big.switch_of_port.ravel()).max() <= 64
    near = big.shares_switch().sum(axis=1) - 1                         # accelerators a circuit could join
    assert near.min() > 0.8 * 575                                      # consecutive blocks per port: < 18 * 63
    # several ports of an accelerator on one plane: the plane's blocks shrink so every switch holds its ports
    two = OCSLayout.planes(10, 4, 8, planes=2)
    assert two.switches == 6 and np.bincount(two.switch_of_port.ravel()).max() <= 8
    with pytest.raises(InvalidInput, match="switch_radix: a switch of radix 3 cannot take the 4 ports"):
        OCSLayout.planes(10, 4, 3, planes=1)
    with pytest.raises(InvalidInput, match="cannot host a circuit"):
        OCSLayout.planes(10, 3, 1)


def test_wiring_networkx_round_trip_keeps_ports():
    w = Wiring.from_networkx(nx.cycle_graph(8), ports=2)
    assert not wiring_violations(w)
    back = Wiring.from_networkx(w.to_networkx(), ports=2)
    assert back == w
    assert (w.adjacency() == nx.to_numpy_array(nx.cycle_graph(8), dtype=int)).all()
    assert w.degree().tolist() == [2] * 8


def test_realize_rejects_odd_cycle_on_two_switches():
    # A triangle needs 3 colours; with 2 single-port switches it cannot be realized.
    with pytest.raises(Infeasible, match="not 2-edge-colourable"):
        Wiring.from_networkx(nx.cycle_graph(3), ports=2)


def test_realize_rejects_degree_over_budget():
    with pytest.raises(Infeasible, match="accelerator 0 needs 3 circuits"):
        Wiring.from_pairs(4, 2, [(0, 1), (0, 2), (0, 3)])


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 6), st.integers(1, 4), st.integers(0, 10_000))
def test_bipartite_multigraphs_always_realize(half, ports, seed):
    # Koenig: a bipartite multigraph of max degree <= ports splits into `ports` matchings.
    rng = np.random.default_rng(seed)
    pairs = []
    for _ in range(ports):
        perm = rng.permutation(half)
        keep = rng.random(half) < 0.8
        pairs += [(int(i), half + int(perm[i])) for i in range(half) if keep[i]]
    w = Wiring.from_pairs(2 * half, ports, pairs, seed=seed)
    assert not wiring_violations(w)
    assert sorted(map(sorted, pairs)) == sorted(sorted((c.a, c.b)) for c in w.circuits)


@settings(max_examples=30, deadline=None)
@given(st.integers(3, 12), st.integers(1, 5), st.integers(0, 10_000))
def test_union_of_matchings_realizes_on_general_layout(n, ports, seed):
    # A union of `ports` matchings always colours; here with an explicit, shuffled port layout.
    rng = np.random.default_rng(seed)
    sop = np.array([rng.permutation(ports) for _ in range(n)])
    lay = OCSLayout(sop, (n,) * ports)
    pairs = []
    for _ in range(ports):
        perm = rng.permutation(n)
        pairs += [(int(perm[i]), int(perm[i + 1])) for i in range(0, n - 1, 2)]
    w = Wiring.from_pairs(n, ports, pairs, lay, seed=seed)
    assert not wiring_violations(w)
    assert len(w.circuits) == len(pairs)
