"""HF AltCLIP (modelplan/specs/hf_altclip.py): AltCLIPModel's total parameters equal sum(p.numel())
of transformers 5.24's module for a small config and the class defaults; the text head by hand;
`count` / `plan --gpus 8` run."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error
from _hf_reference import hf_numel
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"model_type": "altclip", "architectures": ["AltCLIPModel"], "projection_dim": 24,
         "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                         "project_dim": 48, "vocab_size": 100},
         "vision_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                           "image_size": 64, "patch_size": 16}}


@pytest.mark.torch
@pytest.mark.parametrize("data", [SMALL, {"model_type": "altclip", "architectures": ["AltCLIPModel"]}],
                         ids=["small", "defaults"])
def test_counts_equal_transformers(data):
    """AltCLIPModel counts exactly as transformers builds it."""
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_text_head_by_hand():
    """pre_LN (2 x 64) and transformation (64 x 48 + 48) beyond the encoder; text_projection
    48 x 24 and visual_projection 32 x 24 without bias, logit_scale 1 (modeling_altclip.py)."""
    breakdown = count_params(from_hf_config(SMALL)).breakdown
    assert breakdown["final_norm"] == 128 and breakdown["head"] == 64 * 48 + 48
    assert breakdown["vision/projector"] == 48 * 24 + 32 * 24 + 1


def test_count_and_plan_run(tmp_path):
    """`count` and `plan --gpus 8` succeed on the small config."""
    assert_count_plan(tmp_path, SMALL)


def test_other_heads_are_refused():
    """A head class other than AltCLIPModel is a one-line error naming it."""
    assert_one_line_error({**SMALL, "architectures": ["AltCLIPTextModel"]}, "AltCLIPTextModel' not modelled")
