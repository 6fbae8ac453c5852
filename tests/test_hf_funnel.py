"""Funnel-Transformer (modelplan/specs/hf_funnel.py): every head class equals transformers 5.24's
own module sum(p.numel()) at the class defaults (meta device) and on a small config on CPU, tied
and untied; bad block settings are one-line errors."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_default_totals
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

HEADS = ["FunnelForMaskedLM", "FunnelForSequenceClassification", "FunnelForMultipleChoice", "FunnelForPreTraining",
         "FunnelForTokenClassification", "FunnelForQuestionAnswering", "FunnelModel", "FunnelBaseModel"]
SMALL = {"block_sizes": [2, 1, 3], "num_decoder_layers": 1, "d_model": 32, "n_head": 2, "d_head": 8, "d_inner": 48,
         "vocab_size": 100}
"""A small Funnel whose q_width (2 x 8) differs from d_model (32)."""


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("cls", HEADS)
def test_class_defaults_equal_transformers(cls, tied):
    """Class defaults (block_sizes 4, 4, 4, 2 decoder blocks): total equals the module's."""
    ours, theirs = class_default_totals("funnel", cls, tie_word_embeddings=tied)
    assert ours == theirs


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("cls", ["FunnelForMaskedLM", "FunnelForSequenceClassification"])
def test_small_config_equals_transformers_on_cpu(cls):
    """A small config built for real on CPU: total equals sum(p.numel())."""
    ours, theirs = class_default_totals("funnel", cls, "cpu", **SMALL)
    assert ours == theirs


def test_blocks_by_hand():
    """One block of the small config by hand (modeling_funnel.py): q_head 32 x 16, k_head / v_head
    32 x 16 + 16, r_kernel 32 x 16, r_w / r_r / r_s 3 x 16, seg_embed 2 x 16, post_proj 16 x 32 + 32,
    LayerNorm 64; linear_1 32 x 48 + 48, linear_2 48 x 32 + 32, LayerNorm 64 = 5,984; the base model
    holds 6 blocks, FunnelModel 7."""
    data = {**SMALL, "model_type": "funnel"}
    one = 3 * 512 + 2 * 16 + 512 + 3 * 16 + 2 * 16 + 512 + 32 + 64 + 32 * 48 + 48 + 48 * 32 + 32 + 64
    assert one == 5984
    base = count_params(from_hf_config({**data, "architectures": ["FunnelBaseModel"]}))
    full = count_params(from_hf_config({**data, "architectures": ["FunnelModel"]}))
    assert (base.per_layer, full.breakdown["layers"]) == ([one] * 6, 7 * one)


@pytest.mark.parametrize(("overrides", "message"), [
    ({"block_sizes": []}, r"block_sizes: expected a list"),
    ({"block_sizes": [2, 0]}, r"block_sizes: expected a list"),
    ({"block_repeats": [1, 2, 1]}, r"block_repeats: .* not modelled for funnel"),
])
def test_bad_blocks_are_one_line_errors(overrides, message):
    """Block settings the mapper cannot read name the key in one line."""
    assert_one_line_error({**SMALL, "model_type": "funnel", **overrides}, message)
