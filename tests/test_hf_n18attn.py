"""The model_types of modelplan/specs/hf_n18attn.py: lfm3, laguna (a g_proj gate on each head's
attention output), diffllama (differential attention), mimo_v2_flash (value heads narrower than
q/k heads, sliding blocks with their own kv heads and sinks), jetmoe (mixture of attention
experts), doge (dynamic mask attention, residual weights), gemma4_text / gemma4_unified_text. Expected totals are sum(p.numel())
of transformers 5.24's own model built from each small config on CPU (by component on the meta
device) and from each config class's defaults; FLOPs of the new mechanisms against hand-worked
formulas; `count` / `plan --gpus 8` run and `verify` refuses the new features by name."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_count_plan_verify, assert_dense_blocks_shard, assert_one_line_error,
                            assert_total_on_cpu, class_defaults, ours)
from _hf_n18_cases import SMALL, CASES
from _hf_reference import COMPONENTS, hf_model
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.flops import layer_forward_flops
from modelplan.count.blocks import block_of, block_params
from modelplan.count.memory import kv_cache_bytes
from modelplan.count.params import count_params
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.shard import unit_shards
from modelplan.specs.plan import Plan
from modelplan.specs.attention_shape import for_mixer
from modelplan.specs.hf import UNMODELLED, from_hf_config

_PER_LAYER = ("model.embed_tokens_per_layer.", "model.per_layer_model_projection.", "model.per_layer_projection_norm.")
"""Gemma 4's per-layer-input tables and projection (Gemma4TextModel), modelplan's `embedding/per_layer`."""


def hf_components(data: dict) -> dict[str, int]:
    """transformers' sum(p.numel()) by embedding / layers / final_norm / head (parameter names, as
    _hf_reference.hf_components, with Gemma 4's per-layer-input tables under embedding)."""
    out = {"embedding": 0, "layers": 0, "final_norm": 0, "head": 0}
    for name, p in hf_model(data).named_parameters():
        part = "embedding" if name.startswith(_PER_LAYER) else next(
            (key for key, prefixes in COMPONENTS.items()
             if any(name.startswith(x) or f".{x}" in f".{name}" for x in prefixes)), "layers")
        out[part] += p.numel()
    return out


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_total_equals_transformers_on_cpu(name):
    """modelplan's total = sum(p.numel()) of the transformers 5.24 model built on CPU (tied
    tensors yielded once)."""
    assert_total_on_cpu(CASES[name])


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_components_equal_transformers(name):
    """embedding / layers / final_norm / head equal transformers' parameters by name."""
    assert ours(CASES[name]) == hf_components(CASES[name])


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["lfm3", "laguna", "diffllama", "mimo_v2_flash", "jetmoe", "doge", "gemma4_text",
                                        "gemma4_unified_text"])
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults alone give transformers' own count (meta device)."""
    data = class_defaults(model_type)
    assert ours(data) == hf_components(data)


def test_gate_and_lambda_parameters_by_hand():
    """g_proj: Linear(128, 4) per head, Linear(128, 4 x 32) per element (LagunaAttention.g_proj);
    DiffLlama: lambda_q1, k1, q2, k2 of head_dim 32 each (DiffLlamaAttention)."""
    spec = from_hf_config(CASES["laguna"])
    assert block_params(spec, block_of(spec, 0))["attention/head_gate"] == 128 * 4
    spec = from_hf_config(CASES["laguna-element"])
    assert block_params(spec, block_of(spec, 0))["attention/head_gate"] == 128 * 4 * 32
    spec = from_hf_config(CASES["diffllama"])
    assert block_params(spec, block_of(spec, 0))["attention/lambda"] == 4 * 32


def test_mimo_blocks_by_hand():
    """MiMo-V2-Flash, h 128, 4 heads: full block q 4 x 48, k 1 x 48, v 1 x 32, o 4 x 32 -> 128,
    no sinks; sliding block 2 kv heads (k 2 x 48, v 2 x 32) and 4 sinks (MiMoV2FlashAttention)."""
    spec = from_hf_config(CASES["mimo_v2_flash"])
    full, sliding = block_params(spec, block_of(spec, 0)), block_params(spec, block_of(spec, 1))
    assert (full["attention/qkv"], full["attention/out"], full["attention/sinks"]) == (128 * (192 + 48 + 32), 128 * 128, 0)
    assert (sliding["attention/qkv"], sliding["attention/sinks"]) == (128 * (192 + 96 + 64), 4)


