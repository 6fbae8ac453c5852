"""NeMo AutoModel's own MoE model files' attention passes (plan/automodel_attention.py), against bytes
worked by hand from AutoModel 89e3a9fdd: `rope_utils.apply_rotary_emb` (complex fp32), MLA.forward's
q / k cats, `gpt_oss/layers.py` `_apply_rotary_emb` (half-split, model dtype) and GptOssAttention's
transposes; shapes from the HF config.json of DeepSeek-V3 (128 heads, q_lora 1536, kv_lora 512, nope
128, rope 64, v 128) and GPT-OSS-20B (64 q heads, 8 kv heads, head dim 64, hidden 2880)."""

from __future__ import annotations

import pytest

from modelplan.plan.automodel_attention import runs_own_attention, with_automodel_attention
from modelplan.plan.kernels import layer_kernels
from modelplan.specs.load import load_model

DSV3, GPT_OSS = load_model("deepseek-v3"), load_model("gpt-oss-20b")
TOKENS = 4096


def _kernels(spec):
    return layer_kernels(spec, 1, 1, TOKENS, 2, moe_layer=True, ep=8, capacity=TOKENS * spec.moe.top_k
                         // spec.moe.num_experts, attention="flash")


def _op(kernels, name):
    return next(e for e in kernels.elementwise if e.name == name)


def test_mla_rotary_is_the_complex_fp32_form():
    """4096 tokens x (128 + 1) x 64 rope values; float() 2 + 4, complex multiply 4 + 4, cast back
    4 + 2 = 20 B a value each way; 3 kernels a call, q and k: 6 each way."""
    op = _op(with_automodel_attention(_kernels(DSV3), DSV3, "automodel", 2), "attention/rotary")
    assert op.elements == 4096 * 129 * 64
    assert (op.fwd_bytes_per_element, op.bwd_bytes_per_element, op.kernels) == (20, 20, (6, 6))


def test_mla_q_and_k_cats():
    """q: 4096 x 128 x 192 = 100,663,296 values, cat 2d = 4 B each way (its split's join backward);
    k cat 4 B forward, k_pe's expand sum 64 / 192 x 2 B backward; kv_b's split joined backward:
    4096 x 128 x 256 = 134,217,728 values x 4 B."""
    k = with_automodel_attention(_kernels(DSV3), DSV3, "automodel", 2)
    q_cat, k_cat, kv = (_op(k, n) for n in ("attention/q_cat", "attention/k_cat", "attention/kv_split"))
    assert q_cat.elements == k_cat.elements == 100_663_296
    assert q_cat.fwd_bytes == q_cat.bwd_bytes == 402_653_184
    assert k_cat.fwd_bytes == 402_653_184 and k_cat.bwd_bytes == pytest.approx(67_108_864)
    assert kv.elements == 134_217_728 and (kv.fwd_bytes, kv.bwd_bytes) == (0, 536_870_912)


def test_mla_v_is_copied_by_te_attention():
    """TE get_qkv_layout: k (contiguous, 192 a head) and v (a view with 256 a head) have unlike strides,
    so q, k, v are made contiguous: v's 4096 x 128 x 128 = 67,108,864 values copied, 4 B forward."""
    op = _op(with_automodel_attention(_kernels(DSV3), DSV3, "automodel", 2), "attention/v_copy")
    assert op.elements == 67_108_864 and (op.fwd_bytes, op.bwd_bytes) == (268_435_456, 0)


def test_gqa_rotary_is_the_half_split_form_and_gpt_oss_transposes():
    """GPT-OSS-20B: 4096 x (64 + 8) x 64 = 18,874,368 q / k values at 9d / 10d = 18 / 20 B, 7 / 8
    kernels a call; the transposes copy q, k, v (4096 x 80 x 64) and the output (4096 x 64 x 64):
    20,971,520 + 16,777,216 = 37,748,736 values at 2d = 4 B each way."""
    k = with_automodel_attention(_kernels(GPT_OSS), GPT_OSS, "automodel", 2)
    rot, tr = _op(k, "attention/rotary"), _op(k, "attention/transposes")
    assert rot.elements == 18_874_368
    assert (rot.fwd_bytes_per_element, rot.bwd_bytes_per_element, rot.kernels) == (18, 20, (14, 16))
    assert tr.elements == 37_748_736 and (tr.fwd_bytes, tr.bwd_bytes) == (150_994_944, 150_994_944)


@pytest.mark.parametrize("framework", ["megatron", "torchtitan"])
def test_other_engines_unchanged(framework):
    k = _kernels(DSV3)
    assert with_automodel_attention(k, DSV3, framework, 2) == k


def test_dense_models_keep_the_fused_path():
    """AutoModel's dense Llama recipes run TE's fused RoPE (rope_fusion true): only MoE model files."""
    assert not runs_own_attention(load_model("llama-2-7b"), "automodel")
