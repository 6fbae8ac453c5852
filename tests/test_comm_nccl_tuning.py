"""NCCL's tuning.cc (algorithm, protocol) model (modelplan/comm/nccl_tuning.py).

Expected numbers are worked by hand from tuning.cc's constants as tabulated in
shared/reference/comm_hw.md §3.2 and its worked examples §3.3 (8xH100 AllReduce: ring LL
L = 6.6 + 14 x 0.6 = 15.0 us, BW = min(141, 370/2) x 8/14 = 80.6 GB/s; LL up to 1 MiB, NVLS from
2 MiB; 16 x 8 H100 latencies), with the presets' ring busBw (dgx-h100: 450 x 0.824 = 370.8 GB/s).
"""

from __future__ import annotations

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.comm.cost import collective_cost, collective_time_s
from modelplan.comm.nccl_tuning import choices, nccl_arch
from modelplan.comm.ops import Algo, Collective
from modelplan.comm.topology import cluster_links, path_links
from modelplan.errors import SpecError

H100 = cluster_links(load_cluster("dgx-h100"))
BUS = 450 * 0.824  # GB/s, dgx-h100 ring busBw (topo.h 18 x 20.6 ~ 371)
MIB = 2**20


def _table(op, p, g, links=H100, **kw):
    L = path_links(links, p, g, g)
    return {(c.algo, c.proto): c for c in choices(op, L, links.nccl_arch, **kw)}


def test_ring_latency_and_bandwidth_on_one_h100_node():
    t = _table(Collective.ALL_REDUCE, 8, 8)
    ll, ll128, simple = t[Algo.RING, "ll"], t[Algo.RING, "ll128"], t[Algo.RING, "simple"]
    assert ll.lat_s == pytest.approx(15.0e-6)  # 6.6 + 14 x 0.6
    assert ll.algbw_Bps == pytest.approx(141e9 * 8 / 14)  # llMaxBw 141 < 370.8 / 2; = 80.6 GB/s
    assert ll128.lat_s == pytest.approx(40.6e-6)  # 14 + 14 x 1.9
    assert ll128.algbw_Bps == pytest.approx(0.92 * BUS * 1e9 * 8 / 14)
    assert simple.lat_s == pytest.approx(56.0e-6)  # 8.4 + 14 x 3.4
    assert simple.algbw_Bps == pytest.approx(BUS * 1e9 * 8 / 14)


def test_ll_up_to_1mib_then_nvls_on_8_h100():
    """§3.3: 1 MiB LL 28.0 us vs NVLS 28.8; 2 MiB LL 41.0 vs NVLS ~32.7 (measured on 8xH200:
    Ring/LL up to 1 MiB, NVLS from 2 MiB, comm_hw.md §1.2)."""
    one = collective_cost("all_reduce", MIB, 8, 8, H100)
    two = collective_cost("all_reduce", 2 * MIB, 8, 8, H100)
    assert (one.algo, one.protocol) == (Algo.RING, "ll")
    assert one.time_s == pytest.approx(15.0e-6 + MIB / (141e9 * 8 / 14))  # 28.0 us
    assert (two.algo, two.protocol) == (Algo.NVLS, "simple")
    # NVLS chosen by tuning.cc's 25 us + n / (370.8 x 0.85 x 8/9 GB/s); it then runs with the
    # kernel's pipeline fill, 2 loops of 16 channels x 8 heads x 16 KiB = 2 MiB (nvls_pipeline)
    assert two.time_s == pytest.approx(25e-6 + (2 + 2 * 2) * MIB / (BUS * 0.85 * 8 / 9 * 1e9))


