"""Data-parallel collectives overlapped with compute, and the limits that keep part of them exposed.

- Gradient reduction (Megatron `--overlap-grad-reduce`, DDP buckets, DeepSpeed
  overlap_comm): buckets are reduced as the backward fills them, last layers first; the last
  bucket (the first layers' gradients) is only full when the backward ends, so it is always
  exposed: max(last bucket, total - hidden window).
- Parameter gather of the distributed optimizer (Megatron `--overlap-param-gather`): the
  updated parameters are gathered bucket by bucket during the next forward; the first layer
  needs its bucket before it can start, so the first bucket is always exposed. Which forwards
  the gathers hide behind is the engine's (`param_gather_window_s`): Megatron-core chains the
  buckets through the forward pre-hooks, so only the step's first micro-batch hides them.
- FSDP / ZeRO-3 prefetch: each unit's AllGather is issued one unit ahead (FSDP2 forward and
  backward prefetch), so the first unit's gather waits and every later one is exposed by what
  it outlasts the previous unit's compute; without prefetch every gather waits.
- Without overlap everything is exposed.

Bucket size: Megatron-core DDP `bucket_size = max(40_000_000, 1_000_000 * dp)` parameters
(distributed_data_parallel_config; "larger DP sizes need larger buckets", comm_hw.md 5.2).
"""

from __future__ import annotations

MEGATRON_MIN_BUCKET_PARAMS = 40_000_000
"""Megatron-core DDP's smallest bucket, in parameters."""
MEGATRON_BUCKET_PARAMS_PER_DP = 1_000_000
"""Megatron-core DDP's bucket growth per data-parallel rank, in parameters."""


def megatron_bucket_params(dp: int) -> int:
    """Parameters per gradient bucket: max(40M, 1M x dp) (Megatron-core DDP)."""
    return max(MEGATRON_MIN_BUCKET_PARAMS, MEGATRON_BUCKET_PARAMS_PER_DP * dp)


def bucket_fraction(params: int, bucket_params: int) -> float:
    """Share of a stage's collective one bucket carries (1.0 when the stage fits in one)."""
    if params <= 0:
        return 0.0
    return min(1.0, bucket_params / params)


def grad_reduce_exposed_s(total_s: float, last_bucket_s: float, window_s: float, overlap: bool) -> float:
    """Exposed gradient reduction: max(last bucket, total - window) with overlap, else total."""
    if not overlap:
        return total_s
    return min(total_s, max(last_bucket_s, total_s - window_s))


def param_gather_exposed_s(total_s: float, first_bucket_s: float, window_s: float, overlap: bool) -> float:
    """Exposed parameter AllGather: max(first bucket, total - window) with overlap, else total."""
    if not overlap:
        return total_s
    return min(total_s, max(first_bucket_s, total_s - window_s))


def prefetch_exposed_s(gather_s: float, compute_s: float, units: int, prefetch: bool) -> float:
    """Exposed per-unit gathers of `units` units, each gather `gather_s` beside a unit's
    `compute_s`: the first whole, then (units - 1) * max(0, gather - compute) with prefetch;
    units * gather without."""
    if units <= 0:
        return 0.0
    if not prefetch:
        return units * gather_s
    return gather_s + (units - 1) * max(0.0, gather_s - compute_s)


def param_gather_window_s(window: str, t_fwd_s: float, num_microbatches: int, pp: int, vpp: int) -> float:
    """Forward seconds a ZeRO-1/2 step's overlapped parameter AllGather can hide behind, `t_fwd_s`
    one micro-batch's forward of the stage (all its `vpp` chunks).

    step_forwards: every forward of the step, num_microbatches x t_fwd.
    optimizer_step: none; the gather is a blocking call at the end of the optimizer step (DeepSpeed
    zero/stage_1_and_2.py `step` and bf16_optimizer.py `update_lp_params`: `all_gather_dp_groups`
    between the OPTIMIZER_ALLGATHER timers, "ready for next round forward"; 0.19.8 as in 2020's stage2.py).
    first_microbatch (Megatron-core distributed optimizer): only the first bucket is dispatched
    after the step (core_v0.16.1 distrib_optimizer.py `step_with_ready_grads`; core_r0.8.0
    `zero_grad`), each module's forward pre-hook waits for its bucket and dispatches the next
    (distributed_data_parallel.py `_make_forward_pre_hook`, param_and_grad_buffer.py
    `finish_param_sync`), so the gathers run beside the first micro-batch's forward: t_fwd.
    Interleaved (vpp > 1, `align_param_gather`, on by default: Megatron-LM arguments.py
    `--no-align-param-gather`, Megatron-Bridge comm_overlap.py for pp > 1 and vpp > 1): chunks 0
    and 1 are dispatched before the schedule and chunk c + 1 when chunk c's first micro-batch
    starts (schedules.py `param_sync_func`), so chunk 0 hides behind its own first chunk forward
    (t_fwd / vpp) and each later chunk behind the pp chunk forwards before its first one
    (`microbatch_group_size_per_vp_stage`, default pp); never more than the step's forwards.
    """
    every = num_microbatches * t_fwd_s
    if window == "step_forwards":
        return every
    if window == "optimizer_step":
        return 0.0
    if window != "first_microbatch":
        raise ValueError(f"param_gather_window ({window!r}) must be 'step_forwards', 'first_microbatch' "
                         "or 'optimizer_step'")
    if vpp <= 1:
        return min(t_fwd_s, every)
    chunk_s = t_fwd_s / vpp
    return min(chunk_s + (vpp - 1) * pp * chunk_s, every)
