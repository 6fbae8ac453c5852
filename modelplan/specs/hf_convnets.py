"""HF convolutional image classifiers as network specs (`specs.network`), the layer trees
transformers 5.24 builds: MobileNetV1 / MobileNetV2 (modeling_mobilenet_v1.py, modeling_mobilenet_v2.py:
Conv2d + BatchNorm2d + ReLU6 layers, depthwise 3x3 convs, V2's inverted residuals), RegNet
(modeling_regnet.py: ResNet-like X / Y blocks of grouped 3x3 convs, Y with squeeze-and-excitation)
and ConvNeXt (modeling_convnext.py: patchify stem, depthwise 7x7 blocks with channels-last LayerNorm,
pointwise MLP and layer scale, LayerNorm + 2x2 conv downsampling; ConvNeXt V2, modeling_convnextv2.py:
global response normalisation after the activation instead of layer scale).

A Linear over channels-last features (ConvNeXt's pwconv1 / pwconv2) is written as the 1x1 conv it
equals (the same weights, bias and FLOPs); TensorFlow "SAME" padding (MobileNet tf_padding) as the
symmetric kernel // 2 padding of the same output size for the odd kernels these models use.
Images are image_size pixels square (224 in the config classes that state one).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_resnet import IMAGE_SIZE, _conv, _seq, residual_layer
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {
    "mobilenet_v1": ("MobileNetV1Model", "MobileNetV1ForImageClassification"),
    "mobilenet_v2": ("MobileNetV2Model", "MobileNetV2ForImageClassification"),
    "regnet": ("RegNetModel", "RegNetForImageClassification"),
    "convnext": ("ConvNextModel", "ConvNextForImageClassification"),
    "convnextv2": ("ConvNextV2Model", "ConvNextV2ForImageClassification"),
}
"""model_type -> the classes whose head is modelled; the first is the base model."""

DEFAULTS = {
    "mobilenet_v1": {"num_channels": 3, "image_size": 224, "depth_multiplier": 1.0, "min_depth": 8,
                     "hidden_act": "relu6", "classifier_dropout_prob": 0.999},
    "mobilenet_v2": {"num_channels": 3, "image_size": 224, "depth_multiplier": 1.0, "depth_divisible_by": 8,
                     "min_depth": 8, "expand_ratio": 6.0, "output_stride": 32, "first_layer_is_expansion": True,
                     "finegrained_output": True, "hidden_act": "relu6", "classifier_dropout_prob": 0.8},
    "regnet": {"num_channels": 3, "embedding_size": 32, "hidden_sizes": [128, 192, 512, 1088], "depths": [2, 6, 12, 2],
               "groups_width": 64, "layer_type": "y", "hidden_act": "relu", "downsample_in_first_stage": True,
               "image_size": IMAGE_SIZE},  # RegNetConfig states no input size: hf_resnet's 224
    "convnext": {"num_channels": 3, "patch_size": 4, "num_stages": 4, "hidden_sizes": [96, 192, 384, 768],
                 "depths": [3, 3, 9, 3], "hidden_act": "gelu", "layer_scale_init_value": 1e-6, "image_size": 224},
    "convnextv2": {"num_channels": 3, "patch_size": 4, "num_stages": 4, "hidden_sizes": [96, 192, 384, 768],
                   "depths": [3, 3, 9, 3], "hidden_act": "gelu", "image_size": 224},
}
"""Config class defaults (transformers 5.24 configuration_mobilenet_v1.py, configuration_mobilenet_v2.py,
configuration_regnet.py, configuration_convnext.py); RegNet's image_size is the ImageNet crop."""

_ACTS = {"relu": "relu", "relu6": "relu6", "gelu": "gelu", "silu": "silu", "swish": "silu", "sigmoid": "sigmoid",
         "tanh": "tanh", "hardswish": "hardswish", "hardsigmoid": "hardsigmoid"}
"""transformers ACT2FN names -> the network stack's activations (swish is SiLU)."""


def activation(c: HFConfig, key: str = "hidden_act") -> str:
    """The network activation `key` names; another is a one-line error."""
    name = c.text(key)
    if name not in _ACTS:
        raise SpecError(f"{c.source}: {key}: unsupported '{name}' ({', '.join(_ACTS)})")
    return _ACTS[name]


