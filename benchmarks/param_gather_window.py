"""The forward time Megatron-core's overlapped parameter AllGather hides behind (distributed optimizer,
`--overlap-param-gather`): the formula of a what-if probe (`bench_gptoss_gap.py --gather-window`),
not wired into the planner (issue 13, n21gptoss; see benchmarks/published_runs_model.md).

Megatron-core (core_v0.16.1 `distributed/distributed_data_parallel.py` `_make_forward_pre_hook`,
`param_and_grad_buffer.py` `finish_param_sync`; core_r0.8.0 `optimizer/distrib_optimizer.py`
`_finish_param_sync_helper`, "We can't pre-launch all-gathers for all buckets at once"): after the
optimizer step only the first bucket's AllGather is dispatched; each module's forward pre-hook waits
for its own bucket and dispatches the next one. The gathers run beside the FIRST micro-batch's
forward and are done when it ends; later micro-batches hide nothing.

Interleaved schedule (core_v0.16.1 `pipeline_parallel/schedules.py`, `param_sync_func`): chunks 0
and 1 are dispatched before the schedule starts, chunk c + 1 when the first micro-batch of chunk c
starts, so chunk 0's gather runs beside its own first chunk forward and each later chunk's beside
the pp chunk forwards before it (`microbatch_group_size_per_vp_stage`, default pp).
"""

from __future__ import annotations


def megatron_gather_window_s(t_fwd_s: float, num_microbatches: int, pp: int, vpp: int) -> float:
    """Forward seconds the step's parameter AllGather overlaps: one micro-batch's stage forward
    (`t_fwd_s`) without interleaving; with `vpp` chunks, chunk 0's first forward (t_fwd / vpp) plus
    pp chunk forwards for each later chunk; never more than the step's num_microbatches forwards
    (the planner's window today)."""
    if vpp <= 1:
        return min(t_fwd_s, num_microbatches * t_fwd_s)
    chunk_s = t_fwd_s / vpp
    return min(chunk_s + (vpp - 1) * pp * chunk_s, num_microbatches * t_fwd_s)
