"""HF config mapper of Nemotron-H Omni's vision-language model (transformers 5.24
NemotronH_Omni_Reasoning_V3, NemotronH_Omni_Reasoning_V3_Config defaults): the nemotron_h text model
(AutoModelForCausalLM of text_config), a RADIO tower (RadioModel: a bias-free Linear(patch_dim, h)
patch projection, a (max_img_size / p)^2-row position table interpolated per image, num_cls_tokens +
num_registers learned prefix tokens, pre-LN ViT blocks with biased q/k/v/o and fc1-fc2 and
layer-scale lambdas, no final norm; a second bias-free Linear(video_patch_dim, h) for video
patches, idle on images) and the multi-modal projector: over each pixel-shuffled group of
1 / downsample_ratio^2 patches an RMSNorm, linear_1 (-> projector_hidden_size) and linear_2 (->
text width), bias-free. The prefix tokens beyond the first and the video projection are counted as
projector vectors (no image FLOPs); the tower's FLOPs run on the patches and one prefix token.
An audio_config (its audio tower) and use_swiglu_ffn are refused."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig

_RADIO = {"hidden_size": 1280, "num_hidden_layers": 32, "num_attention_heads": 16, "mlp_ratio": 4.0, "patch_size": 16,
          "num_channels": 3, "patch_dim": 768, "image_size": 224, "max_img_size": 2048, "num_cls_tokens": 3,
          "num_registers": 7, "qkv_bias": True, "video_patch_dim": 1536, "video_temporal_patch_size": 2}
"""RadioConfig's defaults (transformers 5.24)."""


def _nemotron_h_omni(c: HFConfig, text_mappers: dict) -> dict:
    """NemotronH_Omni_Reasoning_V3 (module docstring)."""
    from modelplan.specs.hf_n18vlm_base import _text
    from modelplan.specs.hf_vision import _linear, _norm

    if c.data.get("audio_config") is not None:
        raise SpecError(f"{c.source}: audio_config: its audio tower and embed_audio projector are not modelled")
    v = HFConfig({**_RADIO, **(c.data.get("vision_config") or {})}, c.source, "vision_config.")
    if v.flag("use_swiglu_ffn", False):
        raise SpecError(f"{c.source}: vision_config.use_swiglu_ffn: RadioSwiGLUFFN blocks are not modelled")
    h, p, channels = v.size("hidden_size"), v.size("patch_size"), v.size("num_channels")
    if v.size("patch_dim") != channels * p * p:
        raise SpecError(f"{c.source}: vision_config.patch_dim: {v.size('patch_dim')} != num_channels x patch_size^2 "
                        f"({channels * p * p}) is not modelled")
    fields, _ = _text(c, text_mappers, "nemotron_h")
    side = v.size("max_img_size") // p
    ratio = c.number("downsample_ratio", 0.5, positive=True)
    group = int(1 / ratio) ** 2  # NemotronH_Omni_Reasoning_V3Model: vision_hidden_size * int(1 / ratio)^2
    wide, inner = h * group, c.integer("projector_hidden_size", 4096)
    # (vision_final_layernorm exists only beside MTP layers, which the nemotron_h mapper refuses)
    connector = [_norm("layer_norm", wide, "rmsnorm", group), _linear("linear_1", wide, inner, False, group),
                  _linear("linear_2", inner, fields["hidden"], False, group)]
    prefix = v.size("num_cls_tokens") + v.size("num_registers")
    if prefix > 1:  # RadioEmbeddings.cls_register_token (prefix, h): the first is the class token
        connector.append(dict(name="cls_register_tokens", kind="vector", in_features=(prefix - 1) * h))
    if v.integer("video_temporal_patch_size", None) is not None:  # video_patch_projection, no bias
        connector.append(dict(name="video_patch_projection", kind="vector", in_features=v.size("video_patch_dim") * h))
    fields["vision"] = dict(
        layers=v.size("num_hidden_layers"), hidden=h, heads=v.size("num_attention_heads"),
        ffn_hidden=int(h * v.number("mlp_ratio", 4.0, positive=True)), patch_size=p, image_size=v.size("image_size"),
        channels=channels, patch_bias=False, position="learned", position_rows=side * side, class_token=prefix > 0,
        norm="layernorm", norm_bias=True, qkv_bias=v.flag("qkv_bias", True), post_norm=False, layer_scale=True,
        connector=connector)
    return fields


NEMOTRON_OMNI_MAPPERS = {"nemotron_h_omni": _nemotron_h_omni}
