"""HF ResNet configs (model_type resnet) as a network spec (`specs.network`), the layer tree
transformers 5.24's modeling_resnet.py builds: ResNetEmbeddings (7x7 stride-2 conv, BatchNorm,
activation, 3x3 stride-2 max pool), one ResNetStage per hidden_sizes entry (ResNetBasicLayer or
ResNetBottleNeckLayer, a 1x1 conv + BatchNorm shortcut where channels or stride change), an
adaptive average pool to 1 x 1 and, for ResNetForImageClassification, Flatten + Linear(hidden_sizes[-1],
num_labels). Convs are bias-free (ResNetConvLayer); BatchNorm running statistics are buffers.

HF ResNet configs state no input size: a sample is one 3 x 224 x 224 image (`IMAGE_SIZE`).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

IMAGE_SIZE = 224
"""Pixels per side of one priced image: the crop of the ImageNet checkpoints' image processor
(microsoft/resnet-50 preprocessor_config.json crop_size 224)."""

HEADS = {"resnet": ("ResNetModel", "ResNetForImageClassification")}
DEFAULTS = {"resnet": {"num_channels": 3, "embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048],
                       "depths": [3, 4, 6, 3]}}
"""ResNetConfig defaults (transformers 5.24 AutoConfig.for_model('resnet'))."""


def _seq(layers: list[dict], name: str | None = None) -> dict:
    """An nn.Sequential (children by name, else by position)."""
    return {"type": "sequential", "layers": layers, **({"name": name} if name else {})}


def _conv(out: int, kernel: int, stride: int, act: str | None, name: str | None = None, groups: int = 1) -> dict:
    """ResNetConvLayer: Conv2d(kernel, stride, padding kernel // 2, groups, bias=False), BatchNorm2d,
    the activation (none on a block's last conv)."""
    layers = [{"type": "conv2d", "name": "convolution", "out_channels": out, "kernel_size": kernel,
               "stride": stride, "padding": kernel // 2, "groups": groups, "bias": False},
              {"type": "batchnorm2d", "name": "normalization"}]
    return _seq(layers + ([{"type": act, "name": "activation"}] if act else []), name)


def _block(c_in: int, c_out: int, stride: int, bottleneck: bool, act: str, down_in_bottleneck: bool) -> dict:
    """ResNetBasicLayer / ResNetBottleNeckLayer as a residual block."""
    if bottleneck:  # reduction 4: 1x1 down, 3x3, 1x1 up (stride on the first conv when downsample_in_bottleneck)
        mid = c_out // 4
        main = [_conv(mid, 1, stride if down_in_bottleneck else 1, act),
                _conv(mid, 3, 1 if down_in_bottleneck else stride, act), _conv(c_out, 1, 1, None)]
    else:
        main = [_conv(c_out, 3, stride, act), _conv(c_out, 3, 1, None)]
    return residual_layer(main, c_in, c_out, stride, act)


def residual_layer(main: list[dict], c_in: int, c_out: int, stride: int, act: str) -> dict:
    """`main` as the block's `layer`, a shortcut where channels or stride change (ResNetShortCut,
    RegNetShortCut: Conv2d(1x1, stride, bias=False) + BatchNorm2d), the activation after the sum."""
    shortcut = []
    if c_in != c_out or stride != 1:
        shortcut = [{"type": "conv2d", "name": "convolution", "out_channels": c_out, "kernel_size": 1,
                     "stride": stride, "bias": False}, {"type": "batchnorm2d", "name": "normalization"}]
    return {"type": "residual", "main": [_seq(main, "layer")], "shortcut": shortcut, "activation": act}


def resnet(c: HFConfig) -> dict:
    """ResNetModel (pooled features) or ResNetForImageClassification, as a network spec."""
    name = architecture(c, "resnet", HEADS)
    c = with_defaults(c, "resnet", DEFAULTS)
    act = c.text("hidden_act", "relu")
    if act not in ("relu", "gelu", "tanh", "sigmoid", "silu"):
        raise SpecError(f"{c.source}: hidden_act: unsupported '{act}' (relu, gelu, tanh, sigmoid, silu)")
    kind = c.text("layer_type", "bottleneck")
    if kind not in ("basic", "bottleneck"):
        raise SpecError(f"{c.source}: layer_type: unsupported '{kind}' (basic, bottleneck)")
    sizes, depths = c.ints("hidden_sizes"), c.ints("depths")
    if len(sizes) != len(depths) or not sizes or min(sizes + depths) < 1:
        raise SpecError(f"{c.source}: depths: {depths} must be positive, one per hidden_sizes entry ({sizes})")
    down_in_bottleneck = c.flag("downsample_in_bottleneck", False)
    c_in = c.size("embedding_size")
    embedder = _seq([_conv(c_in, 7, 2, act, "embedder"),
                     {"type": "maxpool2d", "name": "pooler", "kernel_size": 3, "stride": 2, "padding": 1}], "embedder")
    stages = []
    for i, (c_out, depth) in enumerate(zip(sizes, depths)):
        stride = 2 if i > 0 or c.flag("downsample_in_first_stage", False) else 1
        blocks = [_block(c_in, c_out, stride, kind == "bottleneck", act, down_in_bottleneck)]
        blocks += [_block(c_out, c_out, 1, kind == "bottleneck", act, down_in_bottleneck) for _ in range(depth - 1)]
        stages.append(_seq([_seq(blocks, "layers")]))
        c_in = c_out
    layers = [embedder, _seq([_seq(stages, "stages")], "encoder"),
              {"type": "adaptiveavgpool2d", "name": "pooler", "output_size": 1}]
    if name == "ResNetForImageClassification":
        layers.append(_seq([{"type": "flatten"}, {"type": "linear", "out_features": labels(c)}], "classifier"))
    return {"kind": "network", "input_shape": [c.size("num_channels"), IMAGE_SIZE, IMAGE_SIZE], "layers": layers}


RESNET_MAPPERS = {"resnet": resnet}
