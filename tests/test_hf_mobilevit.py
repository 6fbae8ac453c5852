"""MobileViT as a network spec (modelplan/specs/hf_mobilevit.py): total parameters equal
sum(p.numel()) of transformers 5.24's own module (the class `architectures` names) for small configs
and the config class defaults; the convolutions', linears' and attention's FLOPs of one image equal
FlopCounterMode's on that module; MobileViT-S's published size; `count` / `plan --gpus 8` /
`verify --tp 2 --pp 2` run; bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_defaults
from _hf_network_checks import assert_count_plan_verify, assert_matmul_flops_equal_flop_counter, total
from _hf_reference import hf_numel

_SMALL = {"model_type": "mobilevit", "hidden_sizes": [16, 24, 32], "neck_hidden_sizes": [8, 8, 16, 16, 24, 24, 48],
          "num_attention_heads": 2, "image_size": 64, "num_labels": 5}
CASES = [{**_SMALL, "architectures": ["MobileViTForImageClassification"]},
         {**_SMALL, "architectures": ["MobileViTModel"], "qkv_bias": False, "expand_ratio": 2.0, "hidden_act": "gelu",
          "conv_kernel_size": 5, "image_size": 128, "patch_size": 4, "hidden_dropout_prob": 0.0}]
IDS = ["classifier", "model-options"]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds the class it names."""
    assert total(data) == hf_numel(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """The config class defaults (AutoConfig.for_model('mobilevit')) count exactly as the classifier."""
    data = {**class_defaults("mobilevit"), "architectures": ["MobileViTForImageClassification"]}
    assert total(data) == hf_numel(data)


def test_published_size():
    """MobileViT-S on ImageNet-1k (Mehta & Rastegari 2022, Table 1: 5.6 M parameters; the class
    defaults are MobileViT-S): 5.58 M within the table's rounding."""
    params = total({"model_type": "mobilevit", "architectures": ["MobileViTForImageClassification"], "num_labels": 1000})
    assert 5_550_000 <= params < 5_650_000


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_flops_equal_flop_counter(data):
    """Convolutions and the classifier (2 x MACs) equal FlopCounterMode's aten.convolution + aten.addmm
    + aten.mm, the attention's q k^T and p v its aten.bmm, on transformers' module."""
    assert_matmul_flops_equal_flop_counter(data)


def test_count_plan_verify_run(tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    assert_count_plan_verify(tmp_path, CASES[0])


@pytest.mark.parametrize("data, message", [
    ({"model_type": "mobilevit", "image_size": 200}, "image_size: layer_3's 25 x 25 grid"),
    ({"model_type": "mobilevit", "output_stride": 16}, "output_stride: 16"),
    ({"model_type": "mobilevit", "attention_probs_dropout_prob": 0.1}, "attention_probs_dropout_prob"),
    ({"model_type": "mobilevit", "num_attention_heads": 7}, "num_attention_heads: 7 must divide"),
    ({"model_type": "mobilevit", "neck_hidden_sizes": [16, 32]}, "neck_hidden_sizes: expected 7"),
    ({"model_type": "mobilevit", "architectures": ["MobileViTForSemanticSegmentation"]},
     "architectures: 'MobileViTForSemanticSegmentation'"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
