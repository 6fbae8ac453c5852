"""The composites of modelplan/specs/hf_n18vlm.py (PaliGemma, ShieldGemma 2, Aya Vision, Command A
Vision, LFM2-VL, LightOnOCR, GLM-4.6V, Video-LLaVA, DeepSeek-VL, Idefics2, Qianfan-OCR,
PaddleOCR-VL, GLM-OCR, VideoLLaMA 3, Kimi K2.5, MiniMax-M3-VL, Ovis2) and of modelplan/specs/hf_n18qformer.py (BLIP-2, InstructBLIP,
InstructBLIP-Video) and hf_n18docling.py (Granite-Docling): total parameters and
the tower + projector alone equal sum(p.numel()) of transformers 5.24's own module built from the
same config on the meta device (the independent source), also for each type's config class
defaults; a tower's forward FLOPs per image equal FlopCounterMode on transformers' tower and
projector; `count` / `plan --gpus 8` run; bad fields are one-line errors naming them."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_n18vlm_cases import _COHERE2, _SIGLIP, N18VLM_CASES
from _hf_reference import hf_eager_composite, hf_total_and_part
from _hf_vision_cases import TEXT, VISION_PARAM_PREFIXES, composite
from modelplan.count.params import count_params
from modelplan.count.vision import image_tokens, vision_forward_flops
from modelplan.specs.hf import from_hf_config

IDS = [f"{d['model_type']}-{i}" for i, d in enumerate(N18VLM_CASES)]
PREFIXES = VISION_PARAM_PREFIXES + ("vision_encoder.", "vision_projection.", "image_tower.", "video_tower.",
                                    "aligner.", "projector.", "qformer.", "query_tokens", "language_projection.",
                                    "density_router.", "mm_projector.",
                                    "visual_embeddings_table.")
"""Name parts of the HF tower / projector parameters (LightOnOCR, Video-LLaVA, DeepSeek-VL add theirs)."""


def hf_total_and_vision(data: dict) -> tuple[int, int]:
    """sum(p.numel()) of transformers' composite, and of its tower + projector parameters."""
    return hf_total_and_part(data, PREFIXES)


def _mine(data: dict) -> tuple[int, int]:
    """(total, vision group); DeepSeek-V3's multi-token prediction modules (the `mtp` group, in its
    checkpoints, not in transformers' model: tests/test_hf.py checks them against MtpModel) left out."""
    counts = count_params(from_hf_config(data, "config.json"))
    return counts.total - counts.breakdown.get("mtp", 0), counts.breakdown.get("vision", 0)


@pytest.mark.torch
@pytest.mark.parametrize("data", N18VLM_CASES, ids=IDS)
def test_small_composites_equal_transformers(data):
    """Each small composite counts exactly: total and tower + projector."""
    assert _mine(data) == hf_total_and_vision(data)


DEFAULT_TYPES = {"paligemma": "PaliGemmaForConditionalGeneration", "shieldgemma2": "Gemma3ForConditionalGeneration",
                 "cohere2_vision": "Cohere2VisionForConditionalGeneration", "lfm2_vl": "Lfm2VlForConditionalGeneration",
                 "lighton_ocr": "LightOnOcrForConditionalGeneration", "glm46v": "Glm46VForConditionalGeneration",
                 "video_llava": "VideoLlavaForConditionalGeneration", "deepseek_vl": "DeepseekVLForConditionalGeneration",
                 "idefics2": "Idefics2ForConditionalGeneration", "qianfan_ocr": "QianfanOCRForConditionalGeneration",
                 "paddleocr_vl": "PaddleOCRVLForConditionalGeneration", "glm_ocr": "GlmOcrForConditionalGeneration",
                 "blip-2": "Blip2ForConditionalGeneration", "instructblip": "InstructBlipForConditionalGeneration",
                 "instructblipvideo": "InstructBlipVideoForConditionalGeneration",
                 "granite_docling": "GraniteDoclingForConditionalGeneration",
                 "video_llama_3": "VideoLlama3ForConditionalGeneration", "kimi_k25": "Kimi_K25ForConditionalGeneration",
                 "minimax_m3_vl": "MiniMaxM3SparseForConditionalGeneration", "ovis2": "Ovis2ForConditionalGeneration"}
"""model_type -> the image-text-to-text class transformers maps it to (aya_vision's defaults,
14 heads over 1152 channels, are refused by transformers itself)."""


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULT_TYPES))
def test_class_defaults_equal_transformers(model_type):
    """Each type's config class defaults (the full-size model) count exactly on the meta device."""
    data = {**class_defaults(model_type), "architectures": [DEFAULT_TYPES[model_type]]}
    assert _mine(data) == hf_total_and_vision(data)


PALIGEMMA_3B_224 = {
    "architectures": ["PaliGemmaForConditionalGeneration"], "model_type": "paligemma", "projection_dim": 2048,
    "text_config": {"hidden_size": 2048, "intermediate_size": 16384, "model_type": "gemma", "num_attention_heads": 8,
                    "num_hidden_layers": 18, "num_image_tokens": 256, "num_key_value_heads": 1, "vocab_size": 257216},
    "vision_config": {"hidden_size": 1152, "intermediate_size": 4304, "model_type": "siglip_vision_model",
                      "num_attention_heads": 16, "num_hidden_layers": 27, "num_image_tokens": 256, "patch_size": 14,
                      "projection_dim": 2048, "vision_use_head": False}}
"""The sizes google/paligemma-3b-pt-224's config.json states (a sparse save: image_size and the
Gemma head_dim come from the class defaults)."""


