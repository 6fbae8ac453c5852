"""HF MobileViT V2 (Mehta & Rastegari 2022b, "Separable Self-attention for Mobile Vision
Transformers"; transformers 5.24 modeling_mobilevitv2.py MobileViTV2Model /
MobileViTV2ForImageClassification) as a network spec (`specs.network`).

Widths from width_multiplier (MobileViTV2Encoder's make_divisible / clip). The stem (3x3 stride-2
conv, BatchNorm, act), MobileNetV2 inverted residuals (layer 0 and 1, `hf_mobilevit`'s), three
MobileViTV2Layers and the mean over the grid, the classifier Linear. A MobileViTV2Layer: the stride-2
inverted residual, the depthwise conv_kxk (BatchNorm, act), the bias-free 1x1 conv_1x1 to the
attention width d, the transformer layers over the unfolded patches, GroupNorm(1), conv_projection
(BatchNorm, no act); no fusion. A transformer layer: x + out_proj(separable(qkv_proj(GroupNorm(1)(x))))
(qkv_proj a 1x1 conv to 1 + 2 d channels, `specs.context_attention.SeparableAttention` over the
patch_size x patch_size unfolding) and x + conv2(act(conv1(GroupNorm(1)(x)))); GroupNorm(1) over
(C, patch area, patches) normalises the same elements as over the folded map.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, dropout, make_divisible, network, pool
from modelplan.specs.hf_mobilevit import check_grid, inverted_residual
from modelplan.specs.hf_resnet import _conv, _seq
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"mobilevitv2": ("MobileViTV2Model", "MobileViTV2ForImageClassification")}
"""model_type -> the classes whose head is modelled (MobileViTV2ForSemanticSegmentation's DeepLabV3 head: refused)."""

DEFAULTS = {"mobilevitv2": {"num_channels": 3, "image_size": 256, "patch_size": 2, "expand_ratio": 2.0,
                            "hidden_act": "swish", "conv_kernel_size": 3, "output_stride": 32, "layer_norm_eps": 1e-5,
                            "n_attn_blocks": [2, 4, 3], "base_attn_unit_dims": [128, 192, 256], "width_multiplier": 1.0,
                            "ffn_multiplier": 2, "attn_dropout": 0.0, "ffn_dropout": 0.0}}
"""MobileViTV2Config defaults (transformers 5.24 configuration_mobilevitv2.py)."""

BASE_WIDTHS = (64, 128, 256, 384, 512)  # MobileViTV2Encoder: layer_1_dim .. layer_5_dim = make_divisible(w x these)


def widths(c: HFConfig) -> list[int]:
    """layer_0_dim .. layer_5_dim of MobileViTV2Encoder."""
    w = c.number("width_multiplier", positive=True)
    first = make_divisible(min(max(32 * w, 16), 64), 8, 16)  # clip(32 w, 16, 64), min_value 16
    return [first, make_divisible(BASE_WIDTHS[0] * w, 16, 16)] + [make_divisible(b * w, 8, 8) for b in BASE_WIDTHS[1:]]


def _plain(out: int, name: str, bias: bool = True) -> dict:
    """MobileViTV2ConvLayer without normalisation or activation: a 1x1 conv."""
    return _seq([{"type": "conv2d", "name": "convolution", "out_channels": out, "kernel_size": 1, "bias": bias}], name)


def transformer_layer(c: HFConfig, dim: int, act: str) -> list[dict]:
    """MobileViTV2TransformerLayer: the attention and FFN residuals over the unfolded patches."""
    eps, p = c.number("layer_norm_eps", positive=True), c.number("ffn_dropout")
    norm = lambda name: {"type": "groupnorm", "name": name, "num_groups": 1, "eps": eps}  # noqa: E731
    ffn = int(c.size("ffn_multiplier") * dim // 16 * 16)  # MobileViTV2Transformer: int((d // 16) * 16)
    if ffn < 1:
        raise SpecError(f"{c.source}: ffn_multiplier: {c.size('ffn_multiplier')} x {dim} rounds to a 0-wide FFN")
    attention = _seq([_plain(1 + 2 * dim, "qkv_proj"),
                      {"type": "separableattention", "name": "attend", "patch": c.divisor("patch_size")},
                      _plain(dim, "out_proj")], "attention")
    conv1 = _seq([{"type": "conv2d", "name": "convolution", "out_channels": ffn, "kernel_size": 1},
                  {"type": act, "name": "activation"}], "conv1")
    return [{"type": "residual", "main": [norm("layernorm_before"), attention]},
            {"type": "residual", "main": [norm("layernorm_after"),
                                          _seq([conv1, *dropout(p, "dropout1"), _plain(dim, "conv2"), *dropout(p, "dropout2")],
                                               "ffn")]}]


def mobilevitv2_layer(c: HFConfig, c_in: int, c_out: int, dim: int, depth: int, act: str) -> list[dict]:
    """MobileViTV2Layer (stride 2): downsampling, local conv_kxk / conv_1x1, the transformer, the norm,
    conv_projection back to c_out."""
    k = c.size("conv_kernel_size")
    layers = [_seq(transformer_layer(c, dim, act), str(j)) for j in range(depth)]
    return [_seq([inverted_residual(c, c_in, c_out, 2, act)], "downsampling_layer"),
            _conv(c_out, k, 1, act, "conv_kxk", groups=c_out),
            _plain(dim, "conv_1x1", bias=False), *([_seq([_seq(layers, "layer")], "transformer")] if layers else []),
            {"type": "groupnorm", "name": "layernorm", "num_groups": 1, "eps": c.number("layer_norm_eps", positive=True)},
            _conv(c_out, 1, 1, None, "conv_projection")]


def _check(c: HFConfig, blocks: list[int], units: list[int]) -> None:
    """The fields MobileViT V2's fixed layout needs, and patch grids the unfolding does not pad."""
    if len(blocks) != 3 or len(units) != 3 or min(blocks) < 0 or min(units) < 1:
        raise SpecError(f"{c.source}: n_attn_blocks: expected 3 entries >= 0 and base_attn_unit_dims 3 positive "
                        f"entries, got {blocks} and {units}")
    if c.number("attn_dropout") > 0:
        raise SpecError(f"{c.source}: attn_dropout: dropout on the context scores not modelled; 0 is")
    check_grid(c, "MobileViT V2", "F.unfold would drop the remainder")


def mobilevitv2(c: HFConfig) -> dict:
    """MobileViTV2Model (pooled) or MobileViTV2ForImageClassification, as a network spec."""
    name = architecture(c, "mobilevitv2", HEADS)
    c = with_defaults(c, "mobilevitv2", DEFAULTS)
    act, blocks, units = activation(c), c.ints("n_attn_blocks"), c.ints("base_attn_unit_dims")
    _check(c, blocks, units)
    dims, w = widths(c), c.number("width_multiplier", positive=True)
    encoder = [_seq([_seq([inverted_residual(c, dims[0], dims[1], 1, act)], "layer")]),
               _seq([_seq([inverted_residual(c, dims[1], dims[2], 2, act),
                           inverted_residual(c, dims[2], dims[2], 1, act)], "layer")])]
    encoder += [_seq(mobilevitv2_layer(c, dims[2 + i], dims[3 + i], make_divisible(units[i] * w, 8, 8), blocks[i], act))
                for i in range(3)]
    layers = [_conv(dims[0], 3, 2, act, "conv_stem"), _seq([_seq(encoder, "layer")], "encoder"),
              pool(), {"type": "flatten"}]
    if name.endswith("ForImageClassification"):
        layers.append({"type": "linear", "name": "classifier", "out_features": labels(c)})
    return network(c, layers)


MOBILEVITV2_MAPPERS = {"mobilevitv2": mobilevitv2}
