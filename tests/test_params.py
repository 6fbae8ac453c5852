"""Exact parameter counts (modelplan.count.params) against published totals and hand-worked sums."""

from __future__ import annotations

import pytest

from modelplan.count.params import count_params
from modelplan.specs.load import load_model
from modelplan.specs.transformer import TransformerSpec

GPT2 = dict(
    layers=12, hidden=768, heads=12, ffn_hidden=3072, vocab=50257, max_positions=1024,
    position="learned", norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True,
    mlp_bias=True, gated_mlp=False, activation="gelu_tanh", tied_embeddings=True,
)


def tiny(**overrides) -> TransformerSpec:
    """A 2-layer model with round sizes so every expected count is easy to work by hand."""
    base = dict(layers=2, hidden=8, heads=2, ffn_hidden=16, vocab=10, position="rotary",
                norm="rmsnorm", gated_mlp=False, tied_embeddings=False)
    return TransformerSpec(**{**base, **overrides})


def test_gpt2_small_with_biases():
    """GPT-2 small is 124,439,808 parameters (HF safetensors metadata of openai-community/gpt2)."""
    assert count_params(TransformerSpec(**GPT2)).total == 124_439_808


def test_gpt2_small_without_biases():
    """Without any bias (linears and LayerNorms, nanoGPT bias=False) GPT-2 small is 124,337,664."""
    spec = TransformerSpec(**{**GPT2, "norm_bias": False, "qkv_bias": False,
                              "attn_out_bias": False, "mlp_bias": False})
    assert count_params(spec).total == 124_337_664


@pytest.mark.parametrize(
    ("preset", "total"),
    [
        ("llama-2-7b", 6_738_415_616),  # HF safetensors metadata, meta-llama/Llama-2-7b-hf
        ("llama-3-8b", 8_030_261_248),  # HF safetensors metadata, meta-llama/Meta-Llama-3-8B
        ("mistral-7b", 7_241_732_096),  # HF safetensors metadata, mistralai/Mistral-7B-v0.1
        ("bert-base", 109_482_240),  # HF BertModel (with pooler), google-bert/bert-base-uncased
    ],
)
def test_dense_presets_match_published_totals(preset, total):
    """Dense presets reproduce the totals published on their model cards."""
    assert count_params(load_model(preset)).total == total


def test_mixtral_total_and_active():
    """Mixtral-8x7B: 46,702,792,704 total, 12,879,925,248 active per token (HF model card)."""
    counts = count_params(load_model("mixtral-8x7b"))
    assert (counts.total, counts.active) == (46_702_792_704, 12_879_925_248)


def test_gpt2_component_breakdown_by_hand():
    """GPT-2 leaves: c_attn 12*(768*2304 + 2304), c_proj 12*(768*768 + 768), wte 50257*768."""
    b = count_params(TransformerSpec(**GPT2)).breakdown
    assert b["layers/attention/qkv"] == 12 * (768 * 2304 + 2304)
    assert b["layers/attention/out"] == 12 * (768 * 768 + 768)
    assert b["embedding/token"] == 50257 * 768
    assert b["embedding/position"] == 1024 * 768
    assert b["head"] == 0  # tied: the output head reuses wte


def test_parents_are_sums_of_children():
    """Every parent key equals the sum of its direct children (nanoGPT sizing convention)."""
    b = count_params(load_model("mixtral-8x7b")).breakdown
    for key, value in b.items():
        children = [v for k, v in b.items() if k.startswith(key + "/") and k.count("/") == key.count("/") + 1]
        if children:
            assert value == sum(children), key


def test_gqa_and_head_dim_override():
    """q: h x (a*d), k and v: h x (kv*d), o: (a*d) x h; here 8*(2*6) + 2*8*(1*6) + 12*8 = 288."""
    spec = tiny(heads=2, kv_heads=1, head_dim=6)
    assert count_params(spec).breakdown["layers/attention"] == 2 * (8 * 12 + 2 * 8 * 6 + 12 * 8)


def test_mqa_kv_heads_one():
    """MQA (kv_heads 1, head_dim 4): per layer q 8*8, k and v 8*4 each, o 8*8 = 192."""
    assert count_params(tiny(kv_heads=1)).per_layer[0] == 192 + (8 * 16 + 16 * 8) + 2 * 8


def test_rotary_alibi_none_add_no_parameters():
    """Only learned positions add a table (max_positions x h): 32 x 8 = 256."""
    counts = {p: count_params(tiny(position=p, max_positions=32)).total for p in ("rotary", "alibi", "none", "learned")}
    assert counts["rotary"] == counts["alibi"] == counts["none"] == counts["learned"] - 256


def test_norm_bias_doubles_norm_parameters():
    """LayerNorm with bias has 2h per norm, RMSNorm h: 2 layers x 2 norms + final = 5 norms."""
    rms = count_params(tiny(norm="rmsnorm")).breakdown
    ln = count_params(tiny(norm="layernorm", norm_bias=True)).breakdown
    assert (rms["layers/norm"] + rms["final_norm"], ln["layers/norm"] + ln["final_norm"]) == (5 * 8, 5 * 16)


