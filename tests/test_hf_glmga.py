"""glmga (modelplan/specs/hf.py: GLM-4.6V's mapper): GlmgaConfig builds transformers 5.24's
Glm46VForConditionalGeneration (it ships no modeling file of its own). Expected totals are that
class's sum(p.numel()) on the meta device, for the class defaults and a small config."""

from __future__ import annotations

import json

import pytest

from _hf_n17_checks import assert_count_plan
from _hf_reference import transformers_module
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

_SMALL = {"text_config": {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
                          "num_key_value_heads": 2, "intermediate_size": 256, "vocab_size": 300},
          "vision_config": {"hidden_size": 64, "depth": 2, "num_heads": 4, "intermediate_size": 96,
                            "out_hidden_size": 128, "patch_size": 14}}


def _config(kwargs: dict) -> tuple[dict, int]:
    """(config.json dict, transformers' own parameter count) of GlmgaConfig(**kwargs)."""
    import torch

    transformers = transformers_module()
    cfg = transformers.AutoConfig.for_model("glmga", **kwargs)
    with torch.device("meta"):
        model = transformers.AutoModelForImageTextToText.from_config(cfg)
    assert type(model).__name__ == "Glm46VForConditionalGeneration"
    return json.loads(cfg.to_json_string(use_diff=False)), sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{}, _SMALL], ids=["class-defaults", "small"])
def test_total_equals_transformers(kwargs):
    """modelplan's total = Glm46VForConditionalGeneration's sum(p.numel())."""
    data, expected = _config(kwargs)
    assert count_params(from_hf_config(data)).total == expected


@pytest.mark.torch
def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0 on the small config."""
    assert_count_plan(tmp_path, _config(_SMALL)[0])
