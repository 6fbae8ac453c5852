"""PP-LCNet as a network spec (modelplan/specs/hf_pp_lcnet.py): total parameters equal sum(p.numel())
of transformers 5.24's PPLCNetForImageClassification for a small config and the config class defaults;
the convolutions' and the head's FLOPs of one image equal FlopCounterMode's on that module; `count` /
`plan --gpus 8` / `verify --tp 2 --pp 2` run; bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_defaults
from _hf_network_checks import assert_count_plan_verify, assert_matmul_flops_equal_flop_counter, total
from _hf_reference import hf_numel

SMALL = {"model_type": "pp_lcnet", "architectures": ["PPLCNetForImageClassification"], "scale": 0.5,
         "class_expand": 64, "num_labels": 5, "image_size": 64, "stem_channels": 16,
         "block_configs": [[[3, 16, 24, 1, False]], [[3, 24, 32, 2, True]], [[5, 32, 32, 1, False]],
                           [[3, 32, 48, 2, False]], [[5, 48, 64, 2, True], [3, 64, 64, 1, True]]]}


@pytest.mark.torch
def test_small_config_equals_transformers():
    """A small config (scale 0.5, squeeze-and-excitation in two stages) counts as transformers builds it."""
    assert total(SMALL) == hf_numel(SMALL)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """The config class defaults (AutoConfig.for_model('pp_lcnet')) count exactly as the classifier."""
    data = {**class_defaults("pp_lcnet"), "architectures": ["PPLCNetForImageClassification"]}
    assert total(data) == hf_numel(data)


@pytest.mark.torch
def test_matmul_flops_equal_flop_counter():
    """Convolutions and the head (2 x MACs) equal FlopCounterMode's aten.convolution + aten.addmm."""
    assert_matmul_flops_equal_flop_counter(SMALL)


def test_count_plan_verify_run(tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    assert_count_plan_verify(tmp_path, SMALL)


@pytest.mark.parametrize("data, message", [
    ({"model_type": "pp_lcnet", "block_configs": [[[3, 16, 32, 1, False]]]}, "block_configs: expected 5 stages"),
    ({"model_type": "pp_lcnet", "block_configs": [[[3, 16, 32, 1, False]], [[3, 48, 64, 2, False]], [[3, 64, 64, 1, False]],
                                                  [[3, 64, 64, 1, False]], [[3, 64, 64, 1, False]]]},
     "block_configs: stage 1 reads 48 channels, the layer before gives 32"),
    ({"model_type": "pp_lcnet", "hidden_act": "mish"}, "hidden_act: unsupported 'mish'"),
    ({"model_type": "pp_lcnet", "architectures": ["PPLCNetBackbone"]}, "architectures: 'PPLCNetBackbone'"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