def test_attention_flops_by_hand():
    """t = s = 64 tokens: DiffLlama's two calls 2 x 4 t s a d (QK^T and PV each 2 t s a d);
    LFM3's gate GEMM 2 t h heads; MiMo's full block QK^T over d 48 and PV over d_v 32:
    2 t s a (48 + 32), output projection 2 t (a d_v) h."""
    t = 64
    spec = from_hf_config(CASES["diffllama"])
    assert block_forward_flops(spec, block_of(spec, 0), t, t)["attention/score"] == 2 * 4 * t * t * 4 * 32
    spec = from_hf_config(CASES["lfm3"])
    assert block_forward_flops(spec, block_of(spec, 2), t, t)["attention/head_gate"] == 2 * t * 128 * 4
    spec = from_hf_config(CASES["mimo_v2_flash"])
    flops = block_forward_flops(spec, block_of(spec, 0), t, t)
    assert (flops["attention/score"], flops["attention/out"]) == (2 * t * t * 4 * (48 + 32), 2 * t * 4 * 32 * 128)


def test_mimo_kv_cache_by_hand():
    """One sequence of 64 tokens, 2 bytes: full blocks 0 and 5 cache 64 x (1 x 48 + 1 x 32), the
    five sliding ones their 32-key window x (2 x 48 + 2 x 32) (what transformers' cache keeps)."""
    spec = from_hf_config(CASES["mimo_v2_flash"])
    assert kv_cache_bytes(spec, 1, 64, 2) == 2 * (2 * 64 * 80 + 5 * 32 * 160)


@pytest.mark.parametrize("name", list(CASES))
def test_planner_gemms_carry_the_counted_flops(name):
    """Every block kind: the planner's weight GEMMs carry count's forward FLOPs but the score term
    (the eager scores / context GEMMs, over the whole sequence) and, in MoE blocks, the MLP
    (priced at its dispatched shapes)."""
    spec, s = from_hf_config(CASES[name]), 128
    for index in range(spec.layers):
        block = block_of(spec, index)
        counted = layer_forward_flops(spec, index, tokens=2 * s, seq_len=s)
        kernels = layer_kernels(spec, 1, 2, s, 2, block=block, moe_layer=block.moe)
        skip = ("attention/score", "/conv") + (("mlp/",) if block.moe else ())
        expected = sum(v for k, v in counted.items() if not any(x in k for x in skip))
        gemms = [g for g in kernels.gemms if not g.name.endswith(("/scores", "/context"))
                 and not (block.moe and g.name.startswith("mlp/"))]
        assert sum(g.flops for g in gemms) == expected, index


@pytest.mark.parametrize("name", list(CASES))
def test_tp_shards_hold_the_counted_parameters(name):
    """plan/shard.py's per-rank elements of each dense block: at tp 1 count's block_params; at tp 2
    with sequence parallelism the two ranks hold it once plus the replicated part once more (blocks
    with one kv head hold it whole on both ranks, not as a partial sum: left out at tp 2)."""
    spec = from_hf_config(CASES[name])
    assert_dense_blocks_shard(spec, tp2=lambda block: not for_mixer(spec, block.mixer).num_kv_heads % 2)


@pytest.mark.parametrize("name", [*CASES, "gemma3n"])
def test_one_rank_holds_the_counted_model(name):
    """Plan() (one rank): plan/shard.py's units sum to count's total, the per-layer-input tables,
    side paths and K/V-sharing blocks included (Gemma 3n: its class defaults, gemma-3n-E4B)."""
    spec = from_hf_config(class_defaults("gemma3n_text") if name == "gemma3n" else CASES[name])
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


@pytest.mark.parametrize(("name", "features"), [
    ("lfm3", ("head_gate",)), ("diffllama", ("differential_attention",)),
    ("mimo_v2_flash", ("v_head_dim", "attention_by_type")), ("jetmoe", ("attention_experts", "moe.output_bias")),
    ("doge", ("dynamic_mask", "residual_weights")), ("gemma4_text-moe", ("moe.router_scales", "moe.branch_norms")),
    ("gemma4_text-wide", ("kv_shared_ffn_hidden",)), ("doge-moe", ("product_key_experts",)), ("gemma4_text-kv", ("attention_by_type", "per_layer_input")),
])
def test_cli_count_plan_and_verify_refusal(name, features, tmp_path):
    """count and plan --gpus 8 run; verify refuses the new features by name in one line."""
    assert_count_plan_verify(tmp_path, CASES[name], *features)


