"""HF PP-LCNet (Cui et al. 2021; transformers 5.24 modeling_pp_lcnet.py PPLCNetForImageClassification)
as a network spec (`specs.network`): the stem conv (3x3, stem_stride, BatchNorm, act) and the
block_configs' depthwise separable layers (a k x k depthwise conv + BatchNorm + act, the optional
squeeze-and-excitation gate AdaptiveAvgPool2d(1), Conv2d(C, C / reduction) + ReLU, Conv2d back +
Hardsigmoid, the pointwise 1x1 conv + BatchNorm + act), channels scaled by `scale` and made
divisible by `divisor` (MobileNetV2's make_divisible); the head: the mean over the grid, a bias-free
1x1 conv to class_expand, act, Linear(class_expand, num_labels).

Not counted: the head's scale by (1 - hidden_dropout_prob) (one multiply per class_expand feature,
a constant the network stack has no layer for; its FLOPs are class_expand per image).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, make_divisible, squeeze_excite
from modelplan.specs.hf_resnet import IMAGE_SIZE, _conv, _seq
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"pp_lcnet": ("PPLCNetForImageClassification",)}
"""model_type -> the classes whose head is modelled (PPLCNetBackbone returns feature maps: refused)."""

BLOCKS = [[[3, 16, 32, 1, False]], [[3, 32, 64, 2, False], [3, 64, 64, 1, False]],
          [[3, 64, 128, 2, False], [3, 128, 128, 1, False]],
          [[3, 128, 256, 2, False]] + [[5, 256, 256, 1, False]] * 5, [[5, 256, 512, 2, True], [5, 512, 512, 1, True]]]
"""PPLCNetConfig.__post_init__'s block_configs when none is given: (kernel, in, out, stride, SE) per layer."""
DEFAULTS = {"pp_lcnet": {"scale": 1.0, "block_configs": None, "stem_channels": 16, "stem_stride": 2, "reduction": 4,
                         "class_expand": 1280, "divisor": 8, "hidden_act": "hardswish", "image_size": IMAGE_SIZE}}
"""PPLCNetConfig defaults (transformers 5.24 configuration_pp_lcnet.py); it states no image size: hf_resnet's 224."""
STEM_CHANNELS = 3  # PPLCNetEncoder.convolution: in_channels=3


def _layers(c: HFConfig) -> list[list[list]]:
    """block_configs: five stages of [kernel, in, out, stride, use_squeeze_excitation] rows."""
    value = c.data.get("block_configs") or BLOCKS
    ok = isinstance(value, list) and len(value) == 5 and all(
        isinstance(stage, list) and all(isinstance(row, list) and len(row) == 5 and all(
            isinstance(x, int) and x > 0 for x in row[:4]) and isinstance(row[4], bool) for row in stage)
        for stage in value)
    if not ok:
        raise SpecError(f"{c.source}: block_configs: expected 5 stages of [kernel, in, out, stride, SE] rows "
                        f"(positive ints and a bool), got {value!r}")
    return value


def pp_lcnet(c: HFConfig) -> dict:
    """PPLCNetForImageClassification as a network spec."""
    architecture(c, "pp_lcnet", HEADS)
    c = with_defaults(c, "pp_lcnet", DEFAULTS)
    if c.has("num_channels") and c.size("num_channels") != STEM_CHANNELS:
        raise SpecError(f"{c.source}: num_channels: PP-LCNet's stem reads {STEM_CHANNELS} channels, got "
                        f"{c.size('num_channels')}")
    act, scale, divisor = activation(c), c.number("scale", positive=True), c.size("divisor")
    width = lambda ch: make_divisible(ch * scale, divisor, divisor)  # noqa: E731  (PPLCNetBlock)
    current = width(c.size("stem_channels"))
    stages = []
    for i, stage in enumerate(_layers(c)):
        layers = []
        for kernel, c_in, c_out, stride, se in stage:
            if width(c_in) != current:
                raise SpecError(f"{c.source}: block_configs: stage {i} reads {width(c_in)} channels, the layer "
                                f"before gives {current}")
            gate = [squeeze_excite(current // c.size("reduction"), current, "relu", "hardsigmoid",
                                   ("avg_pool", "convolutions"))] if se else []
            layers.append(_seq([_conv(current, kernel, stride, act, "depthwise_convolution", groups=current), *gate,
                                _conv(width(c_out), 1, 1, act, "pointwise_convolution")]))
            current = width(c_out)
        stages.append(_seq([_seq(layers, "layers")]))
    layers = [_seq([_conv(width(c.size("stem_channels")), 3, c.size("stem_stride"), act, "convolution"),
                    _seq(stages, "blocks")], "encoder"),
              {"type": "adaptiveavgpool2d", "name": "avg_pool", "output_size": 1},
              {"type": "conv2d", "name": "last_convolution", "out_channels": c.size("class_expand"), "kernel_size": 1,
               "bias": False}, {"type": act, "name": "act_fn"}, {"type": "flatten"},
              {"type": "linear", "name": "head", "out_features": labels(c)}]
    return {"kind": "network", "input_shape": [STEM_CHANNELS, *image_sides(c)], "layers": layers}


PP_LCNET_MAPPERS = {"pp_lcnet": pp_lcnet}
