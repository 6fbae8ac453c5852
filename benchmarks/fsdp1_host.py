"""Pure helpers of `bench_fsdp1_host.py` (issue 13, n18fsdp1; a probe, nothing in modelplan uses
them): could FSDP1's host side, its rate limiter or NCCL's latency be the time the H100 llm-foundry
and fms-fsdp rows miss per FSDP unit and micro-batch?

FSDP1 with `limit_all_gathers=True` (torch/distributed/fsdp/_limiter_utils.py: at most
`_max_num_inflight_all_gathers = 2`; _runtime_utils.py `_unshard`: `event.synchronize()` on the
oldest free event before each AllGather) keeps the CPU within about one unit of the GPU, so a unit
is host-bound when the CPU's work for it exceeds the GPU's: per unit the step takes
max(device, host), the bound `unit_bound_step_s` adds. The CPU's work per unit and micro-batch is
bounded from above by `host_upper_s`: every op the planner lists for the block at a per-op cost,
the limiter's syncs with the gap each leaves before the next AllGather is launched, and FSDP1's
hooks (pre-forward, pre-backward, post-backward) at a per-call cost.
"""

from __future__ import annotations


def host_upper_s(listed_ops: float, per_op_s: float, limiter_syncs: int, limiter_gap_s: float,
                 hook_calls: int, hook_s: float) -> float:
    """Upper bound on the CPU seconds one FSDP unit needs per micro-batch (module docstring)."""
    return listed_ops * per_op_s + limiter_syncs * limiter_gap_s + hook_calls * hook_s


def needed_per_op_s(published_unit_s: float, listed_ops: float) -> float:
    """Host seconds per listed op at which a unit would be wholly host-bound at its published time
    (the step can never be shorter than the host's issue time)."""
    return published_unit_s / listed_ops


def limiter_exposed_s(gap_s: float, collectives_s: float, compute_s: float) -> float:
    """GPU idle time one limiter sync can cause: the next AllGather is launched `gap_s` after the
    unit two back finished (pytorch/pytorch#108234: 235 us from the sync being met to the launch),
    and with the collectives queued before it (`collectives_s`: BACKWARD_POST queues the
    ReduceScatter of the unit behind beside it) must end before the unit in between finishes."""
    return max(0.0, gap_s + collectives_s - compute_s)


def latency_bound_s(latency_s: float, collectives: int) -> float:
    """Every collective's latency exposed: the most NCCL latency can add per unit and micro-batch."""
    return latency_s * collectives


def unit_bound_step_s(predicted_s: float, units: int, microbatches: int, device_unit_s: float,
                      host_unit_s: float) -> float:
    """The predicted step with each unit and micro-batch at max(device, host)."""
    return predicted_s + units * microbatches * max(0.0, host_unit_s - device_unit_s)
