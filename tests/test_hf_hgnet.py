"""HGNetV2 as a network spec (modelplan/specs/hf_hgnet.py): total parameters equal sum(p.numel()) of
transformers 5.24's HGNetV2ForImageClassification for small configs and the config class defaults;
the convolutions' and the classifier's FLOPs of one image equal FlopCounterMode's on that module;
`count` / `plan --gpus 8` / `verify --tp 2 --pp 2` run; bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_defaults
from _hf_network_checks import assert_count_plan_verify, assert_matmul_flops_equal_flop_counter, total
from _hf_reference import hf_numel

_SMALL = {"model_type": "hgnet_v2", "architectures": ["HGNetV2ForImageClassification"], "stem_channels": [3, 8, 12],
          "stage_in_channels": [12, 16], "stage_mid_channels": [8, 12], "stage_out_channels": [16, 24],
          "stage_num_blocks": [1, 2], "stage_downsample": [False, True], "stage_downsample_strides": [2, 2],
          "stage_light_block": [False, True], "stage_kernel_size": [3, 5], "stage_numb_of_layers": [2, 3],
          "hidden_sizes": [16, 24], "depths": [1, 2], "num_labels": 7, "image_size": 64}
CASES = [_SMALL, {**_SMALL, "hidden_act": "gelu", "stage_downsample": [True, False], "image_size": 48}]
IDS = ["small", "small-gelu"]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds HGNetV2ForImageClassification."""
    assert total(data) == hf_numel(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """The config class defaults (AutoConfig.for_model('hgnet_v2')) count exactly as the classifier."""
    data = {**class_defaults("hgnet_v2"), "architectures": ["HGNetV2ForImageClassification"]}
    assert total(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_matmul_flops_equal_flop_counter(data):
    """Convolutions and the classifier (2 x MACs) equal FlopCounterMode's aten.convolution +
    aten.addmm on transformers' module (the stem's pads and stacked branches give its shapes)."""
    assert_matmul_flops_equal_flop_counter(data)


def test_count_plan_verify_run(tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    assert_count_plan_verify(tmp_path, CASES[0])


@pytest.mark.parametrize("data, message", [
    ({"model_type": "hgnet_v2", "use_learnable_affine_block": True}, "use_learnable_affine_block: the scalar"),
    ({"model_type": "hgnet_v2", "architectures": ["HGNetV2Backbone"]}, "architectures: 'HGNetV2Backbone'"),
    ({"model_type": "hgnet_v2", "stage_in_channels": [48, 64, 512, 1024]}, "stage 1 takes 64 channels"),
    ({"model_type": "hgnet_v2", "stage_kernel_size": [3, 3]}, "must have 4 entries each"),
    ({"model_type": "hgnet_v2", "hidden_sizes": [256, 512, 1024, 1000]}, "hidden_sizes: the classifier reads"),
    ({"model_type": "hgnet_v2", "stem_channels": [1, 32, 48]}, "stem_channels: \\[1, 32, 48\\]"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
