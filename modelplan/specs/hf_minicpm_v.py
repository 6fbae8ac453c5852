"""HF config mappers of MiniCPM-V 4.6 / 4.7 and MiniCPM-OCR (transformers 5.24
modeling_minicpmv4_6.py, modeling_minicpmv4_7.py, modeling_minicpm_ocr.py: the same modules): a
Qwen3.5 text model and a SigLIP-shaped tower (biased patch conv, one learned position per patch of
vision_config.image_size, LayerNorm / biased q, k, v, out / fc1, fc2 blocks, post_layernorm, no
pooling head) as the layers of a `VisionSpec.tower`, because its window-attention merger
(ViTWindowAttentionMerger) sits after block insert_layer_id: LayerNorm, attention inside each
window_kernel_size window of patches, then the window's patches concatenated -> LayerNorm ->
Linear(k h, k f) -> GELU -> Linear(k f, h) (k = window patches), so the later blocks run on a k-th
of the patches. downsample_mode '4x' skips it (built, counted, not run). The Merger:
merger_times DownsampleMLPs (LayerNorm(4h), Linear(4h, 4h), GELU, Linear(4h, h), the last to the
text width), each on a quarter of the rows before it."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv, _rows
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_sam import _block
from modelplan.specs.hf_vision import _linear, _norm

_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
           "num_channels": 3, "image_size": 224, "patch_size": 16, "window_kernel_size": [2, 2]}
"""MiniCPMV4_6VisionConfig defaults (transformers 5.24; MiniCPM-OCR's and 4.7's are the same)."""

_MERGE = 4
"""Patches one DownsampleMLP row holds: merged_hidden_size = hidden_size * 4 ('two successive 2x2
spatial merges', MiniCPMV4_6DownsampleMLP)."""


def _window_merger(h: int, f: int, rows: int, k: int, run: bool) -> list[dict]:
    """ViTWindowAttentionMerger on `rows` patches in windows of k; `run` False: its parameters only."""
    layers = [_rows(_norm("vit_merger/layer_norm1", h), rows),
              _rows(_linear("vit_merger/self_attn/qkvo", h, h, True, copies=4), rows),
              dict(name="vit_merger/self_attn/scores", kind="attention", in_features=h, keys=k, rows=rows),
              _rows(_norm("vit_merger/pre_norm", k * h), rows // k),
              _rows(_linear("vit_merger/linear_1", k * h, k * f, True), rows // k),
              _rows(_linear("vit_merger/linear_2", k * f, h, True), rows // k)]
    if run:
        return layers
    # the same modules' weights: two LayerNorms (h, k h), q / k / v / out, linear_1, linear_2, biased
    return [_vec("vit_merger/norms", 2 * h + 2 * k * h), _vec("vit_merger/self_attn/qkvo", h + 1, 4 * h),
            _vec("vit_merger/linear_1", k * h + 1, k * f), _vec("vit_merger/linear_2", k * f + 1, h)]


def _minicpm_v(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """MiniCPMV4_6ForConditionalGeneration / MiniCPMV4_7... / MiniCPMOcr... (module docstring);
    tie_word_embeddings defaults to the class's (true for MiniCPM-OCR)."""
    kind = c.text("model_type")
    fields, _ = _text(c, text_mappers, "qwen3_5_text")
    _, v = _sub(c, "vision_config", f"{kind}_vision")
    v = HFConfig({**_VISION, **v.data}, v.source, v.path)
    h, f, heads, layers = (v.size("hidden_size"), v.size("intermediate_size"), v.divisor("num_attention_heads"),
                           v.size("num_hidden_layers"))
    image, patch = v.size("image_size"), v.size("patch_size")
    side = image // patch
    wh, ww = (v.ints("window_kernel_size") + [0, 0])[:2]
    if wh != ww or wh <= 0:
        raise SpecError(f"{c.source}: vision_config.window_kernel_size: {v.ints('window_kernel_size')} must be two "
                        f"equal positive sides (ViTWindowAttentionMerger.get_window_index)")
    if side % wh:
        raise SpecError(f"{c.source}: vision_config.image_size: its {side} x {side} patch grid must divide into "
                        f"{wh} x {wh} windows")
    insert = c.integer("insert_layer_id", 6)  # MiniCPMV4_6Config.__post_init__ sets the vision config's
    mode = c.text("downsample_mode", "4x" if kind == "minicpm_ocr" else "16x")
    run = mode != "4x" and 0 <= insert < layers  # MiniCPMV4_6VisionModel.forward's use_vit_merger
    first = insert + 1 if run else layers
    after = side // wh if run else side
    tower = [_conv("patch_embedding", v.size("num_channels"), h, patch, side * side),
             dict(name="position_embedding", kind="vector", in_features=side * side * h),
             *_block("blocks", h, f, heads, side, side, first, True, False),
             *_window_merger(h, f, side * side, wh * wh, run)]
    if layers - first:
        tower += _block("merged_blocks", h, f, heads, after, after, layers - first, True, False)
    rows = after * after
    tower.append(_rows(_norm("post_layernorm", h), rows))
    times, t = c.integer("merger_times", 1), fields["hidden"]
    if times < 1:
        raise SpecError(f"{c.source}: merger_times: must be >= 1, got {times}")
    connector = []
    for i in range(times):
        rows //= _MERGE
        if rows < 1:
            raise SpecError(f"{c.source}: merger_times: {times} merges leave no rows of a {side}-patch grid")
        width = t if i == times - 1 else h
        connector += [_rows(_norm(f"merger/{i}/pre_norm", _MERGE * h), rows),
                      _rows(_linear(f"merger/{i}/linear_1", _MERGE * h, _MERGE * h, True), rows),
                      _rows(_linear(f"merger/{i}/linear_2", _MERGE * h, width, True), rows)]
    fields["vision"] = dict(layers=layers, hidden=h, heads=heads, ffn_hidden=f, patch_size=patch, image_size=image,
                            channels=v.size("num_channels"), tower=tower, connector=connector)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", kind == "minicpm_ocr")
    return fields


MINICPM_V_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "minicpmv4_6": _minicpm_v, "minicpmv4_7": _minicpm_v, "minicpm_ocr": _minicpm_v}