def test_multi_node_latencies_16_nodes_of_8_h100():
    """§3.3, 16 x 8 H100 (p 128, Intel host): ring LL 6.6 + 224 x 1.0 + 30 x 2.7; ring Simple
    8.4 + 224 x 3.4 + 30 x 14 (x1.4 plateau at large sizes); tree LL 6.8 + 2(7 x 0.6 + 4 x 5.0);
    tree Simple 8.4 + 2(7 x 4 + 4 x 14)."""
    t = _table(Collective.ALL_REDUCE, 128, 8)
    assert t[Algo.RING, "ll"].lat_s == pytest.approx(311.6e-6)
    assert t[Algo.RING, "simple"].lat_s == pytest.approx(1190.0e-6)
    assert t[Algo.TREE, "ll"].lat_s == pytest.approx(55.2e-6)
    assert t[Algo.TREE, "simple"].lat_s == pytest.approx(176.4e-6)
    simple = t[Algo.RING, "simple"]
    big = 2**30
    assert simple.time_s(big) == pytest.approx(1.4 * 1190.0e-6 + big / simple.algbw_Bps)


def test_tree_size_correction():
    """treeCorrectionFactor[Simple][log2(1 MiB / 64) = 14] = 0.5: tree Simple bandwidth halves."""
    tree = _table(Collective.ALL_REDUCE, 128, 8)[Algo.TREE, "simple"]
    assert tree.time_s(MIB) == pytest.approx(176.4e-6 + MIB / (0.5 * tree.algbw_Bps))
    assert tree.time_s(2**30) == pytest.approx(176.4e-6 + 2**30 / tree.algbw_Bps)  # past 256 MiB: 1.0


def test_pat_one_gpu_per_node():
    """PAT AllGather, 8 nodes x 1: 8.0 + log2(8) x 14 / 3.5 + 2.8 x 8 = 42.4 us; 0.75 x busBw
    (one NIC: 50 x 0.94 GB/s)."""
    pat = _table(Collective.ALL_GATHER, 8, 1)[Algo.PAT, "simple"]
    assert pat.lat_s == pytest.approx(42.4e-6)
    assert pat.algbw_Bps == pytest.approx(0.75 * 50 * 0.94 * 1e9)
    assert (Algo.PAT, "simple") not in _table(Collective.ALL_GATHER, 16, 8)


def test_simple_only_network_keeps_intra_protocols():
    """A network that carries Simple only (EFA, aws-ofi-nccl#76) restricts groups across nodes."""
    spec = load_cluster("dgx-h100")
    efa = spec.model_copy(update={"inter": spec.inter.model_copy(update={"nccl_protocols": ("simple",)})})
    links = cluster_links(efa)
    assert collective_cost("all_reduce", 64 * 1024, 16, 8, links).protocol == "simple"
    assert collective_cost("all_reduce", 64 * 1024, 8, 8, links).protocol == "ll"


def test_nccl_auto_never_picks_what_nccl_does_not_run():
    for p, g in ((8, 8), (16, 8), (32, 8), (64, 8), (8, 1)):
        for e in range(10, 34, 2):
            cost = collective_cost("all_reduce", 2**e, p, g, H100)
            assert cost.algo in (Algo.RING, Algo.TREE, Algo.NVLS), (p, g, e, cost.algo)
            assert cost.protocol in ("ll", "ll128", "simple")


def test_explicit_mpi_algorithms_and_non_nvidia_clusters_keep_the_alpha_beta_model():
    hd = collective_cost("all_reduce", 16 * MIB, 32, 8, H100, "halving_doubling")
    assert hd.algo is Algo.HALVING_DOUBLING and hd.protocol == ""
    mi = collective_cost("all_reduce", 16 * MIB, 8, 8, load_cluster("mi300x-node"))
    assert mi.protocol == ""
    with pytest.raises(SpecError, match="pat is NCCL's"):
        collective_time_s("all_gather", MIB, 4, 1, load_cluster("mi300x-node"), "pat")


@pytest.mark.parametrize(("name", "arch"), [("A100-SXM4-80GB", "ampere"), ("H100-SXM5-80GB", "hopper"),
                                            ("H200-SXM-141GB", "hopper"), ("B200-SXM-180GB", "blackwell"),
                                            ("GB200", "blackwell"), ("V100-SXM2-32GB", "volta"),
                                            ("MI300X", ""), ("TPU v5p", "")])
def test_nccl_arch(name, arch):
    assert nccl_arch(name) == arch


