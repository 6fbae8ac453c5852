"""Megatron-core's unfused rotary for YaRN models (plan/rotary_fusion.py), by hand from Megatron-core
rope_utils.py `_apply_rotary_pos_emb_bshd` / `_rotate_half` (per q or k element of d bytes: forward
t * cos_ 2d, -x2 d, cat 2d, * sin_ 2d, sum 3d, cat with the empty t_pass 2d = 12d in 6 kernels plus
3 + 3 over the freqs table; backward 2d + d + 2d + 2d + 3d = 10d in 5 kernels), applied where
Megatron-Bridge's fusions.validate_rope_fusion_compatibility turns apply_rope_fusion off
(position_embedding_type "yarn") and core's apply_rotary_pos_emb refuses TE's fused RoPE
(mscale != 1); multi-latent attention keeps its fused rotary."""

from __future__ import annotations

import pytest

from modelplan.plan.compute import Roofline, kernel_times
from modelplan.plan.engine import engine_settings
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.rotary_fusion import runs_unfused, with_engine_rotary
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.hf import from_hf_config
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

# gpt-oss-120b (HF config.json): 64 query heads, 8 kv heads, head_dim 64, rotary on every dim;
# 4096 tokens on one TP rank: 4096 x (64 + 8) x 64 rotated q and k values
ROTATED = 4096 * (64 + 8) * 64


def rotary_of(kernels):
    return next(e for e in kernels.elementwise if e.name == "attention/rotary")


def test_gpt_oss_rotary_is_megatrons_unfused_path():
    """18,874,368 values; bf16: 24 B per value forward, 20 B backward; 2 calls (q, k) x (12, 5) kernels."""
    spec = load_model("gpt-oss-120b")
    k = with_engine_rotary(layer_kernels(spec, 1, 1, 4096, 2), spec, "megatron", 2)
    op = rotary_of(k)
    assert op.elements == 18_874_368 == ROTATED
    assert (op.fwd_bytes_per_element, op.bwd_bytes_per_element) == (24, 20)
    assert op.kernels == (24, 10)


@pytest.mark.parametrize("model, framework", [("gpt-oss-120b", "torchtitan"), ("deepseek-v3", "megatron"),
                                              ("llama-3-8b", "megatron")])
def test_fused_where_the_engine_fuses(model, framework):
    """torchtitan's own rotary, MLA's fused rotary (DeepSeek-V3 is YaRN too) and plain RoPE are left alone."""
    spec = load_model(model)
    assert not runs_unfused(spec, framework)
    k = layer_kernels(spec, 1, 1, 4096, 2)
    assert with_engine_rotary(k, spec, framework, 2) == k


def test_block_pays_the_extra_passes_at_hbm_speed():
    """Forward (24 - 4) B and backward (20 - 4) B per rotated value beyond the fused kernel's read and
    write, at 2 TB/s x hbm_efficiency x sustained_fraction, plus 23 and 9 more kernel overheads."""
    cost = CostModel()
    acc = Accelerator(name="gpu", peak_tflops={"bf16": 100.0}, memory_gb=80, memory_bw_tbps=2.0)
    r = Roofline.of(acc, "bf16", cost)
    sw = engine_settings(TrainingSpec(global_batch=1, seq_len=4096, framework="megatron"), load_engine("megatron"))
    yarn = load_model("gpt-oss-120b")
    plain = yarn.model_copy(update={"rope_scaling": None})
    t_yarn, t_plain = (kernel_times(s, 1, False, 1, 4096, 2, s.vocab, r, attention="flash", software=sw)
                       for s in (yarn, plain))
    hbm = 2e12 * cost.hbm_efficiency * cost.sustained_fraction
    overhead = cost.kernel_overhead_us * 1e-6
    assert t_yarn.fwd_elementwise_s - t_plain.fwd_elementwise_s == pytest.approx(20 * ROTATED / hbm + 23 * overhead)
    assert t_yarn.bwd_elementwise_s - t_plain.bwd_elementwise_s == pytest.approx(16 * ROTATED / hbm + 9 * overhead)


