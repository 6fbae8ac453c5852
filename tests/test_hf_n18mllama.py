"""Llama 3.2 Vision (`mllama`, modelplan/specs/hf_n18mllama.py): the total parameter count equals
sum(p.numel()) of transformers 5.24's MllamaForConditionalGeneration built from the same config on
the meta device (the independent source), for small configs and the config class defaults;
`count` and `plan --gpus 8` run without a traceback."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import hf_total_and_part
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

ARCH = ["MllamaForConditionalGeneration"]
_VISION = {"hidden_size": 32, "num_hidden_layers": 4, "num_global_layers": 2, "attention_heads": 4,
           "intermediate_size": 64, "vision_output_dim": 96, "image_size": 56, "patch_size": 14,
           "intermediate_layers_indices": [1, 2]}
CASES = [
    {"model_type": "mllama", "architectures": ARCH,
     "text_config": {"vocab_size": 1000, "hidden_size": 64, "num_hidden_layers": 5, "num_attention_heads": 4,
                     "num_key_value_heads": 2, "intermediate_size": 128, "cross_attention_layers": [1, 3], "pad_token_id": 0},
     "vision_config": _VISION},
    {"model_type": "mllama", "architectures": ARCH,
     "text_config": {"vocab_size": 512, "hidden_size": 96, "num_hidden_layers": 4, "num_attention_heads": 6,
                     "num_key_value_heads": 6, "intermediate_size": 200, "cross_attention_layers": [0], "pad_token_id": 1},
     "vision_config": {**_VISION, "num_global_layers": 1, "max_num_tiles": 2, "vision_output_dim": 64,
                       "supported_aspect_ratios": [[1, 1], [1, 2], [2, 1]]}},
]


def _total(data: dict) -> int:
    return count_params(from_hf_config(data, "config.json")).total


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=["gqa", "mha-two-tiles"])
def test_small_mllama_equals_transformers(data):
    """Total = transformers' sum(p.numel()) (embedding of vocab_size + 8 rows and untied head included)."""
    assert _total(data) == hf_total_and_part(data, ())[0]


@pytest.mark.torch
@pytest.mark.slow
def test_class_defaults_equal_transformers():
    """MllamaConfig's class defaults (Llama 3.2 11B Vision sizes) count exactly on the meta device."""
    data = {**class_defaults("mllama"), "architectures": ARCH}
    assert _total(data) == hf_total_and_part(data, ())[0]


@pytest.mark.parametrize("data", CASES[:1])
def test_count_and_plan_run(data, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    assert_count_plan(tmp_path, data)


def test_bad_cross_attention_layers_is_one_line_error():
    """A cross-attention index past the depth is a one-line error naming the field."""
    bad = {**CASES[0], "text_config": {**CASES[0]["text_config"], "cross_attention_layers": [9]}}
    assert_one_line_error(bad, "cross_attention_layers")
