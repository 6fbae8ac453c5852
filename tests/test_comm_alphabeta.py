"""Alpha-beta formulas worked by hand on the toy cluster (tests/_comm_toy.py).

Expected values come from the textbook formulas (Thakur, Rabenseifner & Gropp 2005; NCCL's
tuning.cc step counts; comm_hw.md §2), evaluated by hand in each test.
"""

import math

import pytest
from _comm_toy import ALPHA_E, ALPHA_I, B_E, B_I, toy_cluster

from modelplan.comm.cost import collective_cost, collective_time_s
from modelplan.errors import SpecError

MiB = 2**20


def test_ring_all_reduce_bytes_and_steps():
    """Ring AllReduce of n over p=4: each rank sends 2(p-1)/p*n = 1.5n bytes in 2(p-1) = 6 steps."""
    c = collective_cost("all_reduce", 64 * MiB, 4, 4, toy_cluster(), algo="ring")
    assert c.bytes_sent_per_rank == 1.5 * 64 * MiB
    assert c.bytes_received_per_rank == 1.5 * 64 * MiB
    assert c.steps == 6


def test_ring_all_reduce_time_one_node():
    """2(p-1)alpha + 2(p-1)/p n/B: p=4, n=100 MB -> 6 us + 1.5e8/1e11 s = 1506 us."""
    t = collective_time_s("all_reduce", 100e6, 4, 4, toy_cluster(), algo="ring")
    assert t == pytest.approx(6 * ALPHA_I + 1.5 * 100e6 / B_I)


def test_ring_all_gather_time():
    """AllGather ring, n = whole output: (p-1)alpha + (p-1)/p n/B = 3 us + 0.75 * 1e8 / 1e11."""
    t = collective_time_s("all_gather", 100e6, 4, 4, toy_cluster(), algo="ring")
    assert t == pytest.approx(3 * ALPHA_I + 0.75 * 100e6 / B_I)


def test_reduce_scatter_ring_equals_all_gather_ring():
    """ReduceScatter (n = whole input) costs the same as AllGather (n = whole output)."""
    ag = collective_time_s("all_gather", 8 * MiB, 4, 4, toy_cluster(), algo="ring")
    rs = collective_time_s("reduce_scatter", 8 * MiB, 4, 4, toy_cluster(), algo="ring")
    assert rs == ag


def test_call_latency_is_paid_once():
    """A cluster's call latency adds exactly once to a ring AllReduce."""
    base = collective_time_s("all_reduce", MiB, 4, 4, toy_cluster(), algo="ring")
    slow = collective_time_s("all_reduce", MiB, 4, 4, toy_cluster(call_latency_us=5.0), algo="ring")
    assert slow - base == pytest.approx(5e-6)


def test_flat_ring_across_nodes_bounded_by_node_nics():
    """8 ranks on 2 nodes of 4: the node boundary has 4 NICs x 10 GB/s = 40 GB/s < 100 GB/s
    NVLink, so busbw -> 40 GB/s at large sizes (comm_hw.md §2.6)."""
    c = collective_cost("all_reduce", 2**40, 8, 4, toy_cluster(), algo="ring")
    assert c.busbw_gbps == pytest.approx(4 * B_E / 1e9, rel=1e-3)


def test_ring_one_rank_per_node_uses_one_nic():
    """A dp group with one rank on each of 8 nodes: busbw -> one NIC's 10 GB/s."""
    c = collective_cost("all_reduce", 2**40, 8, 1, toy_cluster(), algo="ring")
    assert c.busbw_gbps == pytest.approx(B_E / 1e9, rel=1e-3)
    assert c.links == ("toynet",)


def test_ring_latency_counts_inter_node_steps():
    """p=8 on 2 nodes, n=0: NCCL's 2(k-1)=2 network steps + 12 NVLink steps = 2*10 + 12*1 us."""
    t = collective_time_s("all_reduce", 0, 8, 4, toy_cluster(), algo="ring")
    assert t == pytest.approx(2 * ALPHA_E + 12 * ALPHA_I)


