"""The composites of modelplan/specs/hf_composites_more.py (DeepSeek-VL hybrid, MiniCPM-V 4.6 /
4.7, MiniCPM-OCR, Molmo2, Chameleon, IDEFICS, Phi-4-multimodal, ERNIE 4.5 VL MoE, pi0, Hy4 VL,
Apertus 1.5, Inkling, Evolla, Granite 4
Vision): total parameters and the tower + projector alone equal
sum(p.numel()) of transformers 5.24's own module built from the same config on the meta device (the independent
source), also for each type's config class defaults; `count` / `plan --gpus 8` run; bad fields
are one-line errors naming them; the towers given as layer lists (MiniCPM-V's, Chameleon's) run
the forward FLOPs torch.utils.flop_counter.FlopCounterMode counts on transformers' own modules."""

from __future__ import annotations

import pytest

from _hf_composites_more_cases import CASES, CHAMELEON_CASES, INKLING_ASSIGNMENT_CASES, MINICPM_V_CASES
from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import hf_class, hf_config, hf_eager_composite, hf_total_and_part
from _hf_vision_cases import VISION_PARAM_PREFIXES
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.specs.hf import from_hf_config

IDS = [f"{d['model_type']}-{i}" for i, d in enumerate(CASES)]
PREFIXES = VISION_PARAM_PREFIXES + ("high_res_vision_model.", "high_res_vision_neck.", "high_res_vision_proj.",
                                    "high_res_vision_alpha", "aligner.", "merger.", "multi_modal_projector.", "vqmodel.",
                                    "perceiver_resampler.", "gated_cross_attn_layers.", "embed_tokens_extend.",
                                    "resampler_model.", "vision_moe.",
                                    "dit.", "embed_action_time.", "action_out_proj.",
                                    "vision_tokenizer.", "audio_tokenizer.", "audio_tower.",
                                    "protein_encoder.", "adapter.",
                                    "layerwise_projectors.", "spatial_projectors.", "image_newline")
"""Name parts of the HF tower / projector parameters."""


def _mine(data: dict) -> tuple[int, int]:
    """(total, vision group); multi-token prediction modules (the `mtp` group, not in transformers'
    model) left out, and Chameleon's text q / k norm biases and Apertus 1.5's xIELU scalars (held in the
    vision group) moved out of it."""
    counts = count_params(from_hf_config(data, "config.json"))
    moved = sum(counts.breakdown.get(f"vision/tower/{key}", 0) for key in ("text_qk_norm_biases", "text_xielu_alphas"))
    return counts.total - counts.breakdown.get("mtp", 0), counts.breakdown.get("vision", 0) - moved


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=IDS)
def test_small_composites_equal_transformers(data):
    """Each small composite counts exactly: total and tower + projector."""
    assert _mine(data) == hf_total_and_part(data, PREFIXES)


@pytest.mark.torch
@pytest.mark.parametrize("data", INKLING_ASSIGNMENT_CASES)
def test_inkling_scale_assignment_equals_transformers(data):
    """Fewer HMLP layers than scales: the one-to-one assignment counts as transformers' (needs scipy)."""
    pytest.importorskip("scipy")
    assert _mine(data) == hf_total_and_part(data, PREFIXES)


DEFAULT_TYPES = {"deepseek_vl_hybrid": "DeepseekVLHybridForConditionalGeneration",
                 "minicpmv4_6": "MiniCPMV4_6ForConditionalGeneration",
                 "minicpmv4_7": "MiniCPMV4_7ForConditionalGeneration",
                 "minicpm_ocr": "MiniCPMOcrForConditionalGeneration", "molmo2": "Molmo2ForConditionalGeneration",
                 "chameleon": "ChameleonForConditionalGeneration", "idefics": "IdeficsForVisionText2Text",
                 "phi4_multimodal": "Phi4MultimodalForCausalLM",
                 "ernie4_5_vl_moe": "Ernie4_5_VLMoeForConditionalGeneration", "pi0": "PI0ForConditionalGeneration",
                 "hy_v4_vl": "HYV4VLForConditionalGeneration", "apertus1p5": "Apertus1p5ForConditionalGeneration",
                 "inkling_mm_model": "InklingForConditionalGeneration", "evolla": "EvollaForProteinText2Text"}
"""model_type -> the image-text-to-text class transformers maps it to."""


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", sorted(DEFAULT_TYPES))
def test_class_defaults_equal_transformers(model_type):
    """Each type's config class defaults (the full-size model) count exactly on the meta device."""
    data = {**class_defaults(model_type), "architectures": [DEFAULT_TYPES[model_type]]}
    if model_type == "chameleon":  # ChameleonModel needs a vocabulary_map holding '<image>' to build
        data["vocabulary_map"] = {"<image>": 8711}
    assert _mine(data) == hf_total_and_part(data, PREFIXES)