def test_broadcast_and_pcie_latencies():
    """Ring Broadcast: base + one hop (same channels): LL 6.6 + 0.6 on NVLink; a PCIe node reads
    hwLat[PCI]: ring Simple AllReduce on 4 ranks 8.4 + 6 x 5.7 = 42.6 us."""
    bcast = _table(Collective.BROADCAST, 8, 8)[Algo.RING, "ll"]
    assert bcast.lat_s == pytest.approx(7.2e-6)
    assert bcast.algbw_Bps == pytest.approx(141e9)  # bus factor 1: p / nsteps = 8 / 8
    pcie = _table(Collective.ALL_REDUCE, 4, 4, nvlink=False)[Algo.RING, "simple"]
    assert pcie.lat_s == pytest.approx(42.6e-6)


def test_tree_time_never_drops_at_a_correction_boundary():
    """tuning.cc's tree correction is a step table (log2 buckets): 3 MiB + 1 B sits in the 0.6 bucket
    of the Simple row and 4 MiB in the 0.7 one, so tuning.cc's raw time is lower at 4 MiB. A call can
    always be padded to the larger size, so the smaller is priced no slower (found by
    test_comm_properties.test_time_is_monotone_in_size on dgx-1v, tree, 32 ranks over 8 nodes)."""
    from modelplan.comm.cost import collective_time_s
    from modelplan.comm.ops import Algo, Collective
    from test_comm_properties import LINKS
    links = LINKS["dgx-1v"]
    sizes = [3 * 2**20 + 1, 4 * 2**20, 6 * 2**20, 8 * 2**20]
    times = [collective_time_s(Collective.ALL_REDUCE, n, 32, 4, links, Algo.TREE) for n in sizes]
    assert times == sorted(times)


# NCCL net plugin latency (tuning.cc ncclTopoTuneModel: interLat = hwLat[NET][algo][proto] +
# graph latencyInter, + latencyInter again for Simple, "the flush extra latency"; the plugin's
# ncclNetProperties.latency: net_ib 0, aws-ofi-nccl src/platform-aws.cpp 35 us on p5en / p6-b200).
B200 = load_cluster("dgx-b200")
EFA_US = 35.0


def _efa_links(net_latency_us=EFA_US, protocols=("ll", "ll128", "simple")):
    inter = B200.inter.model_copy(update={"nccl_net_latency_us": net_latency_us, "nccl_protocols": protocols})
    return cluster_links(B200.model_copy(update={"inter": inter}))


def test_tree_network_hop_carries_the_plugin_latency():
    """4 nodes x 8 B200, tree AllReduce: base + 2((g-1) hwLat[NVLINK][tree] + log2(4) interLat).
    Simple: 8.4 + 2(7 x 4.0 + 2 x (14 + 2 x 35)) = 400.4 us; LL: 6.8 + 2(7 x 0.6 + 2 x (5.0 + 35))
    = 175.2 us; LL128: 14.0 + 2(7 x 1.25 + 2 x (8.5 + 35)) = 205.5 us (tuning.cc baseLat, hwLat)."""
    t = _table(Collective.ALL_REDUCE, 32, 8, links=_efa_links(), net_lat_us=EFA_US)
    assert t[Algo.TREE, "simple"].lat_s == pytest.approx(400.4e-6)
    assert t[Algo.TREE, "ll"].lat_s == pytest.approx(175.2e-6)
    assert t[Algo.TREE, "ll128"].lat_s == pytest.approx(205.5e-6)


def test_ring_inter_steps_carry_the_plugin_latency():
    """4 nodes x 8 B200 (p 32), ring AllReduce: base + (2(p-1) - 2(k-1)) max(hwLat[NVLINK], netOverhead)
    + 2(k-1) interLat. Simple: 8.4 + 56 x max(3.4, 3 x 1.0) + 6 x (14 + 70) = 702.8 us; LL: 6.6 + 56 x
    max(0.6, 1.0) + 6 x (2.7 + 35) = 288.8 us (tuning.cc; getNetOverhead Intel x86 1 us, x3 Simple)."""
    t = _table(Collective.ALL_REDUCE, 32, 8, links=_efa_links(), net_lat_us=EFA_US)
    assert t[Algo.RING, "simple"].lat_s == pytest.approx(702.8e-6)
    assert t[Algo.RING, "ll"].lat_s == pytest.approx(288.8e-6)


