"""ProphetNet (modelplan/specs/hf_prophetnet.py): the encoder-decoder, the bare model and the
decoder alone equal transformers 5.24's own modules sum(p.numel()) at the class defaults (meta
device) and on a small config on CPU, tied and untied."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_default_totals
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

HEADS = ["ProphetNetForConditionalGeneration", "ProphetNetModel", "ProphetNetForCausalLM"]
SMALL = {"hidden_size": 32, "encoder_ffn_dim": 48, "decoder_ffn_dim": 48, "num_encoder_layers": 2,
         "num_decoder_layers": 3, "num_encoder_attention_heads": 4, "num_decoder_attention_heads": 4,
         "vocab_size": 100, "max_position_embeddings": 64, "ngram": 3, "num_buckets": 8}


CASES = [(cls, "meta", {"tie_word_embeddings": tied}) for cls in HEADS for tied in (True, False)] + \
        [(cls, "cpu", SMALL) for cls in HEADS]
"""The class defaults (12 + 12 blocks of 1024) tied and untied on the meta device; the small config
built for real on CPU."""


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("cls", "device", "overrides"), CASES, ids=[f"{c}-{d}-{i}" for i, (c, d, _) in enumerate(CASES)])
def test_totals_equal_transformers(cls, device, overrides):
    """Every head class: total equals transformers' sum(p.numel()) of the module."""
    ours, theirs = class_default_totals("prophetnet", cls, device, **overrides)
    assert ours == theirs


def test_decoder_extras_by_hand():
    """The small config's n-gram extras (modeling_prophetnet.py): ngram_embeddings 3 x 32 = 96 once;
    relative_pos_embeddings Linear(32, 8 buckets x 4 heads) + bias = 1,056 in each of the 3 decoder
    blocks, none in the 2 encoder blocks."""
    c = count_params(from_hf_config({**SMALL, "model_type": "prophetnet"}))
    assert c.breakdown["embedding/side/ngram_embeddings"] == 96
    assert c.breakdown["layers/side/relative_pos_embeddings"] == 3 * (32 * 32 + 32)


def test_no_cross_attention_is_a_one_line_error():
    """add_cross_attention false (decoder blocks without cross-attention) is refused naming the key."""
    assert_one_line_error({**SMALL, "model_type": "prophetnet", "add_cross_attention": False}, r"add_cross_attention")
