"""cosmos3_edge and cosmos3_edge_text (modelplan/specs/hf_cosmos3.py). Expected totals are
sum(p.numel()) of transformers 5.24's Cosmos3EdgeForConditionalGeneration (and of the text model
with its untied head) on the meta device, for the class defaults and a small config; the merger's
layers by hand from Cosmos3EdgePatchMerger."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan
from _hf_composites import built
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"text_config": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "intermediate_size": 256, "vocab_size": 300, "head_dim": 32, "mlp_bias": True,
                         "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [6, 5, 5]}},
         "vision_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 96,
                           "num_patches": 64, "patch_size": 8, "spatial_merge_size": 3},
         "projector_hidden_size": 100}


def _built(kwargs: dict):
    """(config.json dict, Cosmos3EdgeForConditionalGeneration on the meta device) of Cosmos3EdgeConfig(**kwargs)."""
    return built("cosmos3_edge", kwargs, "Cosmos3EdgeForConditionalGeneration")


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{}, SMALL], ids=["class-defaults", "small"])
def test_composite_equals_transformers(kwargs):
    """The total and the vision part (tower + merger) equal transformers'; the text_config alone as
    cosmos3_edge_text counts the language model and its head."""
    data, model = _built(kwargs)
    counted = count_params(from_hf_config(data))
    assert counted.total == sum(p.numel() for p in model.parameters())
    vision = sum(p.numel() for n, p in model.named_parameters() if n.startswith(("model.visual.", "model.projector.")))
    assert counted.breakdown["vision"] == vision
    text = count_params(from_hf_config({**data["text_config"], "model_type": "cosmos3_edge_text"})).total
    assert text == counted.total - vision


def test_merger_by_hand():
    """h 64, merge 3: LayerNorm 2 x 64, linear_fc1 (64 x 9) x 100 + 100, linear_fc2 100 x 128 + 128."""
    data = {"model_type": "cosmos3_edge", **SMALL,
            "text_config": {**SMALL["text_config"], "model_type": "cosmos3_edge_text"}}
    b = count_params(from_hf_config(data)).breakdown
    assert b["vision/projector"] == 2 * 64 + 64 * 9 * 100 + 100 + 100 * 128 + 128


@pytest.mark.torch
def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0 on the small config."""
    assert_count_plan(tmp_path, _built(SMALL)[0])
