"""Offload to the host: what leaves HBM, what the host must hold, and the seconds it costs.

Per GPU, as pure functions of floats (`HostLink` flattens a cluster's `Host` once):
- optimizer offload (ZeRO-Offload, Ren et al. 2021 sec. 4; DeepSpeed `offload_optimizer`
  device cpu): the fp32 master weights and Adam's states live in host memory and the step runs
  there (DeepSpeed CPU-Adam, memory-bound: it streams every state once); the gradients go
  device-to-host as the backward produces them (overlapped with it), the updated 16-bit
  weights come back host-to-device before the next forward (exposed). Device nvme
  (ZeRO-Infinity, Rajbhandari et al. 2021; `offload_optimizer` device nvme): the states live on
  the node's NVMe and are read and written around the CPU step, DeepSpeed pipelining the
  reads, the step and the writes (pipeline_read / pipeline_write), so the slowest stream sets
  the time;
- parameter offload (ZeRO-Infinity `offload_param`, ZeRO-3 only): each unit's 16-bit weights
  come host-to-device before its forward and again before its backward, prefetched beside the
  previous unit's compute;
- activation offload (Megatron-core `--cpu-offloading`, Transformer Engine
  get_cpu_offload_context; torch.autograd.graph.save_on_cpu): a layer's saved activations go
  device-to-host after its forward and come back before its backward, each transfer beside
  the neighbouring layer's compute; two layers stay resident (the one computing, the one moving).

A node's host memory and DRAM bandwidth are shared by its GPUs, and a PCIe switch uplink by the
GPUs behind it (`gpus_per_pcie_uplink`), all of them copying at once in data-parallel training.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.specs.hardware import Cluster

CPU_ADAM_BYTES_PER_PARAM = 30
"""Host bytes one CPU-Adam update streams per parameter: fp32 master, fp32 gradient, m, v read
(16), master, m, v written (12), the 16-bit weight copy written for the device (2)."""
OPTIMIZER_STATE_BYTES = 12
"""fp32 master + Adam m + v per parameter (what NVMe offload reads and writes around a step)."""
RESIDENT_LAYERS = 2
"""Layers whose activations stay in HBM under activation offload (computing + in flight)."""


class HostLink(NamedTuple):
    """One GPU's share of its node's host, in SI units."""

    pcie_Bps: float  # noqa: N815 - unit in the name
    """Achievable host<->device bytes/s per direction when every GPU copies at once."""
    dram_Bps: float  # noqa: N815
    """Sustained host DRAM bytes/s per GPU."""
    memory_bytes: float
    """Host memory per GPU."""
    nvme_read_Bps: float  # noqa: N815
    """NVMe read bytes/s per GPU (0: no NVMe)."""
    nvme_write_Bps: float  # noqa: N815
    nvme_bytes: float


def host_link(cluster: Cluster) -> HostLink | None:
    """A cluster's host side per GPU, or None when its preset states none."""
    host = cluster.host
    if host is None:
        return None
    g = cluster.gpus_per_node
    share = min(host.gpus_per_pcie_uplink, g)
    read = (host.nvme_read_gbps or 0.0) * 1e9 / g
    write = (host.nvme_write_gbps or host.nvme_read_gbps or 0.0) * 1e9 / g
    return HostLink(
        pcie_Bps=host.pcie_gbps * 1e9 * host.pcie_efficiency / share,
        dram_Bps=host.memory_bw_gbps * 1e9 * host.memory_bw_efficiency / g,
        memory_bytes=host.memory_gb * 1e9 / g,
        nvme_read_Bps=read, nvme_write_Bps=write, nvme_bytes=(host.nvme_tb or 0.0) * 1e12 / g,
    )


class Offload(NamedTuple):
    """What one offload choice does to one GPU."""

    hbm_freed_bytes: float
    """Device bytes that move off the GPU."""
    host_bytes: float
    """Host memory it needs (per GPU)."""
    nvme_bytes: float
    """NVMe it needs (per GPU)."""
    exposed_s: float
    """Seconds per step it adds to the critical path."""
    total_s: float
    """Seconds of transfers and host compute it performs per step (hidden or not)."""


