"""Host issue time of the merged-1F1B EP overlap (`plan/host_issue.py`): counts from the engines'
source (Megatron-core core_v0.15.0 `pipeline_parallel/utils.py` ScheduleNode,
`models/gpt/fine_grained_callables.py`, `models/common/model_chunk_schedule_plan.py`; TE v2.9
GroupedLinear), slots from Megatron's warm-up count, and the per-slot max(device, host)."""

from __future__ import annotations

import pytest

from modelplan.plan import host_issue
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.specs.costmodel import CostModel
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec

from tests.test_plan_moe import F, K, ideal_cluster, mixtral_like


def test_merged_slots_are_the_chunks_after_megatrons_warm_up():
    """pp 8, vpp 4, rank 0, 128 micro-batches, 12 MoE blocks per micro-batch: 2 x 7 + 3 x 8 + 1 = 39
    of the 512 chunks run unmerged (schedules.py get_pp_rank_microbatches + the overlap's extra
    forward), 3 blocks each: (512 - 39) x 3 = 1,419 merged slots."""
    assert host_issue.merged_slots(8, 4, 0, 128, 12) == pytest.approx(1419)


def test_merged_slots_without_pipelining_drop_the_first_forward():
    """combined_1f1b_schedule_for_no_pipelining: the first forward runs alone, so 4 micro-batches of
    2 MoE blocks merge 3 x 2 = 6 slots."""
    assert host_issue.merged_slots(1, 1, 0, 4, 2) == pytest.approx(6)


def test_a_host_bound_slot_adds_host_minus_device():
    """10 slots, 300 host ops at 30 us = 9 ms against 6 ms of device: 10 x 3 ms = 30 ms."""
    assert host_issue.merged_host_s(300, 30e-6, 6e-3, 10) == pytest.approx(30e-3)


def test_a_device_bound_slot_adds_nothing():
    """100 ops at 30 us = 3 ms against 6 ms of device: max(device, host) is the device."""
    assert host_issue.merged_host_s(100, 30e-6, 6e-3, 10) == 0.0


def test_expert_launches_per_local_expert_follow_te_grouped_linear():
    """fc1 + fc2, TE v2.9: fp8 forward 2 x (3 quantize launches + 1 GEMM) = 8, backward 2 x (3 + 1
    column-wise copy + dgrad + wgrad) = 12; bf16 2 GEMMs forward, 4 backward."""
    assert host_issue.expert_ops(True) == (8, 12)
    assert host_issue.expert_ops(False) == (2, 4)


def test_schedule_node_calls_per_moe_block():
    """ScheduleNode._forward per node: event wait + record 2, stream enter / exit 2, nvtx 2, per
    input make_viewless 2 + detach 1, per output make_viewless 2. attn (1 in, 1 out) 11; post_attn
    (1 in, 2 out) + detach(residual) 3 = 16; moe_dispatch (2 in, 1 out) + detach(probs) 3 + free_input
    2 per input = 21; mlp (1, 1) + free_input 2 = 13; moe_combine (1, 1) + free_input 2 +
    make_viewless_tensor 2 + record_stream 1 = 16. _backward per node: 2 + 2 + 2 + run_backward 1 +
    record_stream per gradient (attn 1, post_attn 3, dispatch 2, mlp 1, combine 1) + backward_dw
    of mlp and attn (nvtx range, 2 each)."""
    def fwd(inputs: int, outputs: int) -> int:
        return 2 + 2 + 2 + 3 * inputs + 2 * outputs

    forward = fwd(1, 1) + (fwd(1, 2) + 3) + (fwd(2, 1) + 3 + 2 * 2) + (fwd(1, 1) + 2) + (fwd(1, 1) + 2 + 2 + 1)
    backward = sum(2 + 2 + 2 + 1 + grads for grads in (1, 3, 2, 1, 1)) + 2 * 2
    assert host_issue.MERGED_NODE_OPS == (forward, backward) == (77, 47)


def test_dispatcher_syncs_only_when_dropless_over_several_ranks():
    """token_dispatcher.py preprocess: before_ep_alltoall when dropless and ep x tp > 1; drop-and-pad
    (a capacity) and a single rank do not sync."""
    spec = mixtral_like()
    assert host_issue.dispatcher_syncs(spec, 1, 8)
    assert not host_issue.dispatcher_syncs(spec, 1, 1)
    capped = spec.model_copy(update={"moe": spec.moe.model_copy(update={"capacity_factor": 1.0})})
    assert not host_issue.dispatcher_syncs(capped, 1, 8)


def _overlap_case():
    spec = mixtral_like().model_copy(update={"moe": MoESpec(num_experts=16, top_k=K, expert_ffn_hidden=F)})
    training = TrainingSpec(global_batch=16 * 4, seq_len=1024, ep_comm_overlap=True)
    return spec, training, Plan(dp=16, ep=16, micro_batch=1)


def test_host_term_grows_by_slots_times_ops_times_the_cost_step():
    """No pipelining, 4 micro-batches, 2 MoE blocks: 6 merged slots (hand count above); once
    host-bound, 1 us more per op adds 6 slots x (the block's host ops + the 124 node calls) us."""
    spec, training, plan = _overlap_case()
    ev = Evaluator(spec, training, ideal_cluster())
    point = PlanPoint.of(plan, training)
    fwd, bwd = host_issue.moe_block_host_ops(ev.spec, training, ev.software, ev.dtype_bytes, ev.capacity_factor,
                                             1, False, 1, 1, 16, None)
    ops = fwd + bwd + 77 + 47
    steps = [estimate_plan(spec, training, plan, ideal_cluster(), CostModel(ep_overlap_host_op_us=c)).step
             for c in (1000.0, 1001.0)]
    assert steps[1].step_time_s - steps[0].step_time_s == pytest.approx(6 * ops * 1e-6)
    assert steps[1].host_s > 0
    assert sum(steps[1].terms().values()) == pytest.approx(steps[1].step_time_s)
    stage, _, m, _ = ev.context(point)
    assert m == 4 and ev.ep_host_s(point, stage, m) > 0  # the default cost, host-bound on this tiny block


def test_no_host_term_without_the_overlap_or_at_zero_cost():
    """The host term belongs to the merged schedule: off without `ep_comm_overlap`, and 0 at 0 us."""
    spec, training, plan = _overlap_case()
    plain = training.model_copy(update={"ep_comm_overlap": False})
    assert estimate_plan(spec, plain, plan, ideal_cluster(), CostModel(ep_overlap_host_op_us=1000.0)).step.host_s == 0
    assert estimate_plan(spec, training, plan, ideal_cluster(), CostModel(ep_overlap_host_op_us=0.0)).step.host_s == 0


def test_a_host_bound_plan_says_so_in_its_notes():
    """The plan's notes name the host term and the calibrated cost it was priced at."""
    spec, training, plan = _overlap_case()
    est = estimate_plan(spec, training, plan, ideal_cluster(), CostModel(ep_overlap_host_op_us=1000.0))
    assert any(n.startswith("EP overlap host-bound") and "1000 us per host op" in n for n in est.notes)
