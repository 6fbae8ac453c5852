"""HF config mappers of the Gemma 4 composites (transformers 5.24 Gemma4ForConditionalGeneration,
Gemma4UnifiedForConditionalGeneration): the Gemma 4 text model (hf_gemma4.py), and when the config
holds them (both are optional; the class defaults have neither) the vision tower (Gemma 4 unified:
an encoder-free patch embedder) and the audio tower (unified: a frame embedder) with their
embedders.

The vision tower is priced per image (`VisionSpec`); the audio tower (a Conformer over audio frames)
is counted, not priced: its parameters are `vector` connector entries (memory and optimizer state
hold them), its compute per audio frame is not part of the plan."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _text
from modelplan.specs.hf_vision import _linear

_GEMMA4_TEXT = {"vocab_size": 262144, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 30,
                "num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256}
"""Gemma4TextConfig size defaults (transformers 5.24), under an absent text_config."""
_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 16, "num_attention_heads": 12,
           "num_key_value_heads": 12, "head_dim": 64, "pooling_kernel_size": 3, "patch_size": 16,
           "position_embedding_size": 10 * 1024}
"""Gemma4VisionConfig defaults (transformers 5.24)."""
_AUDIO = {"hidden_size": 1024, "num_hidden_layers": 12, "num_attention_heads": 8, "subsampling_conv_channels": [128, 32],
          "conv_kernel_size": 5, "output_proj_dims": 1536}
"""Gemma4AudioConfig defaults (transformers 5.24)."""

SOFT_TOKENS_PER_SIDE = 16
"""Pooled tokens per side of one priced image without vision_config.image_size: the largest square
within Gemma4ImageProcessor's max_soft_tokens (280), 16 x 16 = 256 soft tokens."""