def image_input(c: HFConfig, channels_key: str = "num_channels") -> list[int]:
    """[channels, height, width] of one image of image_size (an int or [height, width])."""
    return [c.size(channels_key), *image_sides(c)]


def classifier_head(c: HFConfig, name: str, dropout: float | None = None) -> list[dict]:
    """The ...ForImageClassification head on pooled [C, 1, 1] features: flatten, the optional
    nn.Dropout, Linear(C, num_labels) named `name`."""
    drop = [{"type": "dropout", "name": "dropout", "p": dropout}] if dropout else []
    return [{"type": "flatten"}, *drop, {"type": "linear", "name": name, "out_features": labels(c)}]


def dropout(p: float, name: str = "dropout") -> list[dict]:
    """nn.Dropout(p) named `name`, or nothing where p is 0 (a config's p <= 0 builds no layer)."""
    return [{"type": "dropout", "name": name, "p": p}] if p > 0 else []


def squeeze_excite(reduced: int, channels: int, act: str, gate: str = "sigmoid",
                   names: tuple[str, str] = ("pooler", "attention")) -> dict:
    """x * gate(conv(act(conv(avgpool(x))))): AdaptiveAvgPool2d(1), Conv2d(C, reduced, 1),
    act, Conv2d(reduced, C, 1), gate (Hu et al. 2018; RegNetSELayer, EfficientNetSqueezeExciteLayer)."""
    attention = [{"type": "conv2d", "out_channels": reduced, "kernel_size": 1}, {"type": act},
                 {"type": "conv2d", "out_channels": channels, "kernel_size": 1}, {"type": gate}]
    return {"type": "residual", "combine": "mul",
            "main": [{"type": "adaptiveavgpool2d", "name": names[0], "output_size": 1}, _seq(attention, names[1])]}


def network(c: HFConfig, layers: list[dict]) -> dict:
    """The network spec of `layers` over one image."""
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


def pool() -> dict:
    """The base models' pooler: AdaptiveAvgPool2d(1)."""
    return {"type": "adaptiveavgpool2d", "name": "pooler", "output_size": 1}


def mobilenet_v1(c: HFConfig) -> dict:
    """MobileNetV1Model (conv_stem, 13 depthwise + pointwise pairs, average pool) or
    ...ForImageClassification (dropout, Linear(last channels, num_labels))."""
    name = architecture(c, "mobilenet_v1", HEADS)
    c = with_defaults(c, "mobilenet_v1", DEFAULTS)
    act, mult, least = activation(c), c.number("depth_multiplier", positive=True), c.size("min_depth")
    depth = 32
    out = max(int(depth * mult), least)
    stem = _conv(out, 3, 2, act, "conv_stem")
    blocks = []
    for i, stride in enumerate([1, 2, 1, 2, 1, 2, 1, 1, 1, 1, 1, 2, 1]):  # MobileNetV1Model strides
        c_in = out
        if stride == 2 or i == 0:
            depth *= 2
            out = max(int(depth * mult), least)
        blocks += [_conv(c_in, 3, stride, act, groups=c_in), _conv(out, 1, 1, act)]
    layers = [stem, _seq(blocks, "layer"), pool()]
    if name.endswith("ForImageClassification"):
        layers += classifier_head(c, "classifier", c.number("classifier_dropout_prob"))
    return network(c, layers)


