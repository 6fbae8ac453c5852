"""HF ALIGN (modelplan/specs/hf_align.py): AlignModel's total parameters equal sum(p.numel()) of
transformers 5.24's module for a small config and the class defaults (ALIGN-base, EfficientNet-B7
without its top conv); the vision tower's layers hold exactly the network stack's EfficientNet
parameters; `count` / `plan --gpus 8` run."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error
from _hf_reference import hf_numel
from modelplan.count.network import count_network_params
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.hf_align import tower_layers
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_efficientnet import DEFAULTS, efficientnet_layers
from modelplan.specs.network import NetworkSpec

_VISION = {"width_coefficient": 0.5, "depth_coefficient": 0.5, "kernel_sizes": [3, 5], "in_channels": [32, 16],
           "out_channels": [16, 24], "strides": [1, 2], "num_block_repeats": [1, 3], "expand_ratios": [1, 6],
           "image_size": 64}
SMALL = {"model_type": "align", "architectures": ["AlignModel"], "projection_dim": 32, "vision_config": _VISION,
         "text_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128}}


@pytest.mark.torch
@pytest.mark.parametrize("data", [SMALL, {"model_type": "align", "architectures": ["AlignModel"]}],
                         ids=["small", "defaults"])
def test_counts_equal_transformers(data):
    """AlignModel counts exactly as transformers builds it."""
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_tower_holds_the_network_parameters():
    """The tower layers' parameters (convs: C_in / groups x k^2 x C_out + bias; norms 2C) add up to
    the network spec's count of the same EfficientNet (an independent walk: count/network.py)."""
    v = HFConfig({**DEFAULTS["efficientnet"], **_VISION}, "config.json")
    layers = efficientnet_layers(v, top_conv=False)
    tower, _ = tower_layers(layers, [3, 64, 64])
    total = sum((t["in_features"] // t["groups"] * t["kernel"] ** 2 * t["out_features"] + t["out_features"] * t["bias"])
                if t["kind"] == "conv" else 2 * t["in_features"] for t in tower)
    assert total == count_network_params(NetworkSpec(input_shape=[3, 64, 64], layers=layers)).total


def test_count_and_plan_run(tmp_path):
    """`count` and `plan --gpus 8` succeed on the small config."""
    assert_count_plan(tmp_path, SMALL)


def test_other_heads_are_refused():
    """A head class other than AlignModel is a one-line error naming it."""
    assert_one_line_error({**SMALL, "architectures": ["AlignTextModel"]}, "AlignTextModel' not modelled")