def test_per_projection_biases():
    """qkv bias adds a*d + 2*kv*d = 24 per layer, out bias h = 8, plain-MLP biases f + h = 24."""
    base = count_params(tiny()).total
    assert count_params(tiny(qkv_bias=True)).total - base == 2 * 24
    assert count_params(tiny(attn_out_bias=True)).total - base == 2 * 8
    assert count_params(tiny(mlp_bias=True)).total - base == 2 * (16 + 8)


def test_gated_mlp_has_two_input_projections():
    """SwiGLU: gate and up (h x f each) and down (f x h): 3*8*16 = 384 per layer vs 256 plain."""
    assert count_params(tiny(gated_mlp=True)).breakdown["layers/mlp"] == 2 * 384


def test_tied_and_untied_head():
    """An untied head adds vocab x h = 80; tied adds nothing; lm_head_bias adds vocab = 10."""
    untied = count_params(tiny()).breakdown
    tied = count_params(tiny(tied_embeddings=True)).breakdown
    biased = count_params(tiny(lm_head_bias=True)).breakdown
    assert (untied["head"], tied["head"], biased["head"]) == (80, 0, 90)


def test_parallel_block_norm_count():
    """Parallel blocks default to 1 norm (GPT-J/Phi); Falcon-40B/NeoX style states 2."""
    assert count_params(tiny(parallel_block=True)).breakdown["layers/norm"] == 2 * 8
    assert count_params(tiny(parallel_block=True, norms_per_layer=2)).breakdown["layers/norm"] == 2 * 16


def test_embedding_norm_and_no_final_norm():
    """BLOOM's embedding LayerNorm adds 2h = 16; final_norm False removes h = 8 (RMSNorm)."""
    assert count_params(tiny(norm="layernorm", norm_bias=True, embedding_norm=True)).breakdown["embedding/norm"] == 16
    assert count_params(tiny(final_norm=False)).breakdown["final_norm"] == 0


def test_bert_token_types_pooler_and_mlm_transform():
    """type_vocab 2 x h = 16; pooler h*h + h = 72; MLM transform h*h + h + LN 2h = 88."""
    spec = tiny(arch="encoder", norm="layernorm", norm_bias=True, type_vocab=2, pooler=True,
                mlm_transform=True, tied_embeddings=True)
    b = count_params(spec).breakdown
    assert (b["embedding/token_type"], b["head/pooler"], b["head/transform"]) == (16, 72, 88)


def test_qk_norm_adds_two_head_dim_norms():
    """qk_norm: RMSNorm(head_dim) on q and on k: 2 * 4 = 8 per layer."""
    assert count_params(tiny(qk_norm=True)).breakdown["layers/attention/qk_norm"] == 2 * 8


def test_embedding_projection_opt_style():
    """embedding_dim 4 != h 8: token table 10*4, project_in 4*8 and project_out 8*4, head 10*4."""
    b = count_params(tiny(embedding_dim=4)).breakdown
    assert (b["embedding/token"], b["embedding/proj"], b["head/proj"], b["head/output"]) == (40, 32, 32, 40)


def test_moe_router_experts_shared_and_active():
    """4 experts (plain MLP 2*8*16 = 256 each), top-1, router 8*4 + 4 bias, 1 shared expert of
    f=8 (128) with a gate (8): active drops the 3 unused routed experts per MoE layer."""
    moe = dict(num_experts=4, top_k=1, expert_ffn_hidden=16, router_bias=True, shared_experts=1,
               shared_expert_ffn_hidden=8, shared_expert_gate=True)
    counts = count_params(tiny(moe=moe))
    b = counts.breakdown
    assert (b["layers/mlp/router"], b["layers/mlp/experts"]) == (2 * 36, 2 * 4 * 256)
    assert (b["layers/mlp/shared_experts"], b["layers/mlp/shared_gate"]) == (2 * 128, 2 * 8)
    assert counts.total - counts.active == 2 * 3 * 256


def test_moe_interleave_with_dense_prefix():
    """first_dense_layers 1, layer_freq 2 over 5 layers: MoE at blocks 2 and 4 (0-based)."""
    spec = tiny(layers=5, moe=dict(num_experts=2, top_k=1, expert_ffn_hidden=16, first_dense_layers=1, layer_freq=2))
    moe_blocks = [i for i in range(5) if spec.is_moe_layer(i)]
    per_layer = count_params(spec).per_layer
    dense, moe = per_layer[0], per_layer[2]
    assert moe_blocks == [2, 4]
    assert moe - dense == 8 * 2 + 256  # router 8x2 plus one more 256-parameter MLP
    assert per_layer == [dense, dense, moe, dense, moe]


def test_per_layer_sums_to_layers_group():
    """The per-layer list adds up to the `layers` group."""
    counts = count_params(load_model("llama-3-8b"))
    assert sum(counts.per_layer) == counts.breakdown["layers"]
