"""Hierarchical sharding of the data-parallel axis: HSDP and ZeRO++, as collectives per step.

Each function returns the data-parallel traffic of one pipeline stage of `params` parameters
(this tp/pp rank's share) for one step of `microbatches` micro-batches, as `HierCall`s over
named groups the planner places on the rank grid:
- "dp": the whole data-parallel group (dp x cp ranks);
- "shard": `shard` consecutive ranks of it (HSDP's shard group, one node with shard =
  gpus_per_node / tp, ZeRO++'s secondary partition);
- "replica": the dp / shard ranks holding the same shard (stride `shard`).

ZeRO-3 (FSDP FULL_SHARD): per micro-batch an AllGather of the 16-bit weights before the forward
and again before the backward, and a ReduceScatter of the gradients (Rajbhandari et al. 2020
sec. 5: 3 x the parameter volume).
HSDP (PyTorch HYBRID_SHARD; FSDP2's 2-D mesh `dp_replicate x dp_shard`): the same three
collectives inside the shard group, then each gradient shard (params / shard) is all-reduced
over the replica group once per step (gradient accumulation keeps it local until then).
ZeRO++ (Wang et al. 2023): qwZ gathers weights block-quantised to int8 (1 byte plus a 4-byte
fp32 scale per `QUANT_BLOCK` elements); hpZ keeps a secondary copy of the 16-bit weights sharded
inside the node, so the backward's gather stays in the shard group; qgZ reduce-scatters
gradients as int4 with a hierarchical all-to-all (0.5 byte per element, inside the node first,
then across: the volume the paper's 4x reduction counts).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

Group = Literal["dp", "shard", "replica"]
Op = Literal["all_gather", "reduce_scatter", "all_reduce", "all_to_all"]

QUANT_BLOCK = 2048
"""Elements per quantisation block of ZeRO++'s qwZ (one fp32 scale each; an assumption: the
paper's blocks are 'small', DeepSpeed's zero_quantized_weights default group size)."""


class HierCall(NamedTuple):
    """One kind of data-parallel collective of a step."""

    op: Op
    group: Group
    nbytes: float
    """nccl-tests size convention (AllGather: the gathered output; ReduceScatter: the input;
    AllReduce: the buffer; AllToAll: the whole send buffer)."""
    count: int


def hsdp_groups(dp_cp: int, shard: int) -> tuple[int, int]:
    """(shard group size, replica group size) of HSDP over dp_cp ranks."""
    if shard < 1 or dp_cp % shard:
        raise ValueError(f"fsdp_shard_size ({shard}) must divide dp * cp ({dp_cp})")
    return shard, dp_cp // shard


def zero3_calls(params: float, dtype_bytes: int, grad_bytes: int, microbatches: int) -> list[HierCall]:
    """Plain ZeRO-3 / FSDP over the whole dp group."""
    m = microbatches
    return [HierCall("all_gather", "dp", params * dtype_bytes, 2 * m),
            HierCall("reduce_scatter", "dp", params * grad_bytes, m)]


def hsdp_calls(params: float, dtype_bytes: int, grad_bytes: int, microbatches: int, dp_cp: int,
               shard: int) -> list[HierCall]:
    """HSDP: ZeRO-3 inside the shard group, the gradient shard all-reduced across replicas."""
    _, replicas = hsdp_groups(dp_cp, shard)
    m = microbatches
    calls = [HierCall("all_gather", "shard", params * dtype_bytes, 2 * m),
             HierCall("reduce_scatter", "shard", params * grad_bytes, m)]
    if replicas > 1:
        calls.append(HierCall("all_reduce", "replica", params * grad_bytes / shard, 1))
    return calls


def zeropp_calls(params: float, dtype_bytes: int, microbatches: int, qwz: bool = True, hpz: bool = True,
                 qgz: bool = True) -> list[HierCall]:
    """ZeRO++ over the dp group with its secondary partition in the shard group."""
    m = microbatches
    weight_bytes = params * (1 + 4 / QUANT_BLOCK) if qwz else params * dtype_bytes
    calls = [HierCall("all_gather", "dp", weight_bytes, m)]
    calls.append(HierCall("all_gather", "shard" if hpz else "dp", params * dtype_bytes if hpz else weight_bytes, m))
    if qgz:  # int4 gradients through a hierarchical all-to-all: inside the node, then across
        calls += [HierCall("all_to_all", "shard", params * 0.5, m), HierCall("all_to_all", "replica", params * 0.5, m)]
    else:
        calls.append(HierCall("reduce_scatter", "dp", params * dtype_bytes, m))
    return calls


def zeropp_secondary_bytes(params: float, dtype_bytes: int, shard: int, hpz: bool = True) -> float:
    """Device bytes of hpZ's secondary copy: the 16-bit weights sharded over the shard group."""
    return params * dtype_bytes / shard if hpz else 0.0


def hsdp_state_shards(dp_cp: int, shard: int) -> int:
    """Ranks the ZeRO-3 states are divided over under HSDP (the shard group, not all dp_cp)."""
    return hsdp_groups(dp_cp, shard)[0]