@pytest.mark.parametrize(("data", "field"), [
    ({**CASES["laguna-swa-heads"], "num_attention_heads_per_layer": [8, 4, 4, 4]}, "num_attention_heads_per_layer"),
    ({**CASES["laguna"], "num_attention_heads_per_layer": [4, 4]}, "num_attention_heads_per_layer"),
    ({**CASES["laguna"], "gating": "per-channel"}, "gating"),
    ({**CASES["lfm3"], "layer_types": ["conv", "mamba"] * 4}, "layer_types"),
    ({**CASES["mimo_v2_flash"], "mlp_layer_types": ["dense"] * 3}, "mlp_layer_types"),
    ({**CASES["doge-moe"], "num_experts_per_tok": 40}, "num_experts_per_tok"),
    ({**CASES["gemma4_text"], "enable_moe_block": True, "num_experts": 4, "top_k_experts": 2}, "moe_intermediate_size"),
    ({**CASES["gemma4_text-per-layer"], "per_layer_config": {"1": {"head_dim": 48}, "3": {"head_dim": 64}}},
     "per_layer_config"),
    ({**CASES["gemma4_text-per-layer"], "per_layer_config": {"1": {"intermediate_size": 48}}}, "per_layer_config"),
])
def test_bad_options_refused_in_one_line(data, field):
    """An option the spec cannot state (or a malformed one): one line naming the field."""
    assert_one_line_error(data, field)


def test_jetmoe_block_by_hand():
    """JetMoE block, h 128, 4 experts of 2 kv heads x 16 (kv width 32), top 2: kv_proj 128 x 64,
    experts 4 x (32 x 128 + 128 x 32), router 128 x 4, output bias 128 (JetMoeMoA); MLP experts
    4 x 3 x 128 x 64, router 128 x 4, bias 128 (JetMoeMoE). Active: 2 of 4 attention and MLP
    experts; the router GEMM 2 t h E FLOPs."""
    spec = from_hf_config(CASES["jetmoe"])
    b = block_params(spec, block_of(spec, 0))
    attention = {k: v for k, v in b.items() if k.startswith("attention/")}
    assert attention == {"attention/qkv": 128 * 64, "attention/experts": 4 * 2 * 128 * 32,
                         "attention/router": 128 * 4, "attention/out": 128}
    assert (b["mlp/experts"], b["mlp/router"], b["mlp/output_bias"]) == (4 * 3 * 128 * 64, 128 * 4, 128)
    c = count_params(spec)
    assert c.total - c.active == 4 * (2 * 2 * 128 * 32 + 2 * 3 * 128 * 64)
    assert block_forward_flops(spec, block_of(spec, 0), 64, 64)["attention/router"] == 2 * 64 * 128 * 4


def test_doge_block_by_hand():
    """Doge block, h 128, 4 heads of 32, 2 kv heads: A (2) + dt_proj Linear(64, 2) = 2 + 128, residual
    weights 2 x 128 (DogeAttention, DogeDecoderLayer); dt_proj's GEMM 2 t 64 2 FLOPs."""
    spec = from_hf_config(CASES["doge"])
    b = block_params(spec, block_of(spec, 0))
    assert (b["attention/dynamic_mask"], b["residual"]) == (2 + 64 * 2, 2 * 128)
    assert block_forward_flops(spec, block_of(spec, 0), 64, 64)["attention/dynamic_mask"] == 2 * 64 * 64 * 2


def test_doge_product_key_experts_by_hand():
    """doge-moe, h 128, 36 experts (6 keys a half), top 4: router_gate 128 x 12, down_embed and
    up_embed 36 x 128 each (DogeCDMoE); a token reads 4 of the 36 (active: 32 x 256 fewer a block);
    FLOPs 2 t 128 12 for the router and 2 t (2 x 4 x 128) for the two expert matmuls."""
    spec = from_hf_config(CASES["doge-moe"])
    b = block_params(spec, block_of(spec, 0))
    assert (b["mlp/pk_router"], b["mlp/pk_experts"]) == (128 * 12, 2 * 36 * 128)
    c = count_params(spec)
    assert c.total - c.active == 4 * 32 * 2 * 128
    flops = block_forward_flops(spec, block_of(spec, 0), 64, 64)
    assert (flops["mlp/pk_router"], flops["mlp/pk_experts"]) == (2 * 64 * 128 * 12, 2 * 64 * 2 * 4 * 128)


