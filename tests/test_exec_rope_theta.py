"""The executor and the torch oracle rotate with the spec's rope_theta, not a fixed 10000.

Expected values: RoFormer (Su et al. 2021, sec. 3.4.2) theta_j = base^(-2j/d), worked by hand for
d = 4, and HF transformers' own rotary embedding (LlamaRotaryEmbedding, `rope_theta` in config).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from modelplan.execute.layers.attention import rotary_tables
from modelplan.execute.shapes import attention_shape, mla_shape
from modelplan.specs.load import load_model


def test_rotary_tables_use_the_base_worked_by_hand():
    cos, sin = rotary_tables(4, 4, base=500000.0)
    # d = 4: inverse frequencies 1 and 500000^(-1/2); position 3 turns by 3 and 3 / sqrt(500000).
    slow = 3.0 / math.sqrt(500000.0)
    assert cos[3] == pytest.approx([math.cos(3.0), math.cos(slow), math.cos(3.0), math.cos(slow)], rel=1e-12)
    assert sin[3] == pytest.approx([math.sin(3.0), math.sin(slow), math.sin(3.0), math.sin(slow)], rel=1e-12)
    default_cos, _ = rotary_tables(4, 4)
    assert default_cos[3][1] == pytest.approx(math.cos(3.0 / 100.0), rel=1e-12)  # 10000^(-1/2) = 1/100


def test_shapes_carry_the_spec_theta():
    spec = load_model("llama-3-8b")
    assert spec.rope_theta == 500000.0  # Meta's Llama-3-8B config.json: "rope_theta": 500000.0
    assert attention_shape(spec).rotary_base == 500000.0
    mla = load_model("deepseek-v3")
    assert mla_shape(mla).rotary_base == mla.rope_theta


def test_rotary_tables_match_hf_rotary_embedding():
    torch = pytest.importorskip("torch")
    llama = pytest.importorskip("transformers.models.llama.modeling_llama")
    from transformers import LlamaConfig
    config = LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=250000.0)
    emb = llama.LlamaRotaryEmbedding(config)
    x = torch.zeros(1, 7, 16, dtype=torch.float64)
    cos_hf, sin_hf = emb(x, torch.arange(7)[None])
    cos, sin = rotary_tables(7, 16, base=250000.0)
    np.testing.assert_allclose(cos, cos_hf[0].double().numpy(), rtol=0, atol=1e-6)
    np.testing.assert_allclose(sin, sin_hf[0].double().numpy(), rtol=0, atol=1e-6)
