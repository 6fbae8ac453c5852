"""NVLS (NVLink SHARP) in-switch AllReduce, worked by hand on a toy NVLS node.

Formula (modelplan/comm/alphabeta.py `all_reduce_nvls`): each GPU moves n(p+1)/p bytes per
direction at nvlsEfficiency x the link's rate, after NCCL's NVLS latency (no base latency), i.e.
busbw = B x eff x 2(p-1)/(p+1) and time = latency + 2(p-1)/p n / busbw. Where NCCL engages it
(from 5 GPUs on H200, 6 on B200; AllReduce only; one node) is from comm_hw.md §1.2 [MLE-NET].
"""

import pytest
from _comm_toy import ALPHA_I, B_I, toy_cluster

from modelplan.comm.clusters import load_cluster
from modelplan.comm.cost import collective_cost, collective_time_s, valid_algos
from modelplan.comm.exact import bytes_per_rank
from modelplan.errors import SpecError
from modelplan.specs.hardware import Link

MiB = 2**20
EFF = 0.9  # toy nvlsEfficiency: NVLS gets 0.9 x 100 GB/s = 90 GB/s per direction
NVLS_LAT = 20e-6  # toy NVLS latency, 20 us


def nvls_cluster(**changes):
    """8 GPUs per node, intra 100 GB/s / 1 us with NVLS from 5 ranks at 0.9 and 20 us."""
    intra = Link(name="toyswitch", bandwidth_gbps=100.0, efficiency=1.0, latency_us=1.0, nvls=True,
                 nvls_min_ranks=5, nvls_efficiency=EFF, nvls_latency_us=20.0)
    return toy_cluster(gpus_per_node=8, intra=intra, **changes)


def test_nvls_time_formula():
    """p=8, n=80 MB: busbw = 90 GB/s x 2*7/9 = 140 GB/s; time = 20 us + 1.75 x 80e6 / 140e9
    = 20 us + 1000 us = 1020 us."""
    t = collective_time_s("all_reduce", 80e6, 8, 8, nvls_cluster(), algo="nvls")
    assert t == pytest.approx(1020e-6)


def test_nvls_busbw_and_bytes():
    """At large sizes nccl-tests busbw -> 140 GB/s (above the 100 GB/s link: fewer bytes move);
    each GPU sends n (to be reduced) + n/8 (to be multicast) = 9/8 n."""
    c = collective_cost("all_reduce", 2**40, 8, 8, nvls_cluster(), algo="nvls")
    assert c.busbw_gbps == pytest.approx(140.0, rel=1e-5)  # the 20 us latency: 2e-6
    assert c.bytes_sent_per_rank == pytest.approx(9 / 8 * 2**40)
    assert c.inter_node_bytes_per_rank == 0.0


def test_nccl_picks_nvls_only_when_faster():
    """p=8: ring = 14 us + 1.75 n/100e9, NVLS = 20 us + 1.125 n/90e9 = 20 us + 1.25 n/100e9,
    tree = 14 us + 2 n/100e9: they cross at 0.5 n/100e9 = 6 us, n = 1.2 MB."""
    ring_t = 2 * 7 * ALPHA_I + 1.75 * 1.0e6 / B_I
    assert collective_cost("all_reduce", 1.0e6, 8, 8, nvls_cluster(), "nccl").algo.value == "ring"
    assert collective_time_s("all_reduce", 1.0e6, 8, 8, nvls_cluster(), "nccl") == pytest.approx(ring_t)
    assert collective_cost("all_reduce", 1.5e6, 8, 8, nvls_cluster(), "nccl").algo.value == "nvls"
    assert collective_cost("all_reduce", 2**30, 8, 8, nvls_cluster(), "auto").algo.value == "nvls"


def test_not_used_below_nvls_min_ranks():
    """nvls_min_ranks = 5: a 4-rank group never gets NVLS, a 5-rank group does at large sizes."""
    assert "nvls" not in valid_algos("all_reduce", 4, 4, nvls_cluster())
    assert collective_cost("all_reduce", 2**30, 4, 4, nvls_cluster(), "nccl").algo.value != "nvls"
    assert collective_cost("all_reduce", 2**30, 5, 5, nvls_cluster(), "nccl").algo.value == "nvls"
    with pytest.raises(SpecError, match=r"nvls needs >= 5 ranks \(intra.nvls_min_ranks\), not 4"):
        collective_time_s("all_reduce", MiB, 4, 4, nvls_cluster(), algo="nvls")


