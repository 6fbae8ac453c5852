"""Pipeline flushes (`modelplan.plan.pipeline.flush`): gradient accumulation outside the schedule
calls it several times per step, each call filling and draining the pipeline (NeMo AutoModel
benchmark.py: one `schedule.step` per GA step of local_batch_size // pp_microbatch_size
micro-batches)."""

from __future__ import annotations

from fractions import Fraction

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.comm.clusters import load_cluster
from modelplan.plan.estimate import estimate_plan
from modelplan.errors import SpecError
from modelplan.execute import engine
from modelplan.execute.verify import verify
from modelplan.plan.pipeline import pipeline_schedule
from modelplan.plan.pipeline.flush import (
    flush_problem,
    flush_sizes,
    flushed_schedule,
    step_bubble_microbatches,
    step_inflight_microbatches,
)
from modelplan.plan.pipeline.profile import simulate
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


@pytest.mark.parametrize("m,per_flush,sizes", [(32, 8, (8, 8, 8, 8)), (10, 4, (4, 4, 2)), (8, None, (8,)),
                                               (8, 16, (8,))])
def test_flush_sizes_split_the_step(m, per_flush, sizes):
    """m micro-batches in calls of per_flush (the last one the remainder); None or more: one call."""
    assert flush_sizes(m, per_flush) == sizes


def test_1f1b_bubble_is_paid_per_flush():
    """1F1B idles (p - 1) micro-batch times per flush (Narayanan et al. 2021 sec. 2.2: bubble
    fraction (p-1)/m): pp 4, m 32 in 4 flushes of 8 -> 4 x 3 = 12, one flush -> 3."""
    assert step_bubble_microbatches("1f1b", 4, 32, 1, 8) == 12
    assert step_bubble_microbatches("1f1b", 4, 32, 1, None) == 3


def test_interleaved_bubble_is_paid_per_flush():
    """Megatron's interleaved schedule idles (p - 1)/v per flush (Narayanan et al. 2021 sec. 2.2):
    pp 4, vpp 2, m 16 in 2 flushes of 8 -> 2 x 3/2 = 3."""
    assert step_bubble_microbatches("interleaved", 4, 16, 2, 8) == Fraction(3)


def test_1f1b_holds_one_flush():
    """1F1B rank r holds min(pp - r, m) micro-batches (Narayanan et al. 2021 sec. 2.2): with flushes
    of 2 on pp 4, rank 0 holds 2, not 4."""
    assert step_inflight_microbatches("1f1b", 4, 0, 32, 1, 2) == 2
    assert step_inflight_microbatches("1f1b", 4, 0, 32, 1, None) == 4


def test_each_flush_must_meet_the_schedule_rule():
    """Interleaved needs each call's micro-batches divisible by pp (its rule): 16 in calls of 6
    leaves 6, 6, 4 -> 6 % 4 breaks it; calls of 8 run."""
    assert flush_problem("interleaved", 4, 16, 2, 6) is not None
    assert flush_problem("interleaved", 4, 16, 2, 8) is None


def test_planner_bubble_grows_with_the_flushes():
    """Same plan and stage times: 4 flushes of 8 on pp 4 cost 4 x (p-1) bubble micro-batch times,
    4 times one flush's (p-1) (the 1F1B rule above), and rank 0 holds no more than pp = 4."""
    spec, cluster = load_model("llama-3-8b"), load_cluster("dgx-h100")
    plan = Plan(tp=2, pp=4, dp=2, micro_batch=1)
    one = estimate_plan(spec, TrainingSpec(global_batch=64, seq_len=2048), plan, cluster)
    four = estimate_plan(spec, TrainingSpec(global_batch=64, seq_len=2048, pp_flush_microbatches=8), plan, cluster)
    assert four.step.bubble_s == pytest.approx(4 * one.step.bubble_s)
    assert four.memory[0].activations == one.memory[0].activations  # 8 >= pp: rank 0 still holds 4


def test_planner_first_rank_holds_fewer_with_short_flushes():
    """Flushes of 2 on pp 4: 1F1B's rank 0 holds 2 micro-batches instead of 4, so its activations
    shrink (min(pp - r, m), Narayanan et al. 2021)."""
    spec, cluster = load_model("llama-3-8b"), load_cluster("dgx-h100")
    plan = Plan(tp=2, pp=4, dp=2, micro_batch=1)
    one = estimate_plan(spec, TrainingSpec(global_batch=64, seq_len=2048), plan, cluster)
    short = estimate_plan(spec, TrainingSpec(global_batch=64, seq_len=2048, pp_flush_microbatches=2), plan, cluster)
    assert short.memory[0].activations < one.memory[0].activations


