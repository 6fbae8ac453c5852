"""Per-rank element counts against published parameter counts and the ZeRO / Megatron formulas.

Sources: HuggingFace safetensors metadata for GPT-2 small (124,439,808), Llama-2-7B
(6,738,415,616) and Mixtral-8x7B (46,702,792,704); Rajbhandari et al. SC'20, sec. 5 (ZeRO
stage k shards optimizer state, then gradients, then weights over d ranks); Megatron-LM's split
(Shoeybi et al. 2019): matrices and vocabulary rows divided by t, norms and row-parallel biases
replicated.
"""

from __future__ import annotations

import pytest

from modelplan.plan.shard import rank_elements, regrouped, unit_groups, unit_shards
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import MoESpec, TransformerSpec

GPT2_SMALL = TransformerSpec(
    layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50257, max_positions=1024, position="learned",
    norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
    activation="gelu_tanh", tied_embeddings=True,
)
LLAMA2_7B = TransformerSpec(layers=32, hidden=4096, heads=32, ffn_hidden=11008, vocab=32000)
MIXTRAL = TransformerSpec(layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, vocab=32000,
                          moe=MoESpec(num_experts=8, top_k=2, expert_ffn_hidden=14336))
ADAM = TrainingSpec(optimizer="adamw")


@pytest.mark.parametrize("spec,total", [(GPT2_SMALL, 124_439_808), (LLAMA2_7B, 6_738_415_616),
                                        (MIXTRAL, 46_702_792_704)], ids=["gpt2-small", "llama-2-7b", "mixtral-8x7b"])
def test_single_rank_holds_the_published_parameter_count(spec, total):
    """One rank, no sharding: the units add up to the model's published size."""
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == total
    assert rank_elements(spec, Plan(), ADAM)[0].weights == total


@pytest.mark.parametrize("zero,weights,grads,optim", [
    (0, 1, 1, 2), (1, 1, 1, 2 / 4), (2, 1, 1 / 4, 2 / 4), (3, 1 / 4, 1 / 4, 2 / 4),
])
def test_zero_stages_shard_state_over_dp(zero, weights, grads, optim):
    """d = 4, Adam (2 states): stage 1 shards optimizer state, 2 also gradients, 3 also weights.

    GPT-2 small's units all divide by 4, so there is no padding: fractions of Psi = 124,439,808."""
    psi = 124_439_808
    r = rank_elements(GPT2_SMALL, Plan(dp=4, zero=zero), ADAM)[0]
    assert (r.weights, r.gradients, r.optimizer) == (weights * psi, grads * psi, optim * psi)


def test_tensor_parallel_replicates_norms_and_row_biases():
    """t = 2 on GPT-2 small with a 50,304-row vocabulary (nanoGPT's padding, even): matrices,
    column biases and embedding rows halve; per layer 2 LayerNorms (4h) and 2 row-parallel biases
    (2h), the position table (1024h) and the final norm (2h) stay whole.
    Psi = 124,439,808 + 47*768 = 124,475,904; replicated R = 12*6*768 + 1024*768 + 2*768."""
    spec = GPT2_SMALL.model_copy(update={"vocab": 50304})
    psi = 124_475_904
    replicated = 12 * 6 * 768 + 1024 * 768 + 2 * 768
    assert rank_elements(spec, Plan(tp=2), ADAM)[0].weights == (psi - replicated) // 2 + replicated


def test_pipeline_stages_and_the_tied_copy():
    """pp = 2 on GPT-2 small: stage 0 has the embeddings and 6 blocks; stage 1 has 6 blocks, the
    final norm and its own copy of the tied word embedding (Megatron keeps both)."""
    block = 7_087_872  # 12 * block = 124,439,808 - 50257*768 - 1024*768 - 2*768
    word, pos, final = 50257 * 768, 1024 * 768, 2 * 768
    first, last = rank_elements(GPT2_SMALL, Plan(pp=2), ADAM)
    assert first.weights == word + pos + 6 * block
    assert last.weights == 6 * block + final + word


def test_experts_split_over_ep_and_padding_over_expert_dp():
    """Mixtral, dp = 4, ep = 2: each rank holds 4 of 8 experts per layer; expert state is sharded
    over the dp/ep = 2 ranks with the same experts under ZeRO-1.
    One expert: 3 * 4096 * 14336 = 176,160,768 elements."""
    units = unit_shards(MIXTRAL, Plan(dp=4, ep=2))
    assert units["layers/0/experts"].numel == 4 * 176_160_768
    assert units["layers/0/experts"].group_size == 2
    full = rank_elements(MIXTRAL, Plan(dp=4, ep=2), ADAM)[0]
    staged = rank_elements(MIXTRAL, Plan(dp=4, ep=2, zero=1), ADAM)[0]
    dense = full.weights - 32 * 4 * 176_160_768
    assert staged.optimizer == 2 * (dense // 4 + 32 * 4 * 176_160_768 // 2)


def test_padding_rounds_up_to_the_group():
    """A unit of 5 elements over 2 ranks pads to 6; each rank owns 3."""
    spec = TransformerSpec(layers=1, hidden=5, heads=1, ffn_hidden=1, vocab=1, final_norm=False, gated_mlp=False)
    head_free = unit_shards(spec, Plan(dp=2))
    assert head_free["embedding/word"].numel == 5 and head_free["embedding/word"].padded == 6
    r = rank_elements(spec, Plan(dp=2, zero=3), TrainingSpec(optimizer="sgd"))[0]
    assert r.weights == sum(u.padded // 2 for u in head_free.values())


@pytest.mark.parametrize("base,other", [
    (Plan(tp=2, dp=2, ep=2), Plan(tp=2, dp=8, cp=2, ep=2)),
    (Plan(tp=2, dp=4, ep=4, etp=1, sequence_parallel=True), Plan(tp=2, dp=8, cp=1, ep=4, etp=1, sequence_parallel=True)),
    (Plan(tp=4, dp=1), Plan(tp=4, dp=6, cp=4)),
])
def test_regrouped_shards_equal_the_other_plans_own(base, other):
    """The planner sizes units once per (tp, sp, ep, etp) and regroups them for each dp x cp
    (`unit_groups`): every unit equals `unit_shards` of that plan computed from scratch."""
    spec = MIXTRAL if base.ep > 1 else LLAMA2_7B
    sized, own = unit_shards(spec, base), unit_shards(spec, other)
    groups = unit_groups(other.tp, other.dp, other.cp, other.ep, other.etp)
    assert {u: regrouped(s, groups) for u, s in sized.items()} == own
    assert any(s.group_size != own[u].group_size for u, s in sized.items())  # the regrouping is exercised
