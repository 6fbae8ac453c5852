"""HF config mappers of the vision-language composites beyond Gemma 3 / Mistral 3: Qwen2-VL,
Qwen2.5-VL, Qwen3-VL (and -MoE), Qwen3.5 (and -MoE), LLaVA, LLaVA-NeXT, Llama 4, Idefics3 /
SmolVLM, InternVL, GLM-4V and GLM-4.5V.

Each maps its text model with the mapper of the text model_type (`text_mappers`, hf.MAPPERS) and
its vision tower + projector onto a `VisionSpec` whose `connector` lists the projector's layers,
as the transformers 5.24 modules build them (module names in the comments). Towers with dynamic
resolution (the Qwen-VL family) have no image size in their config: an image is priced at
`DEFAULT_IMAGE_SIZE` pixels square unless vision_config.image_size says otherwise.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import LLAMA_MAPPERS, llama
from modelplan.specs.hf_moe import _experts, _qwen_moe_layers
from modelplan.specs.hf_moe_extra import MOE_EXTRA_MAPPERS
from modelplan.specs.hf_other import _vision as siglip_vision

Mapper = Callable[[HFConfig], dict]

DEFAULT_IMAGE_SIZE = 448
"""Pixels per side of one priced image for towers without a fixed resolution (Qwen-VL): 448 x 448
is 1,024 patches of 14 px (256 merged tokens), the InternVL / Idefics3 tile size."""

_TEXT_DEFAULTS = {
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008,
              "num_hidden_layers": 32, "num_attention_heads": 32},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336,
                "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016,
              "num_hidden_layers": 32, "num_attention_heads": 32},
}
"""Size defaults of the config classes a sparse text_config relies on (LLaVA's saves only what
differs from LlamaConfig / MistralConfig / Qwen2Config; transformers 5.24 defaults)."""


def _text(c: HFConfig, default_type: str, text_mappers: dict[str, Mapper], top_level: bool = False) -> tuple[dict, HFConfig]:
    """The text model, mapped by its own model_type; `top_level`: a save without text_config
    keeps the text keys at the top (Qwen2-VL / Qwen2.5-VL before transformers 5)."""
    text = c.sub("text_config")
    if text is None and top_level:
        data = {k: v for k, v in c.data.items() if k not in ("vision_config", "architectures")}
        text = HFConfig({**data, "model_type": default_type}, c.source)
    elif text is None:
        text = HFConfig({}, c.source, "text_config.")
    mapped_type = text.text("model_type", default_type)
    mapper = text_mappers.get(mapped_type)
    if mapper is None or mapped_type in VISION_MAPPERS:
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{mapped_type}'")
    defaults = _TEXT_DEFAULTS.get(mapped_type, {})
    text = HFConfig({**defaults, **text.data}, c.source, text.path)
    fields = mapper(text)
    if fields.get("arch", "decoder") != "decoder":
        raise SpecError(f"{c.source}: text_config.model_type: '{mapped_type}' is not a decoder")
    return fields, text


def _tied(c: HFConfig, text: HFConfig, default: bool, forwarded: bool) -> bool:
    """The composite's tie_word_embeddings; `forwarded`: the config class also ties when an old
    save put true inside text_config (Qwen2-VL, Qwen2.5-VL, LLaVA configuration BC)."""
    tied = c.flag("tie_word_embeddings", default)
    return tied or (forwarded and text.path != "" and text.flag("tie_word_embeddings", False))


def _image_size(v: HFConfig, key: str = "image_size", default: int | None = None) -> int:
    """A square side in pixels (InternVL saves [448, 448]); non-square is refused."""
    value = v.data.get(key, default)
    if isinstance(value, list):
        if len(value) != 2 or value[0] != value[1]:
            raise SpecError(f"{v.source}: {v.path}{key}: only square sizes are supported, got {value!r}")
        return HFConfig({key: value[0]}, v.source, v.path).size(key)
    return HFConfig({key: value}, v.source, v.path).size(key) if value is not None else v.size(key)


def _linear(name: str, n_in: int, n_out: int, bias: bool, merge: int = 1, copies: int = 1) -> dict:
    return dict(name=name, kind="linear", in_features=n_in, out_features=n_out, bias=bias, merge=merge, copies=copies)


def _norm(name: str, width: int, kind: str = "layernorm", merge: int = 1, copies: int = 1) -> dict:
    return dict(name=name, kind=kind, in_features=width, bias=kind == "layernorm", merge=merge, copies=copies)


def _qwen_tower(v: HFConfig, hidden: int, ffn: int, position: str = "rotary", patch: int = 14,
                image_size: int = DEFAULT_IMAGE_SIZE, depth_default: int = 32, heads_default: int = 16,
                **fields) -> dict:
    """Shared fields of the Qwen-VL towers: Conv3d patch embedding over temporal_patch_size frames,
    2-D rotary positions, no norm before or after the blocks, biases on qkv / proj / MLP."""
    fields.setdefault("patch_bias", False)
    return dict(
        layers=v.integer("depth", depth_default), hidden=hidden, heads=v.integer("num_heads", heads_default), ffn_hidden=ffn,
        patch_size=v.integer("patch_size", patch), temporal_patch=v.integer("temporal_patch_size", 2),
        image_size=v.integer("image_size", image_size), channels=v.integer("in_channels", 3, "in_chans"),
        position=position, pre_norm=False, post_norm=False, projector_norm=False, **fields,
    )


def _merger(h: int, m2: int, out: int, norm: str) -> list[dict]:
    """Qwen2-VL PatchMerger / Qwen2_5_VLPatchMerger: ln_q over each patch, then
    Linear(h m^2, h m^2) + GELU + Linear(h m^2, out) on the merged m x m patches."""
    return [_norm("merger/norm", h, norm), _linear("merger/fc1", h * m2, h * m2, True, m2),
            _linear("merger/fc2", h * m2, out, True, m2)]


def _qwen2_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Qwen2-VL: Qwen2 text model, a LayerNorm / fc1-fc2 tower of width embed_dim
    (mlp_ratio x embed_dim inner), PatchMerger to vision_config.hidden_size."""
    fields, text = _text(c, "qwen2_vl_text", text_mappers, top_level=True)
    v = c.sub("vision_config", {})
    h = v.integer("embed_dim", 1280)
    m2 = v.integer("spatial_merge_size", 2) ** 2
    ffn = int(h * v.number("mlp_ratio", 4, positive=True))  # VisionMlp(dim, int(dim * mlp_ratio))
    fields["vision"] = _qwen_tower(v, h, ffn, connector=_merger(h, m2, v.integer("hidden_size", 3584), "layernorm"))
    fields["tied_embeddings"] = _tied(c, text, False, True)
    return fields


