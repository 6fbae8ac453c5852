"""The model_types of modelplan/specs/hf_hyperconn.py: hy_v4 (MLA with a per-channel gate, sinks and
an indexer on some blocks only, independent hyper-connections) and deepseek_v4 (DeepSeek-V4's
compressed attention, manifold-constrained hyper-connections). Expected totals are sum(p.numel())
of transformers 5.24's own model on the meta device, for small configs and the config classes'
defaults; the new mechanisms' parameters, FLOPs, kept bytes and cache against hand-worked formulas
from the modeling files' shapes; `count` / `plan --gpus 8` run and `verify` refuses them by name."""

from __future__ import annotations

import json

import pytest

from _hf_n17_checks import (assert_count_plan_verify, assert_dense_blocks_shard, assert_kernels_match_counted_gemms,
                            assert_one_line_error, class_defaults)
from _hf_reference import hf_numel
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of, block_params
from modelplan.count.memory import activation_bytes_per_layer, kv_cache_bytes
from modelplan.count.params import count_params
from modelplan.plan.shard import unit_shards
from modelplan.specs.hf import UNMODELLED, from_hf_config
from modelplan.specs.plan import Plan

_HY = {"model_type": "hy_v4", "num_hidden_layers": 6, "hidden_size": 128, "intermediate_size": 256,
       "moe_intermediate_size": 32, "num_attention_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32,
       "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 24, "n_routed_experts": 8,
       "num_experts_per_tok": 2, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 32, "vocab_size": 1000,
       "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
_V4 = {"model_type": "deepseek_v4", "num_hidden_layers": 5, "hidden_size": 128, "moe_intermediate_size": 32,
       "num_attention_heads": 4, "head_dim": 64, "q_lora_rank": 48, "n_routed_experts": 8, "num_experts_per_tok": 2,
       "index_n_heads": 2, "index_head_dim": 16, "vocab_size": 1000, "o_groups": 2, "o_lora_rank": 40,
       "hc_mult": 3, "index_topk": 4}

CASES = {
    # default indexer_types at 6 blocks: full, full, shared, shared, shared, full; block 0 dense
    "hy_v4": _HY,
    # every block 'full', 3 streams, two dense blocks
    "hy_v4-full": {**_HY, "indexer_types": ["full"] * 6, "hc_mult": 3, "mlp_layer_types": ["dense"] * 2 + ["sparse"] * 4},
    # default layer_types at 5 blocks: hca, hca, hca, csa, hca; 3 hash_moe blocks
    "deepseek_v4": _V4,
    # a sliding block, legacy compress_ratios / compress_rate_csa, 2 streams, sigmoid router
    "deepseek_v4-legacy": {**_V4, "compress_ratios": [0, 4, 128, 4, 0], "compress_rate_csa": 8, "hc_mult": 2,
                           "scoring_func": "sigmoid", "num_hash_layers": 1},
}


@pytest.mark.torch
@pytest.mark.parametrize("name", [*CASES, "hy_v4-defaults", "deepseek_v4-defaults"])
def test_total_equals_transformers(name):
    """Total (and trainable: no frozen parameter) = transformers' sum(p.numel()) on the meta device,
    for the small configs and each config class's defaults (Hy4-preview, DeepSeek-V4-Flash-Base)."""
    data = class_defaults(name.removesuffix("-defaults")) if name.endswith("-defaults") else CASES[name]
    counted = count_params(from_hf_config(data))
    assert counted.total == counted.trainable == hf_numel(data)


def test_independent_hyper_connections_by_hand():
    """hy_v4, h 128, n 4, no mix: each of attn_hc / ffn_hc fn (2 n, n h) = 8 x 512, base 8, scale 2;
    the head hc_fn (n, n h) = 4 x 512, hc_base 4, hc_scale 1 (HYV4HyperConnection, HYV4HyperHead)."""
    spec = from_hf_config(CASES["hy_v4"])
    assert block_params(spec, block_of(spec, 0))["hyper_connections"] == 2 * (8 * 512 + 8 + 2)
    assert count_params(spec).breakdown["head/hyper_connections"] == 4 * 512 + 4 + 1


def test_manifold_hyper_connections_by_hand():
    """deepseek_v4, h 128, n 3: fn ((2 + n) n, n h) = 15 x 384, base 15, scale 3, twice a block
    (DeepseekV4HyperConnection); forward FLOPs over t tokens: the fn GEMMs 2 x 2 t 384 15 and the
    stream mixes comb^T @ x, 2 x 2 t n^2 h (DeepseekV4DecoderLayer.forward's torch.matmul)."""
    spec, t = from_hf_config(CASES["deepseek_v4"]), 64
    assert block_params(spec, block_of(spec, 0))["hyper_connections"] == 2 * (15 * 384 + 15 + 3)
    flops = block_forward_flops(spec, block_of(spec, 0), t, t)
    assert flops["hyper_connections/proj"] == 2 * 2 * t * 384 * 15
    assert flops["hyper_connections/mix"] == 2 * 2 * t * 3 * 3 * 128


@pytest.mark.torch
def test_hyper_connection_flops_equal_flop_counter():
    """One DeepseekV4HyperConnection's forward matmuls as FlopCounterMode counts them (its fn linear)
    = count's hyper_connections/proj for one module."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode
    from transformers.models.deepseek_v4.modeling_deepseek_v4 import DeepseekV4HyperConnection

    from _hf_reference import hf_config

    data, t = CASES["deepseek_v4"], 16
    module = DeepseekV4HyperConnection(hf_config(data))
    torch.nn.init.normal_(module.fn)
    with FlopCounterMode(display=False) as counter:
        module(torch.randn(1, t, data["hc_mult"], data["hidden_size"]))
    spec = from_hf_config(data)
    assert counter.get_total_flops() == block_forward_flops(spec, block_of(spec, 0), t, t)["hyper_connections/proj"] // 2


def test_streams_in_kept_bytes_and_recompute():
    """The two modules keep n h streams (2 bytes) and two fp32 copies (mHC) a token: 2 (2 n h + 8 n h)
    bytes more than the same blocks without hyper-connections; a fully recomputed block keeps its
    n h input (DeepseekV4DecoderLayer reads [B, S, n, h])."""
    spec = from_hf_config(CASES["deepseek_v4"])
    plain = spec.model_copy(update={"hyper_connections": None})
    s, nh = 32, 3 * 128
    extra = activation_bytes_per_layer(spec, 1, s, 2, layer_index=0) - activation_bytes_per_layer(plain, 1, s, 2, layer_index=0)
    assert extra == s * 2 * (2 * nh + 2 * 4 * nh)
    assert activation_bytes_per_layer(spec, 1, s, 2, recompute="full", layer_index=0) == s * 2 * nh


def test_compressed_attention_blocks_by_hand():
    """deepseek_v4, h 128, 4 heads of d 64, r 48, 2 groups of d_g 40: q_a 128 x 48, q_a_norm 48, q_b
    48 x 256, kv_proj 128 x 64, kv_norm 64, o_a (80, 128), o_b 80 x 128, sinks 4 (DeepseekV4Attention);
    hca compressor kv / gate 128 x 64 each, position_bias 128 x 64, kv_norm 64; csa compressor
    kv / gate 128 x 128 each, position_bias 4 x 128, kv_norm 64, indexer kv / gate 128 x 32 each,
    position_bias 4 x 32, kv_norm 16, q_b 48 x 32, weights_proj 128 x 2 (DeepseekV4CSACompressor,
    DeepseekV4Indexer)."""
    spec = from_hf_config(CASES["deepseek_v4"])
    hca, csa = block_params(spec, block_of(spec, 0)), block_params(spec, block_of(spec, 3))
    base = 128 * 48 + 48 + 48 * 256 + 128 * 64 + 64 + 80 * 128 + 80 * 128 + 4
    assert sum(v for k, v in hca.items() if k.startswith("attention/")) == base + 2 * 128 * 64 + 128 * 64 + 64
    assert csa["attention/compressor"] == 2 * 128 * 128 + 4 * 128 + 64
    assert csa["attention/indexer"] == 2 * 128 * 32 + 4 * 32 + 16 + 48 * 32 + 128 * 2


def test_compressed_attention_flops_by_hand():
    """s = t = 256, window 128: an hca block's queries read 128 window keys + 256 / 128 = 2 pooled
    ones, a csa block's 128 + min(top-k 4, 256 / 4); QK^T and PV of the one K = V head: 2 t keys
    heads 2 d; the grouped output 2 t (heads d) d_g; the csa compressor's kv / gate 2 t h 4 d and
    its indexer's scores over all 64 pooled keys 2 t 64 H^I (d^I + 1)."""
    spec, t = from_hf_config(CASES["deepseek_v4"]), 256
    hca, csa = (block_forward_flops(spec, block_of(spec, i), t, t) for i in (0, 3))
    assert hca["attention/score"] == 2 * t * (128 + 2) * 4 * 2 * 64
    assert csa["attention/score"] == 2 * t * (128 + 4) * 4 * 2 * 64
    assert hca["attention/out/groups"] == 2 * t * 256 * 40
    assert csa["attention/compressor"] == 2 * t * 128 * 4 * 64
    assert csa["attention/indexer/score"] == 2 * t * 64 * 2 * (16 + 1)
    assert csa["attention/indexer/proj"] == 2 * t * (2 * 128 * 32 + 48 * 32 + 128 * 2)


def test_compressed_attention_cache_by_hand():
    """One sequence of 1024 at 2 bytes: each block's window (128 tokens x d 64, K = V) plus its pooled
    keys, 1024 / 128 x 64 (hca) or 1024 / 4 x (64 + 16 indexer) (csa) (DeepseekV4HCACache /
    DeepseekV4CSACache); blocks hca, hca, hca, csa, hca."""
    spec = from_hf_config(CASES["deepseek_v4"])
    hca, csa = 128 * 64 + 8 * 64, 128 * 64 + 256 * (64 + 16)
    assert kv_cache_bytes(spec, 1, 1024, 2) == 2 * (4 * hca + csa)


def test_shared_indexer_blocks_hold_and_run_none():
    """hy_v4's 'shared' blocks (2, 3, 4) hold no indexer and run none, yet read only index_topk
    keys; gate_proj Linear(128, 4 x 24) and sinks (4,) in every block (HYV4Attention)."""
    spec, t = from_hf_config(CASES["hy_v4"]), 128
    own, shared = block_params(spec, block_of(spec, 1)), block_params(spec, block_of(spec, 2))
    assert own["attention/indexer"] == 64 * 32 + 128 * 16 + 2 * 16 + 128 * 2 and "attention/indexer" not in shared
    assert (shared["attention/head_gate"], shared["attention/sinks"]) == (128 * 96, 4)
    flops = block_forward_flops(spec, block_of(spec, 2), t, t)
    assert not any(k.startswith("attention/indexer") for k in flops)
    assert flops["attention/score"] == 2 * t * 32 * 4 * (24 + 24)  # top-k 32 keys, qk 16 + 8 and v 24 dims


@pytest.mark.parametrize("name", list(CASES))
def test_kernels_match_counted_gemms(name):
    """plan/kernels.py's weight GEMMs of each block (tp 1) add up to count's forward FLOPs but the
    attention scores / context and, in MoE blocks, the MLP (priced at dispatched shapes)."""
    assert_kernels_match_counted_gemms(from_hf_config(CASES[name]), 128)


@pytest.mark.parametrize("name", list(CASES))
def test_one_rank_holds_the_counted_model(name):
    """Plan() (one rank): plan/shard.py's units sum to count's total."""
    spec = from_hf_config(CASES[name])
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


def test_dense_block_shards():
    """hy_v4's dense block: at tp 1 count's block_params, at tp 2 (SP) twice the rank's share less the
    replicated part (latents, norms, indexer, hyper-connections)."""
    assert_dense_blocks_shard(from_hf_config(CASES["hy_v4"]))


@pytest.mark.parametrize(("name", "features"), [
    ("hy_v4", ("hyper_connections", "head_gate")), ("deepseek_v4", ("hyper_connections", "compressed_attention")),
])
def test_cli_count_plan_and_verify_refusal(name, features, tmp_path):
    """count and plan --gpus 8 run; verify refuses the new features by name in one line."""
    assert_count_plan_verify(tmp_path, CASES[name], *features)


@pytest.mark.parametrize(("data", "field"), [
    ({**_HY, "indexer_types": ["shared"] + ["full"] * 5}, "indexer_types"),
    ({**_HY, "indexer_types": ["full", "partial"] * 3}, "indexer_types"),
    ({**_HY, "layer_types": ["full_attention"] * 6}, "layer_types"),
    ({**_HY, "hc_mult": 1}, "hc_mult"),
    ({**_V4, "layer_types": ["full_attention"] * 5}, "layer_types"),
    ({**_V4, "compress_ratios": [0, 16, 0, 0, 0]}, "compress_ratios"),
    ({**_V4, "scoring_func": "softmax"}, "scoring_func"),
    ({**_V4, "o_groups": 3}, "o_groups"),
    ({**_V4, "mlp_layer_types": ["moe", "dense", "moe", "moe", "moe"]}, "mlp_layer_types"),
])
def test_bad_options_refused_in_one_line(data, field):
    """An option the spec cannot state (or a malformed one): one line naming the field."""
    assert_one_line_error(data, field)


def test_registered_not_refused():
    """hy_v4, deepseek_v4 and glm5_next are counted, no longer listed as unmodelled."""
    assert not {"hy_v4", "deepseek_v4", "glm5_next", "glm5_next_text"} & set(UNMODELLED)


def _hy_v4_vl_text_reference(data: dict) -> int:
    """transformers has no hy_v4_vl_text causal-LM class: HYV4VLTextModel's sum(p.numel()) plus the
    untied lm_head Linear(h, vocab, bias=False) HYV4VLForConditionalGeneration puts on it."""
    import torch
    from transformers.models.hy_v4_vl.modeling_hy_v4_vl import HYV4VLTextModel

    from _hf_reference import hf_config

    cfg = hf_config(data)
    with torch.device("meta"):
        model = HYV4VLTextModel(cfg)
    return sum(p.numel() for p in model.parameters()) + cfg.vocab_size * cfg.hidden_size


@pytest.mark.torch
@pytest.mark.parametrize("data", [{**_HY, "model_type": "hy_v4_vl_text", "rope_parameters": {  # sections sum to rope 8 / 2
    "rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}}, None], ids=["small", "class-defaults"])
def test_hy_v4_vl_text_equals_transformers(data):
    """HY-V4-VL's language model = transformers' own (HYV4VLTextConfig defaults: h 6144, 78 blocks)."""
    data = class_defaults("hy_v4_vl_text") if data is None else data
    assert count_params(from_hf_config(data)).total == _hy_v4_vl_text_reference(data)


_GLM5 = {"model_type": "glm5_next_text", "num_hidden_layers": 8, "hidden_size": 128, "intermediate_size": 256,
         "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4, "q_lora_rank": 64,
         "kv_lora_rank": 32, "qk_nope_head_dim": 16, "v_head_dim": 24, "n_routed_experts": 8, "num_experts_per_tok": 2,
         "index_n_heads": 2, "index_head_dim": 16, "index_topk": 32, "vocab_size": 1000, "pad_token_id": 0,
         "linear_head_dim": 16, "linear_num_heads": 4, "hc_mult": 3}
GLM5 = {
    # default layer_types at 8 blocks: KDA x 3, indexed MLA, KDA x 3, indexed MLA; dense blocks 0-2
    "glm5_next_text": _GLM5,
    # the second indexed block reuses the first's top-k (index_topk_pattern), the legacy linear_attn_config
    "glm5_next_text-shared": {**_GLM5, "index_topk_pattern": "FFFFFFFS", "index_kpool": 8,
                              "linear_attn_config": {"num_heads": 2, "head_dim": 32, "short_conv_kernel_size": 3}},
}


def _glm5_reference(data: dict) -> int:
    """transformers has no glm5_next_text causal-LM class: Glm5NextTextModel's sum(p.numel()) plus the
    untied lm_head Linear(h, vocab, bias=False) Glm5NextForConditionalGeneration puts on it."""
    import torch
    from transformers.models.glm5_next.modeling_glm5_next import Glm5NextTextModel

    from _hf_reference import hf_config

    cfg = hf_config(data)
    with torch.device("meta"):
        model = Glm5NextTextModel(cfg)
    return sum(p.numel() for p in model.parameters()) + cfg.vocab_size * cfg.hidden_size


@pytest.mark.torch
@pytest.mark.parametrize("name", [*GLM5, "class-defaults"])
def test_glm5_next_text_equals_transformers(name):
    """GLM-5-Next's language model = transformers' own (the class defaults: GLM-5.3-Flash)."""
    data = class_defaults("glm5_next_text") if name == "class-defaults" else GLM5[name]
    assert count_params(from_hf_config(data)).total == _glm5_reference(data)


def test_pooled_indexer_by_hand():
    """glm5_next_text, h 128, H^I 2 x d^I 16, kpool 16: the indexer holds wq_b 64 x 32, wk 128 x 16,
    k_norm 2 x 16, weights_proj 128 x 2 and the pool's ape 16 x 16 and gate 16 x 128
    (Glm5NextTextIndexer); over s = t = 256 it scores 256 / 16 pools, 2 t 16 H^I (d^I + 1), its
    gate GEMM 2 t h d^I joins the projections, and the attention reads top-k 32 + 15 tail keys of
    qk 16 and v 24 dims; the mean head holds nothing."""
    spec, t = from_hf_config(GLM5["glm5_next_text"]), 256
    b = block_params(spec, block_of(spec, 3))
    assert b["attention/indexer"] == 64 * 32 + 128 * 16 + 2 * 16 + 128 * 2 + 16 * 16 + 16 * 128
    flops = block_forward_flops(spec, block_of(spec, 3), t, t)
    assert flops["attention/indexer/score"] == 2 * t * 16 * 2 * 17
    assert flops["attention/indexer/proj"] == 2 * t * (64 * 32 + 128 * 16 + 128 * 2 + 128 * 16)
    assert flops["attention/score"] == 2 * t * (32 + 15) * 4 * (16 + 24)
    assert "head/hyper_connections" not in count_params(spec).breakdown


@pytest.mark.parametrize("name", list(GLM5))
def test_glm5_kernels_and_shards(name):
    """Weight GEMMs of each MLA block (tp 1) = count's forward FLOPs but scores and MoE MLPs (the KDA
    blocks: tests/test_hf_hybrid.py's Kimi Linear checks); one rank holds the counted model."""
    spec = from_hf_config(GLM5[name])
    assert_kernels_match_counted_gemms(spec, 128, only=lambda block: block.mixer == "full_attention")
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


_GLM5_COMPOSITE = {"model_type": "glm5_next", "architectures": ["Glm5NextForConditionalGeneration"],
                   "text_config": {k: v for k, v in _GLM5.items() if k != "model_type"},
                   "vision_config": {"depth": 2, "hidden_size": 64, "num_heads": 4, "intermediate_size": 128,
                                     "out_hidden_size": 96, "projection_intermediate_size": 160}}


@pytest.mark.torch
@pytest.mark.parametrize("data", [_GLM5_COMPOSITE, None], ids=["small", "class-defaults"])
def test_glm5_next_composite_equals_transformers(data):
    """Glm5NextForConditionalGeneration = transformers' own: the text model and GLM-OCR's tower with a
    projection_intermediate_size-wide merger SwiGLU (the class defaults: GLM-5.3-Flash)."""
    data = data or {**class_defaults("glm5_next"), "architectures": ["Glm5NextForConditionalGeneration"]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_glm5_cli(tmp_path):
    """count and plan --gpus 8 run, verify refuses; bad index schedules are refused in one line."""
    assert_count_plan_verify(tmp_path, GLM5["glm5_next_text"], "hyper_connections", "mla.indexer")
    assert_one_line_error({**_GLM5, "index_topk": 30}, "index_topk")
    assert_one_line_error({**_GLM5, "index_topk_pattern": "FFFSFFFF"}, "indexer_types")


_QSA = {"indexer_n_heads": 2, "indexer_kv_heads": 1, "indexer_head_dim": 32, "indexer_budget": 32,
        "indexer_compress_ratio": 4}
_QWEN4 = {"model_type": "qwen4_exp_text", "num_hidden_layers": 4, "hidden_size": 128, "moe_intermediate_size": 32,
          "shared_expert_intermediate_size": 48, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
          "num_experts": 8, "num_experts_per_tok": 2, "vocab_size": 1000, "linear_num_key_heads": 2,
          "linear_num_value_heads": 4, "linear_key_head_dim": 16, "linear_value_head_dim": 16, "hc_count": 3,
          "hc_lowrank": 24, "pad_token_id": 0, **_QSA}
_QSA_DEFAULTS = {"indexer_n_heads": 16, "indexer_kv_heads": 1, "indexer_head_dim": 256, "indexer_budget": 2048,
                 "indexer_compress_ratio": 16}
"""Qwen4ExpTextConfig leaves the QSA sizes unset, and transformers cannot build its full-attention
blocks without them: the class-defaults checks add these (index head 256 = the rotary dims)."""


@pytest.mark.torch
@pytest.mark.parametrize("name", ["small", "class-defaults", "composite"])
def test_qwen4_exp_equals_transformers(name):
    """Qwen4ExpForCausalLM (small; class defaults + QSA sizes) and Qwen4ExpForConditionalGeneration
    (class defaults + QSA sizes) = transformers' own."""
    if name == "small":
        data = _QWEN4
    elif name == "class-defaults":
        data = {**class_defaults("qwen4_exp_text"), **_QSA_DEFAULTS}
    else:
        from _hf_reference import transformers_module

        cfg = transformers_module().AutoConfig.for_model("qwen4_exp", text_config=_QSA_DEFAULTS)
        data = {**json.loads(cfg.to_json_string(use_diff=False)), "architectures": ["Qwen4ExpForConditionalGeneration"]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_gated_residual_and_qsa_by_hand():
    """h 128, n 3 (n h 384), r 24: each of a block's two gated residuals hc_norm 384, down 384 x 24,
    up 24 x 384, inject 384 x 3, and no block norm (Qwen4ExpTextGatedResidual, Qwen4ExpTextDecoderLayer);
    the head 384 + 2 x 384 x 24; the full-attention block's QSA index_qk_proj 128 x 3 x 32 and two norms
    of 32 (Qwen4ExpTextQSAIndexer); over s = t = 256 the indexer scores 256 / 4 pooled keys, 2 t 64 x 2 x 32,
    and the attention reads 32 + 3 keys."""
    spec, t = from_hf_config(_QWEN4), 256
    b = block_params(spec, block_of(spec, 3))
    assert b["hyper_connections"] == 2 * (384 + 2 * 384 * 24 + 384 * 3) and "norm" not in {k for k, v in b.items() if v}
    assert b["attention/indexer"] == 128 * 3 * 32 + 2 * 32
    assert count_params(spec).breakdown["head/hyper_connections"] == 384 + 2 * 384 * 24
    flops = block_forward_flops(spec, block_of(spec, 3), t, t)
    assert flops["attention/indexer/score"] == 2 * t * 64 * 2 * 32
    assert flops["attention/score"] == 2 * t * 35 * (4 * 32 + 4 * 32)
    assert flops["hyper_connections/proj"] == 2 * 2 * t * 384 * (2 * 24 + 3)


def test_qwen4_exp_cli_and_refusals(tmp_path):
    """count and plan --gpus 8 run, verify refuses; PLE and a missing QSA size are refused in one line."""
    assert_count_plan_verify(tmp_path, _QWEN4, "hyper_connections", "token_indexer")
    assert_one_line_error({**_QWEN4, "ple_layer_ids": [1]}, "ple_layer_ids")
    assert_one_line_error({k: v for k, v in _QWEN4.items() if k != "indexer_budget"}, "indexer_budget")
    spec = from_hf_config(_QWEN4)
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total
