"""PP-LCNet as a network spec (modelplan/specs/hf_pp_lcnet.py): total parameters equal sum(p.numel())
of transformers 5.24's PPLCNetForImageClassification for a small config and the config class defaults;
the convolutions' and the head's FLOPs of one image equal FlopCounterMode's on that module; `count` /
`plan --gpus 8` / `verify --tp 2 --pp 2` run; bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults, runner
from _hf_reference import hf_numel
from modelplan.cli import app
from modelplan.count.network import network_layers
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"model_type": "pp_lcnet", "architectures": ["PPLCNetForImageClassification"], "scale": 0.5,
         "class_expand": 64, "num_labels": 5, "image_size": 64, "stem_channels": 16,
         "block_configs": [[[3, 16, 24, 1, False]], [[3, 24, 32, 2, True]], [[5, 32, 32, 1, False]],
                           [[3, 32, 48, 2, False]], [[5, 48, 64, 2, True], [3, 64, 64, 1, True]]]}


def _total(data: dict) -> int:
    return count_params(from_hf_config(data, "config.json")).total


@pytest.mark.torch
def test_small_config_equals_transformers():
    """A small config (scale 0.5, squeeze-and-excitation in two stages) counts as transformers builds it."""
    assert _total(SMALL) == hf_numel(SMALL)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """The config class defaults (AutoConfig.for_model('pp_lcnet')) count exactly as the classifier."""
    data = {**class_defaults("pp_lcnet"), "architectures": ["PPLCNetForImageClassification"]}
    assert _total(data) == hf_numel(data)


@pytest.mark.torch
def test_matmul_flops_equal_flop_counter():
    """Convolutions and the head (2 x MACs) equal FlopCounterMode's aten.convolution + aten.addmm."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_class, hf_config

    spec = from_hf_config(SMALL)
    model = hf_class(SMALL)._from_config(hf_config(SMALL)).eval()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(pixel_values=torch.randn(1, *spec.input_shape))
    ops = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    expected = sum(ops.get(op, 0) for op in ("aten.convolution", "aten.addmm", "aten.mm"))
    assert sum(row.matmul_flops for row in network_layers(spec)) == expected


def test_count_plan_verify_run(tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    path = assert_count_plan(tmp_path, SMALL)
    result = runner.invoke(app, ["verify", str(path), "--tp", "2", "--pp", "2"])
    assert result.exit_code == 0, result.output


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
