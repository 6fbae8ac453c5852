"""The Gemma 3n composite (modelplan/specs/hf_gemma3n_mm.py, hf_mobilenetv5.py).

Independent sources: transformers 5.24's own modules built on the meta device from the same
config (Gemma3nTextModel, Gemma3nAudioEncoder, the two Gemma3nMultimodalEmbedders: everything of
Gemma3nForConditionalGeneration but its timm vision tower) and timm 1.0.31's MobileNetV5Encoder
(`timm.create_model('mobilenetv5_300m_enc')`: sum(p.numel()) and FlopCounterMode's forward FLOPs
on one 768 x 768 image, measured with timm installed; the live check below runs where timm is)."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import transformers_module
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.specs.hf import from_hf_config

MOBILENETV5_300M_PARAMS = 294_126_912
"""timm 1.0.31: sum(p.numel() for p in create_model('mobilenetv5_300m_enc').parameters())."""
MOBILENETV5_300M_FLOPS_768 = 871_482_949_632
"""timm 1.0.31: FlopCounterMode total of create_model('mobilenetv5_300m_enc')(randn(1, 3, 768, 768))
(aten.convolution 775,676,657,664 + aten.bmm 95,806,291,968)."""


def _small(**audio) -> dict:
    """A small Gemma 3n composite: 4 text blocks, a small audio encoder; the tower is fixed by its
    architecture name."""
    text = {"model_type": "gemma3n_text", "hidden_size": 256, "intermediate_size": 512, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 1000,
            "vocab_size_per_layer_input": 1000, "hidden_size_per_layer_input": 32, "num_kv_shared_layers": 0,
            "laurel_rank": 8, "layer_types": ["sliding_attention"] * 3 + ["full_attention"]}
    return {"model_type": "gemma3n", "text_config": text,
            "audio_config": {"model_type": "gemma3n_audio", "hidden_size": 128, "conf_num_hidden_layers": 2,
                             "conf_num_attention_heads": 4, **audio}}


def _hf_without_tower(data: dict) -> int:
    """sum(p.numel()) of Gemma3nForConditionalGeneration's modules but the timm vision tower."""
    import torch

    tf = transformers_module()
    from transformers.models.gemma3n import modeling_gemma3n as m

    cfg = tf.Gemma3nConfig(**{k: v for k, v in data.items() if k != "model_type"})
    with torch.device("meta"):
        parts = [m.Gemma3nTextModel(cfg.text_config), m.Gemma3nAudioEncoder(cfg.audio_config),
                 m.Gemma3nMultimodalEmbedder(cfg.vision_config, cfg.text_config),
                 m.Gemma3nMultimodalEmbedder(cfg.audio_config, cfg.text_config)]
    return sum(p.numel() for part in parts for p in part.parameters())  # the LM head is tied


def _tower(data: dict) -> int:
    return count_params(from_hf_config(data)).breakdown["vision/tower"]


@pytest.mark.torch
@pytest.mark.parametrize("audio", [{}, {"input_feat_size": 80, "conf_conv_kernel_size": 3},
                                   {"sscp_conv_channel_size": [64, 16], "conf_num_hidden_layers": 0}])
def test_small_composite_equals_transformers_plus_timm_tower(audio):
    """Text model, audio encoder and embedders equal transformers'; the tower timm's MobileNetV5."""
    data = _small(**audio)
    total = count_params(from_hf_config(data)).total
    assert _tower(data) == MOBILENETV5_300M_PARAMS
    assert total - MOBILENETV5_300M_PARAMS == _hf_without_tower(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers_plus_timm_tower():
    """Gemma3nConfig's defaults (gemma-3n-E4B): 7,818,517,072 with the tower (Gemma3nForConditionalGeneration
    with timm installed: the same figure)."""
    data = class_defaults("gemma3n")
    total = count_params(from_hf_config(data)).total
    assert total - MOBILENETV5_300M_PARAMS == _hf_without_tower(data)
    assert total == 7_818_517_072


def test_tower_forward_flops_per_image_equal_flop_counter():
    """One 768 x 768 image through the tower: FlopCounterMode's count on timm's module."""
    spec = from_hf_config(_small())
    assert spec.vision.image_size == 768
    flops = vision_forward_flops(spec.vision, spec.hidden)  # leaves, keyed relative to vision/
    assert sum(n for key, n in flops.items() if key.startswith("tower/")) == MOBILENETV5_300M_FLOPS_768


def test_timm_tower_live_when_installed():
    """Where timm is installed, its module's sum(p.numel()) is the constant above."""
    timm = pytest.importorskip("timm")
    try:
        tower = timm.create_model("mobilenetv5_300m_enc", pretrained=False)
    except Exception as exc:  # noqa: BLE001 - a timm without this model (or torchvision) cannot check it
        pytest.skip(f"timm cannot build mobilenetv5_300m_enc: {exc}")
    assert sum(p.numel() for p in tower.parameters()) == MOBILENETV5_300M_PARAMS


def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0 on the composite."""
    assert_count_plan(tmp_path, _small())


@pytest.mark.parametrize(("change", "message"), [
    ({"vision_config": {"architecture": "mobilenetv5_base"}}, r"vision_config.architecture: 'mobilenetv5_base' not modelled"),
    ({"vision_config": {"image_size": 700}}, r"vision_config.image_size: 700 px gives a 44 x 44 grid"),
    ({"vision_config": {"hidden_size": 1024}}, r"vision_config.hidden_size: 1024 must equal the tower's output width"),
    ({"audio_config": {"sscp_conv_stride_size": [[1, 1], [2, 2]]}}, r"audio_config.sscp_conv_stride_size: .* not modelled"),
    ({"audio_config": {"sscp_conv_channel_size": [8]}}, r"audio_config.sscp_conv_channel_size: expected 2 entries"),
])
def test_bad_fields_are_one_line_errors(change, message):
    """A tower or audio setting the mapper cannot express is refused in one line naming it."""
    data = _small()
    for key, value in change.items():
        data[key] = {**data.get(key, {}), **value}
    assert_one_line_error(data, message)
