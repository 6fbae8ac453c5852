"""nemotron_h_omni (modelplan/specs/hf_nemotron_omni.py): the nemotron_h text model, a RADIO tower
and the pixel-shuffle projector. Expected totals are sum(p.numel()) of transformers 5.24's
NemotronH_Omni_Reasoning_V3 on the meta device for the class defaults and a small config (the
vision part: RadioModel and multi_modal_projector); the RADIO prefix tokens and projector by hand."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error
from _hf_composites import built
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"text_config": {"hidden_size": 128, "num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "intermediate_size": 256, "vocab_size": 300, "head_dim": 32, "hybrid_override_pattern": "M*-E",
                         "mamba_num_heads": 4, "mamba_head_dim": 32, "ssm_state_size": 16, "n_groups": 2,
                         "n_routed_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                         "moe_shared_expert_intermediate_size": 48},
         "vision_config": {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "patch_size": 4,
                           "patch_dim": 48, "max_img_size": 32, "num_cls_tokens": 2, "num_registers": 1,
                           "video_patch_dim": 96, "image_size": 16, "video_temporal_patch_size": 2},
         "vision_hidden_size": 64, "projector_hidden_size": 100}


def _built(kwargs: dict):
    """(config.json dict, NemotronH_Omni_Reasoning_V3 on the meta device) of the config class built from kwargs."""
    return built("nemotron_h_omni", kwargs, "NemotronH_Omni_Reasoning_V3")


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{}, SMALL], ids=["class-defaults", "small"])
def test_total_equals_transformers(kwargs):
    """Total and vision part (everything outside language_model) equal transformers'."""
    data, model = _built(kwargs)
    counted = count_params(from_hf_config(data))
    assert counted.total == sum(p.numel() for p in model.parameters())
    assert counted.breakdown["vision"] == sum(p.numel() for n, p in model.named_parameters()
                                              if not n.startswith("language_model."))


@pytest.mark.torch
def test_prefix_and_projector_by_hand():
    """h 64, 2 class tokens + 1 register: the class token 64 and 2 x 64 more prefix values, the 8 x 8
    position grid 64 x 64, the video projection 96 x 64; projector over 4 patches: RMSNorm 256,
    linear_1 256 x 100, linear_2 100 x 128 (RadioEmbeddings, NemotronH_Omni_Reasoning_V3MultiModalProjector)."""
    b = count_params(from_hf_config(_built(SMALL)[0])).breakdown
    assert (b["vision/tower/class"], b["vision/tower/position"]) == (64, 64 * 64)
    assert b["vision/projector"] == 256 + 256 * 100 + 100 * 128 + 2 * 64 + 96 * 64


@pytest.mark.torch
def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0 on the small config."""
    assert_count_plan(tmp_path, _built(SMALL)[0])


@pytest.mark.parametrize(("change", "field"), [
    ({"audio_config": {"model_type": "parakeet_encoder"}}, "audio_config"),
    ({"vision_config": {"use_swiglu_ffn": True}}, "vision_config.use_swiglu_ffn"),
    ({"vision_config": {"patch_dim": 100}}, "vision_config.patch_dim"),
])
def test_unmodelled_options_one_line(change, field):
    """The audio tower, SwiGLU RADIO blocks, a patch_dim other than C p^2: one line naming the field."""
    assert_one_line_error({"model_type": "nemotron_h_omni", **change}, f"{field}:")
