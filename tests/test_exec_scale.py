"""scale_down keeps a model's family and options and makes every split of the plan exact."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelplan.errors import SpecError
from modelplan.execute.scale import check_executable, scale_down
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

LLAMA3_8B = TransformerSpec(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=128256)
MIXTRAL = LLAMA3_8B.model_copy(update={"vocab": 32000, "moe": MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=14336)})
GPT2 = TransformerSpec(layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50257, max_positions=1024,
                       position="learned", norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True,
                       mlp_bias=True, gated_mlp=False, activation="gelu_tanh", tied_embeddings=True)


@settings(max_examples=40, deadline=None)
@given(tp=st.sampled_from([1, 2, 4, 8]), pp=st.sampled_from([1, 2, 4]), dp=st.sampled_from([1, 2, 4]),
       sp=st.booleans(), interleaved=st.booleans(), mb=st.sampled_from([1, 2]))
def test_every_split_of_the_plan_is_exact(tp, pp, dp, sp, interleaved, mb):
    """For Llama-3-8B-shaped plans, the small model passes the executor's own checks."""
    vpp = 2 if interleaved and pp > 1 else 1
    plan = Plan(dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch=mb, schedule="interleaved" if vpp > 1 else "1f1b",
                sequence_parallel=sp and tp > 1)
    small, training = scale_down(LLAMA3_8B, plan, TrainingSpec(global_batch=dp * mb * 8 * pp, seq_len=8192))
    check_executable(small, training, plan)  # raises on any inexact split
    assert small.heads == 2 * tp and small.kv_heads == tp and small.layers == pp * vpp
    assert training.global_batch == dp * mb * min(8 * pp, 2 * pp)


def test_options_are_kept():
    """GPT-2's flags (learned positions, LayerNorm with bias, biases, GELU-tanh, tied head) survive."""
    small, _ = scale_down(GPT2, Plan(tp=2), TrainingSpec(global_batch=4, seq_len=1024))
    keep = ("position", "norm", "norm_bias", "qkv_bias", "attn_out_bias", "mlp_bias", "gated_mlp",
            "activation", "tied_embeddings")
    assert {k: getattr(small, k) for k in keep} == {k: getattr(GPT2, k) for k in keep}
    assert small.kv_heads == small.heads  # MHA stays MHA
    assert small.max_positions == 8


def test_moe_experts_divide_by_ep():
    """Mixtral with ep = 4: 8 experts (a multiple of 4), top-2 kept."""
    small, _ = scale_down(MIXTRAL, Plan(dp=4, ep=4), TrainingSpec(global_batch=4, seq_len=4096))
    assert small.moe.num_experts == 8 and small.moe.top_k == 2 and small.num_moe_layers >= 1


@pytest.mark.parametrize("spec,plan,training,message", [
    (LLAMA3_8B, Plan(tp=3), TrainingSpec(), r"tp \(3\) must divide heads \(32\)"),
    (LLAMA3_8B, Plan(pp=33), TrainingSpec(), r"pp \* vpp \(33 \* 1 = 33\) must not exceed layers \(32\)"),
    (LLAMA3_8B, Plan(dp=2, ep=2), TrainingSpec(global_batch=2), r"ep \(2\) > 1 needs an MoE model"),
    (LLAMA3_8B, Plan(cp=3), TrainingSpec(cp_comm_type="a2a"),
     r"cp_comm_type 'a2a' needs cp \(3\) to divide the heads \(32\) and kv heads \(8\)"),
    (LLAMA3_8B, Plan(dp=4), TrainingSpec(global_batch=6), r"global_batch \(6\) must be divisible"),
    (GPT2.model_copy(update={"position": "alibi"}), Plan(), TrainingSpec(), "alibi"),
])
def test_unexecutable_plans_name_the_numbers(spec, plan, training, message):
    """Each bad plan is a one-line SpecError with the numbers involved."""
    with pytest.raises(SpecError, match=message):
        scale_down(spec, plan, training)


def test_ulysses_scales_heads_over_tp_and_cp():
    """a2a splits heads over tp x cp: Llama-3-8B (GQA) on tp 2, cp 2 keeps 2 heads and 1 kv head
    per tp x cp rank (8 heads, 4 kv heads); p2p keeps the usual 2 tp heads, tp kv heads."""
    small, _ = scale_down(LLAMA3_8B, Plan(tp=2, cp=2), TrainingSpec(cp_comm_type="a2a"))
    assert (small.heads, small.num_kv_heads) == (8, 4)
    small, _ = scale_down(LLAMA3_8B, Plan(tp=2, cp=2), TrainingSpec(cp_comm_type="p2p"))
    assert (small.heads, small.num_kv_heads) == (4, 2)


def test_uneven_split_stays_uneven_when_scaled_down():
    """Llama-3-8B (32 layers) on pp 3 splits 10 + 11 + 11; the scaled copy keeps the remainder:
    3 + 2 = 5 layers, split 1 + 2 + 2 (same shape)."""
    from modelplan.plan.stages import split_layers

    small, _ = scale_down(LLAMA3_8B, Plan(pp=3), TrainingSpec(global_batch=8))
    assert split_layers(32, 3) == (10, 11, 11)
    assert small.layers == 5 and split_layers(small.layers, 3) == (1, 2, 2)
