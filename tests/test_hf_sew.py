"""SEW and SEW-D (modelplan/specs/hf_sew.py; AudioConvInput.squeeze): expected totals are
sum(p.numel()) of transformers 5.24's classes built on CPU (small configs) and on the meta device
(class defaults); the squeezed sequence's FLOPs worked by hand from SEWEncoder.forward; count /
plan --gpus 8 run and verify refuses in one line."""

from __future__ import annotations

import pytest

from _hf_n17_checks import (assert_class_defaults, assert_count_plan, assert_one_line_error,
                            assert_total_on_cpu)
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

_SMALL = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
          "conv_dim": [16, 16], "conv_kernel": [10, 3], "conv_stride": [5, 2], "num_conv_pos_embeddings": 16,
          "num_conv_pos_embedding_groups": 4, "squeeze_factor": 2, "vocab_size": 20, "classifier_proj_size": 8}
CASES = [
    {"model_type": "sew", "architectures": ["SEWForCTC"], **_SMALL},
    {"model_type": "sew", "architectures": ["SEWForSequenceClassification"], **_SMALL, "use_weighted_layer_sum": True},
    {"model_type": "sew", "architectures": ["SEWModel"], **_SMALL, "conv_dim": [16, 32], "mask_time_prob": 0.0},
    {"model_type": "sew-d", "architectures": ["SEWDForCTC"], **_SMALL, "position_buckets": 8,
     "max_position_embeddings": 64},
    {"model_type": "sew-d", "architectures": ["SEWDForSequenceClassification"], **_SMALL, "share_att_key": False,
     "position_buckets": 8, "max_position_embeddings": 64},
]
IDS = [f"{d['architectures'][0]}-{i}" for i, d in enumerate(CASES)]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_total_equals_transformers_on_cpu(data):
    """modelplan's total = sum(p.numel()) of the class built on CPU (conv_dim[-1] == hidden_size in
    case 2: no feature_projection)."""
    assert_total_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "cls"), [("sew", "SEWForCTC"), ("sew-d", "SEWDForSequenceClassification")])
def test_class_defaults_equal_transformers(model_type, cls):
    """The config class defaults (13 feature convs), meta device."""
    assert_class_defaults(model_type, cls)


def test_squeezed_sequence_by_hand():
    """h 32, squeeze 2, s = 10 squeezed tokens: the feature projection on 20 frames 2 x 20 x 16 x 32,
    the strided positional conv one output a token 2 x 10 x 32 x 8 x 16, the upsampling
    Linear(32, 64) on the tokens 2 x 10 x 32 x 64 (32 x 64 + 64 parameters), the CTC lm_head on the
    20 upsampled frames 2 x 20 x 32 x 20."""
    spec = from_hf_config(CASES[0])
    assert count_params(spec).breakdown["embedding/upsample"] == 32 * 64 + 64
    f = count_flops(spec, TrainingSpec(global_batch=1, seq_len=10)).breakdown
    assert f["embedding/projection/linear"] == 2 * 20 * 16 * 32
    assert f["embedding/position_conv"] == 2 * 10 * 32 * 8 * 16
    assert f["embedding/upsample"] == 2 * 10 * 32 * 64
    assert f["head/lm_head"] == 2 * 20 * 32 * 20


@pytest.mark.parametrize("data", [CASES[0], CASES[3]], ids=["sew", "sew-d"])
def test_count_and_plan_run(data, tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, data)


def test_unmodelled_one_line():
    """SEW-D's ConvLayer and an idle rel-embedding LayerNorm, an unknown head: one line naming the field."""
    assert_one_line_error({**CASES[3], "conv_kernel_size": 3}, "conv_kernel_size: 3 is not modelled")
    assert_one_line_error({**CASES[3], "relative_attention": False}, "relative_attention: false")
    assert_one_line_error({**CASES[0], "architectures": ["SEWForAudioFrameClassification"]}, "architectures")
