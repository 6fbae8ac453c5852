"""The composites of modelplan/specs/hf_vlm_towers.py (EXAONE 4.5, Step 3.7, LFM3-VL, HunYuan-VL,
HyperCLOVA X Vision V2, Fuyu), hf_gemma4_vision.py (Gemma 4, Gemma 4 unified), hf_omni.py (the
Qwen omni thinkers), hf_aria.py (Aria) and hf_janus.py (Janus): total parameters and the tower + projector alone equal
sum(p.numel()) of transformers 5.24's own module built from the same config on the meta device (the
independent source), also for each type's config class defaults and a bare model_type; a tower's
forward FLOPs per image equal FlopCounterMode on transformers' tower and projector; `count` /
`plan --gpus 8` run; bad fields and unmodelled types are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_count_refused, assert_one_line_error, class_defaults
from _hf_reference import hf_config, hf_eager_composite, hf_model, hf_total_and_part
from _hf_vision_cases import TEXT, composite
from _hf_vlm_towers_cases import TOWER_CASES
from test_hf_n18vlm import PREFIXES
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.specs.hf import from_hf_config

IDS = [f"{d['model_type']}-{i}" for i, d in enumerate(TOWER_CASES)]
TOWER_PREFIXES = PREFIXES + ("vision_model.", "embed_vision.", "embed_audio.", "audio_tower.", "vision_embed_tokens.",
                              "vision_tower.", "vqmodel.", "generation_embeddings.", "generation_aligner.",
                              "generation_head.")
"""Name parts of the HF tower / projector parameters (Step 3.7's vision_model, Gemma 4's towers and
embedders, Fuyu's patch Linear, Janus's generation path)."""


def _mine(data: dict) -> tuple[int, int]:
    counts = count_params(from_hf_config(data, "config.json"))
    return counts.total, counts.breakdown.get("vision", 0)


@pytest.mark.torch
@pytest.mark.parametrize("data", TOWER_CASES, ids=IDS)
def test_small_composites_equal_transformers(data):
    """Each small composite counts exactly: total and tower + projector."""
    assert _mine(data) == hf_total_and_part(data, TOWER_PREFIXES)


DEFAULT_TYPES = {"exaone4_5": "Exaone4_5_ForConditionalGeneration", "step3p7": "Step3p7ForConditionalGeneration",
                 "lfm3_vl": "Lfm3VlForConditionalGeneration", "gemma4": "Gemma4ForConditionalGeneration",
                 "gemma4_unified": "Gemma4UnifiedForConditionalGeneration", "fuyu": "FuyuForCausalLM",
                 "qwen2_5_omni_thinker": "Qwen2_5OmniThinkerForConditionalGeneration",
                 "qwen3_omni_moe_thinker": "Qwen3OmniMoeThinkerForConditionalGeneration",
                 "hyperclovax_vision_v2": "HyperCLOVAXVisionV2ForConditionalGeneration",
                 "aria": "AriaForConditionalGeneration", "janus": "JanusForConditionalGeneration"}
"""model_type -> the image-text-to-text class transformers maps it to."""


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULT_TYPES))
def test_class_defaults_equal_transformers(model_type):
    """Each type's config class defaults (the full-size model) count exactly on the meta device."""
    data = {**class_defaults(model_type), "architectures": [DEFAULT_TYPES[model_type]]}
    assert _mine(data) == hf_total_and_part(data, TOWER_PREFIXES)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULT_TYPES))
def test_bare_model_type_equals_transformers(model_type):
    """A config naming only model_type (every sub-config absent) counts exactly."""
    data = {"model_type": model_type, "architectures": [DEFAULT_TYPES[model_type]]}
    assert _mine(data) == hf_total_and_part(data, TOWER_PREFIXES)


@pytest.mark.torch
@pytest.mark.slow
def test_hunyuan_vl_defaults_with_head_dim_equal_transformers():
    """HunYuan-VL's class defaults leave head_dim None, which transformers' own attention cannot
    build; with it set to hidden / heads (128, what the mapper reads for None) the count is exact."""
    data = class_defaults("hunyuan_vl")
    data = {**data, "architectures": ["HunYuanVLForConditionalGeneration"],
            "text_config": {**data["text_config"], "head_dim": 128}}
    assert _mine(data) == hf_total_and_part(data, TOWER_PREFIXES)
    assert _mine({**data, "text_config": {**data["text_config"], "head_dim": None}}) == _mine(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["gemma4", "gemma4_unified"])
