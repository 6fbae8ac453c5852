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