def make_divisible(value: float, divisor: int, least: int) -> int:
    """transformers modeling_mobilenet_v2.make_divisible: the nearest multiple of divisor, at
    least `least`, never more than 10 % below value."""
    out = max(least, int(value + divisor / 2) // divisor * divisor)
    return int(out + divisor if out < 0.9 * value else out)


def mobilenet_v2(c: HFConfig) -> dict:
    """MobileNetV2Model (conv_stem, 16 inverted residuals, conv_1x1, average pool) or
    ...ForImageClassification (dropout, Linear(conv_1x1 channels, num_labels))."""
    name = architecture(c, "mobilenet_v2", HEADS)
    c = with_defaults(c, "mobilenet_v2", DEFAULTS)
    act, mult = activation(c), c.number("depth_multiplier", positive=True)
    divisor, least, ratio = c.size("depth_divisible_by"), c.size("min_depth"), c.number("expand_ratio", positive=True)
    if c.integer("output_stride") != 32:
        raise SpecError(f"{c.source}: output_stride: {c.integer('output_stride')} (dilated depthwise convs) not "
                        f"modelled; 32 is")

    def scaled(channels: int) -> int:  # apply_depth_multiplier
        return make_divisible(int(round(channels * mult)), divisor, least)

    channels = [scaled(x) for x in (16, 24, 24, 32, 32, 32, 64, 64, 64, 64, 96, 96, 96, 160, 160, 160, 320)]
    first = scaled(32)
    stem = [_conv(first, 3, 2, act, "first_conv")]
    if not c.flag("first_layer_is_expansion"):
        stem.append(_conv(first, 1, 1, act, "expand_1x1"))
    stem += [_conv(first, 3, 1, act, "conv_3x3", groups=first), _conv(channels[0], 1, 1, None, "reduce_1x1")]
    blocks = []
    for i, stride in enumerate([2, 1, 2, 1, 1, 2, 1, 1, 1, 1, 1, 1, 2, 1, 1, 1]):  # MobileNetV2Model strides
        c_in, c_out = channels[i], channels[i + 1]
        wide = make_divisible(int(round(c_in * ratio)), divisor, least)
        main = [_conv(wide, 1, 1, act, "expand_1x1"), _conv(wide, 3, stride, act, "conv_3x3", groups=wide),
                _conv(c_out, 1, 1, None, "reduce_1x1")]
        residual = stride == 1 and c_in == c_out  # MobileNetV2InvertedResidual.use_residual
        blocks.append({"type": "residual", "main": main} if residual else _seq(main))
    last = 1280 if c.flag("finegrained_output") and mult < 1.0 else scaled(1280)
    layers = [_seq(stem, "conv_stem"), _seq(blocks, "layer"), _conv(last, 1, 1, act, "conv_1x1"), pool()]
    if name.endswith("ForImageClassification"):
        layers += classifier_head(c, "classifier", c.number("classifier_dropout_prob"))
    return network(c, layers)


def _stages(c: HFConfig) -> tuple[list[int], list[int]]:
    """(hidden_sizes, depths), one entry per stage each."""
    sizes, depths = c.ints("hidden_sizes"), c.ints("depths")
    if len(sizes) != len(depths) or not sizes or min(sizes) < 1 or min(depths) < 0:
        raise SpecError(f"{c.source}: depths: {depths} must be one non-negative entry per hidden_sizes entry ({sizes})")
    return sizes, depths


def _regnet_layer(c: HFConfig, c_in: int, c_out: int, stride: int, act: str) -> dict:
    """RegNetXLayer / RegNetYLayer: 1x1, grouped 3x3 (groups out // groups_width), [SE], 1x1, a
    1x1 conv + BatchNorm shortcut where channels or stride change, the activation after the sum."""
    groups = max(1, c_out // c.size("groups_width"))
    if c_out % groups:
        raise SpecError(f"{c.source}: groups_width: {c.size('groups_width')} gives {groups} groups, which do not "
                        f"divide {c_out} channels")
    main = [_conv(c_out, 1, 1, act), _conv(c_out, 3, stride, act, groups=groups)]
    if c.text("layer_type") == "y":
        main.append(squeeze_excite(int(round(c_in / 4)), c_out, "relu"))
    main.append(_conv(c_out, 1, 1, None))
    return residual_layer(main, c_in, c_out, stride, act)


def regnet(c: HFConfig) -> dict:
    """RegNetModel (a 3x3 stride-2 stem, stages of X or Y layers, average pool) or
    ...ForImageClassification (Flatten + Linear(hidden_sizes[-1], num_labels))."""
    name = architecture(c, "regnet", HEADS)
    c = with_defaults(c, "regnet", DEFAULTS)
    act, sizes, depths = activation(c), *_stages(c)
    if c.text("layer_type") not in ("x", "y"):
        raise SpecError(f"{c.source}: layer_type: unsupported '{c.text('layer_type')}' (x, y)")
    c_in = c.size("embedding_size")
    stages = []
    for i, (c_out, depth) in enumerate(zip(sizes, depths)):
        stride = 2 if i > 0 or c.flag("downsample_in_first_stage") else 1
        blocks = [_regnet_layer(c, c_in, c_out, stride, act)]
        blocks += [_regnet_layer(c, c_out, c_out, 1, act) for _ in range(depth - 1)]
        stages.append(_seq([_seq(blocks, "layers")]))
        c_in = c_out
    layers = [_seq([_conv(c.size("embedding_size"), 3, 2, act, "embedder")], "embedder"),
              _seq([_seq(stages, "stages")], "encoder"), pool()]
    if name.endswith("ForImageClassification"):
        layers.append(_seq(classifier_head(c, "1"), "classifier"))
    return network(c, layers)


def _convnext_layer(dim: int, act: str, scale: bool, extra: list[dict]) -> dict:
    """ConvNextLayer: depthwise 7x7 conv, LayerNorm over channels, pwconv1 (dim -> 4 dim), act,
    `extra` (ConvNeXt V2's GRN), pwconv2 (4 dim -> dim), layer scale, added to the input."""
    main = [{"type": "conv2d", "name": "dwconv", "out_channels": dim, "kernel_size": 7, "padding": 3, "groups": dim},
            {"type": "layernorm2d", "name": "layernorm", "eps": 1e-6},
            {"type": "conv2d", "name": "pwconv1", "out_channels": 4 * dim, "kernel_size": 1},
            {"type": act, "name": "act"}, *extra,
            {"type": "conv2d", "name": "pwconv2", "out_channels": dim, "kernel_size": 1}]
    if scale:
        main.append({"type": "layerscale", "name": "layer_scale_parameter"})
    return {"type": "residual", "main": main}


def convnext(c: HFConfig, extra=lambda dim: [], scale: bool | None = None) -> dict:
    """ConvNextModel (patch_embeddings Conv2d(k = s = patch_size) + channels-first LayerNorm,
    stages each opened where channels or stride change by LayerNorm + Conv2d(2x2, stride 2), the
    mean over the grid, a final LayerNorm) or ...ForImageClassification (Linear(hidden_sizes[-1],
    num_labels)); `extra(dim)`: layers after each block's activation."""
    kind = c.text("model_type")
    name = architecture(c, kind, HEADS)
    c = with_defaults(c, kind, DEFAULTS)
    act, sizes, depths = activation(c), *_stages(c)
    if c.integer("num_stages") != len(sizes):
        raise SpecError(f"{c.source}: num_stages: {c.integer('num_stages')} != {len(sizes)} hidden_sizes entries")
    scale = (c.number("layer_scale_init_value") or 0) > 0 if scale is None else scale
    p = c.size("patch_size")
    embeddings = _seq([{"type": "conv2d", "name": "patch_embeddings", "out_channels": sizes[0], "kernel_size": p,
                        "stride": p}, {"type": "layernorm2d", "name": "layernorm", "eps": 1e-6}], "embeddings")
    stages, c_in = [], sizes[0]
    for i, (dim, depth) in enumerate(zip(sizes, depths)):
        stage = []
        if c_in != dim or i > 0:  # ConvNextStage.downsampling_layer (stride 2 after the first stage)
            stage.append(_seq([{"type": "layernorm2d", "eps": 1e-6},
                               {"type": "conv2d", "out_channels": dim, "kernel_size": 2, "stride": 2}],
                              "downsampling_layer"))
        if depth:
            stage.append(_seq([_convnext_layer(dim, act, scale, extra(dim)) for _ in range(depth)], "layers"))
        if stage:
            stages.append(_seq(stage, str(i)))
        c_in = dim
    layers = [embeddings, _seq([_seq(stages, "stages")], "encoder"),
              {"type": "adaptiveavgpool2d", "name": "pool", "output_size": 1}, {"type": "flatten", "name": "flatten"},
              {"type": "layernorm", "name": "layernorm"}]
    if name.endswith("ForImageClassification"):
        layers.append({"type": "linear", "name": "classifier", "out_features": labels(c)})
    return network(c, layers)


CONVNET_MAPPERS = {"mobilenet_v1": mobilenet_v1, "mobilenet_v2": mobilenet_v2, "regnet": regnet,
                   "convnext": convnext,
                   "convnextv2": lambda c: convnext(c, lambda dim: [{"type": "grn", "name": "grn"}], scale=False)}
