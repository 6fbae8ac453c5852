"""HF config mappers of the composites VideoLLaMA 3, Kimi K2.5, MiniMax-M3-VL (dynamic resolution) and
Ovis2 (visual-word embeddings; transformers 5.24; see hf_n18vlm.py for the conventions)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18vlm_base import Mapper, _mlp_connector, _siglip, _sub, _text
from modelplan.specs.hf_vision import DEFAULT_IMAGE_SIZE, _linear, _norm


_VIDEO_LLAMA3_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                        "num_attention_heads": 12, "num_channels": 3, "patch_size": 16}
"""VideoLlama3VisionConfig defaults (transformers 5.24)."""


def _video_llama_3(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """VideoLLaMA 3: Qwen2 text model, VideoLlama3VisionModel (SigLIP blocks, biased patch conv,
    2-D rotary positions: no table, post_layernorm, no head; dynamic resolution, priced at
    image_size or `DEFAULT_IMAGE_SIZE` px) and VideoLlama3Projector.readout: Linear(vision, text)
    + GELU + Linear(text, text), biased; untied."""
    fields, _ = _text(c, text_mappers, "qwen2")
    _, v = _sub(c, "vision_config", "video_llama_3_vision")
    data = {**_VIDEO_LLAMA3_VISION, "image_size": DEFAULT_IMAGE_SIZE, **v.data, "vision_use_head": False}
    tower = {**_siglip(HFConfig(data, v.source, v.path)), "position": "rotary"}
    return _mlp_connector(c, fields, tower, ("readout/0", "readout/2"), False)


_MOONVIT = {"patch_size": 14, "pos_emb_height": 64, "pos_emb_width": 64, "num_attention_heads": 16,
            "num_hidden_layers": 27, "hidden_size": 1152, "intermediate_size": 4304, "merge_kernel_size": [2, 2]}
"""Kimi_K25VisionConfig defaults (transformers 5.24)."""


def _kimi_k25(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Kimi K2.5: DeepSeek-V3 text model (a 'kimi_k2' text_config reads as deepseek_v3, as
    Kimi_K25Config does) and MoonViT: biased patch conv, a learned pos_emb_height x pos_emb_width
    position table (bicubic-resized to each image) beside 2-D rotary, SigLIP-shaped biased blocks,
    final_layernorm; Kimi_K25MultimodalProjection: LayerNorm over each patch, then over the
    merge_kernel_size patches in_proj (h m^2 -> h m^2) + GELU + out_proj (-> text), biased.
    Dynamic resolution: priced at image_size or `DEFAULT_IMAGE_SIZE` px."""
    raw = c.data.get("text_config")
    if isinstance(raw, dict) and raw.get("model_type", "deepseek_v3") == "kimi_k2":
        c = HFConfig({**c.data, "text_config": {**raw, "model_type": "deepseek_v3"}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "deepseek_v3")
    _, v = _sub(c, "vision_config", "kimi_k25_vision")
    v = HFConfig({**_MOONVIT, "image_size": DEFAULT_IMAGE_SIZE, **v.data, "vision_use_head": False}, v.source, v.path)
    kernel = v.ints("merge_kernel_size")
    if len(kernel) != 2 or kernel[0] != kernel[1] or kernel[0] < 1:
        raise SpecError(f"{c.source}: vision_config.merge_kernel_size: only square kernels are supported, got {kernel}")
    tower = {**_siglip(v), "position_rows": v.integer("pos_emb_height") * v.integer("pos_emb_width")}
    m2, h = kernel[0] ** 2, tower["hidden"]
    width = c.integer("projection_hidden_size", 1152)
    tower["connector"] = [_norm("pre_norm", width), _linear("in_proj", h * m2, h * m2, True, m2),
                          _linear("out_proj", h * m2, fields["hidden"], True, m2)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


_MINIMAX_VISION = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 16,
                   "num_channels": 3, "image_size": 2016, "patch_size": 14, "temporal_patch_size": 2,
                   "spatial_merge_size": 2}
"""MiniMaxM3VLVisionConfig defaults (transformers 5.24)."""


def _minimax_m3_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """MiniMax-M3-VL: its text model (minimax_m3_vl_text) and MiniMaxM3VLVisionModel: bias-free
    Conv3d patch embedding over temporal_patch_size frames, 2-D rotary positions, pre_layrnorm,
    biased LayerNorm / fc1-fc2 blocks, no final norm; MiniMaxM3VLMultiModalProjector: per patch
    linear_1 (vision -> projector_hidden_size) + GELU + linear_2 (-> text), then over m x m
    merged patches merge_linear_1 (text m^2 -> projector_hidden_size) + GELU + merge_linear_2
    (-> text), biased; tied when it or its text_config says so."""
    fields, text = _text(c, text_mappers, "minimax_m3_vl_text")
    _, v = _sub(c, "vision_config", "minimax_m3_vl_vision")
    v = HFConfig({**_MINIMAX_VISION, **v.data}, v.source, v.path)
    h, t, p = v.size("hidden_size"), fields["hidden"], c.integer("projector_hidden_size", 6144)
    m2 = v.integer("spatial_merge_size") ** 2
    tower = dict(
        layers=v.size("num_hidden_layers"), hidden=h, heads=v.size("num_attention_heads"),
        ffn_hidden=v.size("intermediate_size"), patch_size=v.size("patch_size"), image_size=v.size("image_size"),
        channels=v.size("num_channels"), temporal_patch=v.size("temporal_patch_size"), patch_bias=False,
        position="rotary", pre_norm=True, post_norm=False, projector_norm=False,
        connector=[_linear("linear_1", h, p, True), _linear("linear_2", p, t, True),
                   _linear("merge_linear_1", t * m2, p, True, m2), _linear("merge_linear_2", p, t, True, m2)])
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False) or text.flag("tie_word_embeddings", False)
    return fields