def test_paligemma_3b_matches_the_published_size():
    """PaliGemma 3B at 224 px: keras-hub's pali_gemma_presets.py states 2,923,335,408 parameters for
    'pali_gemma_3b_224' with its tokenizer's 257,152 rows; the HF config pads the table to 257,216
    (64 more rows of 2,048: +131,072)."""
    keras = {**PALIGEMMA_3B_224, "text_config": {**PALIGEMMA_3B_224["text_config"], "vocab_size": 257152}}
    assert count_params(from_hf_config(keras)).total == 2_923_335_408
    assert count_params(from_hf_config(PALIGEMMA_3B_224)).total == 2_923_335_408 + 64 * 2048


@pytest.mark.torch
def test_paligemma_3b_equals_transformers():
    """The published PaliGemma 3B config counts exactly as transformers builds it (meta device)."""
    assert _mine(PALIGEMMA_3B_224) == hf_total_and_vision(PALIGEMMA_3B_224)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULT_TYPES))
def test_bare_model_type_equals_transformers(model_type):
    """A config naming only model_type (every sub-config absent: the composite's init_kwargs over
    the sub-config class defaults) counts exactly."""
    data = {"model_type": model_type, "architectures": [DEFAULT_TYPES[model_type]]}
    assert _mine(data) == hf_total_and_vision(data)


def test_shieldgemma2_classifier_is_the_whole_composite():
    """ShieldGemma2ForImageClassification wraps Gemma 3's composite and its LM head: same count."""
    data = next(d for d in N18VLM_CASES if d["model_type"] == "shieldgemma2")
    classifier = {**data, "architectures": ["ShieldGemma2ForImageClassification"]}
    assert _mine(classifier) == _mine(data)


def test_idefics2_image_tokens_are_the_latents():
    """An Idefics2 image fills resampler_n_latents text positions (Idefics2Model.image_seq_len)."""
    data = next(d for d in N18VLM_CASES if d["model_type"] == "idefics2")
    assert image_tokens(from_hf_config(data).vision) == data["perceiver_config"]["resampler_n_latents"] == 8


def hf_image_flops(data: dict, image: int) -> int:
    """FLOPs FlopCounterMode counts for one image through transformers' tower and projector
    (get_image_features; eager attention, CPU, float32, no grad)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    cfg, model = hf_eager_composite(data)
    counter = FlopCounterMode(display=False)
    v = cfg.vision_config
    with torch.no_grad(), counter:
        if data["model_type"] in ("glm46v", "glm_ocr"):  # flattened patches (n, C t p p) and their (t, h, w) grid
            p, grid = v.patch_size, image // v.patch_size
            pixels = torch.randn(grid * grid, v.in_channels * v.temporal_patch_size * p * p)
            model.model.get_image_features(pixel_values=pixels, image_grid_thw=torch.tensor([[1, grid, grid]]))
        else:
            model.model.get_image_features(pixel_values=torch.randn(1, 3, image, image))
    return counter.get_total_flops()


FLOP_CASES = [d for d in N18VLM_CASES if d["model_type"] in ("paligemma", "aya_vision", "cohere2_vision",
                                                             "deepseek_vl", "video_llava", "glm46v", "glm_ocr")]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", FLOP_CASES, ids=[d["model_type"] for d in FLOP_CASES])
def test_forward_flops_per_image_equal_flop_counter(data):
    """count.vision's forward FLOPs of one image equal FlopCounterMode on transformers' tower and
    projector (SigLIP / CLIP blocks, pooling head, pixel shuffle + SwiGLU projectors, GLM's
    downsample conv and SwiGLU merger)."""
    spec = from_hf_config(data)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == hf_image_flops(data, spec.vision.image_size)


@pytest.mark.parametrize("data", N18VLM_CASES[::2], ids=IDS[::2])
def test_count_and_plan_run(data, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    assert_count_plan(tmp_path, data)


@pytest.mark.parametrize(("data", "message"), [
    (composite("paligemma", "PaliGemmaForConditionalGeneration", text_config=TEXT,
               vision_config={**_SIGLIP, "model_type": "clip_vision_model"}), r"vision_config.model_type: unsupported 'clip"),
    (composite("aya_vision", "AyaVisionForConditionalGeneration", text_config=_COHERE2, vision_config=_SIGLIP,
               alignment_intermediate_size=97), "alignment_intermediate_size: must be even"),
    (composite("aya_vision", "AyaVisionForConditionalGeneration", text_config=_COHERE2, vision_config=_SIGLIP,
               vision_feature_layer=[-1, -2]), "vision_feature_layer: only a single layer"),
    (composite("lfm2_vl", "Lfm2VlForConditionalGeneration", vision_config={"model_type": "siglip2_vision_model",
               "num_patches": 15}, text_config={**TEXT, "model_type": "lfm2"}), "num_patches: must be a square"),
    (composite("deepseek_vl", "DeepseekVLForConditionalGeneration", text_config={**TEXT, "model_type": "paligemma"}),
     "text_config.model_type: unsupported 'paligemma'"),
    (composite("idefics2", "Idefics2ForConditionalGeneration", text_config=TEXT, perceiver_config=[1]),
     "perceiver_config: expected an object"),
    (composite("granite_docling", "GraniteDoclingForConditionalGeneration", text_config=TEXT,
               vision_config={**_SIGLIP, "out_hidden_size": 64}), "out_hidden_size: 64 must equal"),
])
def test_bad_fields_are_one_line_errors(data, message):
    """A field the mappers cannot read is a one-line SpecError naming it."""
    assert_one_line_error(data, message)