def test_infiniband_reports_no_plugin_latency():
    """A preset's network leaves nccl_net_latency_us at 0 (net_ib init.cc: props->latency = 0), so
    cost.py prices 4 x 8 B200 tree Simple at 8.4 + 2(7 x 4.0 + 2 x 14) = 120.4 us, and with EFA's
    35 us at 400.4 us (previous test)."""
    ib = collective_cost("all_reduce", 64 * 1024, 32, 8, cluster_links(B200), "tree")
    efa = collective_cost("all_reduce", 64 * 1024, 32, 8, _efa_links(protocols=("simple",)), "tree")
    assert cluster_links(B200).net_latency_s == 0.0
    tree_bw = _table(Collective.ALL_REDUCE, 32, 8, links=cluster_links(B200))[Algo.TREE, "simple"]
    assert ib.protocol == "ll"  # IB carries LL: 6.8 + 2(7 x 0.6 + 2 x 5.0) = 35.2 us + n / bw
    assert efa.time_s - (400.4e-6 + 64 * 1024 / (0.6 * tree_bw.algbw_Bps)) == pytest.approx(0, abs=1e-12)


def test_broadcast_across_nodes_reads_the_ring_hop_without_plugin_latency():
    """Ring Broadcast across nodes: base + hwLat[NET][ring] (tuning.cc adds `lat`, not interLat, and
    reads no tree row for one GPU per node): LL 6.6 + 2.7 = 9.3 us whatever the plugin reports."""
    for net in (0.0, EFA_US):
        t = _table(Collective.BROADCAST, 4, 1, links=_efa_links(net), net_lat_us=net)
        assert t[Algo.RING, "ll"].lat_s == pytest.approx(9.3e-6)


def test_pat_reads_the_plugin_latency_through_the_tree_network_hop():
    """PAT AllGather, 8 nodes x 1 GPU: 8.0 + log2(8) x (14 + 2 x 35) / 3.5 + 2.8 x 8 = 102.4 us."""
    pat = _table(Collective.ALL_GATHER, 8, 1, links=_efa_links(), net_lat_us=EFA_US)[Algo.PAT, "simple"]
    assert pat.lat_s == pytest.approx(102.4e-6)


def test_tree_correction_table_is_masters_24_entries():
    """tuning.cc treeCorrectionFactor[3][24]; the 24th (index 23: LL 1.0, LL128 1.0, Simple .9) is read
    only for NVLSTree, so tree AllReduce at 512 MiB (log2(2^29 / 64) = 23) takes no correction."""
    from modelplan.comm.nccl_tuning import TREE_CORRECTION
    assert [len(row) for row in TREE_CORRECTION] == [24, 24, 24]
    assert [row[23] for row in TREE_CORRECTION] == [1.0, 1.0, 0.9]
    tree = _table(Collective.ALL_REDUCE, 128, 8)[Algo.TREE, "simple"]
    assert tree.time_s(2**29) == pytest.approx(176.4e-6 + 2**29 / tree.algbw_Bps)


def test_a_negative_plugin_latency_is_refused():
    from pydantic import ValidationError
    with pytest.raises(ValidationError, match="nccl_net_latency_us"):
        type(B200.inter)(**{**B200.inter.model_dump(), "nccl_net_latency_us": -1.0})


def test_send_recv_across_efa_nodes_pays_the_plugin_latency_as_simple():
    """Send/Recv between nodes (alpha-beta send_recv_direct): call 8.4 + network hop 14 (the
    preset's tuning.cc Simple NET hop) + 2 x 35 (interLat for Simple adds latencyInter twice)
    = 92.4 us + n / (50 x 0.94 GB/s); over InfiniBand (0) 22.4 us + n / be."""
    n = 1 << 20
    be = 50e9 * 0.94
    efa = collective_time_s("send_recv", n, 2, 1, _efa_links())
    ib = collective_time_s("send_recv", n, 2, 1, cluster_links(B200))
    assert efa == pytest.approx(92.4e-6 + n / be)
    assert ib == pytest.approx(22.4e-6 + n / be)
