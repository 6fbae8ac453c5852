"""LeViT as a network spec (modelplan/specs/hf_levit.py): total parameters equal sum(p.numel()) of
transformers 5.24's own module (the class `architectures` names) for small configs and the config
class defaults; the convolutions', linears' and attention's FLOPs of one image equal FlopCounterMode's
on that module; LeViT-128S's published size; `count` / `plan --gpus 8` / `verify --tp 2 --pp 2` run;
bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, class_defaults
from _hf_network_checks import assert_count_plan_verify, assert_matmul_flops_equal_flop_counter, total
from _hf_reference import hf_numel

_SMALL = {"model_type": "levit", "image_size": 64, "hidden_sizes": [32, 48, 64], "num_attention_heads": [2, 3, 4],
          "depths": [1, 2, 1], "key_dim": [8, 8, 8], "mlp_ratio": [2, 2, 2], "attention_ratio": [2, 2, 2],
          "num_labels": 5}
CASES = [{**_SMALL, "architectures": ["LevitForImageClassification"]},
         {**_SMALL, "architectures": ["LevitModel"], "mlp_ratio": [0, 3, 1], "attention_ratio": [1, 4, 2],
          "hidden_sizes": [32, 40, 48], "num_attention_heads": [4, 5, 6], "image_size": 80}]
IDS = ["classifier", "model-options"]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds the class it names."""
    assert total(data) == hf_numel(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """The config class defaults (AutoConfig.for_model('levit')) count exactly as the classifier."""
    data = {**class_defaults("levit"), "architectures": ["LevitForImageClassification"]}
    assert total(data) == hf_numel(data)


def test_published_size():
    """LeViT-128S (Graham et al. 2021, Table 2: 7.8 M parameters, facebook/levit-128S config.json:
    heads 4 / 6 / 8, depths 2 / 3 / 4), whose count includes the distillation head beside the
    classifier (BatchNorm1d(384) + Linear(384, 1000) = 385,768): 7.78 M within the table's rounding."""
    params = total({"model_type": "levit", "architectures": ["LevitForImageClassification"], "num_labels": 1000,
                    "num_attention_heads": [4, 6, 8], "depths": [2, 3, 4]})
    assert 7_750_000 <= params + 2 * 384 + 384 * 1000 + 1000 < 7_850_000


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
    ({"model_type": "levit", "image_size": 200}, "patch_size: the patch embedding leaves a 13 x 13 grid"),
    ({"model_type": "levit", "depths": [4, 4]}, "hidden_sizes: the per-stage lists must have 3 entries"),
    ({"model_type": "levit", "hidden_sizes": [120, 256, 384]}, "key_dim: 16 must divide hidden_sizes\\[0\\]"),
    ({"model_type": "levit", "architectures": ["LevitForImageClassificationWithTeacher"]},
     "architectures: 'LevitForImageClassificationWithTeacher'"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