def optimizer_offload(params: float, dtype_bytes: int, grad_bytes: int, state_bytes: int, link: HostLink,
                      backward_s: float, device: str = "cpu", copies: int = 1) -> Offload:
    """Offload the optimizer of `params` (this GPU's shard) to the host (`device` 'cpu') or NVMe.

    HBM freed at most: the states (`state_bytes` per parameter: master + moments) and the
    gradient buffer (`grad_bytes`; whether an engine frees it depends on its ZeRO stage, the
    caller's business). Gradients travel in the compute dtype (DeepSpeed copies 16-bit gradients
    and upcasts on the host), `copies` times per step (once per micro-batch when the host
    accumulates them), each beside a `backward_s` backward; the step and the h2d copy of the new
    weights are exposed (no delayed parameter update)."""
    d2h = params * dtype_bytes / link.pcie_Bps
    h2d = params * dtype_bytes / link.pcie_Bps
    step = params * CPU_ADAM_BYTES_PER_PARAM / link.dram_Bps  # CPU-Adam is memory-bound
    host = params * (state_bytes + 4)  # states + an fp32 gradient buffer on the host
    nvme = 0.0
    if device == "nvme":
        if link.nvme_read_Bps <= 0:
            raise ValueError("optimizer offload to nvme needs host.nvme_read_gbps on the cluster")
        moved = params * OPTIMIZER_STATE_BYTES
        step = max(step, moved / link.nvme_read_Bps, moved / link.nvme_write_Bps)
        nvme, host = params * state_bytes, params * 4.0
    exposed = copies * max(0.0, d2h - backward_s) + step + h2d
    return Offload(params * (state_bytes + grad_bytes), host, nvme, exposed, copies * d2h + step + h2d)


def param_offload(unit_params: float, units: int, dtype_bytes: int, link: HostLink, unit_fwd_s: float,
                  unit_bwd_s: float, microbatches: int) -> Offload:
    """Offload a stage's 16-bit weights (`units` units of `unit_params`, ZeRO-3) to the host:
    every micro-batch fetches each unit before its forward and its backward, each fetch beside
    the previous unit's compute (the first is exposed); two units stay resident."""
    fetch = unit_params * dtype_bytes / link.pcie_Bps
    per_mb = 2 * fetch + (units - 1) * (max(0.0, fetch - unit_fwd_s) + max(0.0, fetch - unit_bwd_s))
    resident = min(units, RESIDENT_LAYERS)
    freed = max(0, units - resident) * unit_params * dtype_bytes
    return Offload(freed, units * unit_params * dtype_bytes, 0.0, microbatches * per_mb,
                   microbatches * 2 * units * fetch)


def activation_offload(layer_bytes: float, layers: int, link: HostLink, layer_fwd_s: float, layer_bwd_s: float,
                       microbatches_in_flight: int, microbatches: int) -> Offload:
    """Offload the saved activations of `layers` layers (`layer_bytes` each per micro-batch):
    d2h beside the next layer's forward, h2d beside the previous layer's backward, each exposed
    by what it outlasts that compute; the host holds them for every micro-batch in flight."""
    move = layer_bytes / link.pcie_Bps
    per_mb = layers * (max(0.0, move - layer_fwd_s) + max(0.0, move - layer_bwd_s))
    offloaded = max(0, layers - RESIDENT_LAYERS)
    freed = offloaded * layer_bytes * microbatches_in_flight
    return Offload(freed, freed, 0.0, microbatches * per_mb, microbatches * 2 * layers * move)


def host_problem(host_bytes: float, nvme_bytes: float, link: HostLink | None) -> str | None:
    """Why an offload does not fit the host, or None."""
    if link is None:
        return "offload needs the cluster's [host] table (host memory, PCIe)"
    if host_bytes > link.memory_bytes:
        return (f"offload needs {host_bytes / 1e9:.1f} GB of host memory per GPU > "
                f"{link.memory_bytes / 1e9:.1f} GB (the node's host memory over its GPUs)")
    if nvme_bytes > link.nvme_bytes:
        return f"offload needs {nvme_bytes / 1e9:.1f} GB of NVMe per GPU > {link.nvme_bytes / 1e9:.1f} GB"
    return None