def _vision(v: HFConfig) -> dict:
    """Gemma4VisionModel + embed_vision: bias-free Linear(3 p^2, h) patch embedding, a (2,
    position_embedding_size, h) x / y position table, blocks of four RMSNorms (sandwich), bias-free
    q / k / v / o of heads x head_dim (num_key_value_heads k / v heads) with q / k RMSNorms over
    head_dim (the v norm has no weight), bias-free GeGLU; average pooling of k x k patches
    (pooling_kernel_size; transformers does it as a one-hot matmul, a mean here: no FLOPs), then
    Gemma4MultimodalEmbedder: a weight-free RMSNorm and Linear(h, text, bias=False)."""
    v = HFConfig({**_VISION, **v.data}, v.source, v.path)
    k, p = v.divisor("pooling_kernel_size"), v.divisor("patch_size")
    side = v.integer("image_size", SOFT_TOKENS_PER_SIDE * k * p)
    if (side // p) % k:
        raise SpecError(f"{v.source}: {v.path}image_size: {side} px must be a multiple of pooling_kernel_size x "
                        f"patch_size ({k} x {p})")
    return dict(
        layers=v.integer("num_hidden_layers"), hidden=v.integer("hidden_size"), heads=v.integer("num_attention_heads"),
        kv_heads=v.divisor("num_key_value_heads"), head_dim=v.divisor("head_dim"),
        ffn_hidden=v.integer("intermediate_size"), patch_size=p, image_size=side, channels=3, patch_bias=False,
        position="learned", position_rows=2 * v.integer("position_embedding_size"), norm="rmsnorm", norm_bias=False,
        qkv_bias=False, attn_out_bias=False, mlp_bias=False, gated_mlp=True, qk_norm=True, qk_norm_per_head=True,
        sandwich_norms=True, pre_norm=False, post_norm=False, projector_norm=False,
    ), k * k


def _audio(a: HFConfig, text_hidden: int) -> list[dict]:
    """Gemma4AudioModel and embed_audio as counted `vector` entries: subsample_conv_projection (two
    bias-free 3 x 3 stride-2 convs with bias-free LayerNorms, input_proj_linear over (c0 // 4) x
    c1), per Conformer layer two macaron feed-forwards (h -> 4h -> h), chunked attention (q / k /
    v / relative_k_proj of heads x head_dim, post h -> h, per_dim_scale of head_dim), the light
    conv (linear_start h -> 2h, depthwise conv_kernel_size taps, linear_end h -> h) and nine
    RMSNorms (2 per feed-forward, 2 in the light conv, 3 around attention); output_proj
    Linear(h, output_proj_dims, bias=True); embed_audio Linear(output_proj_dims, text, bias=False).
    All linears bias-free but output_proj."""
    a = HFConfig({**_AUDIO, **a.data}, a.source, a.path)
    h, heads, n = a.integer("hidden_size"), a.divisor("num_attention_heads"), a.integer("num_hidden_layers")
    channels = a.ints("subsampling_conv_channels")
    if len(channels) != 2:
        raise SpecError(f"{a.source}: {a.path}subsampling_conv_channels: expected 2 entries, got {channels!r}")
    c0, c1 = channels
    out = a.integer("output_proj_dims")
    layers = usm_conformer(h, heads, n, c0, c1, c0 // 4, a.integer("conv_kernel_size"))
    return layers + [_vec("audio_tower/output_proj", h + 1, out), _vec("embed_audio", out, text_hidden)]


def usm_conformer(h: int, heads: int, n: int, c0: int, c1: int, bins: int, kernel: int) -> list[dict]:
    """The subsampling convs (bias-free 3 x 3 over 1 -> c0 -> c1 channels, each with a weight-only
    norm), input_proj Linear(bins x c1, h) over the `bins` frequency rows left, and n Conformer
    layers (`_audio`'s docstring) as `vector` entries: Gemma 4's audio model and Gemma 3n's
    (modeling_gemma3n.py Gemma3nAudioEncoder) hold the same modules."""
    head = h // heads
    layers = [_vec("audio_tower/subsample", 9 * c0 + c0 + 9 * c0 * c1 + c1),
              _vec("audio_tower/subsample/input_proj", bins * c1, h)]
    if n:
        layers += [_vec("audio_tower/feed_forward", 4 * h, 4 * h * n), _vec("audio_tower/attention", head * heads, 4 * h * n),
                   _vec("audio_tower/attention/post", h, h * n), _vec("audio_tower/attention/per_dim_scale", head, n),
                   _vec("audio_tower/light_conv", h, 3 * h * n),
                   _vec("audio_tower/light_conv/depthwise", kernel, h * n),
                   _vec("audio_tower/norms", h, 9 * n)]
    return layers


def _gemma4(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Gemma 4: Gemma4TextModel (hf_gemma4.py) and the optional towers; tied by default."""
    if c.data.get("text_config") is None:
        c = HFConfig({**c.data, "text_config": {"model_type": "gemma4_text", **_GEMMA4_TEXT}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "gemma4_text")
    t = fields["hidden"]
    vision, audio = c.sub("vision_config"), c.sub("audio_config")
    if vision is not None:
        tower, merge = _vision(vision)
        tower["connector"] = [_linear("embed_vision", tower["hidden"], t, False, merge)]
    if audio is not None:
        if vision is None:
            raise SpecError(f"{c.source}: audio_config: an audio tower without a vision_config is not modelled")
        tower["connector"] += _audio(audio, t)
    if vision is not None:
        fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


_UNIFIED_TEXT = {**_GEMMA4_TEXT, "model_type": "gemma4_unified_text"}
"""Gemma4UnifiedTextConfig size defaults (transformers 5.24; = Gemma4TextConfig's)."""
_UNIFIED_VISION = {"patch_size": 16, "pooling_kernel_size": 3, "mm_embed_dim": 3840, "mm_posemb_size": 1120,
                   "output_proj_dims": 3840}
"""Gemma4UnifiedVisionConfig defaults (transformers 5.24)."""


def _unified_vision(v: HFConfig, text_hidden: int) -> dict:
    """Gemma4UnifiedVisionEmbedder (no encoder blocks): over each model patch of patch_size x
    pooling_kernel_size pixels, patch_ln1 (LayerNorm over 3 P^2), patch_dense Linear(3 P^2,
    mm_embed_dim, bias), patch_ln2, a (mm_posemb_size, 2, mm) x / y position table, pos_norm, then
    the multimodal embedder (a weight-free RMSNorm, Linear(output_proj_dims, text, bias=False));
    priced at image_size or `SOFT_TOKENS_PER_SIDE` model patches a side."""
    v = HFConfig({**_UNIFIED_VISION, **v.data}, v.source, v.path)
    side = v.divisor("patch_size") * v.divisor("pooling_kernel_size")  # model_patch_size
    mm = v.integer("mm_embed_dim")
    return dict(
        layers=0, hidden=mm, heads=1, ffn_hidden=1, patch_size=side,
        image_size=v.integer("image_size", SOFT_TOKENS_PER_SIDE * side), channels=3, position="learned",
        position_rows=2 * v.integer("mm_posemb_size"), pre_norm=True, post_norm=True, projector_norm=False,
        connector=[dict(name="patch_ln1", kind="layernorm", in_features=3 * side * side, bias=True),
                   _linear("embed_vision", v.integer("output_proj_dims"), text_hidden, False)])


def _gemma4_unified(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Gemma 4 unified: Gemma4UnifiedTextModel (hf_gemma4.py), the optional encoder-free vision
    embedder, and the optional audio embedder over raw waveform frames (embed_audio:
    Linear(audio_embed_dim, text, bias=False), counted as a vector: it runs on audio); tied by default."""
    if c.data.get("text_config") is None:
        c = HFConfig({**c.data, "text_config": _UNIFIED_TEXT}, c.source, c.path)
    fields, _ = _text(c, text_mappers, "gemma4_unified_text")
    t = fields["hidden"]
    vision, audio = c.sub("vision_config"), c.sub("audio_config")
    if audio is not None and vision is None:
        raise SpecError(f"{c.source}: audio_config: an audio embedder without a vision_config is not modelled")
    if vision is not None:
        fields["vision"] = _unified_vision(vision, t)
    if audio is not None:
        width = audio.integer("audio_embed_dim", 640, "hidden_size", "output_proj_dims", "audio_samples_per_token")
        fields["vision"]["connector"].append(_vec("embed_audio", width, t))
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


GEMMA4_VISION_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "gemma4": _gemma4, "gemma4_unified": _gemma4_unified,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
