"""glmga, cosmos3_omni and cohere_compass (modelplan/specs/hf_reused.py): GlmgaConfig builds
transformers 5.24's Glm46VForConditionalGeneration, Cosmos3OmniForConditionalGeneration builds
Qwen3-VL's tower and text model, CohereCompassForConditionalGeneration Qwen3-VL's tower around the
cohere_compass_text model. CohereCompassConfig's own defaults do not build (its text model reads
rope_parameters['full_attention']): its "class defaults" add that one entry, which holds no parameter. Expected totals are sum(p.numel()) of the class AutoModelForImageTextToText builds, on the
meta device, for the class defaults and a small config; another sub-config type is refused."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error
from _hf_composites import built
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

_ROPE = {"rope_type": "default", "rope_theta": 10000.0}
_TEXT = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
         "intermediate_size": 256, "vocab_size": 300}
SMALL = {
    "glmga": {"text_config": _TEXT, "vision_config": {"hidden_size": 64, "depth": 2, "num_heads": 4,
                                                      "intermediate_size": 96, "out_hidden_size": 128,
                                                      "patch_size": 14}},
    "cosmos3_omni": {"text_config": {**_TEXT, "head_dim": 32},
                     "vision_config": {"hidden_size": 64, "depth": 4, "num_heads": 4, "intermediate_size": 96,
                                       "out_hidden_size": 128, "deepstack_visual_indexes": [1, 2],
                                       "num_position_embeddings": 64}},
    "cohere_compass": {"text_config": {**_TEXT, "rope_parameters": {"full_attention": _ROPE}},
                       "vision_config": {"hidden_size": 64, "depth": 4, "num_heads": 4, "intermediate_size": 96,
                                         "out_hidden_size": 128, "deepstack_visual_indexes": [1, 2],
                                         "num_position_embeddings": 64}},
}
DEFAULTS = {"glmga": {}, "cosmos3_omni": {}, "cohere_compass": {"text_config": {"rope_parameters": {"full_attention": _ROPE}}}}
CLASSES = {"glmga": "Glm46VForConditionalGeneration", "cosmos3_omni": "Cosmos3OmniForConditionalGeneration",
           "cohere_compass": "CohereCompassForConditionalGeneration"}


def _config(model_type: str, kwargs: dict) -> tuple[dict, int]:
    """(config.json dict, transformers' own parameter count) of the config class built from kwargs."""
    data, model = built(model_type, kwargs, CLASSES[model_type])
    return data, sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.parametrize("model_type", list(SMALL))
@pytest.mark.parametrize("small", [False, True], ids=["class-defaults", "small"])
def test_total_equals_transformers(model_type, small):
    """modelplan's total = the built class's sum(p.numel())."""
    data, expected = _config(model_type, SMALL[model_type] if small else DEFAULTS[model_type])
    assert count_params(from_hf_config(data)).total == expected


@pytest.mark.torch
@pytest.mark.parametrize("model_type", list(SMALL))
def test_count_and_plan_run(model_type, tmp_path):
    """count and plan --gpus 8 exit 0 on the small config."""
    assert_count_plan(tmp_path, _config(model_type, SMALL[model_type])[0])


def test_other_sub_config_refused_in_one_line():
    """A vision_config of another model_type (AutoModel would build other modules): one line."""
    assert_one_line_error({"model_type": "cosmos3_omni", "vision_config": {"model_type": "siglip_vision_model"}},
                          "vision_config.model_type: 'siglip_vision_model' not modelled")
