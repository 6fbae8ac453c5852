"""The forward window of the ZeRO-1/2 parameter AllGather (`comm/dp_overlap.param_gather_window_s`) and
what it exposes: Megatron-core's chained buckets worked by hand from its code (core_v0.16.1
distributed_data_parallel.py `_make_forward_pre_hook`, param_and_grad_buffer.py `finish_param_sync`,
pipeline_parallel/schedules.py `param_sync_func`), then through the real Evaluator."""

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.comm.dp_overlap import param_gather_window_s
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.evaluator import Evaluator, PlanPoint
from modelplan.plan.parallel.dp_zero import DpTimes, dp_exposure
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec


def test_without_interleaving_the_window_is_the_first_microbatch_forward():
    """vpp 1: the pre-hooks wait inside the first forward only, 0.2 s whatever m and pp."""
    assert param_gather_window_s("first_microbatch", 0.2, 5, pp=1, vpp=1) == pytest.approx(0.2)
    assert param_gather_window_s("first_microbatch", 0.2, 80, pp=4, vpp=1) == pytest.approx(0.2)


def test_step_forwards_is_every_forward():
    """The engines without the chain: m x t_fwd = 5 x 0.2 s."""
    assert param_gather_window_s("step_forwards", 0.2, 5, pp=1, vpp=1) == pytest.approx(1.0)


def test_interleaved_chunks_hide_behind_the_group_before_them():
    """pp 4, vpp 2, t_fwd 0.8 s: chunk forward 0.4 s; chunk 0 its own 0.4 s, chunk 1 the pp x 0.4 = 1.6 s
    of chunk-0 forwards run before its first one (microbatch_group_size_per_vp_stage = pp)."""
    assert param_gather_window_s("first_microbatch", 0.8, 16, pp=4, vpp=2) == pytest.approx(0.4 + 1.6)


def test_never_more_than_the_step_forwards():
    """pp 8, vpp 4, 2 micro-batches of 0.1 s: the hand window 0.025 + 3 x 8 x 0.025 = 0.625 s caps at 0.2 s."""
    assert param_gather_window_s("first_microbatch", 0.1, 2, pp=8, vpp=4) == pytest.approx(0.2)


def test_unknown_window_names_the_field():
    """A window the engines do not run is refused with the field's name."""
    with pytest.raises(ValueError, match="param_gather_window"):
        param_gather_window_s("all", 0.1, 2, pp=1, vpp=1)


def _chain_exposed_s(bucket_s: float, buckets: int, t_fwd_s: float) -> float:
    """Megatron-core's chain by hand: bucket 0 is dispatched and waited at the first pre-hook; bucket k + 1
    is dispatched when bucket k is waited and runs beside bucket k's layers (t_fwd / buckets each)."""
    layer_s = t_fwd_s / buckets
    return bucket_s + (buckets - 1) * max(0.0, bucket_s - layer_s)


@pytest.mark.parametrize("bucket_s", [0.01, 0.1, 0.25])
def test_exposed_gather_within_one_bucket_forward_of_the_chain(bucket_s):
    """ZeRO 1, 4 equal buckets, t_fwd 0.3 s, m 4: the planner's max(first bucket, total - t_fwd) is the
    hand-run chain, up to the last bucket's layers (0.075 s) that hide nothing; the old all-forwards
    window (1.2 s) exposes only the first bucket."""
    times = DpTimes(0, 0, 0, 0, all_gather=4 * bucket_s, all_gather_bucket=bucket_s, all_gather_block=0)
    window = param_gather_window_s("first_microbatch", 0.3, 4, pp=1, vpp=1)
    got = dp_exposure(1, times, 4, 0.3, 1.0, True, 0.9, gather_window_s=window).after_pipeline_s
    chain = _chain_exposed_s(bucket_s, 4, 0.3)
    assert chain - 0.3 / 4 - 1e-12 <= got <= chain + 1e-12
    assert dp_exposure(1, times, 4, 0.3, 1.0, True, 0.9).after_pipeline_s == pytest.approx(bucket_s)


