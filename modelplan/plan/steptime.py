"""The step-time formulas of the planner, as small pure functions of floats.

step = pipeline + exposed DP communication + tied-embedding sync + optimizer step, with
pipeline = m * t_max + (pp - 1)/vpp * t_mean (Narayanan et al. 2021 sec. 2.2: bubble fraction
(p-1)/m, (p-1)/(v m) interleaved; `modelplan.plan.schedule.simulate` is the authority and a test
checks this closed form against it), where t is one micro-batch's forward + backward on one
stage: block kernels (roofline times), recompute, exposed TP collectives, pipeline send/recv,
plus the embedding on the first stage and the head + loss on the last.
Exposure rules (comm_hw.md section 5; the constants are in `CostModel`):
- TP collectives: `tp_exposed_fraction` on the critical path (1.0: classic Megatron);
- pipeline send/recv: exposed once per micro-batch per direction per model chunk;
- DP gradient reduction (ZeRO 0/1): hidden behind `dp_overlap_fraction` of the last
  micro-batch's backward, except the last bucket: max(t_bucket, t - f * t_bwd);
- ZeRO-1 parameter AllGather: hidden behind the next forward except one bucket;
- ZeRO-2: gradients are reduce-scattered after every micro-batch, each hidden like the above;
- ZeRO-3: per micro-batch, gather weights for forward and backward and reduce-scatter gradients,
  hidden behind that micro-batch's forward / backward, plus one block's gather that cannot be
  prefetched; this sits inside the pipeline (every micro-batch pays it).
"""

from __future__ import annotations

from typing import NamedTuple


def pipeline_time_s(num_microbatches: int, pp: int, vpp: int, t_max: float, t_mean: float) -> float:
    """m * t_max + (pp - 1)/vpp * t_mean: steady state on the slowest stage plus fill/drain
    (uniform stages: (m + (p-1)/v) t, i.e. bubble fraction (p-1)/(v m); Narayanan et al. 2021)."""
    return num_microbatches * t_max + (pp - 1) / vpp * t_mean


class DpTimes(NamedTuple):
    """Raw data-parallel collective times of one stage's parameters (seconds, not yet hidden)."""

    all_reduce: float
    """Gradient AllReduce (ZeRO 0)."""
    all_reduce_bucket: float
    reduce_scatter: float
    """Gradient ReduceScatter (ZeRO >= 1)."""
    reduce_scatter_bucket: float
    all_gather: float
    """Parameter AllGather (ZeRO >= 1)."""
    all_gather_bucket: float
    all_gather_block: float
    """One block's parameter AllGather (ZeRO-3's first, un-prefetched gather)."""


class DpExposure(NamedTuple):
    """Exposed DP time after the pipeline, exposed DP time per micro-batch (ZeRO-3), and total."""

    after_pipeline_s: float
    per_microbatch_s: float
    total_s: float


def dp_exposure(
    zero: int, times: DpTimes, num_microbatches: int, t_fwd: float, t_bwd: float,
    overlap: bool, overlap_fraction: float, interference: float = 0.0, backward_gathers: bool = True,
) -> DpExposure:
    """Exposed data-parallel communication under the overlap rules of the module docstring;
    every hidden second still costs `interference` seconds (SMs shared with NCCL).

    t_fwd / t_bwd: one micro-batch's forward / backward (with recompute) on the stage.
    `backward_gathers` False: ZeRO-3 keeps the forward's gathered parameters for backward
    (reshard_after_forward False, `plan/fsdp.py`): no second AllGather per micro-batch.
    """
    raw = _dp_exposure(zero, times, num_microbatches, t_fwd, t_bwd, overlap, overlap_fraction, backward_gathers)
    if interference == 0.0:
        return raw
    after, per_mb, total = raw
    m = num_microbatches
    hidden = total - after - m * per_mb
    if hidden <= 0.0:
        return raw
    if zero == 3:
        return DpExposure(after, per_mb + interference * hidden / m, total)
    return DpExposure(after + interference * hidden, per_mb, total)


def _dp_exposure(
    zero: int, times: DpTimes, num_microbatches: int, t_fwd: float, t_bwd: float,
    overlap: bool, overlap_fraction: float, backward_gathers: bool = True,
) -> DpExposure:
    """The overlap rules without interference (hidden behind the backward: max(bucket, t - f t_bwd))."""
    m = num_microbatches
    hide = overlap_fraction * t_bwd if overlap else 0.0
    if zero == 0:
        ar = times.all_reduce
        return DpExposure(max(times.all_reduce_bucket, ar - hide) if overlap else ar, 0.0, ar)
    rs, ag = times.reduce_scatter, times.all_gather
    gather_after = times.all_gather_bucket if overlap else ag  # overlap_param_gather: one bucket
    last_rs = max(times.reduce_scatter_bucket, rs - hide) if overlap else rs
    if zero == 1:
        return DpExposure(last_rs + gather_after, 0.0, rs + ag)
    if zero == 2:
        per_mb = max(0.0, rs - hide) if overlap else rs
        return DpExposure((m - 1) * per_mb + last_rs + gather_after, 0.0, m * rs + ag)
    f = overlap_fraction if overlap else 0.0
    ag_bwd = ag if backward_gathers else 0.0
    per_mb = max(0.0, ag - f * t_fwd) + max(0.0, ag_bwd + rs - hide) + times.all_gather_block
    return DpExposure(0.0, per_mb, m * (ag + ag_bwd + rs))


def optimizer_bytes_per_param(grad_bytes: int, state_bytes: int, dtype_bytes: int, master_weights: bool) -> int:
    """HBM bytes one optimizer step moves per parameter: gradients read 3x (unscale/inf check,
    clip norm, update), fp32 master and states read and written, new weights written (without
    master weights the weights themselves are read and written; Megatron fp16 Adam:
    3*4 + 2*12 + 2 = 38 bytes)."""
    return 3 * grad_bytes + 2 * state_bytes + (dtype_bytes if master_weights else 2 * dtype_bytes)
