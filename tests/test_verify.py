"""verify: the sharded step equals the single-device step under every parallelism, and each
check fails when the executor is broken on purpose.

Expected values are the single-device reference (itself checked against finite differences and
HuggingFace in test_exec_reference.py), the communication list and shard counts (checked against
Narayanan et al. and ZeRO formulas in test_commlist.py / test_shard.py), the schedule data and
the bubble formulas (p-1)/m and (p-1)/(v*m) of Narayanan et al. SC'21.
"""

from __future__ import annotations

import numpy as np
import pytest

from modelplan.comm.ops import Collective
from modelplan.errors import SpecError
from modelplan.execute import data_parallel, engine, mappings
from modelplan.execute.pipeline import PipelineP2P
from modelplan.execute.verify import verify
from modelplan.plan.pipeline import Action, ActionKind, PipelineSchedule
from modelplan.plan.pipeline.actions import strided_layout
from modelplan.specs.plan import Plan, Schedule
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

GPT = TransformerSpec(
    name="gpt-tiny", layers=4, hidden=16, heads=4, ffn_hidden=32, vocab=32, max_positions=8, position="learned",
    norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
    activation="gelu", tied_embeddings=True,
)
LLAMA = TransformerSpec(
    name="llama-tiny", layers=4, hidden=16, heads=4, kv_heads=2, ffn_hidden=24, vocab=32, position="rotary",
    norm="rmsnorm", gated_mlp=True, activation="silu",
)
MOE = LLAMA.model_copy(update={"name": "moe-tiny", "mlp_bias": True, "moe": MoESpec(
    num_experts=4, top_k=2, expert_ffn_hidden=12, shared_experts=1, router_bias=True, first_dense_layers=1)})
TRAIN = TrainingSpec(global_batch=8, seq_len=8, optimizer="adamw")


def failed(report) -> dict[str, str]:
    return {r.name: r.detail for r in report.rows if not r.passed}


def assert_passes(spec, plan, training=TRAIN):
    report = verify(spec, training, plan, scale=False)
    assert report.passed, failed(report)
    return report


# --- every parallelism reproduces the single-device step ----------------------------------


def test_data_parallel_only():
    """dp = 4: gradients averaged over replicas equal the full-batch gradient."""
    assert_passes(GPT, Plan(dp=4))


def test_tensor_parallel_only():
    """tp = 2: Megatron column/row splits with f/g all-reduces."""
    assert_passes(GPT, Plan(tp=2))


