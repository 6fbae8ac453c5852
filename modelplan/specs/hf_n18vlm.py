"""HF config mappers of further vision-language composites (transformers 5.24): PaliGemma (1 and 2),
ShieldGemma 2, Aya Vision, Command A Vision (cohere2_vision), LFM2-VL, LightOnOCR, GLM-4.6V,
Video-LLaVA, DeepSeek-VL, Idefics2, Qianfan-OCR, PaddleOCR-VL, GLM-OCR, VideoLLaMA 3, Kimi K2.5 and MiniMax-M3-VL.

Each maps its text model with the mapper of the text model_type (hf.MAPPERS) and its tower and
projector onto a `VisionSpec` whose `connector` lists the projector's layers (module names in
the comments). Sub-configs follow transformers' `SubConfigSpec.create_subconfig`: an absent
text_config / vision_config is the composite's `init_kwargs` over the sub-config class defaults,
a present one is read over the class defaults alone (the init_kwargs do not apply to it).
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_other import _vision as siglip_pixtral_vision
from modelplan.specs.hf_llama import LLAMA_MAPPERS
from modelplan.specs.hf_vision import DEFAULT_IMAGE_SIZE, VISION_MAPPERS, _clip, _linear, _norm, _qwen_tower

Mapper = Callable[[HFConfig], dict]

CLASS_DEFAULTS: dict[str, dict] = {
    "siglip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                            "num_attention_heads": 12, "image_size": 224, "patch_size": 16, "num_channels": 3,
                            "vision_use_head": True},
    "siglip2_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                             "num_attention_heads": 12, "patch_size": 16, "num_patches": 256, "num_channels": 3,
                             "vision_use_head": True},
    "clip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                          "num_attention_heads": 12, "image_size": 224, "patch_size": 32, "num_channels": 3},
    "pixtral": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
                "image_size": 1024, "patch_size": 16, "num_channels": 3},
    "gemma": {"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 16},
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4},
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4},
    "cohere2": {"vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40,
                "num_attention_heads": 64},
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32},
    "lfm2": {"vocab_size": 65536, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8},
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8},
    "deepseek_v3": {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61,
                    "num_attention_heads": 128, "num_key_value_heads": 128, "moe_intermediate_size": 2048,
                    "n_routed_experts": 256, "n_shared_experts": 1, "first_k_dense_replace": 3,
                    "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4},
    "glm4v_text": {"vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
                   "num_attention_heads": 32, "num_key_value_heads": 2},
    "minimax_m3_vl_text": {"vocab_size": 200064, "hidden_size": 6144, "intermediate_size": 3072,
                           "num_hidden_layers": 60, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32},
}
"""Size defaults of the sub-config classes these composites nest (transformers 5.24
`AutoConfig.for_model(model_type)`; keys the class leaves None, such as Llama's head_dim, are
left out: the text mappers derive them)."""


def _sub(c: HFConfig, key: str, default_type: str, init_kwargs: dict | None = None) -> tuple[str, HFConfig]:
    """(model_type, config) of sub-config `key` as transformers builds it: absent -> init_kwargs
    over the class defaults of `default_type`; present -> its own keys over its class's defaults."""
    raw = c.data.get(key)
    if raw is None:
        data = {"model_type": default_type, **(init_kwargs or {})}
    elif isinstance(raw, dict):
        data = raw
    else:
        raise SpecError(f"{c.source}: {c.path}{key}: expected an object, got {raw!r} ({type(raw).__name__})")
    kind = HFConfig(data, c.source, f"{c.path}{key}.").text("model_type", default_type)
    return kind, HFConfig({**CLASS_DEFAULTS.get(kind, {}), **data}, c.source, f"{c.path}{key}.")


def _text(c: HFConfig, text_mappers: dict[str, Mapper], default_type: str, init_kwargs: dict | None = None,
          drop: tuple[str, ...] = ()) -> tuple[dict, HFConfig]:
    """The text model mapped by its own model_type's mapper; `drop`: keys the composite sets that
    change no parameter (PaliGemma's prefix-LM use_bidirectional_attention)."""
    kind, text = _sub(c, "text_config", default_type, init_kwargs)
    mapper = text_mappers.get(kind)
    if mapper is None or kind in VISION_MAPPERS or kind in COMPOSITE_MAPPERS:
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{kind}'")
    if drop:
        text = HFConfig({k: v for k, v in text.data.items() if k not in drop}, c.source, text.path)
    fields = mapper(text)
    if fields.get("arch", "decoder") != "decoder":
        raise SpecError(f"{c.source}: text_config.model_type: '{kind}' is not a decoder")
    return fields, text


