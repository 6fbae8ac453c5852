"""Memory of one GPU of one pipeline stage: model states sharded by ZeRO, activations of the
micro-batches the schedule keeps in flight, communication buffers, and stated allowances.

Model states (Rajbhandari et al. 2020, ZeRO; Megatron's 18 bytes/parameter for mixed-precision
Adam = 2 weight + 4 fp32 grad + 4 master + 8 Adam m, v): stage 1 shards master weights and
optimizer states over dp, stage 2 also gradients, stage 3 also weights (and then holds two
gathered blocks: the current one and the prefetched next).
Activations (Korthikanti et al. 2022 sec. 4.3): a block's stored bytes times the blocks in
flight; 1F1B's rank r holds min(pp - r, m) micro-batches, GPipe all m, interleaved
min(2(pp - r - 1) + (vpp - 1) pp + 1, m vpp) chunks of layers/(pp vpp) blocks, which is
L (1 + (pp - 1)/(pp vpp)) blocks on the first stage; plus one block's transient working set when
recomputing; token ids and embedding dropout mask on the first stage; logits and loss on the last.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.plan.fsdp import zero3_state_bytes
from modelplan.plan.layerterms import LayerTerms
from modelplan.specs.costmodel import CostModel


def inflight_microbatches(schedule: str, pp: int, pp_rank: int, num_microbatches: int, vpp: int = 1) -> float:
    """Micro-batches (in units of the rank's whole share of layers) whose activations rank
    `pp_rank` holds at its peak (Megatron schedules' num_warmup_microbatches + 1)."""
    m = num_microbatches
    if schedule == "gpipe":
        return float(m)
    if schedule == "1f1b":
        return float(min(pp - pp_rank, m))
    chunks = min((pp - pp_rank - 1) * 2 + (vpp - 1) * pp + 1, m * vpp)
    return chunks / vpp


class StageMemory(NamedTuple):
    """Bytes on one GPU of one stage; `total` is what must fit."""

    weights: float
    gradients: float
    optimizer: float
    """fp32 master weights and optimizer states."""
    activations: float
    comm_buffers: float
    fragmentation: float
    reserved: float
    """CUDA context and library workspaces."""
    total: float


def model_state_bytes(
    params: int, layer_params: int, dp: int, zero: int, dtype_bytes: int, grad_bytes: int,
    state_bytes_per_param: int, zero3: tuple | None = None,
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes of `params` parameters on one GPU under ZeRO `zero`
    (Rajbhandari et al. 2020: stage 1 shards optimizer states, 2 also gradients, 3 also weights;
    stage 3 also holds two gathered blocks, the current one and the prefetched next).
    `zero3`: (Zero3Mode, shard ranks, low-precision shard copy, reduce bytes) for stage 3 as the
    engine runs it (`plan/fsdp.py`), else the plain rule above."""
    if zero >= 3 and zero3 is not None:
        mode, shard, low_copy, reduce_bytes = zero3
        return zero3_state_bytes(params, layer_params, min(shard, dp), dtype_bytes, grad_bytes,
                                 state_bytes_per_param, mode, low_copy, reduce_bytes)
    weights = params * dtype_bytes / (dp if zero >= 3 else 1)
    if zero >= 3:
        weights += 2 * layer_params * dtype_bytes
    gradients = params * grad_bytes / (dp if zero >= 2 else 1)
    optimizer = params * state_bytes_per_param / (dp if zero >= 1 else 1)
    return weights, gradients, optimizer


def stage_memory(
    states: tuple[float, float, float],
    layers: int,
    inflight: float,
    terms: LayerTerms,
    is_first: bool,
    is_last: bool,
    groups: int,
    cost: CostModel,
    moe_terms: LayerTerms | None = None,
    moe_layers: int = 0,
    bucket_bytes: float = 0.0,
) -> StageMemory:
    """Memory of one stage's GPU: model states, `layers` blocks' activations for `inflight`
    micro-batches plus one block's working set, edge activations, buffers and allowances;
    `moe_layers` of the blocks are MoE blocks with `moe_terms`; `bucket_bytes`: the engine's
    data-parallel staging buckets (DeepSpeed's reduce and all-gather buckets)."""
    weights, gradients, optimizer = states
    block_bytes = (layers - moe_layers) * terms.activation_bytes
    working = terms.working_bytes
    if moe_terms is not None and moe_layers:
        block_bytes += moe_layers * moe_terms.activation_bytes
        working = max(working, moe_terms.working_bytes)
    activations = inflight * block_bytes + working
    if is_first:
        activations += inflight * terms.embedding_activation_bytes
    if is_last:
        activations += terms.head_activation_bytes
    # NCCL buffers per communicator; pipeline ranks also keep send/recv buffers of one activation
    comm = groups * cost.nccl_buffer_bytes_per_group + (0 if is_first and is_last else 2 * terms.boundary_bytes)
    comm += bucket_bytes
    allocated = weights + gradients + optimizer + activations + comm
    # the caching allocator fragments around the tensors that come and go (activations, buffers);
    # model states are allocated once, as a few large contiguous buffers (Megatron's param and
    # grad buffers, FSDP's flat shards)
    fragmentation = (activations + comm) * cost.fragmentation_fraction
    reserved = float(cost.runtime_reserved_bytes)
    return StageMemory(weights, gradients, optimizer, activations, comm, fragmentation, reserved,
                       allocated + fragmentation + reserved)


def state_bytes_per_param(optimizer_states: int, master_weights: bool) -> int:
    """fp32 optimizer states (Adam m and v: 2) plus the fp32 master copy (ZeRO's K = 12 for Adam)."""
    return 4 * optimizer_states + (4 if master_weights else 0)
