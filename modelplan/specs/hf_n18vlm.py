"""HF config mappers of further vision-language composites (transformers 5.24): PaliGemma (1 and 2),
ShieldGemma 2, Aya Vision, Command A Vision (cohere2_vision), LFM2-VL, Video-LLaVA, DeepSeek-VL and
Idefics2; `COMPOSITE_MAPPERS` also holds hf_n18ocr.py's and hf_n18vlm_more.py's.

Each maps its text model with the mapper of the text model_type (hf.MAPPERS) and its tower and
projector onto a `VisionSpec` whose `connector` lists the projector's layers (module names in
the comments); sub-configs are read as transformers builds them (hf_n18vlm_base.py).
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18ocr import OCR_MAPPERS
from modelplan.specs.hf_n18vlm_base import Mapper, _mlp_connector, _single_layer, _siglip, _sub, _text, _tower
from modelplan.specs.hf_n18vlm_more import MORE_MAPPERS
from modelplan.specs.hf_n18mllama import N18MLLAMA_MAPPERS
from modelplan.specs.hf_vision import VISION_MAPPERS, _linear, _norm


_PALIGEMMA_VISION = {"intermediate_size": 4096, "hidden_size": 1152, "patch_size": 14, "image_size": 224,
                     "num_hidden_layers": 27, "num_attention_heads": 16, "vision_use_head": False}
_PALIGEMMA_TEXT = {"hidden_size": 2048, "num_hidden_layers": 18, "intermediate_size": 16384, "num_attention_heads": 8,
                   "num_key_value_heads": 1, "vocab_size": 257152}
"""PaliGemmaConfig.sub_configs_defaults init_kwargs (transformers 5.24 configuration_paligemma.py)."""


def _paligemma(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """PaliGemma / PaliGemma 2: Gemma (or Gemma 2) text model whose prefix-LM mask
    (use_bidirectional_attention, no parameters) is priced causal, SigLIP tower, and
    PaliGemmaMultiModalProjector: Linear(vision hidden, projection_dim, bias=True); tied head."""
    fields, _ = _text(c, text_mappers, "gemma", _PALIGEMMA_TEXT, drop=("use_bidirectional_attention",))
    tower, _ = _tower(c, "siglip_vision_model", _PALIGEMMA_VISION)
    out = c.integer("projection_dim", 2048)
    tower["connector"] = [_linear("linear", tower["hidden"], out, True)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


def _shieldgemma2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """ShieldGemma 2: Gemma3ForConditionalGeneration's modules; ShieldGemma2Config ties when its
    own tie_word_embeddings or the text_config's (Gemma3TextConfig default true) says so."""
    fields = text_mappers["gemma3"](c)
    _, text = _sub(c, "text_config", "gemma3_text")
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False) or text.flag("tie_word_embeddings", True)
    return fields


