"""FastVLM (modelplan/specs/hf_fast_vlm.py).

Independent sources: transformers 5.24's own modules built on the meta device from the same config
(the language model and FastVlmMultiModalProjector: everything of FastVlmForConditionalGeneration
but its timm tower) and timm 1.0.31's FastViTHD (`timm.create_model('fastvit_mci3',
inference_mode=True, num_classes=0)`, as TimmWrapperModel builds it: sum(p.numel()) and
FlopCounterMode's forward_features FLOPs, measured with timm installed; the live check runs where
timm is)."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import transformers_module
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.specs.hf import from_hf_config

FASTVIT_MCI3_PARAMS = 122_714_208
"""timm 1.0.31: sum(p.numel()) of create_model('fastvit_mci3', inference_mode=True, num_classes=0)."""
FASTVIT_MCI3_FLOPS = {1536: 1_133_593_362_432, 1024: 486_707_822_592}
"""timm 1.0.31: FlopCounterMode total of that module's forward_features on one S x S image
(1536: conv 999,056,867,328 + mm 48,922,361,856 + bmm 69,306,679,296 + addmm 16,307,453,952)."""

TEXT = {"model_type": "qwen2", "hidden_size": 128, "intermediate_size": 256, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000}
SMALL = {"model_type": "fast_vlm", "text_config": TEXT, "image_seq_length": 256}


def _hf_without_tower(data: dict) -> int:
    """sum(p.numel()) of FastVlmForConditionalGeneration's language model, lm_head and projector."""
    import torch

    tf = transformers_module()
    from transformers.models.fast_vlm import modeling_fast_vlm as m

    cfg = tf.FastVlmConfig(**{k: v for k, v in data.items() if k != "model_type"})
    cfg.text_config.tie_word_embeddings = cfg.tie_word_embeddings  # the composite's flag ties its lm_head
    with torch.device("meta"):
        parts = [tf.AutoModelForCausalLM.from_config(cfg.text_config), m.FastVlmMultiModalProjector(cfg)]
    return sum(p.numel() for part in parts for p in part.parameters())


def _tower_flops(data: dict) -> int:
    spec = from_hf_config(data)
    flops = vision_forward_flops(spec.vision, spec.hidden)  # leaves, keyed relative to vision/
    return sum(n for key, n in flops.items() if key.startswith("tower/"))


@pytest.mark.torch
@pytest.mark.parametrize("change", [{}, {"multimodal_projector_bias": False}, {"tie_word_embeddings": True}])
def test_small_composite_equals_transformers_plus_timm_tower(change):
    """Text model, head and projector equal transformers'; the tower timm's FastViTHD."""
    data = {**SMALL, **change}
    counts = count_params(from_hf_config(data))
    assert counts.breakdown["vision/tower"] == FASTVIT_MCI3_PARAMS
    assert counts.total - FASTVIT_MCI3_PARAMS == _hf_without_tower(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers_plus_timm_tower():
    """FastVlmConfig's defaults (FastVLM-7B shape): 7,762,651,744 (FastVlmForConditionalGeneration
    with timm installed: the same figure)."""
    data = class_defaults("fast_vlm")
    total = count_params(from_hf_config(data)).total
    assert total - FASTVIT_MCI3_PARAMS == _hf_without_tower(data)
    assert total == 7_762_651_744


@pytest.mark.parametrize(("tokens", "side"), [(576, 1536), (256, 1024)])
def test_tower_flops_per_image_equal_flop_counter(tokens, side):
    """image_seq_length tokens = (side / 64)^2: FlopCounterMode's count of the tower at that side."""
    data = {**SMALL, "image_seq_length": tokens}
    assert from_hf_config(data).vision.image_size == side
    assert _tower_flops(data) == FASTVIT_MCI3_FLOPS[side]


def test_timm_tower_live_when_installed():
    """Where timm is installed, its module's sum(p.numel()) is the constant above."""
    timm = pytest.importorskip("timm")
    try:
        tower = timm.create_model("fastvit_mci3", pretrained=False, inference_mode=True, num_classes=0)
    except Exception as exc:  # noqa: BLE001 - a timm without this model (or torchvision) cannot check it
        pytest.skip(f"timm cannot build fastvit_mci3: {exc}")
    assert sum(p.numel() for p in tower.parameters()) == FASTVIT_MCI3_PARAMS


def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, SMALL)


@pytest.mark.parametrize(("change", "message"), [
    ({"vision_config": {"architecture": "fastvit_sa12"}}, r"vision_config.architecture: 'fastvit_sa12' not modelled"),
    ({"vision_config": {"image_size": 1000}}, r"vision_config.image_size: 1000 px must be a multiple of the tower's stride 64"),
    ({"vision_config": {"hidden_size": 1024}}, r"vision_config.hidden_size: 1024 must equal the tower's output width"),
    ({"vision_config": {"model_args": {"inference_mode": False}}}, r"inference_mode: false is not modelled"),
    ({"image_seq_length": 300}, r"image_seq_length: 300 is not a square grid"),
    ({"vision_feature_select_strategy": "default"}, r"only 'full' and -1"),
])
def test_bad_fields_are_one_line_errors(change, message):
    """What the mapper cannot express is refused in one line naming the field."""
    assert_one_line_error({**SMALL, **change}, message)
