"""Data parallelism and ZeRO (Rajbhandari et al. SC'20; Megatron's distributed optimizer).

What it adds, per parameter unit (`plan/shard.py` units, padded to a multiple of the group; the
group is the dp*cp ranks, or dp*cp/ep for routed experts, Megatron's data-parallel group with
cp): at start-up a Broadcast from the first data-parallel rank; every step an AllReduce of the
gradients (zero 0), or a ReduceScatter once (zero 1) or per micro-batch (zero 2, 3), and an
AllGather of the parameters after the update (zero 1, 2) or before every forward and backward
(zero 3). Gradients that are partial sums over tp (`sp.py`; the MoE router) are all-reduced over
tp first, once, or per micro-batch with zero >= 2.

States it shards (`state_bytes`; Megatron's 18 bytes/parameter for mixed-precision Adam = 2
weight + 4 fp32 grad + 4 master + 8 Adam m, v): stage 1 the master weights and optimizer states,
stage 2 also the gradients, stage 3 also the weights (and then holds two gathered blocks: the
current one and the prefetched next).

Overlap (comm_hw.md section 5; the constants are in `CostModel`), `dp_exposure`:
- zero 0/1 gradient reduction: hidden behind `dp_overlap_fraction` of the last micro-batch's
  backward, except the last bucket: max(t_bucket, t - f * t_bwd); not hidden at all where it runs
  after the backward alone (ZeRO-3 kept gathered under torch pipelining, `reduce_beside_backward`);
- zero 1/2 parameter AllGather: hidden behind the next step's forwards except one bucket, all m
  of them or only the engine's window (`gather_window_s`, `comm/dp_overlap.param_gather_window_s`);
- zero 2: gradients are reduce-scattered after every micro-batch, each hidden like the above;
- zero 3: per micro-batch, gather weights for forward and backward and reduce-scatter gradients,
  hidden behind that micro-batch's forward / backward, plus one block's gather that cannot be
  prefetched; this sits inside the pipeline (every micro-batch pays it);
every hidden second still costs `overlap_interference` seconds (SMs shared with NCCL).
The optimizer step streams the rank's ZeRO shard of the states through HBM (`optimizer_s`).
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.dp_overlap import grad_reduce_exposed_s, param_gather_exposed_s
from modelplan.comm.regions import Region
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.fsdp import zero3_state_bytes
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.shard import UnitShard

AG, AR, BC, RS = Collective.ALL_GATHER, Collective.ALL_REDUCE, Collective.BROADCAST, Collective.REDUCE_SCATTER


def unit_calls(calls: RankCalls, u: UnitShard, tp: int, zero: int, m: int, param: int, grad: int,
               units: int = 1, gather: int | None = None) -> None:
    """A unit's data-parallel calls (module docstring): start-up Broadcast, the tp AllReduce of its
    partial-sum gradients, then the ZeRO gradient reduction and parameter gather; `param` and
    `grad` are bytes per element, `m` the backwards of the unit per step (`units` alike units);
    `gather`: bytes per element of the parameter AllGather when not `param` (fp8 parameter
    gathers, `plan/fp8.py` `param_gather_bytes`)."""
    D, P, k = u.group_size, u.padded, units
    gather = param if gather is None else gather
    calls.add(BC, Axis.DP, D, u.numel * param, k, Region.DP_BROADCAST, startup=True, root=0)
    per_mb = zero >= 2
    if u.partial_over_tp:
        calls.add(AR, Axis.TP, tp, u.partial_over_tp * grad, k * (m if per_mb else 1), Region.TP_PARTIAL_GRADS)
    if zero == 0:
        calls.add(AR, Axis.DP, D, P * grad, k, Region.DP_GRADS, overlap=True)
    else:
        calls.add(RS, Axis.DP, D, P * grad, k * (m if per_mb else 1), Region.DP_GRADS, overlap=True)
        calls.add(AG, Axis.DP, D, P * gather, k * (2 * m if zero == 3 else 1), Region.DP_PARAMS, overlap=True)


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
    all_gather_bwd: float | None = None
    """ZeRO-3's backward AllGather when it differs from the forward's (ZeRO++ hpZ gathers inside
    the node, `plan/mechanisms.py`); None: all_gather."""


class DpSeconds(NamedTuple):
    """One rank's data-parallel calls of one micro-batch per step, priced."""

    times: DpTimes
    partial_grads_s: float
    """TP AllReduce of gradients that are partial sums over tp."""


def dp_seconds(calls: RankCalls, time_of, zero: int) -> DpSeconds:
    """Sum the calls `unit_calls` added with m = 1 (`time_of(op, axis, size, nbytes)`: one call)."""
    sums = {AR: 0.0, RS: 0.0, AG: 0.0}
    largest = {AR: 0.0, RS: 0.0, AG: 0.0}
    partial = 0.0
    for (op, axis, size, nbytes, label, _overlap, startup, _root, _role), count in calls.counts.items():
        if startup:
            continue
        one = time_of(op, axis, size, nbytes)
        if axis is Axis.TP:
            partial += count * one
        else:
            passes = 2 if zero == 3 and op is AG else 1  # fwd + bwd gathers
            sums[op] += count * one / passes
            largest[op] = max(largest[op], one)
    times = DpTimes(sums[AR], largest[AR], sums[RS], largest[RS], sums[AG], largest[AG], largest[AG])
    return DpSeconds(times, partial)


