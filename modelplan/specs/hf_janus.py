"""HF config mapper of Janus (transformers 5.24 JanusForConditionalGeneration): a Llama text model, a
SigLIP-shaped understanding tower with its MLP aligner, priced per image, and the image-generation
path (the VQ-VAE JanusVQVAE, generation_embeddings, generation_aligner, generation_head), counted,
not priced: its parameters are `vector` connector entries (memory and optimizer state hold them),
its compute runs only when images are encoded to, or decoded from, generation tokens."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _siglip, _sub, _text
from modelplan.specs.hf_vision import _linear

_VISION = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16, "num_channels": 3,
           "image_size": 384, "patch_size": 16, "mlp_ratio": 4.0, "attention_bias": True, "projection_dim": 2048,
           "depth": 2}
"""JanusVisionConfig defaults (transformers 5.24)."""
_VQ = {"embed_dim": 8, "num_embeddings": 16384, "double_latent": False, "latent_channels": 256, "in_channels": 3,
       "base_channels": 128, "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 2, "out_channels": 3,
       "projection_dim": 2048, "num_hidden_layers": 2, "image_token_embed_dim": 2048}
"""JanusVQVAEConfig defaults (transformers 5.24)."""


def _conv(k: int, n_in: int, n_out: int) -> int:
    """A biased Conv2d(n_in, n_out, k x k)."""
    return k * k * n_in * n_out + n_out


def _resnet(n_in: int, n_out: int) -> int:
    """JanusVQVAEResnetBlock: GroupNorm, 3 x 3 conv, GroupNorm, 3 x 3 conv, a 1 x 1 nin_shortcut
    when the width changes."""
    return 2 * n_in + _conv(3, n_in, n_out) + 2 * n_out + _conv(3, n_out, n_out) + (
        _conv(1, n_in, n_out) if n_in != n_out else 0)


def _attn(c: int) -> int:
    """JanusVQVAEAttnBlock: GroupNorm and 1 x 1 q / k / v / proj_out convs."""
    return 2 * c + 4 * _conv(1, c, c)


def _vqvae(q: HFConfig) -> int:
    """JanusVQVAE parameters: the encoder (conv_in; per channel_multiplier level num_res_blocks
    resnet blocks, attention blocks at the last level, a stride-2 3 x 3 downsample but there; the
    mid block (resnet, attention, resnet); norm_out; conv_out to latent_channels, doubled with
    double_latent), the codebook (num_embeddings x embed_dim), quant_conv / post_quant_conv, the
    decoder (conv_in, mid block, per level from the top num_res_blocks + 1 resnet blocks, attention
    at the top level, a 3 x 3 upsample conv but at level 0; norm_out; conv_out)."""
    b, mult, n = q.integer("base_channels"), q.ints("channel_multiplier"), q.integer("num_res_blocks")
    latent, e = q.integer("latent_channels"), q.integer("embed_dim")
    if not mult:
        raise SpecError(f"{q.source}: {q.path}channel_multiplier: must not be empty")
    mid = lambda c: 2 * _resnet(c, c) + _attn(c)  # noqa: E731 - JanusVQVAEMidBlock
    last = len(mult) - 1
    total, width = _conv(3, q.integer("in_channels"), b), b
    for level, m in enumerate(mult):  # encoder
        for _ in range(n):
            total += _resnet(width, b * m) + (_attn(b * m) if level == last else 0)
            width = b * m
        total += _conv(3, width, width) if level != last else 0
    total += mid(width) + 2 * width + _conv(3, width, 2 * latent if q.flag("double_latent") else latent)
    total += q.integer("num_embeddings") * e + _conv(1, latent, e) + _conv(1, e, latent)
    width = b * mult[last]
    total += _conv(3, latent, width) + mid(width)
    for level in reversed(range(len(mult))):  # decoder
        for _ in range(n + 1):
            total += _resnet(width, b * mult[level]) + (_attn(b * mult[level]) if level == last else 0)
            width = b * mult[level]
        total += _conv(3, width, width) if level != 0 else 0
    return total + 2 * width + _conv(3, width, q.integer("out_channels"))


def _generation(q: HFConfig) -> list[dict]:
    """The generation path as counted vectors: the VQ-VAE, generation_embeddings (num_embeddings x
    embed_dim), generation_aligner (fc1 embed_dim -> projection_dim, num_hidden_layers - 1 more
    projection_dim linears), generation_head (proj_out image_token_embed_dim -> projection_dim,
    vision_head -> num_embeddings), all biased."""
    q = HFConfig({**_VQ, **q.data}, q.source, q.path)
    codes, e, p = q.integer("num_embeddings"), q.integer("embed_dim"), q.integer("projection_dim")
    return _counted("vqmodel", _vqvae(q)) + [
        _vec("generation_embeddings", e, codes),
        _vec("generation_aligner", p, e + 1 + max(q.integer("num_hidden_layers") - 1, 0) * (p + 1)),
        _vec("generation_head/proj_out", p, q.integer("image_token_embed_dim") + 1),
        _vec("generation_head/vision_head", p + 1, codes)]


def _counted(name: str, n: int) -> list[dict]:
    """`n` parameters as vectors of at most 2^20 values (one breakdown key)."""
    rows, rest = divmod(n, 1 << 20)
    return ([_vec(name, 1 << 20, rows)] if rows else []) + ([_vec(name, rest)] if rest else [])


def _janus(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Janus: Llama text model; JanusVisionModel (biased patch conv, one learned position per patch,
    LayerNorm blocks with q / k / v bias = attention_bias, a biased projection_layer, fc1 / fc2 of
    int(h x mlp_ratio), post_layernorm; use_qk_norm's LayerNorms refused); JanusVisionAlignerMLP
    (fc1 h -> projection_dim, depth - 1 more projection_dim linears, biased) into the text; the
    generation path counted (`_generation`); tied by default."""
    fields, _ = _text(c, text_mappers, "llama")
    _, v = _sub(c, "vision_config", "janus_vision")
    v = HFConfig({**_VISION, **v.data}, v.source, v.path)
    if v.flag("use_qk_norm", False):
        raise SpecError(f"{c.source}: vision_config.use_qk_norm: true (LayerNorm q / k norms) is not supported")
    h = v.integer("hidden_size")
    ffn = int(h * v.number("mlp_ratio", positive=True))  # JanusVisionMLP: int(hidden_size * mlp_ratio)
    tower = {**_siglip(HFConfig({**v.data, "intermediate_size": ffn, "vision_use_head": False}, v.source, v.path)),
             "qkv_bias": v.flag("attention_bias")}
    p, depth = v.integer("projection_dim"), v.integer("depth")
    _, q = _sub(c, "vq_config", "janus_vqgan")
    tower["connector"] = [_linear("aligner/fc1", h, p, True)] + (
        [_linear("aligner/hidden_layers", p, p, True, copies=depth - 1)] if depth > 1 else []) + _generation(q)
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


JANUS_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"janus": _janus}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