@pytest.mark.parametrize("data", CASES + INKLING_ASSIGNMENT_CASES)
def test_count_and_plan_run(tmp_path, data):
    """count and plan --gpus 8 exit 0 on each small composite."""
    assert_count_plan(tmp_path, data)


def test_minicpm_merger_quarters_the_later_blocks():
    """MiniCPM-V 16x mode: the blocks after insert_layer_id run on a quarter of the 8 x 8 = 64
    patches (ViTWindowAttentionMerger's 2 x 2 windows), the merger's MLP on a quarter of those."""
    vision = from_hf_config(MINICPM_V_CASES[0]).vision
    rows = {layer.name: layer.rows for layer in vision.tower + vision.connector}
    assert rows["blocks/mlp/lin1"] == 64 and rows["merged_blocks/mlp/lin1"] == 16
    assert rows["merger/0/linear_1"] == 4


@pytest.mark.parametrize(("fields", "message"), [
    ({"vision_config": {"window_kernel_size": [2, 3]}}, "window_kernel_size"),
    ({"vision_config": {"image_size": 72, "patch_size": 8}}, "vision_config.image_size"),
    ({"merger_times": 0}, "merger_times"),
])
def test_minicpm_bad_fields_are_one_line_errors(fields, message):
    """A non-square window, a grid the windows do not divide, no merge round: one line naming the field."""
    base = MINICPM_V_CASES[0]
    data = {**base, **fields, "vision_config": {**base["vision_config"], **fields.get("vision_config", {})}}
    assert_one_line_error(data, message)


def test_chameleon_image_is_1024_tokens():
    """Chameleon's tokenizer turns a 512 x 512 image into 1024 codes of an 8192-entry codebook
    (Chameleon Team 2024, arXiv 2405.09818 sec. 2.1)."""
    from modelplan.count.vision import image_tokens

    spec = from_hf_config({"model_type": "chameleon", "architectures": ["ChameleonForConditionalGeneration"]})
    assert image_tokens(spec.vision) == 1024
    assert count_params(spec).breakdown["vision/tower/quantize/embedding"] == 8192 * 256


def test_inkling_single_frame_patch_is_one_line_error():
    """temporal_patch_size 1 (no temporal scale: transformers 5.24 builds float sizes and fails) is refused."""
    data = {**INKLING_ASSIGNMENT_CASES[0], "vision_config": {"temporal_patch_size": 1}}
    assert_one_line_error(data, "temporal_patch_size")


def _flop_count(run) -> int:
    """FlopCounterMode's total over `run()` (no grad)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


@pytest.mark.torch
@pytest.mark.parametrize("data", MINICPM_V_CASES, ids=[d["model_type"] for d in MINICPM_V_CASES])
def test_minicpm_tower_flops_equal_flop_counter(data):
    """MiniCPM-V / OCR: one image through get_image_features (tower, window merger, merger) costs
    what FlopCounterMode counts on transformers' modules (eager attention)."""
    import torch

    cfg, model = hf_eager_composite(data)
    v = cfg.vision_config
    side = v.image_size // v.patch_size
    pixels = torch.randn(1, v.num_channels, v.patch_size, side * side * v.patch_size)  # the processor's packed patches
    expected = _flop_count(lambda: model.model.get_image_features(pixels, torch.tensor([[side, side]])))
    spec = from_hf_config(data)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == expected


@pytest.mark.torch
def test_chameleon_tokenizer_flops_equal_flop_counter():
    """Chameleon: one image through ChameleonVQVAE.encode (convs, attention, codebook distances)
    costs what FlopCounterMode counts on transformers' modules."""
    import torch

    data = CHAMELEON_CASES[0]
    torch.manual_seed(0)
    model = hf_class(data)._from_config(hf_config(data)).eval()
    side = data["vq_config"]["resolution"]
    expected = _flop_count(lambda: model.model.vqmodel.encode(torch.randn(1, 3, side, side)))
    spec = from_hf_config(data)
    assert sum(vision_forward_flops(spec.vision, spec.hidden).values()) == expected


def test_granite4_vision_class_defaults_refused_naming_the_field():
    """Granite 4 Vision's class defaults leave deepstack_layer_map None, which transformers 5.24
    cannot build either (len(None) in Granite4VisionModel.__init__): one line naming it."""
    assert_one_line_error({"model_type": "granite4_vision"}, "deepstack_layer_map: missing")
