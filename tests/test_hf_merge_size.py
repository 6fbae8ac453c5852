"""The spatial-merge edge of the vision composites: at spatial_merge_size 1 transformers 5.24 still
builds every merger / projector layer (Mistral3PatchMerger.merging_layer is a Linear(h, h),
LightOnOcrPatchMerger's too; the Qwen-VL PatchMergers keep their MLP over h x 1), so the count
must not drop them. Expected numbers: sum(p.numel()) of transformers' own composite built on the
meta device, and FlopCounterMode on its tower + projector for one image (independent sources)."""

from __future__ import annotations

import copy

import pytest

from _hf_n18vlm_cases import _PIXTRAL
from _hf_reference import config, hf_eager_composite, hf_numel
from _hf_vision_cases import _QWEN25, _QWEN3, TEXT, composite
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.specs.hf import from_hf_config

pytestmark = [pytest.mark.torch, pytest.mark.slow]

_QWEN2 = {"depth": 2, "embed_dim": 64, "num_heads": 4, "hidden_size": 256, "image_size": 112}
_GLM4V = {"depth": 2, "hidden_size": 64, "num_heads": 4, "out_hidden_size": 96, "intermediate_size": 160,
          "image_size": 112, "patch_size": 14}
_PADDLE = {"model_type": "paddleocr_vl", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
           "num_attention_heads": 4, "image_size": 56, "patch_size": 14}

BASES = {
    # (config, where spatial_merge_size lives: the top level or vision_config)
    "mistral3": (composite("mistral3", "Mistral3ForConditionalGeneration", text_config={**TEXT, "model_type": "mistral"},
                           vision_config=_PIXTRAL), "top"),
    "lighton_ocr": (composite("lighton_ocr", "LightOnOcrForConditionalGeneration",
                              text_config={**TEXT, "model_type": "qwen3"}, vision_config=_PIXTRAL), "top"),
    "qwen2_vl": (composite("qwen2_vl", "Qwen2VLForConditionalGeneration",
                           text_config={**TEXT, "model_type": "qwen2_vl_text"}, vision_config=_QWEN2), "vision"),
    "qwen2_5_vl": (composite("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", **TEXT, vision_config=_QWEN25),
                   "vision"),
    "qwen3_vl": (composite("qwen3_vl", "Qwen3VLForConditionalGeneration", text_config=TEXT, vision_config=_QWEN3),
                 "vision"),
    "glm4v": (composite("glm4v", "Glm4vForConditionalGeneration", text_config=TEXT, vision_config=_GLM4V), "vision"),
    "paddleocr_vl": (composite("paddleocr_vl", "PaddleOCRVLForConditionalGeneration", text_config=TEXT,
                               vision_config=_PADDLE), "vision"),
}


def merged(model_type: str, merge: int | None) -> dict:
    """The small config of `model_type` at spatial merge size `merge` (None: the class default)."""
    data, where = copy.deepcopy(BASES[model_type][0]), BASES[model_type][1]
    if merge is not None:
        (data if where == "top" else data["vision_config"])["spatial_merge_size"] = merge
    return data


CASES = [(t, m) for t in BASES for m in (1, 2, None)]


@pytest.mark.parametrize(("model_type", "merge"), CASES, ids=[f"{t}-m{m}" for t, m in CASES])
def test_total_equals_transformers_at_each_merge_size(model_type, merge):
    """Total parameters equal sum(p.numel()) of transformers' composite, merge 1 included."""
    data = merged(model_type, merge)
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_mistral3_class_defaults_equal_transformers():
    """Mistral3Config's own defaults (Mistral-Small-3.1 sizes): 23,340,272,640 either way."""
    data = composite("mistral3", "Mistral3ForConditionalGeneration")
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_mistral3_published_config_at_merge_one():
    """Mistral-Small-3.1 (published config.json) with spatial_merge_size 1: the merger is a
    Linear(1024, 1024) (1,048,576 weights) and the total still equals transformers'."""
    one, two = (config("mistral-small-3.1-24b-instruct-2503", spatial_merge_size=m) for m in (1, 2))
    mine = {m: count_params(from_hf_config(d, "config.json")) for m, d in ((1, one), (2, two))}
    assert mine[1].total == hf_numel(one)
    # Linear(h m^2, h, bias=False) at h = 1024: 4 h^2 at m = 2, h^2 at m = 1 (hand-worked)
    assert mine[2].total - mine[1].total == 4 * 1024 ** 2 - 1024 ** 2


def mistral3_image_flops(data: dict, image: int) -> int:
    """FlopCounterMode on transformers' Pixtral tower + Mistral 3 projector for one image of
    image x image pixels (eager attention, CPU, float32, no grad)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    _, model = hf_eager_composite(data)
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        model.model.get_image_features(pixel_values=torch.randn(1, 3, image, image),
                                       image_sizes=torch.tensor([[image, image]]))
    return counter.get_total_flops()


@pytest.mark.parametrize("merge", [1, 2])
def test_mistral3_image_flops_equal_flop_counter(merge):
    """Forward FLOPs of one image, the merger GEMM at merge 1 included, equal FlopCounterMode."""
    data = merged("mistral3", merge)
    spec = from_hf_config(data)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == mistral3_image_flops(
        data, spec.vision.image_size)