@pytest.mark.parametrize("schedule,vpp", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_pipeline_only(schedule, vpp):
    """pp = 2 under each schedule; interleaved with 2 chunks per rank (both directions share a link)."""
    report = assert_passes(GPT, Plan(pp=2, vpp=vpp, schedule=schedule))
    assert len(report.timeline) == 2


@pytest.mark.parametrize("pp,vpp,schedule", [(3, 1, "1f1b"), (2, 2, "interleaved")])
def test_uneven_pipeline_stages(pp, vpp, schedule):
    """5 layers over 3 stages (1 + 2 + 2) and over 2 x 2 chunks (1 + 2 + 1 + 1): the uneven step
    equals the single-device step and its traffic matches the communication list."""
    spec = GPT.model_copy(update={"layers": 5})
    assert_passes(spec, Plan(pp=pp, vpp=vpp, schedule=schedule), TrainingSpec(global_batch=12, seq_len=8))


def test_scaled_down_uneven_split_is_stated():
    """A 32-layer plan on pp 4 with Megatron's --decoder-first/last-pipeline-num-layers 5 and 7
    (5 + 10 + 10 + 7) scaled down keeps the fixed stages' blocks and gives the middle ones one
    block each (scale.py: layers = first + last + (stages - 2) x layers_per_stage): 5 + 1 + 1 + 7, said in
    a note beside the plan's own split."""
    spec = LLAMA.model_copy(update={"layers": 32})
    plan = Plan(pp=4, first_stage_layers=5, last_stage_layers=7)
    report = verify(spec, TrainingSpec(global_batch=8, seq_len=8), plan, steps=1)
    assert report.passed, failed(report)
    assert any("5+1+1+7 executed (the plan's 5+10+10+7" in n for n in report.notes), report.notes


def test_dp_tp_pp_2x2x2():
    """The 8-rank grid dp x tp x pp = 2 x 2 x 2 with 1F1B."""
    assert_passes(LLAMA, Plan(dp=2, tp=2, pp=2))


@pytest.mark.parametrize("scatter_gather", [True, False])
def test_pipeline_scatter_gather_matches_the_list(scatter_gather):
    """tp 2, pp 2, no SP: with Megatron's scatter/gather each TP rank sends its half of every
    boundary tensor and the receiver all-gathers it; the ledger matches the list byte for byte.
    Each of the 4 ranks sends m = 8 messages (stage 0 activations, stage 1 gradients) of
    1 x 8 x 16 float64 = 1,024 B, or its 512-B half with the split, in each of verify's 3 steps."""
    report = assert_passes(GPT, Plan(tp=2, pp=2, scatter_gather=scatter_gather))
    pp_row = next(r for r in report.rows if r.name == "bytes send_recv/pp")
    per_rank = 1 * 8 * 16 * 8 // (2 if scatter_gather else 1)
    assert pp_row.measured == 3 * 4 * 8 * per_rank  # 3 steps x 4 ranks (2 TP x 2 stages) x m = 8 messages


def test_tensor_parallel_with_sequence_parallel():
    """tp = 2 with sequence parallelism: AllGather/ReduceScatter, norms on sequence shards."""
    report = assert_passes(GPT, Plan(tp=2, sequence_parallel=True))
    names = {r.name for r in report.rows}
    assert "bytes reduce_scatter/tp" in names and "bytes all_gather/tp" in names


@pytest.mark.parametrize("zero", [1, 2, 3])
def test_zero_stages(zero):
    """ZeRO 1/2/3 over dp = 2 with AdamW: same step, sharded state."""
    assert_passes(GPT, Plan(dp=2, zero=zero))


def test_gqa_with_tp_equal_to_kv_heads():
    """GQA with 8 query and 2 key/value heads split over tp = kv_heads = 2."""
    spec = LLAMA.model_copy(update={"heads": 8, "hidden": 32, "kv_heads": 2})
    assert_passes(spec, Plan(tp=2, dp=2))


def test_gated_rmsnorm_model_with_everything():
    """SwiGLU + RMSNorm with tp, sequence parallel, interleaved pp, ZeRO-3 and full recompute."""
    training = TRAIN.model_copy(update={"recompute": "full"})
    assert_passes(LLAMA, Plan(dp=2, tp=2, pp=2, vpp=2, schedule="interleaved", sequence_parallel=True, zero=3), training)


def test_moe_with_expert_parallelism():
    """MoE (top-2 of 4, a shared expert) with ep = 2 experts groups and tp = 2 inside the experts."""
    assert_passes(MOE, Plan(dp=2, ep=2, tp=2))


@pytest.mark.parametrize("shared", [1, 0])
def test_moe_sequence_parallel_dispatch(shared):
    """tp 2 with sequence parallelism, ep 2: each TP rank dispatches its own tokens and the TP
    group all-gathers / reduce-scatters the expert buffer (Megatron-core's all-to-all dispatcher);
    a shared expert keeps its own f / g. The step equals the single-device one and the ledger the list."""
    spec = MOE.model_copy(update={"moe": MOE.moe.model_copy(update={"shared_experts": shared})})
    report = assert_passes(spec, Plan(dp=2, ep=2, tp=2, sequence_parallel=True))
    assert any(r.name == "bytes all_gather/tp" and r.passed for r in report.rows)


def test_moe_expert_data_parallel_with_zero():
    """dp = 4, ep = 2: expert gradients reduce over the 2-rank expert-data-parallel groups."""
    assert_passes(MOE, Plan(dp=4, ep=2, zero=2))


def test_parallel_block_encoder():
    """Bidirectional encoder with parallel attention/MLP, token types, embedding norm, head bias."""
    spec = GPT.model_copy(update={"arch": "encoder", "parallel_block": True, "type_vocab": 2,
                                  "embedding_norm": True, "lm_head_bias": True})
    assert_passes(spec, Plan(dp=2, tp=2, pp=2, sequence_parallel=True, zero=1))


@pytest.mark.parametrize("optimizer", ["sgd", "momentum", "adam"])
def test_other_optimizers(optimizer):
    """SGD, momentum and Adam updates under ZeRO-1 equal the reference updates."""
    assert_passes(GPT, Plan(dp=2, zero=1), TRAIN.model_copy(update={"optimizer": optimizer}))


def test_scaled_down_preset_shape():
    """A Llama-3-8B-shaped spec is scaled down and verified under 2 x 2 x 2."""
    big = TransformerSpec(name="llama-3-8b-like", layers=32, hidden=4096, heads=32, kv_heads=8,
                          ffn_hidden=14336, vocab=128256, max_positions=8192)
    report = verify(big, TrainingSpec(global_batch=512, seq_len=8192), Plan(dp=2, tp=2, pp=2, micro_batch=2))
    assert report.passed, failed(report)
    assert report.model.heads == 4 and report.model.kv_heads == 2 and report.model.layers == 2


def test_unexecutable_plan_is_a_one_line_error():
    """tp = 3 does not divide 4 heads: SpecError naming both numbers."""
    with pytest.raises(SpecError, match=r"tp \(3\) must divide heads \(4\)"):
        verify(GPT, TRAIN, Plan(tp=3), scale=False)


# --- each check fails when the executor is broken on purpose ----------------------------


def test_dropping_a_tp_all_reduce_fails_loss_and_ledger(monkeypatch):
    """g forward without its AllReduce: partial sums flow on, the loss is wrong, the ledger short."""
    monkeypatch.setattr(mappings, "reduce_from_tensor_model_parallel_region", lambda tp, x, label: x)
    bad = failed(verify(GPT, TRAIN, Plan(tp=2), scale=False))
    assert {"loss", "gradients", "bytes all_reduce/tp"} <= set(bad)


def test_sending_the_wrong_microbatch_fails_loss(monkeypatch):
    """Stage 0 sends micro-batch i-1's activation for micro-batch i: the loss changes."""
    original = PipelineP2P.send

    def send(self, action, x):
        kept = self.__dict__.setdefault("_previous", {})
        kept[(action.kind, action.microbatch)] = x
        previous = kept.get((action.kind, action.microbatch - 1), x)
        return original(self, action, previous if action.kind is ActionKind.SEND_F else x)

    monkeypatch.setattr(PipelineP2P, "send", send)
    bad = failed(verify(GPT, TRAIN, Plan(pp=2), scale=False))
    assert "loss" in bad and "schedule order" not in bad


def test_skipping_the_zero1_parameter_gather_fails_parameters(monkeypatch):
    """ZeRO-1 without the AllGather of updated weights: other ranks' slices are never filled in."""
    original = data_parallel.DataParallel._collective

    def collective(self, name, group, x, label):
        if name is Collective.ALL_GATHER and label == "dp/params":
            me = group.index(self.comm.rank)
            return np.concatenate([x if k == me else np.zeros_like(x) for k in range(group.size)])
        return original(self, name, group, x, label)

    monkeypatch.setattr(data_parallel.DataParallel, "_collective", collective)
    bad = failed(verify(GPT, TRAIN, Plan(dp=2, zero=1), scale=False, steps=1))
    assert "updated parameters" in bad and "bytes all_gather/dp" in bad and "gradients" not in bad


def test_zero3_keeping_gathered_weights_fails_the_ledger(monkeypatch):
    """ZeRO-3 that gathers each unit once and keeps it: same math, but not the plan's traffic, and
    the kept copies are live memory that no term of the plan accounts for."""
    original = engine.RankProgram.params

    def params(self, chunk):
        kept = self.__dict__.setdefault("_kept", {})
        if chunk not in kept:
            kept[chunk] = original(self, chunk)
        return kept[chunk]

    monkeypatch.setattr(engine.RankProgram, "params", params)
    bad = failed(verify(GPT, TRAIN, Plan(dp=2, zero=3), scale=False, steps=1))
    assert set(bad) == {"bytes all_gather/dp", "memory unaccounted"}


def test_an_extra_buffer_fails_the_memory_check(monkeypatch):
    """A rank that keeps one extra buffer per unit holds more than plan/shard.py says: in the
    declared count and in the measured live bytes."""
    original = data_parallel.DataParallel.place

    def place(self, bucket, values):
        original(self, bucket, values)
        bucket.optim.append(np.zeros(bucket.padded))

    monkeypatch.setattr(data_parallel.DataParallel, "place", place)
    bad = failed(verify(GPT, TRAIN.model_copy(update={"optimizer": "sgd"}), Plan(dp=2), scale=False))
    assert set(bad) == {"held optimizer state", "memory optimizer state"}


def test_missing_sequence_parallel_grad_reduction_fails_gradients(monkeypatch):
    """Norm gradients computed on sequence shards but never all-reduced over tp are wrong."""
    monkeypatch.setattr(data_parallel.DataParallel, "_reduce_partial_over_tp", lambda self, bucket, flat: None)
    bad = failed(verify(GPT, TRAIN, Plan(tp=2, sequence_parallel=True), scale=False, steps=1))
    assert "gradients" in bad and "bytes all_reduce/tp" in bad and "loss" not in bad


def test_unpipelined_order_fails_schedule_and_bubble(monkeypatch):
    """Ranks that run F_i B_i per micro-batch (no pipelining) break the order, the bubble and the
    1F1B warm-up (rank 0 must run pp - 0 = 2 forwards before its first backward)."""
    def naive(schedule, pp, m, vpp=1, per_flush=None):
        actions = tuple(tuple(Action(k, i) for i in range(m) for k in (ActionKind.F, ActionKind.B)) for _ in range(pp))
        return PipelineSchedule(Schedule(schedule), pp, m, vpp, strided_layout(pp, 1), actions)

    monkeypatch.setattr(engine, "flushed_schedule", naive)
    bad = failed(verify(GPT, TRAIN, Plan(pp=2, schedule="1f1b"), scale=False))
    assert set(bad) == {"schedule order", "bubble fraction", "warm-up forwards", "measured bubble"}


def test_a_failing_rank_is_a_failed_execution_row(monkeypatch):
    """A rank that raises ends the run; the report has one failing 'execution' row naming it."""
    original = engine.RankProgram.finish

    def finish(self):
        if self.comm.rank == 1:
            raise RuntimeError("injected")
        original(self)

    monkeypatch.setattr(engine.RankProgram, "finish", finish)
    report = verify(GPT, TRAIN, Plan(dp=2), scale=False)
    assert not report.passed
    assert [r.name for r in report.rows] == ["execution"]
    assert "rank 1" in report.rows[0].detail and "injected" in report.rows[0].detail


def test_compare_tensors_small_tensor_rounding_passes_real_fault_fails():
    """A tensor 1e-7 the size of the largest (a BatchNorm bias gradient that is a sum with
    cancellation) reordered by a sharded run moves by rounding of its terms: 1.2e-15 of the largest
    here (EfficientNet-B7 at tp 2 measured 1.2e-9 relative at the old 1e-6 floor), which is
    1.2e-11 at the 1e-4 floor and passes. A real fault moves it by a share of itself: 10 % of
    1e-7 = 1e-8 of the largest, i.e. 1e-4 relative at the floor, which fails."""
    import numpy as np

    from modelplan.execute.checks import compare_tensors

    ref = {"big": np.array([1.0, -0.5]), "bias": np.array([1e-7, -3e-8])}
    rounding = {"big": ref["big"].copy(), "bias": ref["bias"] + 1.2e-15}
    assert compare_tensors("gradients", rounding, ref, []).passed
    fault = {"big": ref["big"].copy(), "bias": ref["bias"] * 1.1}
    row = compare_tensors("gradients", fault, ref, [])
    assert not row.passed and "bias" in row.detail


def test_deepep_plan_verifies_against_the_executed_dispatcher():
    """Under DeepEP the planner lists the deduplicated exchange (`plan/deepep.py`), which the
    executor does not run: verify compares its ledger with the AllToAll dispatcher's list (the
    step still matches the single-device one) and its report says the exchange is priced only."""
    training = TRAIN.model_copy(update={"moe_flex_dispatcher": "deepep", "fake_balanced_gate": True})
    report = assert_passes(MOE, Plan(dp=2, ep=2), training)
    assert any("DeepEP" in n and "not executed" in n for n in report.notes)
