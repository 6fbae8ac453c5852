"""HF EfficientNet (Tan & Le 2019; transformers 5.24 modeling_efficientnet.py EfficientNetModel /
EfficientNetForImageClassification) as a network spec: a 3x3 stride-2 stem, MBConv blocks (the
expansion, the depthwise conv, squeeze-and-excitation, the projection; from the second block of a
stage on, dropout and the input added), top_conv 1x1, the mean over the grid, dropout + classifier.
Stride-2 convs pad asymmetrically (ZeroPad2d) in transformers, to the output size the symmetric
padding modelled gives."""

from __future__ import annotations

import math

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, classifier_head, make_divisible, network, pool, squeeze_excite
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_vision_models import architecture, with_defaults

HEADS = {"efficientnet": ("EfficientNetModel", "EfficientNetForImageClassification")}
DEFAULTS = {
    "efficientnet": {"num_channels": 3, "image_size": 600, "width_coefficient": 2.0, "depth_coefficient": 3.1,
                     "depth_divisor": 8, "kernel_sizes": [3, 3, 5, 3, 5, 5, 3], "in_channels": [32, 16, 24, 40, 80, 112, 192],
                     "out_channels": [16, 24, 40, 80, 112, 192, 320], "strides": [1, 2, 2, 2, 1, 2, 1],
                     "num_block_repeats": [1, 2, 2, 3, 3, 4, 1], "expand_ratios": [1, 6, 6, 6, 6, 6, 6],
                     "squeeze_expansion_ratio": 0.25, "hidden_act": "swish", "hidden_dim": 2560, "pooling_type": "mean",
                     "dropout_rate": 0.5, "drop_connect_rate": 0.2},
}
"""EfficientNetConfig defaults (transformers 5.24 configuration_efficientnet.py: EfficientNet-B7)."""


def _conv_bn_act(out: int, kernel: int, stride: int, act: str | None, names: tuple[str, ...], groups: int = 1) -> list[dict]:
    """Conv2d(kernel, stride, padding kernel // 2, groups, bias=False), BatchNorm2d, the optional
    activation, named `names` (EfficientNet's expand_conv / expand_bn / expand_act, ...)."""
    layers = [{"type": "conv2d", "name": names[0], "out_channels": out, "kernel_size": kernel, "stride": stride,
               "padding": kernel // 2, "groups": groups, "bias": False}, {"type": "batchnorm2d", "name": names[1]}]
    return layers + ([{"type": act, "name": names[2]}] if act else [])


def _efficientnet_block(c: HFConfig, c_in: int, c_out: int, stride: int, kernel: int, ratio: int, act: str,
                        residual: bool, drop: float) -> dict:
    """EfficientNetBlock: the expansion (1x1 to c_in * ratio, where ratio != 1), the depthwise
    kernel x kernel conv, squeeze-and-excitation to max(1, int(c_in * squeeze_expansion_ratio)),
    the 1x1 projection; `residual`: dropout(drop) and the input added (EfficientNetFinalBlockLayer)."""
    wide = c_in * ratio
    main = []
    if ratio != 1:
        main.append(_seq(_conv_bn_act(wide, 1, 1, act, ("expand_conv", "expand_bn", "expand_act")), "expansion"))
    main.append(_seq(_conv_bn_act(wide, kernel, stride, act, ("depthwise_conv", "depthwise_norm", "depthwise_act"),
                                  groups=wide), "depthwise_conv"))
    squeeze = max(1, int(c_in * c.number("squeeze_expansion_ratio", positive=True)))
    main.append(_seq([squeeze_excite(squeeze, wide, act, names=("squeeze", "excite"))], "squeeze_excite"))
    project = _conv_bn_act(c_out, 1, 1, None, ("project_conv", "project_bn"))
    if residual and drop > 0:
        project.append({"type": "dropout", "name": "dropout", "p": drop})
    main.append(_seq(project, "projection"))
    return {"type": "residual", "main": main} if residual else _seq(main)


def efficientnet_layers(c: HFConfig, top_conv: bool = True) -> list[dict]:
    """The stem and the encoder's blocks (the stages' blocks repeated ceil(depth_coefficient n)
    times, widths scaled by width_coefficient: round_filters), then with `top_conv` top_conv 1x1
    to round_filters(1280) + top_bn + activation (ALIGN's vision encoder has none); `c` over its
    config class's defaults."""
    act, divisor, width = activation(c), c.size("depth_divisor"), c.number("width_coefficient", positive=True)

    def filters(channels: int) -> int:  # round_filters
        return make_divisible(channels * width, divisor, divisor)

    keys = ("kernel_sizes", "in_channels", "out_channels", "strides", "num_block_repeats", "expand_ratios")
    lists = [c.ints(key) for key in keys]
    if len({len(v) for v in lists}) != 1:
        raise SpecError(f"{c.source}: {c.path}{keys[0]}: the per-stage lists must have one length, got "
                        + ", ".join(f"{k} {len(v)}" for k, v in zip(keys, lists)))
    if c.text("pooling_type") != "mean":
        raise SpecError(f"{c.source}: {c.path}pooling_type: '{c.text('pooling_type')}' not modelled (mean is)")
    repeats = [int(math.ceil(c.number("depth_coefficient", positive=True) * n)) for n in lists[4]]
    total, blocks = sum(repeats), []
    for (kernel, c_in, c_out, stride, _, ratio), n in zip(zip(*lists), repeats):
        c_in, c_out = filters(c_in), filters(c_out)
        for j in range(n):
            drop = c.number("drop_connect_rate") * len(blocks) / total
            blocks.append(_efficientnet_block(c, c_out if j else c_in, c_out, 1 if j else stride, kernel, ratio, act,
                                              residual=j > 0, drop=drop))  # id_skip: the first block has none
    stem = _conv_bn_act(filters(32), 3, 2, act, ("convolution", "batchnorm", "activation"))
    encoder = [_seq(blocks, "blocks")]
    if top_conv:
        top = filters(1280)
        if c.size("hidden_dim") != top:  # top_bn is BatchNorm2d(hidden_dim) after a conv to round_filters(1280)
            raise SpecError(f"{c.source}: {c.path}hidden_dim: {c.size('hidden_dim')} must equal top_conv's "
                            f"round_filters(1280) = {top} channels")
        encoder += _conv_bn_act(top, 1, 1, act, ("top_conv", "top_bn", "top_activation"))
    return [_seq(stem, "embeddings"), _seq(encoder, "encoder")]


def efficientnet(c: HFConfig) -> dict:
    """EfficientNetModel (`efficientnet_layers`, the mean over the grid) or
    ...ForImageClassification (dropout, Linear(hidden_dim, num_labels))."""
    name = architecture(c, "efficientnet", HEADS)
    c = with_defaults(c, "efficientnet", DEFAULTS)
    layers = [*efficientnet_layers(c), pool()]
    if name.endswith("ForImageClassification"):
        layers += classifier_head(c, "classifier", c.number("dropout_rate"))
    return network(c, layers)


EFFICIENTNET_MAPPERS = {"efficientnet": efficientnet}
