"""muse_glimmer and muse_glimmer_text (modelplan/specs/hf_muse.py). Expected totals are
sum(p.numel()) of transformers 5.24's MuseGlimmerForConditionalGeneration on the meta device for the
class defaults and a small config (its vision part, and the text model with its head as the rest);
the projector and a block's norms / gate by hand from the modeling file."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error
from _hf_composites import built
from modelplan.count.blocks import block_of, block_params
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

SMALL = {"text_config": {"hidden_size": 128, "num_hidden_layers": 5, "num_attention_heads": 4, "num_key_value_heads": 2,
                         "intermediate_size": 256, "vocab_size": 300, "head_dim": 32, "sliding_window": 16},
         "vision_config": {"hidden_size": 64, "num_hidden_layers": 3, "num_attention_heads": 4, "intermediate_size": 96,
                           "patch_size": 4, "pos_emb_height": 6, "pos_emb_width": 6, "merge_size": 2},
         "out_hidden_size": 256, "projector_hidden_size": 100}


def _built(kwargs: dict):
    """(config.json dict, MuseGlimmerForConditionalGeneration on the meta device) of MuseGlimmerConfig(**kwargs)."""
    return built("muse_glimmer", kwargs, "MuseGlimmerForConditionalGeneration")


@pytest.mark.torch
@pytest.mark.parametrize("kwargs", [{}, SMALL], ids=["class-defaults", "small"])
def test_composite_equals_transformers(kwargs):
    """Total and vision part (tower, adapter, projection) equal transformers'; the text_config alone
    as muse_glimmer_text counts the rest."""
    data, model = _built(kwargs)
    counted = count_params(from_hf_config(data))
    assert counted.total == sum(p.numel() for p in model.parameters())
    vision = sum(p.numel() for n, p in model.named_parameters() if ".vision_" in f".{n.split('model.', 1)[-1]}")
    assert counted.breakdown["vision"] == vision
    assert count_params(from_hf_config(data["text_config"])).total == counted.total - vision


def _small_data() -> dict:
    return {"model_type": "muse_glimmer", **SMALL, "text_config": {**SMALL["text_config"], "model_type": "muse_glimmer_text"}}


def test_block_and_projector_by_hand():
    """h 128, 4 heads of 32, 2 kv heads: q/k/v 128 x (128 + 64 + 64), o 128 x 128, gate 128 x 128, the
    four (1 + w) norms 4 x 128, no q/k norm weights; projector: fc1 256 x 100, fc2 100 x 100,
    projection 100 x 128, bias-free (MuseGlimmerVisionAdapter, vision_projection)."""
    spec = from_hf_config(_small_data())
    block = block_params(spec, block_of(spec, 0))
    assert (block["attention/qkv"], block["attention/head_gate"], block["norm"], block["attention/qk_norm"]) == (
        128 * 256, 128 * 128, 4 * 128, 0)
    assert count_params(spec).breakdown["vision/projector"] == 256 * 100 + 100 * 100 + 100 * 128


def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0 on the small config."""
    assert_count_plan(tmp_path, _small_data())


@pytest.mark.parametrize(("change", "field"), [
    ({"layer_rope_theta": [10000.0] * 5}, "layer_rope_theta"),
    ({"layer_types": ["full_attention"] * 4}, "layer_types"),
])
def test_unmodelled_options_one_line(change, field):
    """RoPE on a full block (or none on a sliding one), a layer_types list of the wrong length: one line."""
    data = _small_data()
    assert_one_line_error({**data, "text_config": {**data["text_config"], **change}}, f"{field}:")


def test_non_square_grid_one_line():
    """A non-square position grid: one line naming the fields."""
    data = _small_data()
    assert_one_line_error({**data, "vision_config": {**SMALL["vision_config"], "pos_emb_width": 7}},
                          "pos_emb_height / pos_emb_width")


@pytest.mark.parametrize("model_type", ["diffusion_gemma", "muse_spark"])
def test_refused_multimodal_types_name_the_mechanism(model_type, tmp_path):
    """Each refused multimodal type fails in one line with its missing mechanism (hf_unmodelled_multimodal.py)."""
    from _hf_n17_checks import assert_count_refused
    from modelplan.specs.hf import UNMODELLED

    assert_count_refused(tmp_path, {"model_type": model_type}, UNMODELLED[model_type])
