"""Plan validity (modelplan.plan.validate): every rule, every number in its message."""

from __future__ import annotations

import pytest

from modelplan.errors import SpecError
from modelplan.plan.validate import Reason, padded_vocab, plan_notes, plan_problems, validate_plan
from modelplan.specs.hardware import Accelerator, Cluster, Link
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec


def model(**kw) -> TransformerSpec:
    """A small Llama-like model: 32 heads, 8 KV heads, ffn 11008, 24 layers."""
    base = dict(layers=24, hidden=4096, heads=32, kv_heads=8, ffn_hidden=11008, vocab=32000)
    return TransformerSpec(**{**base, **kw})


def cluster(gpus_per_node: int = 8, nodes: int | None = None) -> Cluster:
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    link = Link(name="l", bandwidth_gbps=100.0, latency_us=1.0)
    return Cluster(name="c", accelerator=acc, gpus_per_node=gpus_per_node, nodes=nodes, intra=link, inter=link)


def reasons(plan: Plan, spec=None, training=None, **kw) -> set[Reason]:
    training = training or TrainingSpec(global_batch=512, seq_len=2048)
    return {p.reason for p in plan_problems(spec or model(), training, plan, **kw)}


def messages(plan: Plan, spec=None, training=None, **kw) -> str:
    training = training or TrainingSpec(global_batch=512, seq_len=2048)
    return "; ".join(p.message for p in plan_problems(spec or model(), training, plan, **kw))


def test_valid_plan_has_no_problems():
    """tp 8 (divides 32 heads, 8 KV heads, 11008), pp 4 (divides 24), 2 * 32 divides 512."""
    assert plan_problems(model(), TrainingSpec(global_batch=512), Plan(dp=32, tp=8, pp=4, micro_batch=2),
                         cluster(), world_size=1024) == []


def test_tp_must_divide_heads():
    """32 % 3 != 0: the message names both numbers."""
    assert "tp (3) must divide heads (32)" in messages(Plan(tp=3))


def test_kv_heads_replicated_when_tp_is_a_multiple():
    """8 KV heads on tp 16: each KV head replicated on 2 ranks (stated), not an error."""
    spec = model(heads=64, hidden=8192)
    assert Reason.TP_KV_HEADS not in reasons(Plan(tp=16), spec, allow_tp_across_nodes=True)
    assert plan_notes(spec, Plan(tp=16))[-1] == "each of the 8 KV heads is replicated on 2 TP ranks"


def test_kv_heads_neither_divides_nor_multiple():
    """12 heads, 6 KV heads, tp 4: 6 % 4 and 4 % 6 are both non-zero."""
    msg = messages(Plan(tp=4), model(hidden=768, heads=12, kv_heads=6, ffn_hidden=3072))
    assert "tp (4) must divide kv_heads (6) or be a multiple of it" in msg


def test_tp_must_divide_ffn():
    """ffn_hidden 11000 is not a multiple of 16 (64 heads and 16 KV heads are)."""
    spec = model(heads=64, kv_heads=16, hidden=8192, ffn_hidden=11000)
    assert "tp (16) must divide ffn_hidden (11000)" in messages(Plan(tp=16), spec, allow_tp_across_nodes=True)


def test_vocab_padding_megatron():
    """GPT-2's 50257 pads to 50304 (multiple of 128) with tp 1: Megatron/nanoGPT's padded vocab."""
    assert padded_vocab(50257, 1) == 50304
    assert padded_vocab(50257, 8) == 51200  # multiple of 1024


def test_vocab_padding_is_stated():
    """A padded vocabulary is a note, not an error."""
    assert plan_notes(model(vocab=50257), Plan(tp=1)) == [
        "vocab padded from 50257 to 50304 (multiple of 128 * tp 1, Megatron-LM)"
    ]


def test_pp_times_vpp_must_not_exceed_layers():
    """24 layers cannot fill pp 4 x vpp 8 = 32 chunks; 16 chunks (uneven) are valid."""
    plan = Plan(pp=4, vpp=8, schedule="interleaved")
    assert "pp * vpp (4 * 8 = 32) must not exceed layers (24): every pipeline stage needs at least one layer" in messages(plan)
    assert "layers" not in messages(Plan(pp=4, vpp=4, schedule="interleaved"))


def test_micro_batch_times_dp_must_divide_global_batch():
    """3 * 32 = 96 does not divide 512."""
    assert "micro_batch * dp (3 * 32 = 96) must divide global_batch (512)" in messages(Plan(dp=32, micro_batch=3))


def test_interleaved_needs_m_divisible_by_pp():
    """512 / (1 * 32) = 16 micro-batches on pp 3 (Megatron's interleaved schedule)."""
    plan = Plan(dp=32, pp=3, vpp=2, schedule="interleaved")
    assert "interleaved schedule needs num_microbatches (16) divisible by pp (3)" in messages(plan)