def test_torch_pipelining_last_stage_keeps_one_flush_of_logits():
    """torch.distributed.pipelining's last stage keeps each call's outputs (`output_chunks`,
    torchtitan's pp_keeps_outputs): 4 flushes of 8 hold 8 micro-batches' logits, not 32; the
    drop is 24 x micro_batch x seq x vocab x 2 bytes (bf16, tp 1)."""
    spec, cluster = load_model("llama-3-8b"), load_cluster("dgx-h100")
    plan = Plan(tp=1, pp=4, dp=2, micro_batch=1)
    base = dict(global_batch=64, seq_len=2048, framework="torchtitan")
    one = estimate_plan(spec, TrainingSpec(**base), plan, cluster)
    four = estimate_plan(spec, TrainingSpec(**base, pp_flush_microbatches=8), plan, cluster)
    logits = 1 * 2048 * 128256 * 2  # Llama 3 vocab 128256 (its config.json), bf16
    drop = one.memory[-1].activations - four.memory[-1].activations
    assert drop == pytest.approx(24 * logits, rel=1e-9)


def test_cli_takes_pp_flush_microbatches():
    """`modelplan plan --pp-flush-microbatches 0` is refused naming the option; 8 plans."""
    runner = CliRunner()
    bad = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "16", "--batch", "64", "--pp", "4",
                              "--pp-flush-microbatches", "0"])
    assert bad.exit_code != 0 and "pp-flush-microbatches" in bad.output
    ok = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "16", "--batch", "64", "--pp", "4", "--tp", "2",
                             "--pp-flush-microbatches", "8", "--json"])
    assert ok.exit_code == 0, ok.output


def test_fsdp_kept_gathered_reduces_once_per_flush():
    """ZeRO-3 kept gathered across micro-batches under PP (torchtitan's reshard_after_forward False):
    torch pipelining's perform_reduce_grad ends every schedule call with FSDP's post-backward
    (stage.py), so 4 flushes pay 4 times the one reduction after the pipeline."""
    spec, cluster = load_model("llama-3-8b"), load_cluster("dgx-h100")
    plan = Plan(tp=1, pp=4, dp=4, micro_batch=1, zero=3)
    base = dict(global_batch=128, seq_len=2048, framework="torchtitan")
    one = estimate_plan(spec, TrainingSpec(**base), plan, cluster)
    four = estimate_plan(spec, TrainingSpec(**base, pp_flush_microbatches=8), plan, cluster)
    assert one.step.dp_comm_s > 0
    assert four.step.dp_comm_s == pytest.approx(4 * one.step.dp_comm_s)


def test_flushed_schedule_runs_each_flush_after_the_one_before():
    """1F1B, pp 2, 4 micro-batches in flushes of 2: rank 0 warms up min(pp - r, m) = 2 forwards per
    flush (Narayanan et al. 2021 fig. 4), so F0 F1 B0 B1 then the next flush's F2 F3 B2 B3; one
    flush is the plain schedule."""
    flushed = flushed_schedule("1f1b", 2, 4, 1, 2)
    assert [str(a) for a in flushed.actions[0]] == ["F0", "F1", "B0", "B1", "F2", "F3", "B2", "B3"]
    assert flushed.num_microbatches == 4
    assert flushed_schedule("1f1b", 2, 4, 1, 4) == pipeline_schedule("1f1b", 2, 4, 1)


def test_flushes_of_1f1b_and_interleaved_do_not_overlap():
    """Stage 0's backward of a flush's last micro-batch ends the flush on rank 0, before the next
    flush's first forward there: the unit-clock simulation of two flushes idles exactly twice one
    flush's (p - 1) / v (Narayanan et al. 2021 sec. 2.2)."""
    for kind, vpp in (("1f1b", 1), ("interleaved", 2)):
        two = simulate(flushed_schedule(kind, 4, 16, vpp, 8))
        busy = max(two.busy(r) for r in range(4))
        assert Fraction(two.makespan - busy) * 16 / Fraction(busy) == 2 * Fraction(3, vpp)
        assert step_bubble_microbatches(kind, 4, 16, vpp, 8) == 2 * Fraction(3, vpp)


# --- verify runs the schedule once per flush -------------------------------------------------

