"""HF Swin / Donut-Swin / Swin V2 image models as network specs (modelplan/specs/hf_swin_networks.py, the
network stack's windowattention and spacetodepth): total parameters equal sum(p.numel()) of
transformers 5.24's own module for small configs and the class defaults, and torchvision's
published swin_t; the matmul FLOPs of one image equal FlopCounterMode on that module with eager
attention; `count` / `plan` / `verify` run; bad fields are one-line errors."""

from __future__ import annotations

import pytest

from _hf_image_classifier_cases import SWIN_CASES, SWIN_DEFAULTS, SWINV2_CASES
from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults, runner
from _hf_network_checks import flop_counts
from _hf_reference import hf_numel
from modelplan.cli import app
from modelplan.count.network import network_layers
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

CASES = SWIN_CASES + SWINV2_CASES
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
@pytest.mark.parametrize("model_type", sorted(SWIN_DEFAULTS))
def test_class_defaults_equal_transformers(model_type):
    """Each type's config class defaults (Swin-T) count exactly as its classifier."""
    data = {**class_defaults(model_type), "architectures": [SWIN_DEFAULTS[model_type]]}
    assert _total(data) == hf_numel(data)


def test_published_swin_t():
    """torchvision's swin_t, 1000 classes: 28,288,354 parameters (torchvision.models docs, num_params)."""
    assert _total({"model_type": "swin", "architectures": ["SwinForImageClassification"], "num_labels": 1000}) \
        == 28_288_354


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES[:3] + CASES[4:5], ids=IDS[:3] + IDS[4:5])
def test_matmul_flops_equal_flop_counter(data):
    """Convolution, linear and attention FLOPs (2 x MACs) of one image equal FlopCounterMode's
    aten.convolution + addmm + mm + bmm on transformers' module with eager attention (grids that
    are multiples of the window: no padding, which transformers runs its projections on), less
    Swin V2's position-bias MLP, which runs once per forward on (2 w - 1)^2 coordinates:
    2 x (2 x 512 + 512 x heads) FLOPs a coordinate in each block (not a per-image cost)."""
    spec, ops = flop_counts(data)
    expected = sum(ops.get(op, 0) for op in ("aten.convolution", "aten.addmm", "aten.mm", "aten.bmm"))
    if data["model_type"] == "swinv2":
        rows = [r for r in network_layers(spec) if r.type == "windowattention"]
        expected -= sum(2 * (2 * 512 + 512 * r.param_shapes["cpb_fc2_weight"][0]) * (2 * 4 - 1) ** 2 for r in rows)
    assert sum(row.matmul_flops for row in network_layers(spec)) == expected


@pytest.mark.parametrize("data", CASES[::3], ids=IDS[::3])
def test_count_plan_verify_run(data, tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    path = assert_count_plan(tmp_path, data)
    result = runner.invoke(app, ["verify", str(path), "--tp", "2", "--pp", "2"])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("data, message", [
    ({"model_type": "swin", "use_absolute_embeddings": True}, "use_absolute_embeddings"),
    ({"model_type": "swin", "image_size": 226}, "patch_size: 4 must divide image_size 226"),
    ({"model_type": "swin", "image_size": 64, "window_size": 7}, "window_size: stage 2's 4 x 4 grid"),
    ({"model_type": "swin", "num_heads": [3, 6]}, "num_heads: expected one positive entry per stage"),
    ({"model_type": "swin", "num_heads": [5, 6, 12, 24]}, "num_heads: 5 must divide stage 0's width 96"),
    ({"model_type": "swinv2", "pretrained_window_sizes": [0, 0]}, "pretrained_window_sizes: expected one entry"),
    ({"model_type": "swinv2", "image_size": [64, 32], "window_size": 8}, "window_size: stage 0's 16 x 8 grid gives Swin V2 a non-square window"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)
