"""SegFormer and PVT v2 as network specs (modelplan/specs/hf_reduced_attention.py): total parameters
equal sum(p.numel()) of transformers 5.24's own module (the class `architectures` names) for small
configs and the config class defaults; the convolutions' and linears' FLOPs of one image equal
FlopCounterMode's on that module, the attention's its aten.bmm / scaled-dot-product; `count` /
`plan --gpus 8` / `verify --tp 2 --pp 2` run; bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_defaults
from _hf_network_checks import assert_count_plan_verify, assert_matmul_flops_equal_flop_counter, total
from _hf_reference import hf_numel

_SMALL = {"depths": [1, 2], "sr_ratios": [2, 1], "hidden_sizes": [8, 16], "patch_sizes": [7, 3], "strides": [4, 2],
          "num_attention_heads": [1, 2], "mlp_ratios": [4, 2], "num_encoder_blocks": 2, "num_labels": 5}
CASES = [
    {"model_type": "segformer", "architectures": ["SegformerForImageClassification"], **_SMALL, "image_size": 64},
    {"model_type": "segformer", "architectures": ["SegformerModel"], **_SMALL, "image_size": 32},
    {"model_type": "pvt_v2", "architectures": ["PvtV2ForImageClassification"], **_SMALL, "image_size": 64},
    {"model_type": "pvt_v2", "architectures": ["PvtV2Model"], **_SMALL, "image_size": 64, "qkv_bias": False,
     "linear_attention": True},
]
IDS = [f"{d['architectures'][0]}-{i}" for i, d in enumerate(CASES)]
DEFAULTS = {"segformer": "SegformerForImageClassification", "pvt_v2": "PvtV2ForImageClassification"}


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds the class it names."""
    assert total(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.parametrize("model_type", sorted(DEFAULTS))
def test_class_defaults_equal_transformers(model_type):
    """Each type's config class defaults (AutoConfig.for_model) count exactly as its classifier."""
    data = {**class_defaults(model_type), "architectures": [DEFAULTS[model_type]]}
    assert total(data) == hf_numel(data)


def test_published_size():
    """PVT v2-b0 on ImageNet-1k (Wang et al. 2022, PVT v2, Table 1 / OpenGVLab/PVT pvt_v2_b0: 3.7 M
    parameters; transformers' class defaults are b0's sizes): 3.67 M within the table's rounding."""
    params = total({"model_type": "pvt_v2", "architectures": ["PvtV2ForImageClassification"], "num_labels": 1000})
    assert 3_650_000 <= params < 3_750_000


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_flops_equal_flop_counter(data):
    """Convolutions and linears (2 x MACs, bias adds apart) equal FlopCounterMode's aten.convolution
    + aten.addmm + aten.mm on transformers' module; the attention's q k^T and p v its aten.bmm and
    aten.matmul FLOPs (SegFormer built with eager attention: FlopCounterMode does not count the CPU
    SDPA kernel)."""
    assert_matmul_flops_equal_flop_counter(data)


@pytest.mark.parametrize("data", CASES[::3], ids=IDS[::3])
def test_count_plan_verify_run(data, tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    assert_count_plan_verify(tmp_path, data)


@pytest.mark.parametrize("data, message", [
    ({"model_type": "segformer", "architectures": ["SegformerForSemanticSegmentation"]},
     "architectures: 'SegformerForSemanticSegmentation'"),
    ({"model_type": "pvt_v2", "num_encoder_blocks": 5}, "num_encoder_blocks: 5 needs"),
    ({"model_type": "segformer", "num_attention_heads": [3, 2, 5, 8]}, "num_attention_heads: 3 must divide"),
    ({"model_type": "pvt_v2", "mlp_ratios": [8, "x", 4, 4]}, "mlp_ratios: expected a list of positive numbers"),
    ({"model_type": "segformer", "sr_ratios": [0, 4, 2, 1]}, "stage 0: .*must be positive"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
