"""An NVLink domain wider than one node (GB200 NVL72: 72 GPUs over 18 trays of 4): groups inside the
domain ride the intra link, groups across domains the NICs; hosts and launchers keep the tray.

Expected times are worked by hand on the toy cluster (intra 100 GB/s and 1 us per hop, NIC 10 GB/s
and 10 us, no call latency; tests/_comm_toy.py) from the ring / tree / direct formulas: ring
AllReduce 2(p-1) hops, 2(k-1) of them across nodes, 2(p-1)/p n over min(B_intra, g B_nic) (Thakur
et al. 2005; NCCL tuning.cc nInterSteps); double binary tree 2((g-1) a_i + lg k a_e) + 2n / B
(comm_hw.md §2.4); direct AllToAll a + max((p-g)/p n / B_nic, (g-1)/p n / B_intra) (§2.6).
"""

import pytest
from _comm_toy import toy_cluster

from modelplan.comm.clusters import cluster_from_dict, load_cluster
from modelplan.comm.cost import collective_time_s
from modelplan.comm.topology import cluster_links, shape_of_ranks
from modelplan.errors import SpecError
from modelplan.specs.hardware import Link

N = 16e6  # bytes: 16 MB per rank, so the bandwidth terms come out in whole microseconds
US = 1e-6


def tray_rack(**changes):
    """Trays of 4 GPUs joined into one 16-GPU NVLink domain (the toy's links)."""
    return toy_cluster(gpus_per_node=4, nvlink_domain_gpus=16, **changes)


def test_domain_defaults_to_the_node():
    """Without nvlink_domain_gpus the domain is the node (every existing preset)."""
    c = toy_cluster(gpus_per_node=8, nodes=4)
    assert (c.domain_gpus, c.domains) == (8, 4)
    assert (cluster_links(c).gpus_per_node, cluster_links(c).nodes) == (8, 4)


def test_comm_model_node_is_the_domain():
    """cluster_links reads the domain as its node: 8 trays of 4 in domains of 16 are 2 domains."""
    c = tray_rack(nodes=8)
    links = cluster_links(c)
    assert (c.gpus_per_node, c.max_gpus, links.gpus_per_node, links.nodes) == (4, 32, 16, 2)


def test_ring_allreduce_inside_the_domain_stays_on_the_intra_link():
    """16 ranks on 4 trays of one domain: 30 intra hops + 30/16 x 16 MB / 100 GB/s = 30 + 300 us."""
    t = collective_time_s("all_reduce", N, 16, None, tray_rack(), "ring")
    assert t == pytest.approx((2 * 15 * 1 + 2 * 15 / 16 * N / 100e9 / US) * US)
    assert t == pytest.approx(330 * US)


def test_ring_allreduce_over_the_same_trays_without_a_domain_uses_the_nics():
    """The same 16 ranks on 4 separate nodes: 24 intra + 6 network hops, 30 MB over
    min(100, 4 x 10) GB/s = 24 + 60 + 750 us."""
    t = collective_time_s("all_reduce", N, 16, None, toy_cluster(gpus_per_node=4), "ring")
    assert t == pytest.approx((24 * 1 + 6 * 10) * US + 2 * 15 / 16 * N / 40e9)
    assert t == pytest.approx(834 * US)


def test_ring_allreduce_across_two_domains():
    """32 ranks on 2 domains of 16: 60 intra + 2 network hops, 31 MB over min(100, 16 x 10) GB/s."""
    t = collective_time_s("all_reduce", N, 32, None, tray_rack(), "ring")
    assert t == pytest.approx((60 * 1 + 2 * 10) * US + 2 * 31 / 32 * N / 100e9)
    assert t == pytest.approx(390 * US)


def test_tree_allreduce_across_two_domains():
    """Double binary tree over 2 domains of 16: 2((16-1) x 1 + lg 2 x 10) us + 2 x 16 MB / 100 GB/s."""
    t = collective_time_s("all_reduce", N, 32, None, tray_rack(), "tree")
    assert t == pytest.approx(2 * (15 * 1 + 1 * 10) * US + 2 * N / 100e9)
    assert t == pytest.approx(370 * US)