def test_exposed_gather_by_hand():
    """1.0 s AllGather in 0.25 s buckets, t_fwd 0.3 s: 1.0 - 0.3 = 0.7 s exposed (not max(0.25, 1.0 - 4 x 0.3))."""
    times = DpTimes(0, 0, 0, 0, all_gather=1.0, all_gather_bucket=0.25, all_gather_block=0)
    got = dp_exposure(1, times, 4, 0.3, 1.0, True, 0.9, gather_window_s=0.3)
    assert got.after_pipeline_s == pytest.approx(0.7)
    assert got.total_s == pytest.approx(1.0)


def test_blocking_gather_hides_nothing():
    """DeepSpeed's gather at the end of its step: window 0, the whole 1.0 s AllGather exposed."""
    assert param_gather_window_s("optimizer_step", 0.2, 5, pp=1, vpp=1) == 0.0
    times = DpTimes(0, 0, 0, 0, all_gather=1.0, all_gather_bucket=0.25, all_gather_block=0)
    assert dp_exposure(1, times, 4, 0.3, 1.0, True, 0.9, interference=0.1,
                       gather_window_s=0.0).after_pipeline_s == pytest.approx(1.0)


def test_engine_profiles_name_their_window():
    """Megatron runs the chained window, DeepSpeed the blocking gather; the FSDP engines keep the default."""
    assert load_engine("megatron").param_gather_window == "first_microbatch"
    assert load_engine("deepspeed").param_gather_window == "optimizer_step"
    for name in ("torchtitan", "fsdp", "foundry", "automodel"):
        assert load_engine(name).param_gather_window == "step_forwards"


LLAMA = load_model("llama-3-8b")
H100 = load_cluster("dgx-h100")


def _evaluators(plan: Plan, global_batch: int) -> tuple[Evaluator, Evaluator, PlanPoint]:
    """Megatron's evaluator as the profile says, and one whose window is every forward."""
    training = TrainingSpec(global_batch=global_batch, seq_len=128, framework="megatron")
    chained, every = Evaluator(LLAMA, training, H100), Evaluator(LLAMA, training, H100)
    every.software = every.software._replace(param_gather_window="step_forwards")
    return chained, every, PlanPoint.of(plan, training)


def test_evaluator_exposes_the_forwards_after_the_first():
    """Llama-3-8B, ZeRO 1 over 64 H100s (8 nodes), seq 128, 4 micro-batches: the 8B-parameter AllGather
    outlasts the step's forwards, so the chain exposes (m - 1) x t_fwd more, less the interference
    share those seconds paid while hidden: (1 - k)(m - 1) t_fwd (dp_zero.py's interference rule)."""
    plan = Plan(dp=64, zero=1, micro_batch=1)
    chained, every, point = _evaluators(plan, 256)
    t_fwd = chained.context(point)[0].terms.fwd_s
    k = chained.cost.overlap_interference
    m = 256 // 64
    a, b = chained.evaluate(point).step, every.evaluate(point).step
    times = chained.dp_entry(1, 1, 64, 1, False, 0).times
    assert times.all_gather - times.all_gather_bucket > m * t_fwd  # both windows leave the AllGather exposed
    assert a.step_time_s - b.step_time_s == pytest.approx((1 - k) * (m - 1) * t_fwd, rel=1e-9)


def test_one_microbatch_is_unchanged():
    """m = 1: the first micro-batch's forward is the step's forwards."""
    plan = Plan(dp=64, zero=1, micro_batch=1)
    chained, every, point = _evaluators(plan, 64)
    assert chained.evaluate(point).step.step_time_s == pytest.approx(every.evaluate(point).step.step_time_s)


def test_plan_states_the_window():
    """`plan`'s engine line names the window for Megatron, not for torchtitan."""
    plan = Plan(dp=8, zero=1, micro_batch=1)
    line = "parameter AllGather hidden beside the first micro-batch's forward only"
    mega = estimate_plan(LLAMA, TrainingSpec(global_batch=32, seq_len=512, framework="megatron"), plan, H100)
    titan = estimate_plan(LLAMA, TrainingSpec(global_batch=32, seq_len=512, framework="torchtitan"), plan, H100)
    assert any(line in note for note in mega.notes)
    assert not any(line in note for note in titan.notes)