@pytest.mark.parametrize("towers", [("vision_config",), ("vision_config", "audio_config")])
def test_gemma4_default_towers_equal_transformers(model_type, towers):
    """Gemma 4 (and unified) with its towers at their config class defaults (the composite's class
    defaults hold neither) counts exactly."""
    data = {**class_defaults(model_type), "architectures": [DEFAULT_TYPES[model_type]], **{k: {} for k in towers}}
    assert _mine(data) == hf_total_and_part(data, TOWER_PREFIXES)


def test_gemma4_audio_is_counted_not_priced():
    """Gemma 4's audio tower adds parameters but no per-image FLOPs (it runs on audio frames)."""
    data = next(d for d in TOWER_CASES if d["model_type"] == "gemma4" and "audio_config" in d)
    with_audio, without = from_hf_config(data), from_hf_config({k: v for k, v in data.items() if k != "audio_config"})
    assert count_params(with_audio).total > count_params(without).total
    assert vision_forward_flops(with_audio.vision, 128) == vision_forward_flops(without.vision, 128)


FLAT_PATCHES = ("exaone4_5", "lfm3_vl", "hyperclovax_vision_v2", "qwen2_5_omni_thinker", "qwen3_omni_moe_thinker")
"""Types whose get_image_features takes Qwen-VL-style flattened patches and their grid."""


