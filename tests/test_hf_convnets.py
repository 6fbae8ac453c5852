"""HF convolutional classifiers as network specs (modelplan/specs/hf_convnets.py, hf_efficientnet.py, hf_bit.py, hf_poolformer.py,
hf_textnet.py): total parameters
equal sum(p.numel()) of transformers 5.24's own module (the class `architectures` names) for small
configs and the config class defaults; published sizes; convolution FLOPs of one image equal
FlopCounterMode's aten.convolution on that module; `count` / `plan --gpus 8` / `verify` run; bad
fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_image_classifier_cases import BIT_CASES, CONVNET_CASES, CONVNET_DEFAULTS, POOLFORMER_CASES, TEXTNET_CASES
from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults, runner
from _hf_reference import hf_numel
from modelplan.cli import app
from modelplan.count.network import network_layers
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

CASES = CONVNET_CASES + BIT_CASES + POOLFORMER_CASES + TEXTNET_CASES
IDS = [f"{d['architectures'][0]}-{i}" for i, d in enumerate(CASES)]


def _total(data: dict) -> int:
    return count_params(from_hf_config(data, "config.json")).total


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds the class it names."""
    assert _total(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(CONVNET_DEFAULTS))
def test_class_defaults_equal_transformers(model_type):
    """Each type's config class defaults (AutoConfig.for_model) count exactly as its classifier."""
    data = {**class_defaults(model_type), "architectures": [CONVNET_DEFAULTS[model_type]]}
    assert _total(data) == hf_numel(data)


def test_published_sizes():
    """ImageNet-1k classifiers (torchvision.models docs, num_params): mobilenet_v2 3,504,872,
    efficientnet_b0 5,288,548 (width and depth coefficients 1.0, 224 px), regnet_y_400mf 4,344,144
    (RegNetY-400MF, Radosavovic et al. 2020: widths 48 / 104 / 208 / 440, depths 1 / 3 / 6 / 6,
    group width 8)."""
    labels = {"num_labels": 1000}
    assert _total({"model_type": "mobilenet_v2", "architectures": ["MobileNetV2ForImageClassification"],
                   **labels}) == 3_504_872
    assert _total({"model_type": "efficientnet", "architectures": ["EfficientNetForImageClassification"],
                   "width_coefficient": 1.0, "depth_coefficient": 1.0, "hidden_dim": 1280, "image_size": 224,
                   **labels}) == 5_288_548
    assert _total({"model_type": "regnet", "architectures": ["RegNetForImageClassification"], "hidden_sizes": [48, 104, 208, 440],
                   "depths": [1, 3, 6, 6], "groups_width": 8, **labels}) == 4_344_144


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES[::2], ids=IDS[::2])
def test_matmul_flops_equal_flop_counter(data):
    """The convolutions' and linears' FLOPs of one image (2 x MACs, bias adds apart) equal
    FlopCounterMode's aten.convolution + aten.addmm + aten.mm on transformers' module (TensorFlow
    'SAME' and ZeroPad2d paddings give the output sizes of the symmetric padding modelled; ConvNeXt's
    pointwise Linears are its 1x1 convs)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_class, hf_config

    spec = from_hf_config(data)
    model = hf_class(data)._from_config(hf_config(data)).eval()
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model(pixel_values=torch.randn(1, *spec.input_shape))
    ops = {str(op): n for op, n in counter.get_flop_counts()["Global"].items()}
    expected = sum(ops.get(op, 0) for op in ("aten.convolution", "aten.addmm", "aten.mm"))
    assert sum(row.matmul_flops for row in network_layers(spec)) == expected


@pytest.mark.parametrize("data", CASES[1::3], ids=IDS[1::3])
def test_count_plan_verify_run(data, tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    path = assert_count_plan(tmp_path, data)
    result = runner.invoke(app, ["verify", str(path), "--tp", "2", "--pp", "2"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("data, message", [
    ({"model_type": "mobilenet_v2", "hidden_act": "mish"}, "hidden_act: unsupported 'mish'"),
    ({"model_type": "mobilenet_v2", "output_stride": 8}, "output_stride: 8"),
    ({"model_type": "efficientnet", "hidden_dim": 1280}, "hidden_dim: 1280 must equal"),
    ({"model_type": "efficientnet", "strides": [1, 2]}, "kernel_sizes: the per-stage lists"),
    ({"model_type": "regnet", "layer_type": "z"}, "layer_type: unsupported 'z'"),
    ({"model_type": "convnext", "num_stages": 3}, "num_stages: 3"),
    ({"model_type": "bit", "layer_type": "basic"}, "layer_type: unsupported 'basic'"),
    ({"model_type": "poolformer", "pool_size": 4}, "pool_size: 4 must be odd"),
    ({"model_type": "textnet", "conv_layer_strides": [[1]]}, "conv_layer_kernel_sizes: expected one list"),
    ({"model_type": "poolformer", "num_encoder_blocks": 5}, "num_encoder_blocks: 5 needs"),
    ({"model_type": "convnext", "depths": [1, 1]}, "depths: \\[1, 1\\] must be"),
    ({"model_type": "regnet", "architectures": ["RegNetForSegmentation"]}, "architectures: 'RegNetForSegmentation'"),
    ({"model_type": "bit", "width_factor": 2}, "width_factor: 2 makes the last stage 4096 wide"),
    ({"model_type": "bit", "global_padding": "valid"}, "global_padding: unsupported 'valid'"),
    ({"model_type": "bit", "output_stride": 16}, "output_stride: 16"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
