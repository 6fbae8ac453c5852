"""HF config mapper of DeepSeek-VL hybrid (transformers 5.24 modeling_deepseek_vl_hybrid.py,
DeepseekVLHybridForConditionalGeneration): DeepSeek-VL's Llama text model and SigLIP tower beside a
second, high-resolution SAM ViT (hf_sam.py, its own neck included) whose output and whose first
global block's output (through a second neck, DeepseekVLSamVisionNeck) each run through
DeepseekVLSamVisionProj (the map interpolated to 4 x the SigLIP grid, two bias-free 3x3 stride-2
convs: output_channels -> 2x -> 4x); the sum (scaled by the learned high_res_vision_alpha) and the
SigLIP tokens meet in DeepseekVLHybridAligner: vision_proj and high_res_vision_proj (each to half
the text width, biased), concatenated, GELU, proj Linear(text, text). Tied by default."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv, _rows
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text, _tower
from modelplan.specs.hf_ocr_more import _GOT_VISION as _SAM_VISION, _stride2
from modelplan.specs.hf_sam import sam_tower
from modelplan.specs.hf_vision import _linear, _norm


def _high_res(v: HFConfig, grid: int) -> list[dict]:
    """The SAM tower, its second neck and the shared proj as connector layers with fixed rows;
    `grid`: the SigLIP grid side the proj output must match."""
    sam, side, out = sam_tower(v)
    if not v.ints("global_attn_indexes"):
        raise SpecError(f"{v.source}: {v.path}global_attn_indexes: empty (DeepseekVLHybridModel reads the first "
                        f"global block's output)")
    h, n, up = v.size("hidden_size"), side * side, 4 * grid  # F.interpolate to (4 output_size)^2
    half = _stride2(up)
    layers = [{**layer, "name": f"high_res/{layer['name']}"} for layer in sam["tower"]]
    return layers + [
        _conv("high_res_neck/conv1", h, out, 1, n, bias=False), _rows(_norm("high_res_neck/layer_norm1", out), n),
        _conv("high_res_neck/conv2", out, out, 3, n, bias=False), _rows(_norm("high_res_neck/layer_norm2", out), n),
        # run twice per image (the last state and the global block's): rows doubled, weights once
        _conv("high_res_proj/conv1", out, 2 * out, 3, 2 * half * half, bias=False),
        _conv("high_res_proj/conv2", 2 * out, 4 * out, 3, 2 * _stride2(half) ** 2, bias=False),
        dict(name="high_res_vision_alpha", kind="vector", in_features=1)]


def _deepseek_vl_hybrid(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """DeepseekVLHybridForConditionalGeneration (module docstring)."""
    fields, _ = _text(c, text_mappers, "llama")
    tower, v = _tower(c, "siglip_vision_model")
    grid = v.size("image_size") // v.size("patch_size")
    _, sam = _sub(c, "high_res_vision_config", "sam_vision_model")
    sam = HFConfig({**_SAM_VISION, **sam.data}, sam.source, sam.path)
    t, out, tokens = fields["hidden"], sam.size("output_channels"), grid * grid
    if _stride2(_stride2(4 * grid)) != grid:
        raise SpecError(f"{c.source}: vision_config: a {grid}-patch grid does not match the high-res proj's output")
    rows = dict(rows=tokens)
    tower["connector"] = _high_res(sam, grid) + [
        {**_linear("aligner/vision_proj", tower["hidden"], t // 2, True), **rows},
        {**_linear("aligner/high_res_vision_proj", 4 * out, t // 2, True), **rows},
        {**_linear("aligner/proj", t, t, True), **rows}]
    if t % 2:
        raise SpecError(f"{c.source}: text_config.hidden_size: {t} must be even (the aligner's two halves)")
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


DEEPSEEK_VL_HYBRID_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "deepseek_vl_hybrid": _deepseek_vl_hybrid}