def hf_image_flops(data: dict, image: int) -> int:
    """FLOPs FlopCounterMode counts for one image through transformers' tower and projector
    (get_image_features; eager attention, CPU, float32, no grad)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    if data["model_type"] == "fuyu":  # no tower: the Linear over raw patches (1, n, p p C)
        model, cfg = hf_model(data, "cpu"), hf_config(data)
        with torch.no_grad(), counter:
            model.model.get_image_features(torch.randn(1, (image // cfg.patch_size) ** 2,
                                                       cfg.patch_size ** 2 * cfg.num_channels))
        return counter.get_total_flops()
    cfg, model = hf_eager_composite(data)
    v = cfg.vision_config
    with torch.no_grad(), counter:
        if data["model_type"] in FLAT_PATCHES:  # flattened patches (n, C t p p) and their (t, h, w) grid
            p, grid = v.patch_size, image // v.patch_size
            pixels = torch.randn(grid * grid, v.in_channels * v.temporal_patch_size * p * p)
            model.model.get_image_features(pixel_values=pixels, image_grid_thw=torch.tensor([[1, grid, grid]]))
        elif data["model_type"] == "hunyuan_vl":  # flattened patches (n, C p p), one frame
            p, grid = v.patch_size, image // v.patch_size
            model.model.get_image_features(pixel_values=torch.randn(grid * grid, v.num_channels * p * p),
                                           image_grid_thw=torch.tensor([[1, grid, grid]]))
        elif data["model_type"].startswith("gemma4"):  # patches (1, n, 3 p p) and their (x, y) grid positions
            p = v.patch_size * (v.pooling_kernel_size if data["model_type"] == "gemma4_unified" else 1)
            grid = image // p
            xy = torch.stack(torch.meshgrid(torch.arange(grid), torch.arange(grid), indexing="xy"), -1).reshape(1, -1, 2)
            model.model.get_image_features(pixel_values=torch.rand(1, grid * grid, 3 * p ** 2), image_position_ids=xy)
        else:
            model.model.get_image_features(pixel_values=torch.randn(1, 3, image, image))
    # Gemma 4's average pooling runs as a one-hot matmul (Gemma4VisionPooler): a mean, not a layer;
    # Aria's cross-attention scores / context (the bmm of nn.MultiheadAttention) are not priced
    left_out = sum(sum(n for op, n in ops.items() if name == "Gemma4VisionModel.pooler" or str(op) == "aten.bmm")
                   for name, ops in counter.get_flop_counts().items()
                   if name in ("Gemma4VisionModel.pooler", "AriaProjector.cross_attn.multihead_attn"))
    return counter.get_total_flops() - left_out


FLOP_CASES = [d for d in TOWER_CASES if "vision_config" in d or d["model_type"] == "fuyu"]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", FLOP_CASES, ids=[d["model_type"] for d in FLOP_CASES])
def test_forward_flops_per_image_equal_flop_counter(data):
    """count.vision's forward FLOPs of one image equal FlopCounterMode on transformers' tower and
    projector (EXAONE 4.5's grouped-query qkv and windows, Step 3.7's conv downsamplers, LFM3-VL's
    short convolutions, Gemma 4's head_dim and pooled embedder, the encoder-free embedders, the
    omni thinkers' Qwen-VL towers with their audio encoders left out, Aria's query cross-attention
    but its score / context matmuls)."""
    spec = from_hf_config(data)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == hf_image_flops(data, spec.vision.image_size)


def test_grouped_query_tower_attention():
    """EXAONE 4.5's qkv: Linear(64, (4 + 2 x 2) x 16, bias) = 64 x 128 + 128 per block, against
    64 x 192 + 192 with 4 kv heads (hand count, Exaone4_5_VisionAttention)."""
    gqa, mha = (from_hf_config(TOWER_CASES[0]).vision, from_hf_config(
        {**TOWER_CASES[0], "vision_config": {**TOWER_CASES[0]["vision_config"], "num_key_value_heads": 4}}).vision)
    assert (mha.kv_heads, gqa.kv_heads) == (4, 2)
    layers = gqa.layers
    diff = count_params(from_hf_config(TOWER_CASES[0])).breakdown["vision"] - count_params(
        from_hf_config({**TOWER_CASES[0], "vision_config": {**TOWER_CASES[0]["vision_config"],
                                                           "num_key_value_heads": 4}})).breakdown["vision"]
    assert diff == -layers * (64 * 64 + 64)


@pytest.mark.parametrize("data", TOWER_CASES, ids=IDS)
def test_count_and_plan_run(data, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    assert_count_plan(tmp_path, data)


@pytest.mark.parametrize(("model_type", "sub", "key"), [
    ("exaone4_5", "vision_config", "spatial_merge_size"), ("hyperclovax_vision_v2", "vision_config", "patch_size"),
    ("hunyuan_vl", "vision_config", "spatial_merge_size"), ("lfm3_vl", "vision_config", "spatial_merge_size"),
    ("gemma4", "vision_config", "pooling_kernel_size"), ("gemma4_unified", "vision_config", "patch_size"),
    ("aria", "vision_config", "patch_size"), ("exaone4_5", "vision_config", "num_key_value_heads"),
])
def test_zero_divisors_are_one_line_errors(model_type, sub, key):
    """A 0 size the mappers divide by is a one-line error naming it, not a ZeroDivisionError."""
    assert_one_line_error({"model_type": model_type, sub: {key: 0}}, f"{sub}.{key}: must be > 0")


@pytest.mark.parametrize(("data", "message"), [
    (composite("exaone4_5", "Exaone4_5_ForConditionalGeneration", text_config={**TEXT, "model_type": "exaone4"},
               vision_config={"num_key_value_heads": 0}), "vision_config.num_key_value_heads"),
    (composite("step3p7", "Step3p7ForConditionalGeneration", vision_config={"mlp_ratio": -1}),
     "vision_config.mlp_ratio"),
    (composite("exaone4_5", "Exaone4_5_ForConditionalGeneration", text_config={**TEXT, "model_type": "llava"}),
     "text_config.model_type: unsupported 'llava'"),
    (composite("lfm3_vl", "Lfm3VlForConditionalGeneration", vision_config={"layer_types": ["conv"]}),
     "vision_config.layer_types: 1 entries for 14 layers"),
    (composite("gemma4", "Gemma4ForConditionalGeneration", vision_config={"image_size": 112}),
     "vision_config.image_size: 112 px must be a multiple"),
    (composite("gemma4", "Gemma4ForConditionalGeneration", audio_config={}), "audio_config: an audio tower without"),
    (composite("janus", "JanusForConditionalGeneration", vision_config={"use_qk_norm": True}),
     "vision_config.use_qk_norm: true"),
    (composite("aria", "AriaForConditionalGeneration", projector_patch_to_query_dict={"x": 1}),
     "projector_patch_to_query_dict: expected"),
    (composite("aria", "AriaForConditionalGeneration", projector_patch_to_query_dict={"24": 8}),
     "24 patches is not a square grid"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A field the mappers cannot read is a one-line SpecError naming it."""
    assert_one_line_error(data, message)


@pytest.mark.parametrize(("model_type", "reason"), [
    ("gemma4_unified_assistant", "pre_projection"),
])
def test_refused_composites_name_the_mechanism(model_type, reason, tmp_path):
    """A vision-language type the spec cannot express exits non-zero with one line naming the part."""
    assert_count_refused(tmp_path, {"model_type": model_type}, reason)
