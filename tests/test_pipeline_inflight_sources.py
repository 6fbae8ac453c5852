"""The planner's interleaved in-flight counts against the engines' own schedule code (issue 13,
Llama 3 405B in core; benchmarks/published_runs_model.md, n17dense; Megatron's per-micro-batch
stage memory: tests/test_plan_memory.py)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from modelplan.plan.pipeline.profile import inflight_microbatches


def _megatron_core_held(pp: int, vpp: int, m: int, rank: int) -> int:
    """Megatron-core schedules.py get_pp_rank_microbatches (interleaved): warm-up
    (pp - r - 1) * 2 + (vpp - 1) * microbatch_group_size_per_vp_stage (= pp by default), all
    m * vpp when that is more; then one steady forward before the first backward."""
    warmup = (pp - rank - 1) * 2 + (vpp - 1) * pp
    return m * vpp if warmup >= m * vpp else warmup + 1


def _torch_held(pp: int, vpp: int, m: int, rank: int) -> int:
    """torch.distributed.pipelining ScheduleInterleaved1F1B `_get_warmup_ops` (multiply_factor 2,
    microbatches_per_round = m // max(1, m // pp)), capped at m * vpp, plus one steady forward."""
    per_round = m // max(1, m // pp)
    warmup = min((vpp - 1) * per_round + 2 * ((pp - 1) - rank), m * vpp)
    return min(warmup + 1, m * vpp)


@pytest.mark.parametrize("m", [32, 16])
def test_llama3_405b_interleaved_in_flight_is_megatron_core_s_and_torch_s(m):
    """Llama 3 405B, pp 16, vpp 8 (Dubey et al. 2024 Table 4: 32 / 16 sequences per DP group): rank
    r holds 2 (15 - r) + 7 x 16 + 1 chunk forwards at m = 32 (rank 1: 141) and every one of the
    m vpp = 128 at m = 16 (Megatron's are_all_microbatches_in_warmup)."""
    pp, vpp = 16, 8
    for rank in range(pp):
        held = _megatron_core_held(pp, vpp, m, rank)
        assert held == _torch_held(pp, vpp, m, rank)
        assert inflight_microbatches("interleaved", pp, rank, m, vpp) == Fraction(held, vpp)
    assert _megatron_core_held(pp, vpp, 32, 1) == 141
    assert _megatron_core_held(pp, vpp, 16, 1) == 128