def _siglip(v: HFConfig) -> dict:
    """SiglipVisionModel: biased patch conv, one learned position per patch, biased LayerNorm /
    fc1-fc2 blocks, post_layernorm, the attention-pooling head when vision_use_head (built, and
    counted, even where the composite reads last_hidden_state)."""
    return siglip_pixtral_vision(v, False, projector_norm=False)


def _siglip2(v: HFConfig) -> dict:
    """Siglip2VisionModel: SigLIP's blocks with a biased Linear(C p^2, h) patch embedding (the
    conv's parameters) and a num_patches-row position table resized to each image; an image is
    priced at sqrt(num_patches) x sqrt(num_patches) patches."""
    rows = v.size("num_patches")
    side = int(round(rows ** 0.5))
    if side * side != rows:
        raise SpecError(f"{v.source}: {v.path}num_patches: must be a square, got {rows}")
    data = {**v.data, "image_size": side * v.size("patch_size")}
    return {**_siglip(HFConfig(data, v.source, v.path)), "position_rows": rows}


def _tower(c: HFConfig, default_type: str, init_kwargs: dict | None = None,
           kinds: tuple[str, ...] = ("siglip_vision_model",)) -> tuple[dict, HFConfig]:
    """The vision tower of vision_config (one of `kinds`) and its config."""
    kind, v = _sub(c, "vision_config", default_type, init_kwargs)
    towers = {"siglip_vision_model": _siglip, "siglip2_vision_model": _siglip2, "clip_vision_model": _clip,
              "pixtral": lambda v: siglip_pixtral_vision(v, True, projector_norm=False)}
    if kind not in kinds:
        raise SpecError(f"{c.source}: vision_config.model_type: unsupported '{kind}' ({', '.join(kinds)})")
    return towers[kind](v), v


def _single_layer(c: HFConfig, key: str, default: int) -> None:
    """Composites whose projector width assumes one feature layer: a list is refused."""
    if isinstance(c.data.get(key, default), list):
        raise SpecError(f"{c.source}: {key}: only a single layer index is supported")
    c.integer(key, default)


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
    t = fields["hidden"]
    tower["connector"] = [_linear("linear1", tower["hidden"], t, True), _linear("linear2", t, t, True)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


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
    heads = HFConfig(data, c.source, c.path).size("num_attention_heads")
    data = {**data, "attention_bias": False, "head_dim": data.get("head_dim") or data["hidden_size"] // heads}
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
    t = fields["hidden"]
    tower["connector"] = [_linear("readout/0", tower["hidden"], t, True), _linear("readout/2", t, t, True)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


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


COMPOSITE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "paligemma": _paligemma, "shieldgemma2": _shieldgemma2, "aya_vision": _aya_vision,
    "cohere2_vision": _cohere2_vision, "lfm2_vl": _lfm2_vl, "lighton_ocr": _lighton_ocr, "glm46v": _glm46v,
    "video_llava": _video_llava, "deepseek_vl": _deepseek_vl, "idefics2": _idefics2,
    "qianfan_ocr": _qianfan_ocr, "paddleocr_vl": _paddleocr_vl, "glm_ocr": _glm_ocr,
    "video_llama_3": _video_llama_3, "kimi_k25": _kimi_k25,
    "minimax_m3_vl": _minimax_m3_vl,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""

N18VLM_UNMODELLED: dict[str, str] = {
    "mllama": "cross-attention decoder blocks (cross_attention_layers: gated cross-attention with q/k norms "
              "instead of self-attention) and its tiled tower (gated position / tile embeddings, a global encoder)",
    "idefics": "gated cross-attention blocks between the decoder blocks (gated_cross_attn_layers) and its perceiver",
    "fast_vlm": "its timm FastViTHD tower (convolutional RepMixer stages)",
    "perception_lm": "its timm Perception Encoder tower",
    "got_ocr2": "its SAM tower's per-block relative-position tables and convolutional neck and projector",
    "granite4_vision": "its window Q-Former downsamplers (deepstack_layer_map)",
    "aria": "its cross-attention projector over learned queries and the Aria MoE text model",
    "fuyu": "patch embeddings without a vision tower (vision_embed_tokens: a Linear over raw patch pixels)",
}
"""Vision-language types transformers 5.24 ships that the spec cannot yet express exactly."""