def test_hierarchical_all_reduce_cuts_inter_node_bytes_by_node_size():
    """Hierarchical sends 2(k-1)/k*(n/g) through each NIC: a ring AllReduce over the k nodes
    (2(k-1)/k*n) divided by g=4 ranks per node."""
    n, k, g = 64 * MiB, 4, 4
    c = collective_cost("all_reduce", n, k * g, g, toy_cluster(), algo="hierarchical")
    assert c.inter_node_bytes_per_rank == pytest.approx(2 * (k - 1) / k * n / g)


def test_hierarchical_all_reduce_time():
    """2(g-1)ai + 2(k-1)ae + 2(g-1)/g n/Bi + 2(k-1)/k (n/g)/Be for g=4, k=2, n=1e9."""
    n = 1e9
    expected = 6 * ALPHA_I + 2 * ALPHA_E + 1.5 * n / B_I + 1.0 * (n / 4) / B_E
    assert collective_time_s("all_reduce", n, 8, 4, toy_cluster(), "hierarchical") == pytest.approx(expected)


@pytest.mark.parametrize("p, depth", [(2, 1), (16, 4), (17, 5), (64, 6)])
def test_tree_latency_grows_with_log_p(p, depth):
    """Double binary tree, one rank per node, n=0: 2 * ceil(lg p) network hops."""
    t = collective_time_s("all_reduce", 0, p, 1, toy_cluster(), algo="tree")
    assert t == pytest.approx(2 * depth * ALPHA_E)


def test_binomial_broadcast_time():
    """Binomial broadcast over p=4 in one node: ceil(lg 4) (alpha + n/B) = 2 (1 us + 1 ms)."""
    t = collective_time_s("broadcast", 100e6, 4, 4, toy_cluster(), algo="binomial")
    assert t == pytest.approx(2 * (ALPHA_I + 100e6 / B_I))


def test_pipelined_ring_broadcast_bus_factor_one():
    """NCCL ring Broadcast: (p-1) hops + n/B; busbw -> B at large n (factor 1)."""
    c = collective_cost("broadcast", 2**40, 4, 4, toy_cluster(), algo="ring")
    assert c.busbw_gbps == pytest.approx(B_I / 1e9, rel=1e-3)


def test_halving_doubling_all_reduce_one_node():
    """Rabenseifner, p=4 in one node: 2 lg p alpha + 2(p-1)/p n/B = 4 us + 1.5 n/B."""
    t = collective_time_s("all_reduce", 1e8, 4, 4, toy_cluster(), algo="halving_doubling")
    assert t == pytest.approx(4 * ALPHA_I + 1.5 * 1e8 / B_I)


def test_recursive_doubling_all_reduce_one_node():
    """lg p rounds of the whole vector: p=4 -> 2 (alpha + n/B)."""
    t = collective_time_s("all_reduce", 1e8, 4, 4, toy_cluster(), algo="recursive_doubling")
    assert t == pytest.approx(2 * (ALPHA_I + 1e8 / B_I))


def test_all_to_all_across_nodes_limited_by_one_nic():
    """Direct all-to-all over 8 ranks on 2 nodes: the 4 off-node blocks (n/2) leave through
    this GPU's own NIC: alpha_e + (n/2)/B_e (nccl-tests#267)."""
    n = 1e9
    t = collective_time_s("all_to_all", n, 8, 4, toy_cluster(), algo="direct")
    assert t == pytest.approx(ALPHA_E + 0.5 * n / B_E)


def test_pairwise_all_to_all_time():
    """Pairwise over p=4 in one node: (p-1)(alpha + (n/p)/B)."""
    n = 4e8
    t = collective_time_s("all_to_all", n, 4, 4, toy_cluster(), algo="pairwise")
    assert t == pytest.approx(3 * (ALPHA_I + 1e8 / B_I))


def test_send_recv_uses_nic_across_nodes():
    """A pipeline send between two nodes: alpha_e + n/B_e; inside a node alpha_i + n/B_i."""
    n = 1e8
    assert collective_time_s("send_recv", n, 2, 1, toy_cluster()) == pytest.approx(ALPHA_E + n / B_E)
    assert collective_time_s("send_recv", n, 2, 2, toy_cluster()) == pytest.approx(ALPHA_I + n / B_I)


def test_barrier_dissemination():
    """Dissemination barrier over 16 ranks on 4 nodes: ceil(lg 16) = 4 network rounds, 0 bytes."""
    c = collective_cost("barrier", 0, 16, 4, toy_cluster())
    assert c.time_s == pytest.approx(4 * ALPHA_E)
    assert c.bytes_sent_per_rank == 0 and c.steps == 4


