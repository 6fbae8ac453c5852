"""PEGASUS-X (modelplan/specs/hf_pegasus_x.py): total parameters equal sum(p.numel()) of
transformers 5.24's own PegasusXForConditionalGeneration / PegasusXModel built from the same
config (the independent source), for small configs switching each option and for the class
defaults; an encoder query is priced at block_size + num_global_tokens keys (Phang et al. 2022,
sec. 3: block-local attention with global tokens)."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import transformers_module
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = dict(model_type="pegasus_x", vocab_size=100, d_model=64, encoder_layers=2, decoder_layers=3,
             encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128,
             max_position_embeddings=256, num_global_tokens=8, block_size=16)
CASES = [SMALL, {**SMALL, "num_global_tokens": 3, "encoder_layers": 4}, {**SMALL, "architectures": ["PegasusXModel"]}]


def _hf(data: dict) -> int:
    import torch

    tf = transformers_module()
    cfg = tf.PegasusXConfig(**{k: v for k, v in data.items() if k not in ("model_type", "architectures")})
    cls = tf.PegasusXModel if data.get("architectures") == ["PegasusXModel"] else tf.PegasusXForConditionalGeneration
    with torch.device("meta"):
        model = cls(cfg)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=[str(i) for i in range(len(CASES))])
def test_small_configs_equal_transformers(data):
    """Bias-free attention, embed_global, the encoder blocks' global_self_attn_layer_norm."""
    assert count_params(from_hf_config(data)).total == _hf(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """PegasusXConfig's defaults (pegasus-x-large shape): 568,568,832."""
    data = class_defaults("pegasus_x")
    assert count_params(from_hf_config(data)).total == _hf(data) == 568_568_832


def test_encoder_window_is_block_plus_global_tokens():
    """Each encoder query scores block_size local keys and the num_global_tokens global ones; the
    global norm sits in the encoder blocks only (2 h: weight and bias)."""
    spec = from_hf_config(SMALL)
    assert spec.seq2seq.encoder_window == 16 + 8
    b = count_params(spec).breakdown
    assert b["layers/side/global_self_attn_layer_norm"] == 2 * 2 * 64  # 2 encoder blocks x LayerNorm(64)
    assert b["embedding/side/embed_global"] == 8 * 64


@pytest.mark.torch
def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, SMALL)


@pytest.mark.parametrize(("change", "message"), [
    ({"architectures": ["PegasusXForCausalLM"]}, r"architectures: 'PegasusXForCausalLM' not modelled"),
    ({"num_global_tokens": 0}, r"num_global_tokens"),
    ({"decoder_ffn_dim": 256}, r"encoder_ffn_dim \(128\) != decoder_ffn_dim \(256\)"),
])
def test_bad_fields_are_one_line_errors(change, message):
    """Fields the mapper cannot express are refused in one line naming them."""
    assert_one_line_error({**SMALL, **change}, message)
