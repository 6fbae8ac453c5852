"""HF ImageGPT (modelplan/specs/hf_imagegpt.py): total parameters equal sum(p.numel()) of
transformers 5.24's ImageGPTModel / ImageGPTForImageClassification; `count` / `plan --gpus 8` run;
the causal-image-modelling head (vocab_size - 1 outputs) is a one-line refusal."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error
from _hf_reference import hf_numel
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"model_type": "imagegpt", "n_embd": 64, "n_layer": 2, "n_head": 4, "n_positions": 64, "vocab_size": 33}
CASES = [{**SMALL, "architectures": ["ImageGPTModel"]},
         {**SMALL, "architectures": ["ImageGPTForImageClassification"], "num_labels": 10},
         {"model_type": "imagegpt", "architectures": ["ImageGPTForImageClassification"]}]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=["model", "classifier", "defaults"])
def test_counts_equal_transformers(data):
    """Each config counts exactly as transformers builds the class it names."""
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_small_by_hand():
    """n_embd 64, 2 blocks, 33 ids, 64 positions: tables (33 + 64) x 64; per block two RMS norms
    (64 each), c_attn 64 x 192 + 192, c_proj 64 x 64 + 64, c_fc 64 x 256 + 256, c_proj 256 x 64 + 64;
    ln_f 64 (GPT-2's Conv1D layout, ImageGPTLayerNorm has no bias)."""
    block = 2 * 64 + 64 * 192 + 192 + 64 * 64 + 64 + 64 * 256 + 256 + 256 * 64 + 64
    assert count_params(from_hf_config(CASES[0])).total == 97 * 64 + 2 * block + 64


def test_count_and_plan_run(tmp_path):
    """`count` and `plan --gpus 8` succeed on the classifier."""
    assert_count_plan(tmp_path, CASES[1])


def test_causal_head_is_refused():
    """ImageGPTForCausalImageModeling is a one-line error naming the supported classes."""
    assert_one_line_error({**SMALL, "architectures": ["ImageGPTForCausalImageModeling"]},
                          "ImageGPTForCausalImageModeling' not modelled")