def _qwen2_5_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Qwen2.5-VL: Qwen2 text model, an RMSNorm / SwiGLU (biased) tower with window attention
    (full attention in fullatt_block_indexes; no count change), RMSNorm PatchMerger."""
    fields, text = _text(c, "qwen2_5_vl_text", text_mappers, top_level=True)
    fields["vision"] = _qwen2_5_tower(c.sub("vision_config", {}))
    fields["tied_embeddings"] = _tied(c, text, False, True)
    return fields


def _qwen2_5_tower(v: HFConfig, **fields) -> dict:
    """Qwen2_5_VisionTransformerPretrainedModel and its RMSNorm PatchMerger (also EXAONE 4.5's)."""
    h, patch = v.integer("hidden_size", 3584), v.divisor("patch_size", 14)
    merge = v.divisor("spatial_merge_size", 2)
    m2 = merge ** 2
    window = v.integer("window_size", 112) // merge // patch * merge  # vit_merger_window_size, in patches
    return _qwen_tower(
        v, h, v.integer("intermediate_size", 3420), norm="rmsnorm", norm_bias=False, gated_mlp=True,
        window_patches=window or None, full_attention_layers=v.ints("fullatt_block_indexes", [7, 15, 23, 31]),
        connector=_merger(h, m2, v.integer("out_hidden_size", 3584), "rmsnorm"), **fields)


def _qwen3_vl_moe_text(c: HFConfig) -> dict:
    """Qwen3-VL-MoE text model: Qwen3 attention (q/k norms, head_dim 128) with fused routed
    experts behind a softmax router whose top-k weights are always renormalised
    (Qwen3VLMoeTextTopKRouter); MoE placement as Qwen3-MoE (decoder_sparse_step, mlp_only_layers)."""
    moe = None
    if c.integer("num_experts", 60, "num_local_experts") > 0:
        moe = _experts(c.renamed({"num_local_experts": "num_experts"}), "num_experts", 60, 4,
                       "moe_intermediate_size", norm_topk_prob=True, **_qwen_moe_layers(c))
    bias = c.flag("attention_bias", False)
    return llama(c, head_dim=c.integer("head_dim", 128), qk_norm=True, qkv_bias=bias, attn_out_bias=bias, moe=moe)


def _qwen3_vl(c: HFConfig, text_mappers: dict[str, Mapper], text_type: str = "qwen3_vl_text",
              deepstack: bool = True) -> dict:
    """Qwen3-VL: Qwen3 text model, a LayerNorm / fc1-fc2 tower with a biased Conv3d and a learned
    position table (num_position_embeddings rows, interpolated) besides 2-D rotary, the
    PatchMerger (LayerNorm over each patch) and one deepstack merger (LayerNorm after the merge)
    per deepstack_visual_indexes entry."""
    fields, text = _text(c, text_type, text_mappers)
    fields["vision"] = _qwen3_tower(c.sub("vision_config", {}), deepstack)
    fields["tied_embeddings"] = _tied(c, text, False, False)
    return fields


def _qwen3_tower(v: HFConfig, deepstack: bool = True) -> dict:
    """Qwen3_VLVisionModel with its merger and deepstack mergers (also Qwen3-Omni's)."""
    h, m2 = v.integer("hidden_size", 1152), v.integer("spatial_merge_size", 2) ** 2
    # Qwen3.5's tower (Qwen3_5VisionModel) builds no deepstack mergers, whatever the key says
    out = v.integer("out_hidden_size", 3584)
    deep = len(v.ints("deepstack_visual_indexes", [8, 16, 24])) if deepstack else 0
    connector = [_norm("merger/norm", h), _linear("merger/fc1", h * m2, h * m2, True, m2),
                 _linear("merger/fc2", h * m2, out, True, m2)]
    if deep:
        connector += [_norm("deepstack/norm", h * m2, merge=m2, copies=deep),
                      _linear("deepstack/fc1", h * m2, h * m2, True, m2, deep),
                      _linear("deepstack/fc2", h * m2, out, True, m2, deep)]
    return _qwen_tower(
        v, h, v.integer("intermediate_size", 4304), patch_bias=True, position="learned", patch=16,
        position_rows=v.integer("num_position_embeddings", 2304), connector=connector)


def _clip(v: HFConfig) -> dict:
    """CLIPVisionModel: class embedding, bias-free patch conv, (patches + 1) learned positions,
    pre_layrnorm and post_layernorm, LayerNorm / fc1-fc2 blocks with biases."""
    return dict(
        layers=v.integer("num_hidden_layers", 12), hidden=v.integer("hidden_size", 768),
        heads=v.integer("num_attention_heads", 12), ffn_hidden=v.integer("intermediate_size", 3072),
        patch_size=v.integer("patch_size", 32), image_size=v.integer("image_size", 224),
        channels=v.integer("num_channels", 3), patch_bias=False, class_token=True,
        pre_norm=True, post_norm=True, projector_norm=False,
    )


def _llava_tower(c: HFConfig) -> dict:
    vision = c.sub("vision_config", {})
    kind = vision.text("model_type", "clip_vision_model")
    if kind == "clip_vision_model":
        return _clip(vision)
    if kind == "siglip_vision_model":
        return siglip_vision(HFConfig({**{"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                                          "num_attention_heads": 12, "image_size": 224, "patch_size": 16},
                                       **vision.data}, c.source, vision.path), False, projector_norm=False)
    raise SpecError(f"{c.source}: vision_config.model_type: unsupported '{kind}' (clip_vision_model, "
                    "siglip_vision_model)")


def _llava(c: HFConfig, text_mappers: dict[str, Mapper], newline: bool = False) -> dict:
    """LLaVA / LLaVA-NeXT: the text model, a CLIP (or SigLIP) tower, LlavaMultiModalProjector
    (linear_1 over the selected layers' concatenated features, GELU, linear_2); LLaVA-NeXT adds
    the learned image_newline (text width)."""
    fields, text = _text(c, "llama", text_mappers)
    tower = _llava_tower(c)
    layer = c.data.get("vision_feature_layer", -2)
    if isinstance(layer, list):
        selected = len(c.ints("vision_feature_layer"))
    else:
        c.integer("vision_feature_layer", -2)
        selected = 1
    t, bias = fields["hidden"], c.flag("multimodal_projector_bias", True)
    strategy = c.text("vision_feature_select_strategy", "default")
    if strategy not in ("default", "full"):
        raise SpecError(f"{c.source}: vision_feature_select_strategy: unsupported '{strategy}' (default, full)")
    # 'default' drops the first token (CLIP's class token; a SigLIP patch), 'full' keeps every token
    offset = (int(tower.get("class_token", False)) if strategy == "full" else
              -1 + int(tower.get("class_token", False)))
    connector = [_linear("linear_1", tower["hidden"] * selected, t, bias), _linear("linear_2", t, t, bias)]
    for layer in connector:
        layer["row_offset"] = offset
    if newline:
        connector.append(dict(name="image_newline", kind="vector", in_features=t))
    fields["vision"] = {**tower, "connector": connector}
    fields["tied_embeddings"] = _tied(c, text, False, True)
    return fields


def _llama4(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Llama 4: Llama 4 text model and Llama4VisionModel: unfold + bias-free Linear patch
    embedding, class embedding, (patches + 1) positions, layernorm_pre / layernorm_post, biased
    LayerNorm / fc1-fc2 blocks, the pixel-shuffle adapter (fc1 intermediate_size ->
    projector_input_dim, fc2 projector_output_dim^2, no biases) and multi_modal_projector
    Linear(vision_output_dim, text hidden, bias=False)."""
    fields, text = _text(c, "llama4_text", text_mappers)
    v = c.sub("vision_config", {})
    ratio = v.number("pixel_shuffle_ratio", 0.5, positive=True)
    merge = round(1 / ratio ** 2)
    if abs(merge * ratio ** 2 - 1) > 1e-9:
        raise SpecError(f"{c.source}: vision_config.pixel_shuffle_ratio: 1 / ratio^2 must be an integer, got {ratio}")
    inner, p_in, p_out = (v.integer(k, d) for k, d in
                          (("intermediate_size", 5632), ("projector_input_dim", 4096), ("projector_output_dim", 4096)))
    fields["vision"] = dict(
        layers=v.integer("num_hidden_layers", 34), hidden=v.integer("hidden_size", 768),
        heads=v.integer("num_attention_heads", 16), ffn_hidden=inner, patch_size=v.integer("patch_size", 14),
        image_size=v.integer("image_size", 448), channels=v.integer("num_channels", 3), patch_bias=False,
        class_token=True, position="learned", pre_norm=True, post_norm=True, projector_norm=False,
        connector=[_linear("adapter/fc1", inner, p_in, False, merge), _linear("adapter/fc2", p_out, p_out, False, merge),
                   _linear("linear_1", v.integer("vision_output_dim", 7680), fields["hidden"], False, merge)],
    )
    fields["tied_embeddings"] = _tied(c, text, False, False)
    return fields


def _idefics3(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Idefics3 / SmolVLM: Llama text model, a SigLIP-style tower (biased patch conv, one position
    per patch, post_layernorm, no pooling head) and the connector: pixel shuffle by scale_factor,
    then Linear(h s^2, text hidden, bias=False)."""
    fields, text = _text(c, "llama", text_mappers)
    v = c.sub("vision_config", {})
    s2 = c.integer("scale_factor", 2) ** 2
    h = v.integer("hidden_size", 1152)
    fields["vision"] = dict(
        layers=v.integer("num_hidden_layers", 12), hidden=h, heads=v.integer("num_attention_heads", 16),
        ffn_hidden=v.integer("intermediate_size", 3072), patch_size=v.integer("patch_size", 32),
        image_size=v.integer("image_size", 224), channels=v.integer("num_channels", 3), pre_norm=False,
        post_norm=True, projector_norm=False,
        connector=[_linear("modality_projection", h * s2, fields["hidden"], False, s2)],
    )
    fields["tied_embeddings"] = _tied(c, text, False, False)
    return fields


def _internvl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """InternVL (transformers' -hf format): the text model, InternViT (cls token, learned
    positions, biased patch conv, q/k/v bias = attention_bias, optional q/k RMSNorms, layer-scale
    lambda_1 / lambda_2, LayerNorm or RMSNorm), no final norm under mean pooling, and
    multi_modal_projector: LayerNorm + Linear(h / r^2, text) + GELU + Linear(text, text) after a
    pixel shuffle by downsample_ratio r."""
    fields, text = _text(c, "qwen2", text_mappers)
    v = c.sub("vision_config", {})
    if v.flag("use_mask_token", False):
        raise SpecError(f"{c.source}: vision_config.use_mask_token: true is not supported")
    norm = {"layer_norm": "layernorm", "rms_norm": "rmsnorm"}.get(v.text("norm_type", "layer_norm"))
    if norm is None:
        raise SpecError(f"{c.source}: vision_config.norm_type: unsupported '{v.text('norm_type')}' (layer_norm, rms_norm)")
    if norm == "rmsnorm" and not v.flag("use_mean_pooling", True):  # its final LayerNorm keeps a bias
        raise SpecError(f"{c.source}: vision_config.use_mean_pooling: false with norm_type rms_norm is not supported")
    ratio = c.number("downsample_ratio", 0.5, positive=True)
    s2 = int(1 / ratio) ** 2  # InternVLMultiModalProjector: hidden * int(1 / downsample_ratio) ** 2
    h, t = v.integer("hidden_size", 1024), fields["hidden"]
    fields["vision"] = dict(
        layers=v.integer("num_hidden_layers", 24), hidden=h, heads=v.integer("num_attention_heads", 16),
        ffn_hidden=v.integer("intermediate_size", 4096), patch_size=_image_size(v, "patch_size", 14),
        image_size=_image_size(v, "image_size", 448), channels=v.integer("num_channels", 3), class_token=True,
        position="learned" if v.flag("use_absolute_position_embeddings", True) else "rotary",
        norm=norm, norm_bias=norm == "layernorm", qkv_bias=v.flag("attention_bias", False),
        qk_norm=v.flag("use_qk_norm", False), layer_scale=True, pre_norm=False,
        post_norm=not v.flag("use_mean_pooling", True), projector_norm=False,
        connector=[_norm("layer_norm", h * s2, merge=s2), _linear("linear_1", h * s2, t, True, s2),
                   _linear("linear_2", t, t, True, s2)],
    )
    fields["tied_embeddings"] = _tied(c, text, True, False)
    return fields


def _glm4v_text(c: HFConfig) -> dict:
    """GLM-4V text model (Glm4vTextModel): GLM-4 blocks (sandwich norms, q/k/v bias always, fused
    gate_up_proj), head_dim = hidden / heads."""
    heads = c.size("num_attention_heads")
    data = {**c.data, "attention_bias": True, "head_dim": c.size("hidden_size") // heads}
    return LLAMA_MAPPERS["glm4"](HFConfig(data, c.source, c.path))


def _glm4v_moe_text(c: HFConfig) -> dict:
    """GLM-4.5V text model: GLM-4.5's blocks (Glm4vMoeTextConfig: attention_bias defaults to true)."""
    return MOE_EXTRA_MAPPERS["glm4_moe"](HFConfig({"attention_bias": True, **c.data}, c.source, c.path))


def _glm4v(c: HFConfig, text_mappers: dict[str, Mapper], text_type: str = "glm4v_text") -> dict:
    """GLM-4V: GLM-4 text model and Glm4vVisionModel: biased Conv3d patch embedding, RMSNorm
    after it (post_conv_layernorm) and after the blocks, one learned position per patch of
    image_size (interpolated), RMSNorm / SwiGLU blocks of out_hidden_size inner width without
    biases (qkv bias = attention_bias), a Conv2d(h, out, m, stride m) downsample, and the merger
    (proj, LayerNorm, SwiGLU of intermediate_size, no biases)."""
    fields, text = _text(c, text_type, text_mappers)
    v = c.sub("vision_config", {})
    h, m2 = v.integer("hidden_size", 1536), v.integer("spatial_merge_size", 2) ** 2
    out, inner = v.integer("out_hidden_size", 4096), v.integer("intermediate_size", 13696)
    fields["vision"] = _qwen_tower(
        v, h, out, position="learned", patch_bias=True, norm="rmsnorm", norm_bias=False, gated_mlp=True,
        mlp_bias=False, qkv_bias=v.flag("attention_bias", False), attn_out_bias=False,
        image_size=v.integer("image_size", 336), depth_default=24, heads_default=12,
        connector=[_linear("downsample", h * m2, out, True, m2), _linear("merger/proj", out, out, False, m2),
                   _norm("merger/norm", out, merge=m2), _linear("merger/gate_up", out, inner, False, m2, 2),
                   _linear("merger/down", inner, out, False, m2)])
    fields["vision"]["pre_norm"] = fields["vision"]["post_norm"] = True
    fields["tied_embeddings"] = _tied(c, text, False, False)
    return fields


VISION_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "qwen2_vl": _qwen2_vl, "qwen2_5_vl": _qwen2_5_vl, "qwen3_vl": _qwen3_vl,
    "qwen3_vl_moe": lambda c, m: _qwen3_vl(c, m, "qwen3_vl_moe_text"),
    # Qwen3.5: the Qwen3-VL tower without deepstack, on the gated-DeltaNet text models (hf_hybrid)
    "qwen3_5": lambda c, m: _qwen3_vl(c, m, "qwen3_5_text", deepstack=False),
    "qwen3_5_moe": lambda c, m: _qwen3_vl(c, m, "qwen3_5_moe_text", deepstack=False), "llava": _llava,
    "llava_next": lambda c, m: _llava(c, m, newline=True), "llama4": _llama4, "idefics3": _idefics3,
    "smolvlm": _idefics3, "internvl": _internvl, "glm4v": _glm4v,
    # GLM-4.5V: the same tower; its text model is GLM-4.5's (Glm4vMoeTextModel = Glm4MoeModel's blocks)
    "glm4v_moe": lambda c, m: _glm4v(c, m, "glm4v_moe_text"),
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""

VISION_TEXT_MAPPERS: dict[str, Mapper] = {"qwen3_vl_moe_text": _qwen3_vl_moe_text, "glm4v_text": _glm4v_text,
                                          "glm4v_moe_text": _glm4v_moe_text}
"""Text models of composites that have no text-only mapper elsewhere."""
