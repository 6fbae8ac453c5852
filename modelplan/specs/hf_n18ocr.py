"""HF config mappers of the OCR / document composites and the GLM-4.6V family (transformers 5.24):
LightOnOCR, GLM-4.6V, Qianfan-OCR, PaddleOCR-VL and GLM-OCR (see hf_n18vlm.py for the conventions)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import LLAMA_MAPPERS
from modelplan.specs.hf_n18vlm_base import Mapper, _siglip, _sub, _text, _tower
from modelplan.specs.hf_vision import VISION_MAPPERS, _linear, _norm, _qwen_tower


_LIGHTON_VISION = {"head_dim": 64, "hidden_size": 1024, "image_size": 1540, "intermediate_size": 4096,
                   "num_attention_heads": 16, "num_channels": 3, "num_hidden_layers": 24, "patch_size": 14}
_LIGHTON_TEXT = {"head_dim": 128, "hidden_size": 1024, "intermediate_size": 3072, "max_position_embeddings": 40960,
                 "num_attention_heads": 16, "num_hidden_layers": 28, "num_key_value_heads": 8, "rms_norm_eps": 1e-6,
                 "rope_theta": 1000000, "sliding_window": None, "vocab_size": 151936}
"""LightOnOcrConfig.sub_configs_defaults init_kwargs (transformers 5.24)."""


def _lighton_ocr(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """LightOnOCR: Qwen3 text model, Pixtral tower, and LightOnOcrMultiModalProjector: RMSNorm
    over the tower width, patch_merger Linear(h m^2, h, bias=False) over m x m patches, linear_1
    (h -> text) and linear_2 (text -> text) without biases (Mistral 3's projector); tied head."""
    fields, _ = _text(c, text_mappers, "qwen3", _LIGHTON_TEXT)
    tower, _ = _tower(c, "pixtral", _LIGHTON_VISION, kinds=("pixtral",))
    m2, h, t = c.integer("spatial_merge_size", 2) ** 2, tower["hidden"], fields["hidden"]
    # LightOnOcrPatchMerger.merging_layer is built even at spatial_merge_size 1 (a Linear(h, h))
    tower["connector"] = [_norm("norm", h, "rmsnorm"), _linear("patch_merger", h * m2, h, False, m2),
                          _linear("linear_1", h, t, False, m2), _linear("linear_2", t, t, False, m2)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


def _glm46v(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """GLM-4.6V: GLM-4V's modules (Glm4vVisionModel, Glm4vTextModel) over Glm4vTextConfig's size
    defaults; untied by default."""
    _, text = _sub(c, "text_config", "glm4v_text")
    data = {**c.data, "text_config": {"model_type": "glm4v_text", **text.data}}
    return VISION_MAPPERS["glm4v"](HFConfig(data, c.source, c.path), text_mappers)


def _qianfan_ocr(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Qianfan-OCR: InternVL's modules (InternViT tower, pixel-shuffle projector) on a Qwen3 text
    model; QianfanOCRVisionConfig's attention_bias defaults to true, the head is untied."""
    _, text = _sub(c, "text_config", "qwen3")
    _, v = _sub(c, "vision_config", "qianfan_ocr_vision")
    data = {**c.data, "text_config": {"model_type": "qwen3", **text.data},
            "vision_config": {"attention_bias": True, **v.data}}
    fields = VISION_MAPPERS["internvl"](HFConfig(data, c.source, c.path), text_mappers)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


_PADDLEOCR_TEXT = {"vocab_size": 103424, "hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 18,
                   "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 128, "use_bias": False,
                   "rms_norm_eps": 1e-5}
_PADDLEOCR_VISION = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27,
                     "num_attention_heads": 16, "num_channels": 3, "image_size": 384, "patch_size": 14,
                     "vision_use_head": False}
"""PaddleOCRTextConfig / PaddleOCRVisionConfig defaults (transformers 5.24)."""


def _paddleocr_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """PaddleOCR-VL: ERNIE 4.5 text model (PaddleOCRTextModel: use_bias on q/k/v/o and the MLP,
    head_dim 128), a SigLIP-shaped tower (biased patch conv, (image_size / patch)^2 positions,
    post_layernorm, no head) and PaddleOCRProjector: LayerNorm over each patch, then over m x m
    merged patches linear_1 (h m^2 -> h m^2) + GELU + linear_2 (-> text), biased; tied unless
    both the composite and its text model say false. A save without text_config is flat (its
    text keys at the top, as the published checkpoints)."""
    raw = c.data.get("text_config")
    if raw is not None and not isinstance(raw, dict):
        raise SpecError(f"{c.source}: text_config: expected an object, got {raw!r}")
    if raw is None:  # hub saves are flat: PaddleOCRVLConfig reads the text keys at the top
        raw, path = {k: v for k, v in c.data.items() if k not in ("vision_config", "architectures", "model_type")}, ""
    else:
        path = "text_config."
    text = HFConfig({**_PADDLEOCR_TEXT, **raw}, c.source, path)
    fields = text_mappers["ernie4_5"](text)
    _, v = _sub(c, "vision_config", "paddleocr_vl_vision")
    tower = _siglip(HFConfig({**_PADDLEOCR_VISION, **{k: x for k, x in v.data.items() if k != "vision_use_head"}},
                             v.source, v.path))
    m2, h = v.integer("spatial_merge_size", 2) ** 2, tower["hidden"]
    tower["connector"] = [_norm("pre_norm", h), _linear("linear_1", h * m2, h * m2, True, m2),
                          _linear("linear_2", h * m2, fields["hidden"], True, m2)]
    fields["vision"] = tower
    # PaddleOCRVLConfig BC: a text_config tie_word_embeddings (default true) also ties; a flat
    # save's top-level key is the composite's own field, so its text model keeps the default
    text_tie = text.flag("tie_word_embeddings", True) if path else True
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True) or text_tie
    return fields


_GLM_OCR_TEXT = {"vocab_size": 59392, "hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 16,
                 "num_attention_heads": 16, "num_key_value_heads": 8, "rms_norm_eps": 1e-5}
"""GlmOcrTextConfig defaults (transformers 5.24)."""


def _glm_ocr_text(c: HFConfig) -> dict:
    """GLM-OCR text model (GlmOcrTextModel): GLM-4 blocks (sandwich norms, fused gate_up_proj)
    without q/k/v biases, head_dim = hidden / heads."""
    data = {**_GLM_OCR_TEXT, **c.data}
    full = HFConfig(data, c.source, c.path)
    heads, hidden = full.size("num_attention_heads"), full.size("hidden_size")
    data = {**data, "attention_bias": False, "head_dim": data.get("head_dim") or hidden // heads}
    return LLAMA_MAPPERS["glm4"](HFConfig(data, c.source, c.path))


def _glm_ocr(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """GLM-OCR: its text model (`_glm_ocr_text`) and GlmOcrVisionModel: biased Conv3d patch
    embedding, 2-D rotary only (no position table, no norm before the blocks), RMSNorm / SwiGLU
    blocks with attention_bias on qkv / proj / MLP and per-head q / k RMSNorms, post_layernorm, a
    Conv2d(h, out, m, stride m) downsample and the merger (proj, LayerNorm, SwiGLU of
    out_hidden_size x in_channels, no biases); untied."""
    text = c.sub("text_config")
    fields = _glm_ocr_text(text if text is not None else HFConfig({}, c.source, "text_config."))
    v = c.sub("vision_config", {})
    h, m2 = v.integer("hidden_size", 1024), v.integer("spatial_merge_size", 2) ** 2
    out, channels, bias = v.integer("out_hidden_size", 1536), v.integer("in_channels", 3), v.flag("attention_bias", True)
    fields["vision"] = _qwen_tower(
        v, h, v.integer("intermediate_size", 4096), patch_bias=True, norm="rmsnorm", norm_bias=False, gated_mlp=True,
        mlp_bias=bias, qkv_bias=bias, attn_out_bias=bias, qk_norm=True, qk_norm_per_head=True,
        image_size=v.integer("image_size", 336), depth_default=24, heads_default=16,
        connector=[_linear("downsample", h * m2, out, True, m2), _linear("merger/proj", out, out, False, m2),
                   _norm("merger/norm", out, merge=m2), _linear("merger/gate_up", out, out * channels, False, m2, 2),
                   _linear("merger/down", out * channels, out, False, m2)])
    fields["vision"]["post_norm"] = True
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


OCR_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "lighton_ocr": _lighton_ocr, "glm46v": _glm46v, "qianfan_ocr": _qianfan_ocr, "paddleocr_vl": _paddleocr_vl,
    "glm_ocr": _glm_ocr,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
