"""FSMT (modelplan/specs/hf_fsmt.py): total and trainable parameters equal sum(p.numel()) of
transformers 5.24's own FSMTForConditionalGeneration built from the same config (the independent
source), for small configs switching each option and for the class defaults; its head's FLOPs
read the target vocabulary."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import transformers_module
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = dict(model_type="fsmt", langs=["en", "de"], src_vocab_size=100, tgt_vocab_size=80, d_model=64,
             encoder_layers=2, decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
             encoder_ffn_dim=128, decoder_ffn_dim=128, max_position_embeddings=40)
CASES = [SMALL, {**SMALL, "tie_word_embeddings": True}, {**SMALL, "pad_token_id": 3, "scale_embedding": False},
         {**SMALL, "src_vocab_size": 80}, {**SMALL, "architectures": ["FSMTModel"]}]


def _hf(data: dict) -> tuple[int, int]:
    """(total, trainable) of transformers' module for `data`."""
    import torch

    tf = transformers_module()
    cfg = tf.FSMTConfig(**{k: v for k, v in data.items() if k not in ("model_type", "architectures")})
    cls = tf.FSMTModel if data.get("architectures") == ["FSMTModel"] else tf.FSMTForConditionalGeneration
    with torch.device("meta"):
        model = cls(cfg)
    params = list(model.parameters())
    return sum(p.numel() for p in params), sum(p.numel() for p in params if p.requires_grad)


def _mine(data: dict) -> tuple[int, int]:
    counts = count_params(from_hf_config(data))
    return counts.total, counts.trainable


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=[str(i) for i in range(len(CASES))])
def test_small_configs_equal_transformers(data):
    """Separate source / target tables, the tied or untied output projection, the position rows."""
    assert _mine(data) == _hf(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """FSMTConfig's defaults (WMT19 en-de shape): 483,913,728."""
    data = class_defaults("fsmt")
    assert _mine(data) == _hf(data) == (483_913_728, 483_913_728)


def test_encoder_table_is_the_source_vocabulary():
    """The encoder's table has src_vocab_size rows, the decoder's tgt_vocab_size (d_model wide each)."""
    b = count_params(from_hf_config(SMALL)).breakdown
    assert (b["embedding/encoder_token"], b["embedding/token"]) == (100 * 64, 80 * 64)


@pytest.mark.torch
def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, SMALL)


@pytest.mark.parametrize(("change", "message"), [
    ({"architectures": ["FSMTForCausalLM"]}, r"architectures: 'FSMTForCausalLM' not modelled"),
    ({"decoder_ffn_dim": 256}, r"encoder_ffn_dim \(128\) != decoder_ffn_dim \(256\)"),
    ({"src_vocab_size": 0}, r"src_vocab_size"),
])
def test_bad_fields_are_one_line_errors(change, message):
    """Fields the mapper cannot express are refused in one line naming them."""
    assert_one_line_error({**SMALL, **change}, message)