TINY = TransformerSpec(
    name="gpt-tiny", layers=4, hidden=16, heads=4, ffn_hidden=32, vocab=32, max_positions=8, position="learned",
    norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
    activation="gelu", tied_embeddings=True,
)
FLUSHED = TrainingSpec(global_batch=8, seq_len=8, optimizer="adamw", pp_flush_microbatches=2)


def _failed(report) -> dict[str, str]:
    return {r.name: r.detail for r in report.rows if not r.passed}


def test_verify_executes_every_flush_and_one_optimizer_step():
    """pp 2, 8 micro-batches in flushes of 2: the sharded step (four schedule calls, gradients
    accumulated, one optimizer step) equals the single-device step, and the executed bubble is four
    flushes' (p - 1) = 4 micro-batch times over 8, not one flush's 1/8."""
    report = verify(TINY, FLUSHED, Plan(pp=2), scale=False, steps=2)
    assert report.passed, _failed(report)
    bubble = next(r for r in report.rows if r.name == "bubble fraction")
    assert bubble.expected == pytest.approx(4 / 8) and bubble.measured == pytest.approx(4 / 8)
    assert any("flushes of 2 + 2 + 2 + 2 micro-batches" in n for n in report.notes)


def test_verify_checks_zb_v_flushes_that_overlap():
    """ZB-V's trailing weight gradients run beside the next flush's forwards: the executed timeline
    idles less than two flushes' bubbles, and the planner's step bubble (`flush_overlap`) matches it."""
    report = verify(TINY, FLUSHED.model_copy(update={"pp_flush_microbatches": 4}), Plan(pp=2, schedule="zb-v"),
                    scale=False, steps=1)
    assert report.passed, _failed(report)
    bubble = next(r for r in report.rows if r.name == "bubble fraction")
    assert bubble.measured == pytest.approx(bubble.expected)
    assert bubble.expected < float(2 * step_bubble_microbatches("zb-v", 2, 4, 1)) / 8


def test_losing_one_flush_gradients_fails_verify(monkeypatch):
    """A rank that drops the gradients of the second flush (a reset of the buffers per flush would
    too): the loss is still right, the accumulated gradients and the update are not."""
    original = engine.RankProgram.add_grads

    def add_grads(self, chunk, microbatch, grads):
        if not 2 <= microbatch < 4:  # micro-batches 2, 3: the second flush of 2
            original(self, chunk, microbatch, grads)

    monkeypatch.setattr(engine.RankProgram, "add_grads", add_grads)
    bad = _failed(verify(TINY, FLUSHED, Plan(pp=2), scale=False, steps=1))
    assert {"gradients", "updated parameters"} <= set(bad) and "loss" not in bad


def test_scaled_down_verify_keeps_two_flushes():
    """GPT-2, pp 2, 64 micro-batches in flushes of 16: the scaled-down run keeps two flushes of the
    fewest micro-batches 1F1B runs from 2 pp (4 + 4) and passes."""
    training = TrainingSpec(global_batch=64, seq_len=64, pp_flush_microbatches=16)
    report = verify(load_model("gpt2"), training, Plan(pp=2, micro_batch=1), steps=1)
    assert report.passed, _failed(report)
    assert report.training.pp_flush_microbatches == 4 and report.training.global_batch == 8
    assert any("flushes of 4 + 4 micro-batches" in n for n in report.notes)


def test_verify_refuses_a_flush_its_schedule_cannot_run():
    """DualPipe needs an even count of at least 2 pp micro-batches in every call: flushes of 2 at pp 2
    are refused before anything runs, with the rule's numbers."""
    with pytest.raises(SpecError, match="dualpipe"):
        verify(TINY, FLUSHED, Plan(pp=2, schedule="dualpipe"), scale=False)


def test_verify_notes_the_flushes_it_executes():
    """verify's note names the executed flushes as flush_sizes cuts them (global batch 10, micro-batch 1,
    dp 1: m = 10 in flushes of 4, 4 and the remainder 2), and none with one flush or pp 1."""
    from modelplan.execute.verify import flush_note

    flushed = TrainingSpec(global_batch=10, pp_flush_microbatches=4)
    plan = Plan(pp=2, dp=1, micro_batch=1)
    assert flush_note(flushed, plan) == ["pipeline flushes of 4 + 4 + 2 micro-batches: the schedule runs once per "
                                         "flush, gradients accumulated across the flushes, one optimizer step"]
    assert flush_note(TrainingSpec(global_batch=8, pp_flush_microbatches=8), plan) == []
    assert flush_note(flushed, Plan(pp=1, dp=1, micro_batch=1)) == []



