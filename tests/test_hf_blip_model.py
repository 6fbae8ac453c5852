"""HF BlipModel, the BLIP image-text pair (modelplan/specs/hf_vlm_bert.py): total parameters equal
sum(p.numel()) of transformers 5.24's module for a small config and the class defaults; the pair's
head by hand; `count` / `plan --gpus 8` run."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan
from _hf_reference import hf_numel
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"model_type": "blip", "architectures": ["BlipModel"], "projection_dim": 24,
         "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                         "vocab_size": 100},
         "vision_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                           "image_size": 64, "patch_size": 16}}


@pytest.mark.torch
@pytest.mark.parametrize("data", [SMALL, {"model_type": "blip", "architectures": ["BlipModel"]}],
                         ids=["small", "defaults"])
def test_counts_equal_transformers(data):
    """BlipModel counts exactly as transformers builds it."""
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_pair_head_by_hand():
    """BlipModel has no LM head: the text pooler (64 x 64 + 64), text_projection 64 x 24 and
    visual_projection 32 x 24 without bias, logit_scale 1 (modeling_blip.py BlipModel)."""
    pair = count_params(from_hf_config(SMALL))
    lm = count_params(from_hf_config({**SMALL, "architectures": ["BlipForConditionalGeneration"]}))
    head, projector = pair.breakdown["head"], pair.breakdown["vision/projector"]
    assert head == (64 * 64 + 64) + 64 * 24 and projector == 32 * 24 + 1
    assert pair.total - head - projector == lm.total - lm.breakdown["head"]


def test_count_and_plan_run(tmp_path):
    """`count` and `plan --gpus 8` succeed on the small config."""
    assert_count_plan(tmp_path, SMALL)