def test_world_size_must_equal_gpus():
    """dp * tp * pp = 4 * 2 * 2 = 16 is not 32."""
    msg = messages(Plan(dp=4, tp=2, pp=2), world_size=32)
    assert "dp * tp * pp * cp (4 * 2 * 2 * 1 = 16) must equal the GPU count (32)" in msg


def test_tp_stays_inside_a_node_unless_allowed():
    """tp 16 on 8-GPU nodes crosses nodes; allowed with the flag."""
    spec = model(heads=64, kv_heads=16, hidden=8192, ffn_hidden=16384)
    assert "tp (16) must divide the 8 GPUs of an NVLink domain" in messages(Plan(tp=16), spec, cluster=cluster())
    assert Reason.TP_NODE not in reasons(Plan(tp=16), spec, cluster=cluster(), allow_tp_across_nodes=True)


def test_plan_larger_than_a_fixed_cluster():
    """2 nodes of 8 hold 16 GPUs, not 32."""
    msg = messages(Plan(dp=32), cluster=cluster(nodes=2))
    assert "plan needs 32 GPUs but cluster c has 16 (2 nodes x 8)" in msg


def test_ep_must_divide_experts():
    """8 experts over ep 3 (dp 3) is uneven."""
    spec = model(moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=1024))
    training = TrainingSpec(global_batch=6)
    assert "ep (3) must divide moe.num_experts (8)" in messages(Plan(dp=3, ep=3), spec, training)


def test_ep_needs_moe():
    """A dense model has no experts to split."""
    assert "ep (2) > 1 needs an MoE model" in messages(Plan(dp=2, ep=2))


def test_sequence_parallel_needs_tp():
    """SP shards over the TP group: nothing to shard with tp 1 (checked even for unvalidated plans)."""
    plan = Plan.model_construct(**{**Plan().model_dump(), "sequence_parallel": True})
    assert "sequence_parallel needs tp > 1 (tp = 1)" in messages(plan)


def test_cp_must_divide_seq():
    """seq 2048 over cp 3 is uneven."""
    assert "cp (3) must divide seq_len (2048)" in messages(Plan(cp=3))


def test_validate_plan_raises_every_problem_in_one_line():
    """Two broken rules -> one SpecError line with both, joined by '; '."""
    with pytest.raises(SpecError) as exc:
        validate_plan(model(), TrainingSpec(global_batch=512), Plan(tp=3, dp=32, micro_batch=3))
    text = str(exc.value)
    assert "\n" not in text
    assert "tp (3) must divide heads (32)" in text and "must divide global_batch (512)" in text


def test_the_transformer_evaluator_points_a_network_to_its_family():
    """A network handed to the transformer evaluator: one SpecError naming the kind and the entry
    points that plan it (networks are planned; no 'not supported yet')."""
    from modelplan.plan.validate import planning_spec
    from modelplan.specs.load import load_model

    with pytest.raises(SpecError, match="not 'network'; plan it with search_plans / estimate_plan") as err:
        planning_spec(load_model("mlp"))
    assert "not supported" not in str(err.value)


DEEPSPEED = TrainingSpec(global_batch=512, seq_len=2048, framework="deepspeed")


@pytest.mark.parametrize("plan, broken", [
    (Plan(dp=8, pp=2, zero=1), False),                       # BLOOM / MT-NLG: ZeRO-1 under the pipeline
    (Plan(dp=8, pp=2, zero=2), True),                        # pipe/engine.py asserts stage < 2
    (Plan(dp=8, pp=2, zero=3), True),
    (Plan(dp=8, pp=1, zero=3), False),                       # no pipeline: any ZeRO stage
    (Plan(dp=8, pp=2, vpp=2, schedule="interleaved"), True),  # TrainSchedule is DeepSpeed's only schedule
])
def test_deepspeed_pipeline_engine_rules(plan, broken):
    """DeepSpeed's PipelineEngine asserts "ZeRO-2 and ZeRO-3 are incompatible with pipeline
    parallelism" (deepspeed/runtime/pipe/engine.py) and runs its 1F1B TrainSchedule only
    (pipe/schedule.py); Megatron runs both (the distributed optimizer, interleaving)."""
    assert (Reason.ENGINE in reasons(plan, training=DEEPSPEED)) is broken
    assert Reason.ENGINE not in reasons(plan)


def test_deepspeed_search_ranks_only_plans_its_pipeline_runs():
    """The search under --framework deepspeed ranks no pipelined plan with ZeRO >= 2 or an
    interleaved schedule, and counts what it dropped under the engine's reason."""
    from modelplan.comm.clusters import load_cluster
    from modelplan.plan.search import SearchSpace, search_plans

    result = search_plans(model(), DEEPSPEED, load_cluster("dgx-h100"), 16, SearchSpace(pp=[2]), top_k=50)
    assert result.best and all(e.plan.zero <= 1 and e.plan.schedule == "1f1b" for e in result.best)
    assert result.rejected.get(Reason.ENGINE.value, 0) > 0
