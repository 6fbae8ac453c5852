"""HF MobileViT (Mehta & Rastegari 2022; transformers 5.24 modeling_mobilevit.py MobileViTModel /
MobileViTForImageClassification) as a network spec (`specs.network`).

The stem (3x3 stride-2 conv, BatchNorm, act), MobileNetV2 inverted residuals (layer_1, layer_2),
three MobileViTLayers and the 1x1 expansion conv, the mean over the grid and the classifier
(dropout, Linear). A MobileViTLayer: a stride-2 inverted residual, then the input stacked with
(conv_kxk, a bias-free 1x1 conv to the transformer width, the transformer layers over the unfolded
patches, a LayerNorm, conv_projection back) along the channels (the `concat` residual, the input
first), and the fusion conv. The transformer layers attend over the patch_size x patch_size patches
unfolded (the `attend` residual's `patch`: the tokens at one offset of every patch form one sequence)
with pre-norm attention (query, key / value as one conv to 2 x hidden, the output dense, dropout) and
MLP (dense, act, dense, dropout) residuals; per-token Linears are the 1x1 convs they equal.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, dropout, image_input, make_divisible
from modelplan.specs.hf_resnet import _conv, _seq
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"mobilevit": ("MobileViTModel", "MobileViTForImageClassification")}
"""model_type -> the classes whose head is modelled (MobileViTForSemanticSegmentation's DeepLabV3 head: refused)."""

DEFAULTS = {"mobilevit": {"num_channels": 3, "image_size": 256, "patch_size": 2, "hidden_sizes": [144, 192, 240],
                          "neck_hidden_sizes": [16, 32, 64, 96, 128, 160, 640], "num_attention_heads": 4,
                          "mlp_ratio": 2.0, "expand_ratio": 4.0, "hidden_act": "silu", "conv_kernel_size": 3,
                          "output_stride": 32, "hidden_dropout_prob": 0.1, "attention_probs_dropout_prob": 0.0,
                          "classifier_dropout_prob": 0.1, "layer_norm_eps": 1e-5, "qkv_bias": True}}
"""MobileViTConfig defaults (transformers 5.24 configuration_mobilevit.py)."""

TRANSFORMER_DEPTHS = (2, 4, 3)  # MobileViTEncoder: num_stages of layer_3, layer_4, layer_5


def inverted_residual(c: HFConfig, c_in: int, c_out: int, stride: int, act: str) -> dict:
    """MobileViTInvertedResidual: expand 1x1, depthwise 3x3 (stride), reduce 1x1 without activation,
    the input added where stride 1 keeps the channels."""
    wide = make_divisible(int(round(c_in * c.number("expand_ratio", positive=True))), 8, 8)
    main = [_conv(wide, 1, 1, act, "expand_1x1"), _conv(wide, 3, stride, act, "conv_3x3", groups=wide),
            _conv(c_out, 1, 1, None, "reduce_1x1")]
    return {"type": "residual", "main": main} if stride == 1 and c_in == c_out else _seq(main)


def transformer_layer(dim: int, ffn: int, heads: int, patch: int, act: str, eps: float, p: float,
                      qkv_bias: bool) -> list[dict]:
    """MobileViTTransformerLayer: the attention and MLP residuals over the unfolded patches."""
    conv = lambda name, out, bias=True: {"type": "conv2d", "name": name, "out_channels": out, "kernel_size": 1,  # noqa: E731
                                         "bias": bias}
    attend = {"type": "residual", "name": "attention", "combine": "attend", "heads": heads, "patch": patch,
              "main": [conv("query", dim, qkv_bias)], "shortcut": [conv("key_value", 2 * dim, qkv_bias)]}
    norm = lambda name: {"type": "layernorm2d", "name": name, "eps": eps}  # noqa: E731
    return [{"type": "residual", "name": "attention",
             "main": [norm("layernorm_before"), attend, conv("dense", dim), *dropout(p)]},
            {"type": "residual", "name": "mlp",
             "main": [norm("layernorm_after"), conv("intermediate", ffn), {"type": act, "name": "act"},
                      conv("output", dim), *dropout(p)]}]


def mobilevit_layer(c: HFConfig, c_in: int, c_out: int, hidden: int, depth: int, act: str) -> list[dict]:
    """MobileViTLayer (stride 2): the downsampling inverted residual, the stacked local / global
    representations, the fusion conv."""
    k, heads, patch = c.size("conv_kernel_size"), c.size("num_attention_heads"), c.size("patch_size")
    if hidden % heads:
        raise SpecError(f"{c.source}: num_attention_heads: {heads} must divide the transformer width {hidden}")
    eps, p = c.number("layer_norm_eps", positive=True), c.number("hidden_dropout_prob")
    ffn = int(hidden * c.number("mlp_ratio", positive=True))
    layers = [_seq(transformer_layer(hidden, ffn, heads, patch, act, eps, p, c.flag("qkv_bias")), str(j))
              for j in range(depth)]
    local_global = [_conv(c_out, k, 1, act, "conv_kxk"),
                    {"type": "conv2d", "name": "conv_1x1", "out_channels": hidden, "kernel_size": 1, "bias": False},
                    _seq(layers, "transformer"), {"type": "layernorm2d", "name": "layernorm", "eps": eps},
                    _conv(c_out, 1, 1, act, "conv_projection")]
    return [inverted_residual(c, c_in, c_out, 2, act),
            {"type": "residual", "name": "local_global", "combine": "concat", "main": local_global},
            _conv(c_out, k, 1, act, "fusion")]


def _check(c: HFConfig, necks: list[int], hidden: list[int]) -> None:
    """The fields MobileViT's fixed layout needs, and patch grids the unfolding does not interpolate."""
    if len(necks) != 7 or len(hidden) != 3 or min(necks + hidden) < 1:
        raise SpecError(f"{c.source}: neck_hidden_sizes: expected 7 and hidden_sizes 3 positive entries, got "
                        f"{necks} and {hidden}")
    if c.number("attention_probs_dropout_prob") > 0:
        raise SpecError(f"{c.source}: attention_probs_dropout_prob: dropout on the attention probabilities not modelled "
                        f"(the attend combine has none); 0 is")
    check_grid(c, "MobileViT", "MobileViT's bilinear resize to whole patches not modelled")


def check_grid(c: HFConfig, family: str, remainder: str) -> None:
    """Output stride, kernel and the patch grids of MobileViT's layout (V1 and V2 share the stem and strides)."""
    if c.integer("output_stride") != 32:
        raise SpecError(f"{c.source}: output_stride: {c.integer('output_stride')} (dilated {family} layers) not "
                        f"modelled; 32 is")
    if c.size("conv_kernel_size") % 2 == 0:
        raise SpecError(f"{c.source}: conv_kernel_size: {c.size('conv_kernel_size')} must be odd")
    patch, sides = c.divisor("patch_size"), list(image_sides(c))
    for stage in range(5):  # the stride-2 stem and four stride-2 layers: each side ceil(side / 2)
        sides = [-(-s // 2) for s in sides]
        if stage >= 2 and any(s % patch for s in sides):
            raise SpecError(f"{c.source}: image_size: layer_{stage + 1}'s {sides[0]} x {sides[1]} grid is not a multiple "
                            f"of patch_size {patch} ({remainder})")


def mobilevit(c: HFConfig) -> dict:
    """MobileViTModel (pooled) or MobileViTForImageClassification, as a network spec."""
    name = architecture(c, "mobilevit", HEADS)
    c = with_defaults(c, "mobilevit", DEFAULTS)
    act, necks, hidden = activation(c), c.ints("neck_hidden_sizes"), c.ints("hidden_sizes")
    _check(c, necks, hidden)
    layer_2 = [inverted_residual(c, necks[1] if i == 0 else necks[2], necks[2], 2 if i == 0 else 1, act)
               for i in range(3)]
    encoder = [_seq([_seq([inverted_residual(c, necks[0], necks[1], 1, act)], "layer")]),
               _seq([_seq(layer_2, "layer")])]
    encoder += [_seq(mobilevit_layer(c, necks[2 + i], necks[3 + i], hidden[i], depth, act))
                for i, depth in enumerate(TRANSFORMER_DEPTHS)]
    layers = [_conv(necks[0], 3, 2, act, "conv_stem"), _seq([_seq(encoder, "layer")], "encoder"),
              _conv(necks[6], 1, 1, act, "conv_1x1_exp"), {"type": "adaptiveavgpool2d", "name": "pooler", "output_size": 1},
              {"type": "flatten"}]
    if name.endswith("ForImageClassification"):
        layers += [*dropout(c.number("classifier_dropout_prob")),
                   {"type": "linear", "name": "classifier", "out_features": labels(c)}]
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


MOBILEVIT_MAPPERS = {"mobilevit": mobilevit}