_OVIS2_VISION = {"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24, "num_attention_heads": 8,
                 "num_channels": 3, "image_size": 224, "patch_size": 14, "qkv_bias": False, "mlp_bias": False,
                 "vocab_size": 16384, "hidden_stride": 1, "num_visual_indicator_tokens": 5}
"""Ovis2VisionConfig defaults (transformers 5.24)."""


def _ovis2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Ovis2: Qwen2 text model and Ovis2VisionModel: biased patch conv, one learned position per
    patch, an RMSNorm on the embeddings and after the blocks, RMSNorm / SwiGLU blocks (q/k/v/out
    bias qkv_bias, MLP bias mlp_bias); then head_linear (h s^2 -> visual vocab - indicators,
    no bias) over hidden_stride x hidden_stride patches, a LayerNorm, a softmax, and the
    probabilities times visual_embeddings_table (visual vocab x hidden_size: a bias-free linear);
    tied. The table's width is the composite's hidden_size (the text width in published configs)."""
    fields, _ = _text(c, text_mappers, "qwen2")
    _, v = _sub(c, "vision_config", "ovis2_vision")
    v = HFConfig({**_OVIS2_VISION, **v.data}, v.source, v.path)
    bias, mlp_bias = v.flag("qkv_bias"), v.flag("mlp_bias")
    h, s2 = v.size("hidden_size"), v.integer("hidden_stride") ** 2
    vocab, indicators = v.size("vocab_size"), v.integer("num_visual_indicator_tokens")
    if not 0 <= indicators < vocab:
        raise SpecError(f"{c.source}: vision_config.num_visual_indicator_tokens: must be in [0, vocab_size), "
                        f"got {indicators}")
    tower = dict(
        layers=v.size("num_hidden_layers"), hidden=h, heads=v.size("num_attention_heads"),
        ffn_hidden=v.size("intermediate_size"), patch_size=v.size("patch_size"), image_size=v.size("image_size"),
        channels=v.size("num_channels"), patch_bias=True, norm="rmsnorm", norm_bias=False, qkv_bias=bias,
        attn_out_bias=bias, mlp_bias=mlp_bias, gated_mlp=True, pre_norm=True, post_norm=True, projector_norm=False,
        connector=[_linear("head_linear", h * s2, vocab - indicators, False, s2),
                   _norm("head_norm", vocab - indicators, merge=s2),
                   _linear("visual_embeddings_table", vocab, c.integer("hidden_size", 1536), False, s2)])
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


MORE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "video_llama_3": _video_llama_3, "kimi_k25": _kimi_k25, "minimax_m3_vl": _minimax_m3_vl, "ovis2": _ovis2,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