class DpExposure(NamedTuple):
    """Exposed DP time after the pipeline, exposed DP time per micro-batch (ZeRO-3), and total."""

    after_pipeline_s: float
    per_microbatch_s: float
    total_s: float


def dp_exposure(
    zero: int, times: DpTimes, num_microbatches: int, t_fwd: float, t_bwd: float,
    overlap: bool, overlap_fraction: float, interference: float = 0.0, backward_gathers: bool = True,
    reduce_beside_backward: bool = True, gather_window_s: float | None = None,
) -> DpExposure:
    """Exposed data-parallel communication under the overlap rules of the module docstring.

    t_fwd / t_bwd: one micro-batch's forward / backward (with recompute) on the stage.
    `backward_gathers` False: ZeRO-3 keeps the forward's gathered parameters for backward
    (reshard_after_forward False, `plan/fsdp.py`): no second AllGather per micro-batch.
    `reduce_beside_backward` False: the gradient reduction after the last micro-batch waits alone
    (torch pipelining's REDUCE_GRAD, `evaluator_dp._dp_terms`): none of it hides behind a backward.
    `gather_window_s`: the forward seconds the ZeRO-1/2 parameter AllGather hides behind
    (`dp_overlap.param_gather_window_s`); None: all m forwards.
    """
    raw = _dp_exposure(zero, times, num_microbatches, t_fwd, t_bwd if reduce_beside_backward else 0.0,
                       overlap, overlap_fraction, backward_gathers, gather_window_s)
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
    overlap: bool, overlap_fraction: float, backward_gathers: bool = True, gather_window_s: float | None = None,
) -> DpExposure:
    """The overlap rules without interference (hidden behind the backward: max(bucket, t - f t_bwd))."""
    m = num_microbatches
    hide = overlap_fraction * t_bwd if overlap else 0.0
    if zero == 0:
        ar = times.all_reduce
        return DpExposure(grad_reduce_exposed_s(ar, times.all_reduce_bucket, hide, overlap), 0.0, ar)
    rs, ag = times.reduce_scatter, times.all_gather
    # overlap_param_gather: hidden behind the next step's forwards (the engine's window) but for the first bucket
    window = m * t_fwd if gather_window_s is None else gather_window_s
    gather_after = param_gather_exposed_s(ag, times.all_gather_bucket, window, overlap)
    last_rs = grad_reduce_exposed_s(rs, times.reduce_scatter_bucket, hide, overlap)
    if zero == 1:
        return DpExposure(last_rs + gather_after, 0.0, rs + ag)
    if zero == 2:
        per_mb = max(0.0, rs - hide) if overlap else rs
        return DpExposure((m - 1) * per_mb + last_rs + gather_after, 0.0, m * rs + ag)
    f = overlap_fraction if overlap else 0.0
    ag_bwd = (ag if times.all_gather_bwd is None else times.all_gather_bwd) if backward_gathers else 0.0
    per_mb = max(0.0, ag - f * t_fwd) + max(0.0, ag_bwd + rs - hide) + times.all_gather_block
    return DpExposure(0.0, per_mb, m * (ag + ag_bwd + rs))


def state_bytes(
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


def state_bytes_per_param(optimizer_states: int, master_weights: bool, bytes_per_state: int = 4) -> int:
    """Optimizer states (Adam m and v: 2, fp32 unless `bytes_per_state` says otherwise) plus the fp32
    master copy (ZeRO's K = 12 for Adam)."""
    return bytes_per_state * optimizer_states + (4 if master_weights else 0)


def optimizer_bytes_per_param(grad_bytes: int, state_bytes: int, dtype_bytes: int, master_weights: bool) -> int:
    """HBM bytes one optimizer step moves per parameter: gradients read 3x (unscale/inf check,
    clip norm, update), fp32 master and states read and written, new weights written (without
    master weights the weights themselves are read and written; Megatron fp16 Adam:
    3*4 + 2*12 + 2 = 38 bytes)."""
    return 3 * grad_bytes + 2 * state_bytes + (dtype_bytes if master_weights else 2 * dtype_bytes)


HP_GRAD_ACCUMULATE_BYTES = 20
"""HBM bytes per parameter DeepSpeed's BF16_Optimizer moves around every micro-batch's backward
(deepspeed/runtime/bf16_optimizer.py): `backward_prologue` zeroes the bf16 `.grad` (write 2),
`backward_epilogue` -> `update_hp_grads` runs `hp_grad.add_(lp.grad.to(float32))`: read 2,
write and read the fp32 temporary 4 + 4, read and write the fp32 gradient 4 + 4."""


def hp_grad_accumulate_s(dense_params: int, expert_params: int, roofline) -> float:
    """One micro-batch's accumulation of the rank's bf16 gradients into the fp32 ones (BF16_Optimizer,
    ZeRO 0/1: every rank holds every gradient of its stage), streamed through HBM."""
    return roofline.memory_time_s((dense_params + expert_params) * HP_GRAD_ACCUMULATE_BYTES)


def optimizer_s(dense_params: int, expert_params: int, dp: int, ep: int, zero: int, bytes_per_param: int,
                roofline, expert_group: int | None = None) -> float:
    """The optimizer step of one rank: its ZeRO shard of the dense parameters (over the dp*cp
    gradient-reduction group `dp`) and of the routed experts (over dp/ep, or `expert_group`
    ranks), streamed through HBM."""
    shards = (dp, expert_group or dp // ep) if zero >= 1 else (1, 1)
    sharded = dense_params / shards[0] + expert_params / shards[1]
    return roofline.memory_time_s(sharded * bytes_per_param)