def test_expert_alltoall_inside_the_domain():
    """EP 16 inside one domain: 1 us + 15/16 x 16 MB / 100 GB/s = 151 us; on 4 plain nodes of 4 the
    12/16 of the buffer leaving each node goes through one 10 GB/s NIC: 10 + 1200 us."""
    inside = collective_time_s("all_to_all", N, 16, None, tray_rack(), "direct")
    nodes = collective_time_s("all_to_all", N, 16, None, toy_cluster(gpus_per_node=4), "direct")
    assert inside == pytest.approx(151 * US)
    assert nodes == pytest.approx(1210 * US)


def test_point_to_point_between_trays_of_one_domain_is_nvlink():
    """Ranks 0 and 4 sit on different trays but one domain: 1 us + 16 MB / 100 GB/s = 161 us."""
    links = cluster_links(tray_rack())
    shape = shape_of_ranks((0, 4), links.gpus_per_node)
    assert collective_time_s("send_recv", N, 2, shape, links) == pytest.approx(161 * US)


@pytest.mark.parametrize("changes, message", [
    (dict(nvlink_domain_gpus=6), r"nvlink_domain_gpus \(6\) must be a multiple of gpus_per_node \(4\)"),
    (dict(nvlink_domain_gpus=16, nodes=6), r"nodes \(6\) x gpus_per_node \(4\) must fill whole NVLink domains"),
    (dict(nvlink_domain_gpus=16, intra=Link(name="xgmi", bandwidth_gbps=448, latency_us=3, fabric="mesh")),
     r"needs intra.fabric 'switch'"),
])
def test_domain_validation_names_the_numbers(changes, message):
    """A domain that is not whole nodes, nodes that are not whole domains, or a mesh domain: errors."""
    with pytest.raises(ValueError, match=message):
        toy_cluster(gpus_per_node=4, **changes)


def test_domain_error_is_one_line_from_a_file():
    """From TOML the same check is a one-line SpecError naming the field."""
    data = {"extends": "gb200-nvl72", "nvlink_domain_gpus": 70}
    with pytest.raises(SpecError, match=r"nvlink_domain_gpus \(70\) must be a multiple of gpus_per_node \(4\)"):
        cluster_from_dict(data, "rack.toml")


def test_gb200_nvl72_tp8_spans_two_trays_on_nvlink():
    """On gb200-nvl72 a TP group of 8 (two trays of 4) sits in one node of the comm model, the
    72-GPU domain, at NVLink5's 18 x 40.1 GB/s (NCCL topo.h), not on two trays' NICs."""
    nvl72 = cluster_links(load_cluster("gb200-nvl72"))
    assert (nvl72.gpus_per_node, nvl72.intra_Bps) == (72, pytest.approx(900e9 * 0.802))
    shape = shape_of_ranks(tuple(range(8)), nvl72.gpus_per_node)
    assert (shape.nodes, shape.ranks_per_node) == (1, 8)


def test_launchers_keep_the_physical_tray():
    """torchrun runs one process per GPU of a host: 16 ranks on gb200-nvl72 are 4 trays of 4
    (`--nnodes 4 --nproc-per-node 4`), not one 72-GPU node."""
    from modelplan.export.launch import launch_geometry
    from modelplan.specs.plan import Plan

    geometry = launch_geometry(Plan(dp=2, tp=8), load_cluster("gb200-nvl72"))
    assert (geometry.nnodes, geometry.nproc_per_node) == (4, 4)


def test_host_offload_shares_a_tray_not_the_domain():
    """A tray's two Grace CPUs (2 x 512 GB/s LPDDR5X, the preset's [host]) feed its 4 GPUs:
    1024 GB/s x 0.7 (the field's STREAM-class default) / 4 per GPU, not / 72."""
    from modelplan.comm.offload import host_link

    link = host_link(load_cluster("gb200-nvl72"))
    assert link.dram_Bps == pytest.approx(1024e9 * 0.7 / 4)