def test_reduction_after_the_pipeline_waits_alone_under_torch_pipelining():
    """Kept gathered (ZeRO-3 reduced once, as ZeRO-1's rule): a 4 s ReduceScatter (1 s last bucket)
    beside a 5 s backward at overlap fraction 0.9 exposes max(1, 4 - 4.5) = 1 s when FSDP reduces
    beside the backward; torch pipelining's REDUCE_GRAD runs after the chunk's last backward and the
    compute stream waits on it (stage.py perform_reduce_grad), so all 4 s are exposed. The gather
    after the pipeline (2 s, 0.5 s first bucket, behind m x t_fwd = 3 x 1 s) is 0.5 s either way."""
    from modelplan.plan.parallel.dp_zero import DpTimes, dp_exposure

    times = DpTimes(0.0, 0.0, reduce_scatter=4.0, reduce_scatter_bucket=1.0, all_gather=2.0,
                    all_gather_bucket=0.5, all_gather_block=0.0)
    beside = dp_exposure(1, times, 3, t_fwd=1.0, t_bwd=5.0, overlap=True, overlap_fraction=0.9)
    alone = dp_exposure(1, times, 3, t_fwd=1.0, t_bwd=5.0, overlap=True, overlap_fraction=0.9,
                        reduce_beside_backward=False)
    assert beside.after_pipeline_s == pytest.approx(1.0 + 0.5)
    assert alone.after_pipeline_s == pytest.approx(4.0 + 0.5)


def test_fsdp_kept_gathered_under_pp_exposes_its_whole_reduction():
    """torchtitan PP with ZeRO-3 kept gathered: on the critical rank the DP seconds after the
    pipeline are its whole gradient ReduceScatter, its gradient copies, the gather's un-hidden part
    (max(first bucket, gather - m t_fwd)) with the interference share of the hidden rest
    (`dp_zero.dp_exposure`) and its partial-gradient AllReduce: nothing of the
    reduction hides behind the last backward (the test above, on the planner's own DP entry)."""
    from modelplan.comm.dp_overlap import param_gather_exposed_s
    from modelplan.plan.evaluator import Evaluator, PlanPoint

    spec, cluster = load_model("llama-3-8b"), load_cluster("dgx-h100")
    training = TrainingSpec(global_batch=64, seq_len=2048, framework="torchtitan")
    plan = Plan(tp=1, pp=4, dp=4, micro_batch=1, zero=3)
    ev = Evaluator(spec, training, cluster)
    point = PlanPoint.of(plan, training)
    stage, _, m, _ = ev.context(point)
    st = stage.terms
    dpe = ev.dp_entry(1, 4, 4, 3, False, st.critical_rank)
    t = dpe.times
    gather = param_gather_exposed_s(t.all_gather, t.all_gather_bucket, m * st.fwd_s, True)
    hidden = t.all_gather - gather  # what the forward hides still costs the interference share
    want = t.reduce_scatter + dpe.grad_copy_s + gather + ev.cost.overlap_interference * hidden + dpe.partial_grads_s
    after, _, _ = ev._dp_terms(st, dpe, m, 3, "default", None, 4, 4)
    assert t.reduce_scatter > 0
    assert after == pytest.approx(want)


def test_cli_verify_of_a_flushed_plan_executes_two_flushes(tmp_path):
    """`plan --pp-flush-microbatches 8` (GPT-2, pp 2, dp 2: 32 micro-batches per replica in 4 flushes)
    then `verify PLAN.json`: it executes two flushes of 2 pp = 4 micro-batches and passes."""
    runner = CliRunner()
    planned = runner.invoke(app, ["plan", "gpt2", "--gpus", "4", "--pp", "2", "--dp", "2", "--tp", "1", "--batch", "64",
                                  "--seq", "1024", "--micro-batch", "1", "--pp-flush-microbatches", "8", "--top", "1",
                                  "--json"])
    assert planned.exit_code == 0, planned.output
    path = tmp_path / "plan.json"
    path.write_text(planned.stdout)
    result = runner.invoke(app, ["verify", str(path), "--steps", "1"])
    assert result.exit_code == 0, result.output
    assert "pipeline flushes of 4 + 4 micro-batches" in result.output
