"""HF config mappers of decoder-side vision-language composites whose text model has its own mapper
and whose tower is a variant of one already modelled (transformers 5.24): EXAONE 4.5 (Qwen2.5-VL's
tower with grouped-query attention), Step 3.7 (a layer-scaled ViT with two stride-2 conv
downsamplers), LFM3-VL (short-convolution and attention blocks), HunYuan-VL (a conv patch merger
with learned newline / begin / end tokens), HyperCLOVA X Vision V2 (Qwen2.5-VL's tower and a linear
projector) and Fuyu (no tower: a Linear over raw patch pixels). Sub-configs are read as
transformers builds them (hf_n18vlm_base.py); the projectors are `connector` layers (module names
in the comments). `TOWER_MAPPERS` also holds hf_gemma4_vision.py's, hf_omni.py's, hf_aria.py's and hf_janus.py's."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_aria import ARIA_MAPPERS
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gemma4_vision import GEMMA4_VISION_MAPPERS
from modelplan.specs.hf_janus import JANUS_MAPPERS
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_omni import OMNI_MAPPERS
from modelplan.specs.hf_vision import DEFAULT_IMAGE_SIZE, _linear, _norm, _qwen2_5_tower

_EXAONE4 = {"vocab_size": 102400, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 32,
            "num_attention_heads": 32, "num_key_value_heads": 32}
"""Exaone4Config size defaults (transformers 5.24), under an absent text_config."""
_STEP3P5 = {"vocab_size": 128815, "hidden_size": 4096, "intermediate_size": 11264, "num_hidden_layers": 45,
            "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 128}
"""Step3p7TextConfig size defaults (transformers 5.24; = Step3p5Config's)."""


def _exaone4_5(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """EXAONE 4.5: EXAONE 4 text model ('exaone4_5_text' reads as exaone4, as Exaone4_5_Config
    does) and Exaone4_5_VisionModel: Qwen2.5-VL's windowed RMSNorm / SwiGLU tower and RMSNorm
    PatchMerger, its fused qkv Linear(h, (heads + 2 num_key_value_heads) x head_dim, bias=True)
    (Exaone4_5_VisionAttention); untied by default."""
    raw = c.data.get("text_config")
    if isinstance(raw, dict) and raw.get("model_type") == "exaone4_5_text":
        c = HFConfig({**c.data, "text_config": {**raw, "model_type": "exaone4"}}, c.source, c.path)
    if raw is None:
        c = HFConfig({**c.data, "text_config": {"model_type": "exaone4", **_EXAONE4}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "exaone4")
    _, v = _sub(c, "vision_config", "exaone4_5_vision")
    fields["vision"] = _qwen2_5_tower(v, kv_heads=v.divisor("num_key_value_heads", 8))
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


def _step3p7(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Step 3.7: Step 3.5's text model (Step3p7TextConfig, model_type step3p5, whatever the
    text_config's model_type says: Step3p7Config drops it) and Step3p7VisionModel: bias-free patch
    conv, one learned position per patch of image_size, pre_layernorm, biased LayerNorm / fc1-fc2
    blocks of int(hidden x mlp_ratio) inner width with layer-scale lambda_1 / lambda_2 (2-D
    rotary: no parameters), no final norm; then downsampler1 Conv2d(h, 2h, 3, stride 2) and
    downsampler2 Conv2d(2h, 4h, 3, stride 2), biased (each a linear of 9 x in channels over a
    quarter of the rows: exact FLOPs when the patch grid side is a multiple of 4), and
    multi_modal_projector Linear(4h, text, bias=projector_bias); untied."""
    text = c.data.get("text_config")
    text = {k: x for k, x in text.items() if k != "model_type"} if isinstance(text, dict) else {}
    c = HFConfig({**c.data, "text_config": {**_STEP3P5, **text, "model_type": "step3p5"}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "step3p5")
    _, v = _sub(c, "vision_config", "step3p5_vision")
    h = v.integer("width", v.integer("hidden_size", 1536))  # Step3p7VisionConfig: width / layers / heads win
    ffn = int(h * v.number("mlp_ratio", 8960 / 1536, positive=True))  # intermediate_size = int(h * mlp_ratio)
    fields["vision"] = dict(
        layers=v.integer("layers", v.integer("num_hidden_layers", 47)), hidden=h,
        heads=v.integer("heads", v.integer("num_attention_heads", 16)), ffn_hidden=ffn,
        patch_size=v.integer("patch_size", 14), image_size=v.integer("image_size", 728),
        channels=v.integer("num_channels", 3), patch_bias=False, pre_norm=True, post_norm=False,
        layer_scale=True, projector_norm=False,
        connector=[_linear("downsampler1", 9 * h, 2 * h, True, 4), _linear("downsampler2", 9 * 2 * h, 4 * h, True, 16),
                   _linear("multi_modal_projector", 4 * h, fields["hidden"], c.flag("projector_bias", False), 16)])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


_LFM3 = {"vocab_size": 128000, "hidden_size": 2048, "intermediate_size": 7680, "num_hidden_layers": 24,
         "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 128}
"""Lfm3Config size defaults (transformers 5.24), under an absent text_config."""


def _lfm3_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """LFM3-VL: LFM3 text model and Lfm3VlVisionModel: bias-free Linear(C t p^2, h) patch
    embedding, embedding_norm (RMSNorm), 2-D rotary, blocks of RMSNorm + (grouped-query attention
    with per-head q / k RMSNorms, or where layer_types says 'conv' the gated depthwise short
    convolution) + RMSNorm + bias-free SwiGLU (w1 / w3 / w2), no final norm; dynamic resolution,
    priced at image_size or `DEFAULT_IMAGE_SIZE` px. Lfm3VlMultiModalProjector: LayerNorm over
    each patch, then over the spatial_merge_size^2 patches linear_1 (-> projector_hidden_size) +
    GELU + linear_2 (-> text), biased by projector_bias; tied by default."""
    raw = c.data.get("text_config")
    if raw is None:
        c = HFConfig({**c.data, "text_config": {"model_type": "lfm3", **_LFM3}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "lfm3")
    _, v = _sub(c, "vision_config", "lfm3_vl_vision")
    layers = v.integer("num_hidden_layers", 14)
    kinds = v.texts("layer_types", None)
    if kinds is None:  # Lfm3VlVisionConfig.__post_init__
        kinds = ["conv" if i < 2 or i % 2 else "full_attention" for i in range(layers)]
    if len(kinds) != layers:
        raise SpecError(f"{c.source}: vision_config.layer_types: {len(kinds)} entries for {layers} layers")
    h, m2 = v.integer("hidden_size", 1024), v.divisor("spatial_merge_size", 2) ** 2
    inner, bias = c.integer("projector_hidden_size", 4096), c.flag("projector_bias", True)
    fields["vision"] = dict(
        layers=layers, hidden=h, heads=v.integer("num_attention_heads", 16), kv_heads=v.divisor("num_key_value_heads", 8),
        ffn_hidden=v.integer("intermediate_size", 2560), patch_size=v.integer("patch_size", 16),
        temporal_patch=v.integer("temporal_patch_size", 2), image_size=v.integer("image_size", DEFAULT_IMAGE_SIZE),
        channels=v.integer("in_channels", 3), patch_bias=False, position="rotary", norm="rmsnorm", norm_bias=False,
        qkv_bias=False, attn_out_bias=False, mlp_bias=False, gated_mlp=True, qk_norm=True, qk_norm_per_head=True,
        pre_norm=True, post_norm=False, projector_norm=False, conv_layers=kinds.count("conv"),
        conv_kernel=v.integer("conv_kernel_size", 3),
        connector=[_norm("layer_norm", h), _linear("linear_1", h * m2, inner, bias, m2),
                   _linear("linear_2", inner, fields["hidden"], bias, m2)])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


_PERSIMMON = {"vocab_size": 262144, "hidden_size": 4096, "intermediate_size": 16384, "num_hidden_layers": 36,
              "num_attention_heads": 64}
"""PersimmonConfig size defaults (transformers 5.24; FuyuConfig's text init_kwargs repeat them)."""
_FUYU_TEXT_KEYS = ("vocab_size", "max_position_embeddings", "hidden_size", "intermediate_size", "num_hidden_layers",
                   "num_attention_heads", "hidden_act", "initializer_range", "layer_norm_eps", "use_cache",
                   "qk_layernorm", "hidden_dropout", "attention_dropout", "eos_token_id", "rope_scaling", "rope_theta")
"""Top-level keys FuyuConfig.__post_init__ moves into the text_config of a flat save."""


def _fuyu(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Fuyu: Persimmon text model (a flat save's text keys read as FuyuConfig moves them) and no
    vision tower: vision_embed_tokens Linear(patch_size^2 x num_channels, text hidden, bias=True)
    over each raw patch (an encoder-free `VisionSpec`), one text position per patch; untied."""
    text = c.data.get("text_config")
    if text is None:
        flat = {k: x for k, x in c.data.items() if k in _FUYU_TEXT_KEYS}
        text = {"partial_rotary_factor": 0.5, **flat} if flat else {"qk_layernorm": True, "hidden_act": "relu2"}
    if isinstance(text, dict):
        c = HFConfig({**c.data, "text_config": {**_PERSIMMON, **text, "model_type": text.get("model_type", "persimmon")}},
                     c.source, c.path)
    fields, _ = _text(c, text_mappers, "persimmon")
    t = fields["hidden"]
    fields["vision"] = dict(
        layers=0, hidden=t, heads=1, ffn_hidden=1, patch_size=c.integer("patch_size", 30),
        image_size=c.integer("image_size", 300), channels=c.integer("num_channels", 3), position="rotary",
        pre_norm=False, post_norm=False, projector_norm=False, connector=[])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


_HUNYUAN_TEXT = {"vocab_size": 290943, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                 "num_attention_heads": 32}
"""HunYuanVLTextConfig size defaults (transformers 5.24)."""
_HUNYUAN_OWN = ("vision_config", "architectures", "model_type", "image_token_id", "im_start_id", "im_end_id",
                "im_newline_id", "tie_word_embeddings", "_name_or_path", "transformers_version")
"""HunYuanVLConfig's own keys: the rest of a flat (legacy) save is its text model's."""


def _hunyuan_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """HunYuan-VL: HunYuanVLTextModel (Llama blocks with per-head query / key RMSNorms; a flat save's
    text keys read as HunYuanVLConfig folds them) and HunYuanVLVisionTransformer: biased patch conv,
    a learned table of (max_image_size / p)^2 + 1 rows (interpolated), biased LayerNorm / fc1-fc2
    blocks, no final norm; HunYuanVLVisionPatchMerger: before_rms, proj_conv Conv2d(h, 2h, m,
    stride m) + GELU + proj_out Conv2d(2h, 4h, 1), biased, an image_newline (4h) closing each row
    of merged patches, mlp Linear(4h, text, bias) over the (g / m) x (g / m + 1) rows, image_begin
    / image_end / image_sep (text wide each), after_rms; dynamic resolution, priced at image_size
    or `DEFAULT_IMAGE_SIZE` px; tied unless both the composite and its text_config say not."""
    text = c.data.get("text_config")
    if text is None:
        text = {k: x for k, x in c.data.items() if k not in _HUNYUAN_OWN}
    if isinstance(text, dict):
        c = HFConfig({**c.data, "text_config": {**_HUNYUAN_TEXT, **text, "use_qk_norm": True,
                                                "model_type": "hunyuan_v1_dense"}}, c.source, c.path)
    fields, text_cfg = _text(c, text_mappers, "hunyuan_v1_dense")
    _, v = _sub(c, "vision_config", "hunyuan_vl_vision")
    h, t = v.integer("hidden_size", 1152), fields["hidden"]
    m, p = v.divisor("spatial_merge_size", 2), v.divisor("patch_size", 16)
    side = v.integer("image_size", DEFAULT_IMAGE_SIZE)
    merged = (side // p) // m
    if merged < 2:  # HunYuanVLVisionPatchMerger: spatial height and width must be greater than 1
        raise SpecError(f"{c.source}: vision_config.image_size: {side} px gives {merged} merged patches a side (needs 2+)")
    fields["vision"] = dict(
        layers=v.integer("num_hidden_layers", 27), hidden=h, heads=v.integer("num_attention_heads", 16),
        ffn_hidden=v.integer("intermediate_size", 4304), patch_size=p, image_size=side, channels=v.integer("num_channels", 3),
        position_rows=(v.integer("max_image_size", 2048) // p) ** 2 + 1, pre_norm=False, post_norm=False,
        projector_norm=False,
        connector=[_norm("before_rms", h, "rmsnorm"), _linear("proj_conv", h * m * m, 2 * h, True, m * m),
                   _linear("proj_out", 2 * h, 4 * h, True, m * m), dict(name="image_newline", kind="vector", in_features=4 * h),
                   {**_linear("mlp", 4 * h, t, True), "rows": merged * (merged + 1)},
                   dict(name="image_begin_end_sep", kind="vector", in_features=t, copies=3),
                   {**_norm("after_rms", t, "rmsnorm"), "rows": merged * (merged + 1) + 2}])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True) or text_cfg.flag("tie_word_embeddings", True)
    return fields


_HYPERCLOVAX = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
                "num_attention_heads": 32, "head_dim": 128}
"""HyperCLOVAXConfig size defaults (transformers 5.24), under an absent text_config."""


def _hyperclovax_vision_v2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """HyperCLOVA X Vision V2: HyperCLOVA X text model and Qwen2_5_VisionTransformerPretrainedModel
    (a 'qwen2_5_vl' vision model_type reads as qwen2_5_vl_vision, as the config class does) with
    its merger, then projector Linear(out_hidden_size, text, bias=True); tied by default."""
    if c.data.get("text_config") is None:
        c = HFConfig({**c.data, "text_config": {"model_type": "hyperclovax", **_HYPERCLOVAX}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "hyperclovax")
    _, v = _sub(c, "vision_config", "qwen2_5_vl_vision")
    tower = _qwen2_5_tower(v)
    m2 = v.divisor("spatial_merge_size", 2) ** 2
    tower["connector"].append(_linear("projector", v.integer("out_hidden_size", 3584), fields["hidden"], True, m2))
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


TOWER_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "exaone4_5": _exaone4_5, "step3p7": _step3p7, "lfm3_vl": _lfm3_vl, "fuyu": _fuyu, "hunyuan_vl": _hunyuan_vl,
    "hyperclovax_vision_v2": _hyperclovax_vision_v2, **GEMMA4_VISION_MAPPERS,
    **OMNI_MAPPERS, **ARIA_MAPPERS, **JANUS_MAPPERS,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""

TOWER_UNMODELLED: dict[str, str] = {
}
"""Vision-language types transformers 5.24 ships that the spec cannot yet express exactly (the
mechanism named); refused in one line."""
