"""HF CLIPSegModel (modelplan/specs/hf_image_text.py, CLIPModel's modules): total parameters equal
sum(p.numel()) of transformers 5.24's module for a small config and the class defaults;
CLIPSegForImageSegmentation (its FiLM decoder) is a one-line refusal."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error
from _hf_reference import hf_numel
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"model_type": "clipseg", "architectures": ["CLIPSegModel"], "projection_dim": 24,
         "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128},
         "vision_config": {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 64,
                           "image_size": 64, "patch_size": 16}}


@pytest.mark.torch
@pytest.mark.parametrize("data", [SMALL, {"model_type": "clipseg", "architectures": ["CLIPSegModel"]}],
                         ids=["small", "defaults"])
def test_counts_equal_transformers(data):
    """CLIPSegModel counts exactly as transformers builds it."""
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_same_as_clip():
    """CLIPSegModel holds CLIPModel's modules: the same config counts the same as model_type clip."""
    clip = {**SMALL, "model_type": "clip", "architectures": ["CLIPModel"]}
    assert count_params(from_hf_config(SMALL)).total == count_params(from_hf_config(clip)).total


def test_count_and_plan_run(tmp_path):
    """`count` and `plan --gpus 8` succeed on the small config."""
    assert_count_plan(tmp_path, SMALL)


def test_segmentation_head_is_refused():
    """CLIPSegForImageSegmentation's decoder is a one-line error naming the supported class."""
    assert_one_line_error({**SMALL, "architectures": ["CLIPSegForImageSegmentation"]},
                          "CLIPSegForImageSegmentation' not modelled")
