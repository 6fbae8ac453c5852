"""Offload to the host: per-GPU host shares, ZeRO-Offload / ZeRO-Infinity optimizer, parameters,
activations. Expected numbers are hand-worked from the preset figures (DGX A100: 2 TB DDR4,
2 x 204.8 GB/s, PCIe Gen4 x16 31.5 GB/s shared by 2 GPUs) and the module's rules."""

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.comm.offload import (
    HostLink,
    activation_offload,
    host_link,
    host_problem,
    optimizer_offload,
    param_offload,
)

LINK = HostLink(pcie_Bps=10e9, dram_Bps=30e9, memory_bytes=200e9, nvme_read_Bps=2e9, nvme_write_Bps=1e9,
                nvme_bytes=1e12)


def test_dgx_a100_host_share():
    """PCIe 31.5 x 0.8 over 2 GPUs = 12.6 GB/s; DRAM 409.6 x 0.7 / 8 = 35.84 GB/s; 2 TB / 8 = 256 GB."""
    link = host_link(load_cluster("dgx-a100"))
    assert link.pcie_Bps == pytest.approx(12.6e9)
    assert link.dram_Bps == pytest.approx(35.84e9)
    assert link.memory_bytes == pytest.approx(256e9)
    assert link.nvme_read_Bps == 0.0


def test_cluster_without_host_has_no_link():
    """A preset without [host] offers no offload."""
    assert host_link(load_cluster("dgx-b200")) is None


def test_optimizer_offload_to_cpu():
    """1e9 params, bf16, fp32 grads, 12 B states: frees 16 GB; host 16 GB; d2h 0.2 s hidden behind
    a 1 s backward, CPU-Adam 30 GB / 30 GB/s = 1 s, h2d 0.2 s: 1.2 s exposed."""
    o = optimizer_offload(1e9, 2, 4, 12, LINK, backward_s=1.0)
    assert o.hbm_freed_bytes == pytest.approx(16e9)
    assert o.host_bytes == pytest.approx(16e9)
    assert o.exposed_s == pytest.approx(1.2)
    assert o.total_s == pytest.approx(1.4)


def test_optimizer_offload_d2h_longer_than_backward():
    """The same with a 0.05 s backward: 0.15 s of the gradient copy shows too."""
    assert optimizer_offload(1e9, 2, 4, 12, LINK, backward_s=0.05).exposed_s == pytest.approx(1.35)


def test_optimizer_offload_to_nvme():
    """States on NVMe: 12 GB written at 1 GB/s (12 s) is the slowest stream; 12 s + 0.2 s h2d."""
    o = optimizer_offload(1e9, 2, 4, 12, LINK, backward_s=1.0, device="nvme")
    assert o.exposed_s == pytest.approx(12.2)
    assert o.nvme_bytes == pytest.approx(12e9)
    assert o.host_bytes == pytest.approx(4e9)


def test_nvme_needs_a_bandwidth():
    """No NVMe figure: a clear error."""
    with pytest.raises(ValueError, match="nvme_read_gbps"):
        optimizer_offload(1e9, 2, 4, 12, LINK._replace(nvme_read_Bps=0.0), 1.0, device="nvme")


def test_param_offload():
    """4 units of 1e9 params (2 GB, 0.2 s each way) beside 0.1 s forward / 0.3 s backward units:
    per micro-batch 0.4 + 3 x (0.1 + 0) = 0.7 s; 2 micro-batches 1.4 s; 2 units freed (4 GB)."""
    o = param_offload(1e9, 4, 2, LINK, unit_fwd_s=0.1, unit_bwd_s=0.3, microbatches=2)
    assert o.exposed_s == pytest.approx(1.4)
    assert o.hbm_freed_bytes == pytest.approx(4e9)


def test_activation_offload():
    """10 layers of 1 GB (0.1 s each way) beside 0.05 s / 0.2 s: 10 x 0.05 = 0.5 s per micro-batch;
    8 layers x 1 GB x 3 micro-batches in flight = 24 GB freed."""
    o = activation_offload(1e9, 10, LINK, 0.05, 0.2, microbatches_in_flight=3, microbatches=4)
    assert o.exposed_s == pytest.approx(2.0)
    assert o.hbm_freed_bytes == pytest.approx(24e9)


def test_host_problem():
    """300 GB of host state on a 200 GB share: the message names both."""
    assert "300.0 GB of host memory per GPU > 200.0 GB" in host_problem(300e9, 0.0, LINK)
    assert host_problem(100e9, 0.0, LINK) is None
    assert "[host]" in host_problem(1.0, 0.0, None)