@pytest.mark.parametrize("rope, expected", [
    ({"rope_scaling": {"rope_type": "yarn", "factor": 32.0}}, "yarn"),  # transformers 4 (gpt-oss)
    ({"rope_scaling": {"type": "yarn", "factor": 40}}, "yarn"),  # the older key (deepseek-v3)
    ({"rope_parameters": {"rope_type": "yarn", "rope_theta": 150000.0}}, "yarn"),  # transformers 5
    ({"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, None),
    ({"rope_scaling": {"type": 7}}, None),  # not a kind this reads: no error (it changes no count)
    ({}, None),
])
def test_hf_config_reads_the_scaling_kind(rope, expected):
    config = {"model_type": "llama", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
              "intermediate_size": 128, "vocab_size": 100, **rope}
    assert from_hf_config(config).rope_scaling == expected


# Megatron-core 0.12.2 without apply_rope_fusion (NeMo v2.3.0 DeepSeekConfig; the dgxc 25.05 DeepSeek-V3
# row): `qkv_up_proj_and_rope_apply` runs `_apply_rotary_pos_emb_bshd` with MLA's de-interleave
# (forward cat of the strided halves 2d, 1 kernel; backward two slice gradients as zeros + strided copy,
# 2d and 2 kernels each, summed 3d: 7d in 5), then cats q and k and copies v (plan/mla_assembly.py).
# DeepSeek-V3 at tp 2 (HF config.json: 128 heads -> 64 a rank, rope 64, nope 128, v 128), 4096 tokens.
DSV3 = load_model("deepseek-v3")


def _dsv3_unfused():
    k = layer_kernels(DSV3, 2, 1, 4096, 2, moe_layer=True, ep=64, capacity=4096 * 8 // 256)
    return with_engine_rotary(k, DSV3, "megatron", 2, rope_fusion=False)


def test_mla_rotary_without_rope_fusion_is_the_unfused_path_with_the_deinterleave():
    """4096 x (64 + 1) x 64 = 17,039,360 rope values; (12 + 2) d = 28 B forward, (10 + 7) d = 34 B
    backward; 2 calls x (12 + 1, 5 + 5) kernels."""
    op = rotary_of(_dsv3_unfused())
    assert op.elements == 17_039_360
    assert (op.fwd_bytes_per_element, op.bwd_bytes_per_element, op.kernels) == (28, 34, (26, 20))


def test_mla_without_rope_fusion_cats_q_and_k_and_copies_v():
    """q and k: 4096 x 64 x 192 = 50,331,648 values, 4 B forward each; v: 4096 x 64 x 128 =
    33,554,432 values copied (4 B forward, nothing backward); kv_b's split joined backward:
    4096 x 64 x 256 = 67,108,864 values x 4 B."""
    ops = {e.name: e for e in _dsv3_unfused().elementwise}
    assert ops["attention/q_cat"].elements == ops["attention/k_cat"].elements == 50_331_648
    assert ops["attention/v_copy"].fwd_bytes == 33_554_432 * 4 and ops["attention/v_copy"].bwd_bytes == 0
    assert ops["attention/kv_split"].bwd_bytes == 67_108_864 * 4


@pytest.mark.parametrize("model, framework, fusion, expected", [
    ("deepseek-v3", "megatron", True, False),  # Megatron-Bridge's perf scripts: apply_rope_fusion = True
    ("deepseek-v3", "megatron", False, True),
    ("llama-2-7b", "megatron", False, True),  # plain RoPE: the same unfused bshd path
    ("deepseek-v3", "torchtitan", False, False),  # a Megatron-core setting
])
def test_rope_fusion_setting_decides_the_path(model, framework, fusion, expected):
    assert runs_unfused(load_model(model), framework, fusion) is expected


def test_unfused_mla_cats_are_rerun_by_mla_up_proj():
    """core 0.12.2 checkpoints the whole `qkv_up_proj_and_rope_apply` (up projections, rope, cats,
    v's copy) under `recompute_up_proj`."""
    from modelplan.count.blocks import Block
    from modelplan.plan.recompute import recomputed_kernel_names
    names = recomputed_kernel_names(DSV3, Block("full_attention", True, False, False), ("mla_up_proj",))
    assert {"attention/q_cat", "attention/k_cat", "attention/v_copy", "attention/rotary"} <= names


def test_training_spec_fuses_by_default():
    """Megatron-LM arguments.py: --no-rope-fusion stores False into apply_rope_fusion (default True)."""
    assert TrainingSpec(global_batch=8, seq_len=128).rope_fusion is True