def test_gemma4_global_block_by_hand():
    """gemma4_text-kv global block, h 128, 4 heads of 64, 1 kv head, K = V: q_proj 128 x 256, k_proj
    128 x 64, no v_proj, o_proj 256 x 128, q/k norms 2 x 64; a sliding block 2 kv heads of 32 with
    v_proj (Gemma4TextAttention)."""
    spec = from_hf_config(CASES["gemma4_text-kv"])
    full, sliding = block_params(spec, block_of(spec, 1)), block_params(spec, block_of(spec, 0))
    assert (full["attention/qkv"], full["attention/out"], full["attention/qk_norm"]) == (128 * 320, 256 * 128, 128)
    assert sliding["attention/qkv"] == 128 * (128 + 64 + 64)


def test_gemma4_moe_block_by_hand():
    """gemma4_text-moe block, h 128: router proj 128 x 8, scale 128, per_expert_scale 8, experts
    8 x 3 x 128 x 32, the dense MLP 3 x 128 x 256 as the shared expert, three branch norms of 128
    (Gemma4TextRouter, Gemma4TextExperts, Gemma4TextDecoderLayer)."""
    spec = from_hf_config(CASES["gemma4_text-moe"])
    b = block_params(spec, block_of(spec, 0))
    assert (b["mlp/router"], b["mlp/router_scales"], b["mlp/norms"]) == (128 * 8, 128 + 8, 3 * 128)
    assert (b["mlp/experts"], b["mlp/shared_experts"]) == (8 * 3 * 128 * 32, 3 * 128 * 256)


STEP3P5 = [
    # sliding blocks with 8 query heads, global ones 4; dense blocks 0 and 3; one shared expert of 48
    {"model_type": "step3p5", **SMALL, "num_key_value_heads": 2, "head_dim": 32, "n_routed_experts": 8,
     "num_experts_per_tok": 2, "moe_intermediate_size": 32, "share_expert_dim": 48, "sliding_window": 64,
     "layer_types": ["sliding_attention", "full_attention"] * 2, "num_sliding_attention_heads": 8,
     "mlp_layer_types": ["dense", "sparse", "sparse", "dense"]},
    # the legacy keys: moe_layers_enum, attention_other_setting, MTP-padded layer_types, MLP bias
    {"model_type": "step3p5", **SMALL, "num_key_value_heads": 2, "head_dim": 32, "n_routed_experts": 4,
     "num_experts_per_tok": 2, "moe_intermediate_size": 32, "share_expert_dim": 32, "sliding_window": 64,
     "num_nextn_predict_layers": 1, "moe_layers_enum": "1,2", "attention_other_setting": {"num_attention_heads": 2},
     "layer_types": ["full_attention", "sliding_attention", "sliding_attention", "full_attention", "full_attention"],
     "mlp_bias": True},
]


def _step3p5_reference(data: dict) -> int:
    """transformers has no step3p5 causal-LM class: Step3p7TextModel's sum(p.numel()) plus the
    untied lm_head Linear(h, vocab, bias=False) Step3p7ForConditionalGeneration puts on it."""
    import torch
    from transformers.models.step3p7.modeling_step3p7 import Step3p7TextModel

    from _hf_reference import hf_config

    cfg = hf_config(data)
    with torch.device("meta"):
        model = Step3p7TextModel(cfg)
    return sum(p.numel() for p in model.parameters()) + cfg.vocab_size * cfg.hidden_size


@pytest.mark.torch
@pytest.mark.parametrize("data", STEP3P5 + [None], ids=["small", "legacy-keys", "class-defaults"])
def test_step3p5_equals_transformers(data):
    """Step 3.5's text model (the step3p7 composite's language model) = transformers' own."""
    data = class_defaults("step3p5") if data is None else data
    assert count_params(from_hf_config(data)).total == _step3p5_reference(data)


def test_lfm2_moe_without_layer_types_is_refused_as_transformers_does():
    """Lfm2MoeConfig keeps layer_types None and Lfm2MoeDecoderLayer indexes it: transformers raises
    TypeError building the class defaults, so count refuses them in one line naming the field."""
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("torch")
    import torch

    data = class_defaults("lfm2_moe")
    with pytest.raises(TypeError), torch.device("meta"):
        transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model("lfm2_moe"))
    assert_one_line_error(data, "layer_types: missing")


def test_registered_not_refused():
    """The types are counted, no longer listed as unmodelled (Gemma 3n's composite too: test_hf_gemma3n_mm.py)."""
    assert not {"lfm3", "laguna", "diffllama", "mimo_v2_flash", "jetmoe", "doge", "step3p5", "gemma4_text",
                "gemma4_unified_text"} & set(UNMODELLED)
    assert "gemma3n" not in UNMODELLED