def test_not_used_across_nodes():
    """16 ranks on 2 nodes of 8: NVLS is intra-node only (NVLSTree is not modelled)."""
    assert collective_cost("all_reduce", 2**30, 16, 8, nvls_cluster(), "auto").algo.value != "nvls"
    assert collective_cost("all_reduce", 2**30, 16, 8, nvls_cluster(), "nccl").algo.value != "nvls"
    with pytest.raises(SpecError, match=r"nvls runs inside one node; this group spans 2 nodes"):
        collective_time_s("all_reduce", MiB, 16, 8, nvls_cluster(), algo="nvls")


@pytest.mark.parametrize("op", ["all_gather", "reduce_scatter"])
def test_all_gather_reduce_scatter_never_nvls(op):
    """NVLS is modelled for AllReduce only (AG/RS stay on ring, comm_hw.md §1.2)."""
    for algo in ("auto", "nccl"):
        assert collective_cost(op, 2**30, 8, 8, nvls_cluster(), algo).algo.value != "nvls"
    with pytest.raises(SpecError, match=rf"{op} has no 'nvls' algorithm"):
        collective_time_s(op, MiB, 8, 8, nvls_cluster(), algo="nvls")


def test_cluster_without_nvls_rejects_it():
    """The plain toy node (no intra.nvls) has no NVLS, even at 8 ranks."""
    with pytest.raises(SpecError, match=r"nvls needs a node whose intra link has NVLink SHARP"):
        collective_time_s("all_reduce", MiB, 4, 4, toy_cluster(), algo="nvls")


def test_presets_flag_nvls_on_hopper_and_blackwell_switches_only():
    """dgx-h100/h200: Hopper nvlsEfficiency 0.85, from 5 GPUs; dgx-b200: Blackwell 0.74, from 6
    (NCCL tuning.cc via comm_hw.md §3.1; MLE-NET via §1.2). A100, V100, MI300X: none."""
    for name, min_ranks, eff in [("dgx-h100", 5, 0.85), ("dgx-h200", 5, 0.85), ("dgx-b200", 6, 0.74)]:
        intra = load_cluster(name).intra
        assert (intra.nvls, intra.nvls_min_ranks, intra.nvls_efficiency) == (True, min_ranks, eff)
        assert intra.nvls_latency_us == 25.0
    for name in ["dgx-a100", "dgx-a100-40gb", "dgx-1v", "mi300x-node"]:
        assert load_cluster(name).intra.nvls is False


def test_h200_nvls_gain_over_ring_ramps_with_group_size():
    """Measured on 8xH200: NVLS/ring busbw 1.14x at 5 GPUs, 1.29x at 8 (comm_hw.md §1.2);
    the model (0.85 x 2(p-1)/(p+1): 1.13x, 1.32x) is within 5% of both."""
    h200 = load_cluster("dgx-h200")
    for p, gain in [(5, 1.14), (8, 1.29)]:
        nvls = collective_cost("all_reduce", 16 * 2**30, p, p, h200, "nvls").busbw_gbps
        ring = collective_cost("all_reduce", 16 * 2**30, p, p, h200, "ring").busbw_gbps
        assert nvls / ring == pytest.approx(gain, rel=0.05)


def test_h200_nccl_uses_nvls_from_2_mib():
    """NCCL picks NVLS from 2 MiB on an 8xH200 node (comm_hw.md §1.2); so does the model."""
    h200 = load_cluster("dgx-h200")
    for n in (2 * MiB, 64 * MiB, 2**34):
        assert collective_cost("all_reduce", n, 8, 8, h200, "nccl").algo.value == "nvls"


def test_nvls_has_no_exact_schedule():
    """In-switch reduction has no per-rank send/recv schedule: only estimates, as for tree."""
    with pytest.raises(SpecError, match=r"no exact per-rank schedule for nvls all_reduce"):
        bytes_per_rank("all_reduce", "nvls", 64, 8)


def test_executor_ledger_never_uses_nvls():
    """The executor's communicator (and so the ledger verify compares) runs ring AllReduce."""
    from modelplan.plan.commlist import EXECUTOR_ALGO

    assert "nvls" not in {a.value for a in EXECUTOR_ALGO.values()}
    assert EXECUTOR_ALGO["all_reduce"].value == "ring"


def test_nvls_needs_a_switch_fabric():
    """A mesh (xGMI) link cannot reduce in a switch: one-line error naming the field."""
    with pytest.raises(ValueError, match=r"nvls: in-switch reduction needs fabric 'switch', not 'mesh'"):
        Link(name="xgmi", bandwidth_gbps=448.0, latency_us=1.0, fabric="mesh", nvls=True)


def test_nvls_on_the_network_link_is_rejected():
    """inter.nvls makes no sense (NVLS is the NVSwitch's), so the cluster rejects it."""
    inter = Link(name="net", bandwidth_gbps=10.0, latency_us=10.0, nvls=True)
    with pytest.raises(ValueError, match=r"inter.nvls: NVLS is an in-node NVSwitch capability"):
        toy_cluster(inter=inter)
