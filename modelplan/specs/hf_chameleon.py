"""HF config mapper of Chameleon (transformers 5.24 modeling_chameleon.py,
ChameleonForConditionalGeneration): a Llama text model whose q / k norms are LayerNorms over
head_dim with one weight and bias per head (ChameleonLayerNorm((heads, head_dim))), the norms
after each sublayer when swin_norm (ChameleonSwinDecoderLayer), an untied head; and the VQ-VAE
image tokenizer ChameleonVQVAE as the layers of a `VisionSpec.tower`: its encoder (conv_in; per
level of channel_multiplier num_res_blocks ResNet blocks (GroupNorm, 3x3 conv, GroupNorm, 3x3
conv, a 1x1 nin_shortcut where the width changes), a vanilla attention block after each at an
attn_resolutions side, a 3x3 stride-2 downsample but after the last level; mid: ResNet, attention,
ResNet; GroupNorm, conv_out to latent_channels (2x when double_latent)), quant_conv (1x1 to
embed_dim), the num_embeddings x embed_dim codebook and post_quant_conv (built, not run by
encode). An image's codes enter the text model as tokens (no projector): one per position of
the (resolution / 2^(levels - 1))^2 latent grid. The q / k norms' biases, which the text stack's
RMSNorm convention does not hold, are the `text_qk_norm_biases` vector of the vision group."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv, _rows
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper
from modelplan.specs.hf_vision import _linear, _norm

_TEXT = {"vocab_size": 65536, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 32, "max_position_embeddings": 4096, "rms_norm_eps": 1e-5}
_VQ = {"embed_dim": 256, "num_embeddings": 8192, "double_latent": False, "latent_channels": 256, "resolution": 512,
       "in_channels": 3, "base_channels": 128, "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 2,
       "attn_resolutions": None, "attn_type": "vanilla"}
"""ChameleonConfig / ChameleonVQVAEConfig defaults (transformers 5.24)."""


def _resnet(name: str, n_in: int, n_out: int, side: int) -> list[dict]:
    """ChameleonVQVAEEncoderResnetBlock on a side x side map (GroupNorm: a weight and bias per channel)."""
    n = side * side
    out = [_rows(_norm(f"{name}/norm1", n_in), n), _conv(f"{name}/conv1", n_in, n_out, 3, n),
           _rows(_norm(f"{name}/norm2", n_out), n), _conv(f"{name}/conv2", n_out, n_out, 3, n)]
    return out + ([_conv(f"{name}/nin_shortcut", n_in, n_out, 1, n)] if n_in != n_out else [])


def _attn(name: str, width: int, side: int) -> list[dict]:
    """ChameleonVQVAEEncoderAttnBlock: GroupNorm, 1x1 q / k / v / proj_out, every position attending to all."""
    n = side * side
    return [_rows(_norm(f"{name}/norm", width), n), _rows(_linear(f"{name}/qkv_proj_out", width, width, True,
                                                                  copies=4), n),
            dict(name=f"{name}/scores", kind="attention", in_features=width, keys=n, rows=n)]


def vq_encoder(q: HFConfig, post_quant_conv: bool = True) -> tuple[list[dict], int, int]:
    """(tower layers, latent grid side, total stride) of ChameleonVQVAE (module docstring);
    `post_quant_conv` False: without it (Apertus 1.5's encode-only tokenizer)."""
    mult, blocks, base = q.ints("channel_multiplier"), q.integer("num_res_blocks"), q.size("base_channels")
    if not mult or min(mult) <= 0 or blocks < 0 or base % 32:
        raise SpecError(f"{q.source}: vq_config: channel_multiplier {mult} (positive), num_res_blocks {blocks} (>= 0) "
                        f"and base_channels {base} (a multiple of GroupNorm's 32 groups) expected")
    side, vanilla = q.size("resolution"), q.text("attn_type") == "vanilla"
    at = set(q.ints("attn_resolutions")) if q.data.get("attn_resolutions") is not None else set()
    layers = [_conv("encoder/conv_in", q.size("in_channels"), base, 3, side * side)]
    width = base
    for level, m in enumerate(mult):
        out = base * m
        for i in range(blocks):
            layers += _resnet(f"encoder/down{level}/block{i}", width, out, side)
            width = out
            if side in at and vanilla:
                layers += _attn(f"encoder/down{level}/attn{i}", width, side)
        if level != len(mult) - 1:
            side //= 2  # F.pad (0, 1, 0, 1), Conv2d(k 3, stride 2)
            if side < 1:
                raise SpecError(f"{q.source}: vq_config.resolution: {q.size('resolution')} halves below one pixel")
            layers.append(_conv(f"encoder/down{level}/downsample", width, width, 3, side * side))
    layers += _resnet("encoder/mid/block_1", width, width, side)
    layers += _attn("encoder/mid/attn_1", width, side) if vanilla else []
    layers += _resnet("encoder/mid/block_2", width, width, side)
    latent, embed, n = q.size("latent_channels"), q.size("embed_dim"), side * side
    layers += [_rows(_norm("encoder/norm_out", width), n),
               _conv("encoder/conv_out", width, latent * (2 if q.flag("double_latent") else 1), 3, n),
               _conv("quant_conv", latent, embed, 1, n),
               # the codebook: each latent scored against every code (ChameleonVQVAEVectorQuantizer's distance matmul)
               _rows(_linear("quantize/embedding", embed, q.size("num_embeddings"), False), n)]
    if post_quant_conv:
        layers.append(_vec("post_quant_conv", embed + 1, latent))  # Conv2d(embed_dim, latent, 1): built, not run
    return layers, side, 2 ** (len(mult) - 1)


def _chameleon(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """ChameleonForConditionalGeneration (module docstring); text_mappers unused (its text model
    is the composite's own keys)."""
    t = HFConfig({**_TEXT, **c.data}, c.source, c.path)
    fields = llama(t, qk_norm=True, qk_norm_weight="per_head",
                   norm_placement="output" if t.flag("swin_norm", False) else "pre")
    raw = c.data.get("vq_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: vq_config: expected an object, got {raw!r}")
    q = HFConfig({**_VQ, **raw}, c.source, "vq_config.")
    tower, side, stride = vq_encoder(q)
    heads = fields["heads"]
    hd = fields["hidden"] // heads
    kv = fields["kv_heads"] or heads
    # ChameleonLayerNorm's bias beside the weight the text stack counts: (heads + kv_heads) x head_dim a block
    tower.append(_vec("text_qk_norm_biases", (heads + kv) * hd, fields["layers"]))
    fields["vision"] = dict(layers=0, hidden=q.size("embed_dim"), heads=1, ffn_hidden=1, patch_size=stride,
                            image_size=side * stride, channels=q.size("in_channels"), tower=tower, connector=[])
    return fields


CHAMELEON_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"chameleon": _chameleon}
