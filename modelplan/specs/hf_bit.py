"""HF BiT (Big Transfer, Kolesnikov et al. 2020; transformers 5.24 modeling_bit.py BitModel /
BitForImageClassification) as a network spec: a ResNet v2 with weight-standardised convs and
GroupNorm (BitGroupNormActivation: nn.GroupNorm(num_groups) + the activation).

The stem is a 7x7 stride-2 conv, (for layer_type bottleneck a GroupNorm + activation), a 3x3
stride-2 max pool (after a 1-pixel zero pad unless global_padding is SAME); then per stage
pre-activation bottlenecks (norm1, conv1 1x1, norm2, conv2 3x3 with the stage's stride, norm3,
conv3 1x1, the first with a 1x1 downsample conv of the pre-activated input) or post-activation ones
(conv / GroupNorm pairs, the sum activated); BitModel's final GroupNorm + activation
(preactivation), the average pool, Flatten + Linear(hidden_sizes[-1], num_labels).

Weight standardisation ((w - mean) / std per output channel) is counted as the plain conv it
feeds: the same parameters and activation FLOPs (its per-weight arithmetic is not counted).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, classifier_head, image_input, make_divisible
from modelplan.specs.hf_resnet import IMAGE_SIZE, _seq
from modelplan.specs.hf_vision_models import architecture, with_defaults

HEADS = {"bit": ("BitModel", "BitForImageClassification")}
DEFAULTS = {"bit": {"num_channels": 3, "embedding_size": 64, "hidden_sizes": [256, 512, 1024, 2048],
                    "depths": [3, 4, 6, 3], "layer_type": "preactivation", "hidden_act": "relu", "global_padding": None,
                    "num_groups": 32, "embedding_dynamic_padding": False, "output_stride": 32, "width_factor": 1,
                    "image_size": IMAGE_SIZE}}
"""BitConfig defaults (transformers 5.24 configuration_bit.py); it states no input size: hf_resnet's 224."""


def _conv(name: str, out: int, kernel: int, stride: int = 1) -> dict:
    """WeightStandardizedConv2d(bias=False), padding ((stride - 1) + (kernel - 1)) // 2 (get_padding_value;
    TensorFlow SAME gives the same output sizes for these odd kernels)."""
    return {"type": "conv2d", "name": name, "out_channels": out, "kernel_size": kernel, "stride": stride,
            "padding": ((stride - 1) + (kernel - 1)) // 2, "bias": False}


def _norm(c: HFConfig, name: str, act: str | None) -> list[dict]:
    """BitGroupNormActivation: GroupNorm(num_groups) and the activation (apply_activation)."""
    norm = {"type": "groupnorm", "name": name, "num_groups": c.size("num_groups")}
    return [norm] + ([{"type": act, "name": f"{name}_act"}] if act else [])


def _preact(c: HFConfig, c_in: int, c_out: int, stride: int, first: bool, act: str) -> dict:
    """BitPreActivationBottleneckLayer: the downsample (first layer) reads the pre-activated input."""
    mid = make_divisible(c_out * 0.25, 8, 8)  # make_div(out_channels * bottle_ratio)
    pre = _seq(_norm(c, "norm1", act))
    main = [_conv("conv1", mid, 1), *_norm(c, "norm2", act), _conv("conv2", mid, 3, stride), *_norm(c, "norm3", act),
            _conv("conv3", c_out, 1)]
    block = {"type": "residual", "main": main,
             "shortcut": [_seq([_conv("conv", c_out, 1, stride)], "downsample")] if first else []}
    return _seq([pre, block]) if first else {"type": "residual", "main": [pre, *main]}


def _bottleneck(c: HFConfig, c_in: int, c_out: int, stride: int, first: bool, act: str) -> dict:
    """BitBottleneckLayer: conv / GroupNorm pairs, the downsample conv + GroupNorm, the sum activated."""
    mid = make_divisible(c_out * 0.25, 8, 8)
    main = [_conv("conv1", mid, 1), *_norm(c, "norm1", act), _conv("conv2", mid, 3, stride), *_norm(c, "norm2", act),
            _conv("conv3", c_out, 1), *_norm(c, "norm3", None)]
    shortcut = [_seq([_conv("conv", c_out, 1, stride), *_norm(c, "norm", None)], "downsample")] if first else []
    return {"type": "residual", "main": main, "shortcut": shortcut, "activation": act}


def bit(c: HFConfig) -> dict:
    """BitModel (pooled features) or BitForImageClassification, as a network spec."""
    name = architecture(c, "bit", HEADS)
    c = with_defaults(c, "bit", DEFAULTS)
    act, kind = activation(c), c.text("layer_type")
    if kind not in ("preactivation", "bottleneck"):
        raise SpecError(f"{c.source}: layer_type: unsupported '{kind}' (preactivation, bottleneck)")
    padding = (c.text("global_padding", None) or "none").upper()
    if padding not in ("NONE", "SAME"):
        raise SpecError(f"{c.source}: global_padding: unsupported '{padding.lower()}' (null, SAME)")
    sizes, depths = c.ints("hidden_sizes"), c.ints("depths")
    if len(sizes) != len(depths) or not sizes or min(depths) < 1:
        raise SpecError(f"{c.source}: depths: {depths} must be positive, one per hidden_sizes entry ({sizes})")
    widths = [make_divisible(h * c.size("width_factor"), 8, 8) for h in sizes]
    if widths[-1] != sizes[-1]:  # BitModel.norm and the classifier are sized by hidden_sizes[-1]
        raise SpecError(f"{c.source}: width_factor: {c.size('width_factor')} makes the last stage {widths[-1]} wide, "
                        f"but BitModel's norm and classifier take hidden_sizes[-1] = {sizes[-1]}")
    stem = [_conv("convolution", c.size("embedding_size"), 7, 2)]
    if kind == "bottleneck":
        stem += _norm(c, "norm", act)
    pool_pad = 1 if padding == "NONE" or c.flag("embedding_dynamic_padding") else 0  # ConstantPad2d(1) / dynamic
    stem.append({"type": "maxpool2d", "name": "pooler", "kernel_size": 3, "stride": 2, "padding": pool_pad})
    stages, c_in, stride_now = [], c.size("embedding_size"), 4
    layer = _preact if kind == "preactivation" else _bottleneck
    for i, (c_out, depth) in enumerate(zip(widths, depths)):
        stride = 1 if i == 0 else 2
        if stride_now >= c.integer("output_stride") and stride > 1:
            raise SpecError(f"{c.source}: output_stride: {c.integer('output_stride')} (dilated stages) not modelled; "
                            f"32 is")
        blocks = [layer(c, c_in if j == 0 else c_out, c_out, stride if j == 0 else 1, j == 0, act)
                  for j in range(depth)]
        stages.append(_seq([_seq(blocks, "layers")]))
        c_in, stride_now = c_out, stride_now * stride
    layers = [_seq(stem, "embedder"), _seq([_seq(stages, "stages")], "encoder")]
    if kind == "preactivation":
        layers += _norm(c, "norm", act)
    layers.append({"type": "adaptiveavgpool2d", "name": "pooler", "output_size": 1})
    if name.endswith("ForImageClassification"):
        layers.append(_seq(classifier_head(c, "1"), "classifier"))
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


BIT_MAPPERS = {"bit": bit}
