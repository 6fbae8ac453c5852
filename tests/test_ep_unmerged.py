"""The merged-1F1B EP overlap outside its steady state (`plan/parallel/ep.py` unmerged_chunks,
unmerged_s): Megatron-core core_v0.15 schedules.py `get_pp_rank_microbatches` runs
2 (pp - rank - 1) + (vpp - 1) * microbatch_group_size_per_vp_stage warm-up forward chunks (the
group size defaults to pp, model_parallel_config.py) plus one extra forward when
`overlap_moe_expert_parallel_comm` is set, and as many cool-down backwards; without pipelining
(combined_1f1b.py `combined_1f1b_schedule_for_no_pipelining`) the first forward and the last
backward run alone. Their AllToAlls are not hidden."""

from __future__ import annotations

import pytest

from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator
from modelplan.plan.parallel.ep import EpExposure, unmerged_chunks, unmerged_s
from modelplan.specs.costmodel import CostModel
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec

from tests.test_plan_moe import F, H, INTER_BPS, K, ideal_cluster, mixtral_like


def test_interleaved_warm_up_is_megatrons_count_plus_the_extra_forward():
    """pp 8, vpp 4 (the Qwen3-235B / DeepSeek-V3 H100 layouts), 128 micro-batches: rank 0 runs
    2 x 7 + 3 x 8 + 1 = 39 chunks unmerged each way, the last rank 0 + 24 + 1 = 25."""
    assert unmerged_chunks(8, 4, 0, 128) == 39
    assert unmerged_chunks(8, 4, 7, 128) == 25


def test_megatrons_pp2_vp2_example_warms_up_four_chunks_plus_one():
    """model_parallel_config.py's PP=2 VP=2 example (rank 0 | 0 1 0 1 2 3 2 3): rank 0's warm-up
    is 2 x 1 + 1 x 2 = 4 forward chunks, one more under the overlap; capped at m * vpp."""
    assert unmerged_chunks(2, 2, 0, 4) == 5
    assert unmerged_chunks(2, 2, 0, 1) == 2  # one micro-batch: both chunks, nothing merges


def test_without_pipelining_only_the_first_forward_and_last_backward_run_alone():
    """combined_1f1b_schedule_for_no_pipelining: phase 0 the 1st forward, phase m the m-th backward."""
    assert unmerged_chunks(1, 1, 0, 4) == 1


def test_unmerged_seconds_are_chunks_times_blocks_per_chunk_times_the_merged_away_seconds():
    """5 unmerged chunks (pp 2, vpp 2, rank 0) of 4 / 2 MoE blocks each, 1 ms merged away per
    block: 5 x 2 x 1 ms = 10 ms."""
    x = EpExposure(0.0, 0.0, 0.0, 1e-3)
    assert unmerged_s(x, 2, 2, 0, 4, 4) == pytest.approx(10e-3)


def test_overlap_saves_the_all_to_alls_of_all_but_one_micro_batch_without_pipelining():
    """ep 16 over a 10 GB/s NIC (the AllToAll of `test_ep_comm_overlap_exposes_only_what_the_all_
    to_alls_exceed_of_the_block_compute`, 4 x 8/16 x n / NIC bandwidth per block, all hidden by the
    block's compute when merged), dp 16, 4 micro-batches, 2 MoE blocks: the merged plan exposes the
    first forward's and last backward's AllToAlls, one micro-batch's worth: the step is
    (4 - 1) x 2 blocks x AllToAll shorter than without the overlap. Host issue time off
    (`ep_overlap_host_op_us` 0; `test_host_issue.py` prices it): AllToAll accounting only."""
    spec = mixtral_like().model_copy(update={"moe": MoESpec(num_experts=16, top_k=K, expert_ffn_hidden=F)})
    a2a = 4 * 8 / 16 * (1024 * K * H * 2) / INTER_BPS
    plan, m = Plan(dp=16, ep=16, micro_batch=1), 4
    plain_t = TrainingSpec(global_batch=16 * m, seq_len=1024)
    merged_t = TrainingSpec(global_batch=16 * m, seq_len=1024, ep_comm_overlap=True)
    no_host = CostModel(ep_overlap_host_op_us=0.0)
    plain = estimate_plan(spec, plain_t, plan, ideal_cluster(), no_host)
    merged = estimate_plan(spec, merged_t, plan, ideal_cluster(), no_host)
    assert plain.step.ep_comm_s == pytest.approx(m * 2 * a2a)
    assert merged.step.ep_comm_s == pytest.approx(1 * 2 * a2a)
    assert plain.step.step_time_s - merged.step.step_time_s == pytest.approx((m - 1) * 2 * a2a)
    assert sum(merged.step.terms().values()) == pytest.approx(merged.step.step_time_s)
    ev = Evaluator(spec, merged_t, ideal_cluster())
    assert ev.block_terms(1, False, 1, "none", 1, 16).ep.merged_s == pytest.approx(a2a)


def test_interleaved_overlap_step_agrees_across_the_search_paths():
    """pp 2, vpp 2 with the overlap (4 MoE blocks, 8 micro-batches): `evaluate`, `step_time_s`
    and the search's `variant_times_s` give one step, which exceeds the plan's steady-state
    pricing by exactly the unmerged term (Megatron's count on the critical rank), and the step's
    terms still add up."""
    from modelplan.plan.evaluator import PlanPoint

    spec = mixtral_like(layers=4)
    training = TrainingSpec(global_batch=8 * 8, seq_len=1024, ep_comm_overlap=True)
    plan = Plan(dp=8, ep=8, pp=2, vpp=2, schedule="interleaved", micro_batch=1)
    ev = Evaluator(spec, training, ideal_cluster())
    point = PlanPoint.of(plan, training)
    step = ev.evaluate(point).step
    assert ev.step_time_s(point) == pytest.approx(step.step_time_s)
    assert ev.variant_times_s(ev.context(point), point, [False], ["none"]) == pytest.approx([step.step_time_s])
    stage, _, m, _ = ev.context(point)
    crit = stage.terms.critical_rank
    extra = unmerged_chunks(2, 2, crit, m) * stage.blocks[crit].moe_run / 2 * stage.moe.ep.merged_s
    assert extra > 0
    assert ev.ep_unmerged_s(point, stage, m) == pytest.approx(extra)
    assert step.ep_comm_s == pytest.approx(m * stage.terms.ep_s + extra)
    est = estimate_plan(spec, training, plan, ideal_cluster())
    assert est.step.step_time_s == pytest.approx(step.step_time_s)
    assert sum(est.step.terms().values()) == pytest.approx(step.step_time_s)