def _swiglu_shuffle(c: HFConfig, text_hidden: int, tower: dict, inner: int, norm: bool) -> list[dict]:
    """Aya Vision / Command A Vision projector: pixel shuffle by downsample_factor d (d^2 patches
    per row), an optional LayerNorm over h d^2, linear_1 (h d^2 -> inner, bias), SwiGLU over its
    two halves, linear_2 (inner / 2 -> text hidden, bias)."""
    d2 = c.integer("downsample_factor", 2) ** 2
    h = tower["hidden"] * d2
    if inner % 2:
        raise SpecError(f"{c.source}: alignment_intermediate_size: must be even (SwiGLU halves), got {inner}")
    layers = [_norm("layernorm", h, merge=d2)] if norm else []
    return layers + [_linear("linear_1", h, inner, True, d2), _linear("linear_2", inner // 2, text_hidden, True, d2)]


_AYA_VISION = {"hidden_size": 1152, "intermediate_size": 4304, "patch_size": 14, "image_size": 384,
               "num_hidden_layers": 26, "num_attention_heads": 14, "vision_use_head": False}
"""AyaVisionConfig.sub_configs_defaults vision init_kwargs (transformers 5.24)."""


def _aya_vision(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Aya Vision: Cohere2 text model, SigLIP tower (last layer, every token), and
    AyaVisionMultiModalProjector (pixel shuffle, LayerNorm, SwiGLU linear_1 / linear_2 of
    alignment_intermediate_size, which defaults to the text width); tied head."""
    fields, _ = _text(c, text_mappers, "cohere2")
    tower, _ = _tower(c, "siglip_vision_model", _AYA_VISION)
    _single_layer(c, "vision_feature_layer", -1)
    inner = c.integer("alignment_intermediate_size", fields["hidden"])
    tower["connector"] = _swiglu_shuffle(c, fields["hidden"], tower, inner, True)
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


_COHERE2_VISION = {"hidden_size": 1152, "intermediate_size": 3072, "image_size": 512, "num_hidden_layers": 27,
                   "num_attention_heads": 12}
"""Cohere2VisionConfig.sub_configs_defaults vision init_kwargs (transformers 5.24)."""


def _cohere2_vision(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Command A Vision: Cohere2 text model, SigLIP tower (with its pooling head unless
    vision_use_head is false), Cohere2VisionMultiModalProjector (pixel shuffle, SwiGLU
    linear_1 / linear_2 of alignment_intermediate_size, no norm); tied head."""
    fields, _ = _text(c, text_mappers, "cohere2")
    tower, _ = _tower(c, "siglip_vision_model", _COHERE2_VISION)
    inner = c.integer("alignment_intermediate_size", 36864)
    tower["connector"] = _swiglu_shuffle(c, fields["hidden"], tower, inner, False)
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


def _lfm2_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """LFM2-VL: LFM2 text model, SigLIP 2 tower (NaFlex: linear patch embedding, resized position
    table), Lfm2VlMultiModalProjector (pixel unshuffle by downsample_factor, optional LayerNorm,
    linear_1 to projector_hidden_size, activation, linear_2; projector_bias); tied unless
    tie_word_embeddings / tie_embedding says false."""
    fields, _ = _text(c, text_mappers, "lfm2")
    tower, _ = _tower(c, "siglip2_vision_model", kinds=("siglip2_vision_model",))
    d2 = c.integer("downsample_factor", 2) ** 2
    h, inner, bias = tower["hidden"] * d2, c.integer("projector_hidden_size", 2560), c.flag("projector_bias", True)
    norm = [_norm("layer_norm", h, merge=d2)] if c.flag("projector_use_layernorm", True) else []
    tower["connector"] = norm + [_linear("linear_1", h, inner, bias, d2), _linear("linear_2", inner, fields["hidden"], bias, d2)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_embedding", True, "tie_word_embeddings")
    return fields


_VIDEO_LLAVA_VISION = {"model_type": "clip_vision_model", "intermediate_size": 4096, "hidden_size": 1024,
                       "patch_size": 14, "image_size": 224, "num_hidden_layers": 24, "num_attention_heads": 16}
"""VideoLlavaConfig.sub_configs_defaults vision init_kwargs (transformers 5.24)."""


def _video_llava(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Video-LLaVA: LLaVA's text model, projector (linear_1, GELU, linear_2, biased) and CLIP
    image_tower, plus a video_tower of the same vision_config (towers=2: both counted, one run
    per image)."""
    if c.data.get("vision_config") is None:
        c = HFConfig({**c.data, "vision_config": _VIDEO_LLAVA_VISION}, c.source, c.path)
    fields = VISION_MAPPERS["llava"](c, text_mappers)
    fields["vision"]["towers"] = 2
    return fields


def _deepseek_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """DeepSeek-VL: Llama text model, SigLIP tower (pooling head built) and the aligner
    DeepseekVLAligner: linear1 (vision hidden -> text hidden), GELU, linear2 (text -> text),
    biased; tied by default."""
    fields, _ = _text(c, text_mappers, "llama")
    tower, _ = _tower(c, "siglip_vision_model")
    return _mlp_connector(c, fields, tower, ("linear1", "linear2"), True)


_IDEFICS2_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
                    "num_channels": 3, "image_size": 224, "patch_size": 32, "vision_use_head": False}
"""Idefics2VisionConfig defaults (transformers 5.24): SigLIP's blocks without a pooling head."""
_IDEFICS2_TEXT = {"max_position_embeddings": 4096 * 8, "rms_norm_eps": 1e-5}
"""Idefics2Config.sub_configs_defaults text init_kwargs (over MistralConfig)."""


def _perceiver(p: HFConfig, vision_hidden: int, text_hidden: int, text_ffn: int) -> list[dict]:
    """Idefics2Connector: modality_projection (bias-free SwiGLU MLP, vision hidden ->
    text intermediate_size -> text hidden) on every patch, then Idefics2PerceiverResampler:
    n_latents learned latents, resampler_depth layers (RMSNorms on latents and context, bias-free
    q / k / v / o of resampler_n_heads x resampler_head_dim with num_key_value_heads k/v heads,
    post-attention RMSNorm, SwiGLU of 4 x width) and a final RMSNorm; its width is the text width
    (Idefics2Config forces perceiver_config.hidden_size to it). The latents' rows run q / o / MLP,
    the patches' rows k / v (the latents' own k / v rows are left out)."""
    n, depth = p.integer("resampler_n_latents", 64), p.integer("resampler_depth", 3)
    heads, dim, kv = p.integer("resampler_n_heads", 16), p.integer("resampler_head_dim", 96), p.integer("num_key_value_heads", 4)
    t = text_hidden
    layers = [_linear("modality_projection/gate_up", vision_hidden, text_ffn, False, copies=2),
              _linear("modality_projection/down", text_ffn, t, False),
              dict(name="perceiver/latents", kind="vector", in_features=n * t)]
    if depth:
        latent = dict(rows=n, copies=depth)
        layers += [{**_norm("perceiver/norms", t, "rmsnorm"), **latent, "copies": 2 * depth},
                   {**_norm("perceiver/context_norm", t, "rmsnorm"), "copies": depth},
                   {**_linear("perceiver/q_proj", t, heads * dim, False), **latent},
                   _linear("perceiver/kv_proj", t, kv * dim, False, copies=2 * depth),
                   {**_linear("perceiver/o_proj", heads * dim, t, False), **latent},
                   {**_linear("perceiver/gate_up", t, 4 * t, False), **latent, "copies": 2 * depth},
                   {**_linear("perceiver/down", 4 * t, t, False), **latent}]
    return layers + [{**_norm("perceiver/norm", t, "rmsnorm"), "rows": n}]


def _idefics2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Idefics2: Mistral text model, Idefics2VisionTransformer (SigLIP-shaped, post_layernorm,
    no head), the modality projection and perceiver resampler (`_perceiver`); untied."""
    fields, text = _text(c, text_mappers, "mistral", _IDEFICS2_TEXT)
    _, v = _sub(c, "vision_config", "idefics2_vision")
    tower = _siglip(HFConfig({**_IDEFICS2_VISION, **{k: x for k, x in v.data.items() if k != "vision_use_head"}},
                             v.source, v.path))
    _, p = _sub(c, "perceiver_config", "idefics2_perceiver")
    tower["connector"] = _perceiver(p, tower["hidden"], fields["hidden"], fields["ffn_hidden"])
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


COMPOSITE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "paligemma": _paligemma, "shieldgemma2": _shieldgemma2, "aya_vision": _aya_vision,
    "cohere2_vision": _cohere2_vision, "lfm2_vl": _lfm2_vl, "video_llava": _video_llava, "deepseek_vl": _deepseek_vl,
    "idefics2": _idefics2, **OCR_MAPPERS, **MORE_MAPPERS, **N18MLLAMA_MAPPERS,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""

N18VLM_UNMODELLED: dict[str, str] = {
    "perception_lm": "its timm Perception Encoder tower",
}
"""Vision-language types transformers 5.24 ships that the spec cannot yet express exactly."""
