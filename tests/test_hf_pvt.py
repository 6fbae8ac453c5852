"""PVT as a network spec (modelplan/specs/hf_pvt.py): total parameters equal sum(p.numel()) of
transformers 5.24's own module (the class `architectures` names) for small configs and the config
class defaults; the convolutions', linears' and attention's FLOPs of one image equal FlopCounterMode's
on that module; PVT-Tiny's published size; `count` / `plan --gpus 8` / `verify --tp 2 --pp 2` run;
bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_defaults
from _hf_network_checks import assert_count_plan_verify, assert_matmul_flops_equal_flop_counter, total
from _hf_reference import hf_numel

_SMALL = {"model_type": "pvt", "image_size": 64, "num_encoder_blocks": 3, "depths": [1, 2, 1],
          "sequence_reduction_ratios": [4, 2, 1], "hidden_sizes": [8, 16, 24], "patch_sizes": [4, 2, 2],
          "strides": [4, 2, 2], "num_attention_heads": [1, 2, 3], "mlp_ratios": [4, 2, 2], "num_labels": 5}
CASES = [{**_SMALL, "architectures": ["PvtForImageClassification"]},
         {**_SMALL, "architectures": ["PvtModel"], "qkv_bias": False, "hidden_act": "relu", "depths": [2, 0, 1]}]
IDS = ["classifier", "model-options"]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds the class it names."""
    assert total(data) == hf_numel(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """The config class defaults (AutoConfig.for_model('pvt')) count exactly as the classifier."""
    data = {**class_defaults("pvt"), "architectures": ["PvtForImageClassification"]}
    assert total(data) == hf_numel(data)


def test_published_size():
    """PVT-Tiny on ImageNet-1k (Wang et al. 2021, Table 2: 13.2 M parameters; the class defaults are
    PVT-Tiny's)."""
    params = total({"model_type": "pvt", "architectures": ["PvtForImageClassification"], "num_labels": 1000})
    assert 13_150_000 <= params < 13_250_000


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_flops_equal_flop_counter(data):
    """Convolutions and linears (2 x MACs) equal FlopCounterMode's aten.convolution + aten.addmm +
    aten.mm, the attention's q k^T and p v its aten.bmm, on transformers' module."""
    assert_matmul_flops_equal_flop_counter(data)


def test_count_plan_verify_run(tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    assert_count_plan_verify(tmp_path, CASES[0])


@pytest.mark.parametrize("data, message", [
    ({"model_type": "pvt", "patch_sizes": [2, 2, 2, 2], "strides": [2, 2, 2, 2]},
     "image_size: stage 1's 56 x 56 grid differs from the 28 x 28"),
    ({"model_type": "pvt", "sequence_reduction_ratios": [8, 4, 2, 2]}, "sequence_reduction_ratios: the class-token"),
    ({"model_type": "pvt", "hidden_dropout_prob": 0.1}, "hidden_dropout_prob: dropout not modelled"),
    ({"model_type": "pvt", "num_encoder_blocks": 5}, "num_encoder_blocks: 5 needs"),
    ({"model_type": "pvt", "num_attention_heads": [3, 2, 5, 8]}, "stage 0: .*num_attention_heads dividing"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
