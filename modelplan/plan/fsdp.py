"""ZeRO-3 as PyTorch FSDP (FSDP1 / FSDP2) and DeepSpeed run it: memory per unit, gathers per
micro-batch, and HSDP's shard and replica groups, as pure functions.

A unit is one transformer block (torchtitan, fms-fsdp and llm-foundry wrap each block; the
embedding and head are units of their own). On one GPU (Rajbhandari et al. 2020 sec. 5; PyTorch
FSDP2 docs/fsdp.md):
- at rest every unit is a shard over the `shard` ranks: the fp32 master (the sharded parameter
  itself in FSDP), its fp32 gradient and Adam's m, v; DeepSpeed ZeRO-3 and Megatron-FSDP also
  keep a 16-bit copy of the shard;
- `reshard_after_forward` True: a unit's 16-bit parameters are gathered before its forward and
  freed after it, gathered again before its backward; FSDP prefetches one unit ahead, so two
  units are gathered at a time (the current and the next); in backward the unit also holds its
  unsharded 16-bit gradient and, with fp32 reduction, the fp32 copy the ReduceScatter reads;
- False without pipeline parallelism (FSDP SHARD_GRAD_OP-like for parameters): gathered once per
  micro-batch forward and kept until the unit's backward, so at the start of backward the whole
  stage's parameters are gathered;
- False under pipeline parallelism (torchtitan): gathered once per step and kept across
  micro-batches; the gradient ReduceScatter runs after the last micro-batch only, so unsharded
  gradients accumulate for the whole stage, in the reduce dtype (FSDP2
  `set_requires_gradient_sync(False)` accumulates in reduce_dtype).
HSDP (`fsdp_shard_size`): the states shard over groups of that many data-parallel ranks and are
replicated across groups; gathers and ReduceScatters stay in the shard group and each gradient
shard is then all-reduced over the replicas (PyTorch HYBRID_SHARD; FSDP2 2-D device mesh).
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.plan.engine import EngineSettings

UNITS_IN_FLIGHT = 2
"""Gathered units with prefetch: the one computing and the next (FSDP2 backward prefetch of one
unit; FSDP1 BACKWARD_PRE with limit_all_gathers)."""


class Zero3Mode(NamedTuple):
    """How a ZeRO-3 stage keeps its parameters between passes."""

    reshard_after_forward: bool
    pipelined: bool
    """pp > 1: under reshard_after_forward False the stage keeps parameters and unsharded
    gradients across micro-batches."""


def zero3_mode(plan_value: bool | str, software: EngineSettings, pp: int) -> Zero3Mode:
    """The plan's reshard_after_forward, or the engine's rule for 'default'."""
    if plan_value == "default":
        value = software.reshard_after_forward_pp if pp > 1 else software.reshard_after_forward
    else:
        value = bool(plan_value)
    return Zero3Mode(value, pp > 1)


def zero3_state_bytes(
    params: int, unit_params: int, shard: int, dtype_bytes: int, grad_bytes: int, state_bytes: int,
    mode: Zero3Mode, low_precision_copy: bool, reduce_bytes: int,
) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes of `params` parameters of one stage under ZeRO-3
    with units of `unit_params` (module docstring). `state_bytes`: fp32 master + optimizer
    states per parameter (sharded); `reduce_bytes`: bytes per element the gradient reduction
    reads (4 with fp32 reduction)."""
    d = dtype_bytes
    weights = params * d / shard if low_precision_copy else 0.0
    gradients = params * grad_bytes / shard
    optimizer = params * state_bytes / shard
    # one unit's backward: its unsharded 16-bit gradient and the fp32 copy the ReduceScatter reads
    unit_grads = unit_params * (d + (reduce_bytes if reduce_bytes != d else 0))
    if mode.reshard_after_forward:
        weights += UNITS_IN_FLIGHT * unit_params * d
        gradients += unit_grads
    elif mode.pipelined:
        weights += params * d
        gradients += params * reduce_bytes  # unsharded gradients accumulated across micro-batches
    else:
        weights += params * d
        gradients += unit_grads
    return weights, gradients, optimizer


def gathers_per_microbatch(mode: Zero3Mode) -> tuple[float, float]:
    """(forward, backward) parameter AllGathers per micro-batch, as multiples of the stage's
    parameters (the ReduceScatter follows every backward unless `pipelined` and not resharded,
    see `reduces_per_step`)."""
    if mode.reshard_after_forward:
        return 1.0, 1.0
    return (0.0, 0.0) if mode.pipelined else (1.0, 0.0)


def reduces_every_microbatch(mode: Zero3Mode) -> bool:
    """Whether gradients are reduce-scattered after every micro-batch's backward (else once, after
    the last: the pipelined, not-resharded mode)."""
    return mode.reshard_after_forward or not mode.pipelined


def hsdp_groups(dp: int, shard_size: int | None) -> tuple[int, int]:
    """(shard group, replica group) sizes of HSDP over dp ranks; (dp, 1) without HSDP."""
    if shard_size is None or shard_size >= dp:
        return dp, 1
    return shard_size, dp // shard_size


def gather_copy_out_bytes(gathered_elements: float, dtype_bytes: int) -> float:
    """HBM bytes of copying `gathered_elements` gathered parameters out of the AllGather's flat
    buffer (DeepSpeed `AllGatherCoalescedHandle.wait`: torch.cat per parameter reads the d-byte
    gathered slice and writes the d-byte parameter: 2 d per element, `EngineProfile.zero3_gather_copy_out`)."""
    return 2.0 * dtype_bytes * gathered_elements
