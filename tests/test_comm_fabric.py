"""Oversubscribed fabrics: rings barely notice, all-to-all pays the bisection (comm/fabric.py).

Expected factors are hand-worked from the module's flow-counting rules; times use the toy
cluster (NIC 10 GB/s, 10 us per network hop, one GPU per node) so the NIC term is exact."""

import pytest
from _comm_toy import ALPHA_E, B_E, toy_cluster

from modelplan.comm.cost import collective_time_s
from modelplan.comm.fabric import alltoall_slowdown, ring_slowdown
from modelplan.comm.ops import Algo
from modelplan.specs.hardware import Fabric


def test_nonblocking_or_inside_a_leaf_is_free():
    """Oversubscription 1, or a group of 4 nodes under a 4-node leaf: factor 1."""
    assert ring_slowdown(64, 4, 1.0) == 1.0
    assert alltoall_slowdown(4, 4, 8.0) == 1.0
    assert ring_slowdown(64, None, 8.0) == 1.0


def test_ring_slowed_only_when_oversubscription_exceeds_the_leaf_share():
    """16 nodes, 4 per leaf: 4 flows share 4/2 up-links at 2:1 -> no slowdown; at 8:1, 8/4 = 2."""
    assert ring_slowdown(16, 4, 2.0) == 1.0
    assert ring_slowdown(16, 4, 8.0) == pytest.approx(2.0)


def test_alltoall_pays_the_bisection():
    """16 nodes, 4 per leaf, 2:1: 12/16 of the traffic leaves the leaf, at half rate: 1.5."""
    assert alltoall_slowdown(16, 4, 2.0) == pytest.approx(1.5)


def test_alltoall_time_on_an_oversubscribed_cluster():
    """16 one-GPU nodes, 160 MB direct all-to-all: 150 MB off node over 10 GB/s = 15 ms + 10 us;
    on 4-node leaves at 2:1 the NIC term is 1.5x (22.5 ms)."""
    flat = toy_cluster(gpus_per_node=1)
    tight = toy_cluster(gpus_per_node=1, fabric=Fabric(leaf_nodes=4, oversubscription=2.0))
    n = 160_000_000
    t_flat = collective_time_s("all_to_all", n, 16, 1, flat, Algo.DIRECT)
    t_tight = collective_time_s("all_to_all", n, 16, 1, tight, Algo.DIRECT)
    assert t_flat == pytest.approx(ALPHA_E + 15 / 16 * n / B_E)
    assert t_tight == pytest.approx(ALPHA_E + 1.5 * 15 / 16 * n / B_E)


def test_ring_time_unchanged_at_moderate_oversubscription():
    """A ring AllReduce over 16 nodes on 4-node leaves at 2:1 costs what it costs non-blocking."""
    flat = toy_cluster(gpus_per_node=1)
    tight = toy_cluster(gpus_per_node=1, fabric=Fabric(leaf_nodes=4, oversubscription=2.0))
    n = 1_000_000_000
    assert collective_time_s("all_reduce", n, 16, 1, tight, Algo.RING) == pytest.approx(
        collective_time_s("all_reduce", n, 16, 1, flat, Algo.RING))


def test_fabric_fields_validated():
    """Oversubscription below 1 is not a fabric."""
    with pytest.raises(ValueError, match="oversubscription"):
        Fabric(oversubscription=0.5)