def test_mesh_pair_gets_one_link():
    """On a 8-GPU xGMI mesh of 7 links x 64 GB/s (448 GB/s), 2 GPUs share one link: busbw ->
    64 GB/s (ROCm MI300X docs: one 64 GB/s link per GPU pair)."""
    mesh = toy_cluster(gpus_per_node=8, intra={"name": "xgmi", "bandwidth_gbps": 448.0,
                                                "latency_us": 1.0, "fabric": "mesh"})
    c = collective_cost("all_reduce", 2**40, 2, 2, mesh, algo="ring")
    assert c.busbw_gbps == pytest.approx(64.0, rel=1e-3)


def test_single_rank_group_costs_nothing():
    """A group of one rank (tp=1) communicates nothing."""
    assert collective_time_s("all_reduce", 2**30, 1, 1, toy_cluster()) == 0.0


def test_forced_power_of_two_algorithm_rejects_other_sizes():
    """halving_doubling is modelled for power-of-two groups only; forcing it on 6 ranks says so."""
    with pytest.raises(SpecError, match=r"power-of-two group size, not 6"):
        collective_time_s("all_reduce", MiB, 6, 2, toy_cluster(), algo="halving_doubling")


def test_auto_skips_invalid_algorithms():
    """auto on 6 ranks still answers (ring, tree, binomial, hierarchical remain)."""
    c = collective_cost("all_reduce", MiB, 6, 2, toy_cluster())
    assert c.algo.value in {"ring", "tree", "binomial", "hierarchical"}


def test_hierarchical_needs_several_nodes():
    """hierarchical inside one node is rejected with the node count in the message."""
    with pytest.raises(SpecError, match=r"hierarchical needs >= 2 nodes.*1 node\(s\) x 4"):
        collective_time_s("all_reduce", MiB, 4, 4, toy_cluster(), algo="hierarchical")


def test_unknown_algorithm_for_op():
    """A tree broadcast is not modelled: the error lists what is."""
    with pytest.raises(SpecError, match=r"broadcast has no 'tree' algorithm \(one of ring, binomial"):
        collective_time_s("broadcast", MiB, 4, 4, toy_cluster(), algo="tree")


def test_negative_size_rejected():
    """nbytes must be >= 0."""
    with pytest.raises(SpecError, match=r"nbytes \(-1\) must be >= 0"):
        collective_time_s("all_reduce", -1, 4, 4, toy_cluster())


def test_nccl_mode_picks_ring_or_tree_only():
    """algo='nccl' returns one of NCCL's AllReduce algorithms (ring or tree) at every size."""
    for n in (8, MiB, 2**30):
        assert collective_cost("all_reduce", n, 16, 4, toy_cluster(), "nccl").algo.value in {"ring", "tree"}


def test_log2_helper_matches_math():
    """ceil(lg p) used for recursive rounds matches math.ceil(math.log2(p))."""
    from modelplan.comm.alphabeta import ceil_lg

    for p in range(1, 200):
        assert ceil_lg(p) == math.ceil(math.log2(p))


def test_explicit_ranks_placement():
    """Ranks (0..5, 8, 9) on 4-GPU nodes sit 4 + 2 + 2 on 3 nodes: the 2-rank nodes have 2 NICs,
    so a ring's busbw -> 2 x 10 GB/s."""
    from modelplan.comm.topology import shape_of_ranks

    shape = shape_of_ranks((0, 1, 2, 3, 4, 5, 8, 9), gpus_per_node=4)
    c = collective_cost("all_reduce", 2**40, 8, shape, toy_cluster(), algo="ring")
    assert (c.nodes, c.ranks_per_node) == (3, 4)
    assert c.busbw_gbps == pytest.approx(2 * B_E / 1e9, rel=1e-3)


def test_placement_size_must_match():
    """A GroupShape of 8 ranks cannot price a group of 16."""
    from modelplan.comm.topology import group_shape

    with pytest.raises(SpecError, match=r"group_size \(16\) differs from the placement's 8 ranks"):
        collective_time_s("all_reduce", 1, 16, group_shape(8, 4, 4), toy_cluster())
