"""HF TextNet (FAST's backbone, Chen et al. 2021; transformers 5.24 modeling_textnet.py TextNetModel /
TextNetForImageClassification) as a network spec: the stem (Conv2d(stem_kernel_size, stem_stride,
bias=False), BatchNorm2d, the activation), then per stage TextNetRepConvLayers, each the sum of
RepVGG-style branches (Ding et al. 2021) - the k_h x k_w conv, a k_h x 1 and a 1 x k_w conv where the
kernel is not 1 along the other axis, each with its BatchNorm2d, and a BatchNorm2d of the input
where channels and stride stay - then ReLU; TextNetModel's 2 x 2 average pool, or the classifier's
1 x 1 pool, Flatten and fc Linear(hidden_sizes[-1], num_labels). The branches are nested residual
sums (the network stack's blocks add two)."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, image_input
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"textnet": ("TextNetModel", "TextNetForImageClassification")}
DEFAULTS = {"textnet": {
    "stem_kernel_size": 3, "stem_stride": 2, "stem_num_channels": 3, "stem_out_channels": 64, "stem_act_func": "relu",
    "image_size": [640, 640], "hidden_sizes": [64, 64, 128, 256, 512],
    "conv_layer_kernel_sizes": [[[3, 3], [3, 3], [3, 3]], [[3, 3], [1, 3], [3, 3], [3, 1]],
                                [[3, 3], [3, 3], [3, 1], [1, 3]], [[3, 3], [3, 1], [1, 3], [3, 3]]],
    "conv_layer_strides": [[1, 2, 1], [2, 1, 1, 1], [2, 1, 1, 1], [2, 1, 1, 1]]}}
"""TextNetConfig defaults (transformers 5.24 configuration_textnet.py, its __post_init__ lists)."""


def _branch(name: str, out: int, kernel: tuple[int, int], stride: int) -> dict:
    """Conv2d(kernel, stride, padding (k - 1) // 2 per axis, bias=False) and its BatchNorm2d."""
    conv = {"type": "conv2d", "name": f"{name}_conv", "out_channels": out, "kernel_size": list(kernel),
            "stride": stride, "padding": [(kernel[0] - 1) // 2, (kernel[1] - 1) // 2], "bias": False}
    return _seq([conv, {"type": "batchnorm2d", "name": f"{name}_batch_norm"}])


def rep_conv(c_in: int, c_out: int, kernel: tuple[int, int], stride: int) -> dict:
    """TextNetRepConvLayer: the branches' sum, then ReLU."""
    branches = [_branch("main", c_out, kernel, stride)]
    if kernel[1] != 1:
        branches.append(_branch("vertical", c_out, (kernel[0], 1), stride))
    if kernel[0] != 1:
        branches.append(_branch("horizontal", c_out, (1, kernel[1]), stride))
    if c_in == c_out and stride == 1:
        branches.append({"type": "batchnorm2d", "name": "rbr_identity"})
    block = branches[0]
    for k, branch in enumerate(branches[1:], start=2):
        last = k == len(branches)
        block = {"type": "residual", "main": [block], "shortcut": [branch], **({"activation": "relu"} if last else {})}
    return block if len(branches) > 1 else _seq([block, {"type": "relu"}])


def textnet(c: HFConfig) -> dict:
    """TextNetModel or TextNetForImageClassification, as a network spec."""
    name = architecture(c, "textnet", HEADS)
    c = with_defaults(c, "textnet", DEFAULTS)
    kernels, strides, sizes = c.data["conv_layer_kernel_sizes"], c.data["conv_layer_strides"], c.ints("hidden_sizes")
    if (not isinstance(kernels, list) or not isinstance(strides, list) or len(kernels) != len(strides)
            or len(sizes) != len(kernels) + 1):
        raise SpecError(f"{c.source}: conv_layer_kernel_sizes: expected one list of [k_h, k_w] per stage, as many "
                        f"as conv_layer_strides and one fewer than hidden_sizes ({len(sizes)})")
    k = c.size("stem_kernel_size")
    stem = [{"type": "conv2d", "name": "conv", "out_channels": c.size("stem_out_channels"), "kernel_size": k,
             "stride": c.size("stem_stride"), "padding": k // 2, "bias": False},
            {"type": "batchnorm2d", "name": "batch_norm"}, {"type": activation(c, "stem_act_func"), "name": "activation"}]
    stages, c_in = [], c.size("stem_out_channels")
    for i, (stage_kernels, stage_strides) in enumerate(zip(kernels, strides)):
        if len(stage_kernels) != len(stage_strides) or any(len(kk) != 2 for kk in stage_kernels):
            raise SpecError(f"{c.source}: conv_layer_kernel_sizes: stage {i} needs one [k_h, k_w] per stride, got "
                            f"{stage_kernels} for strides {stage_strides}")
        layers = []
        for kernel, stride in zip(stage_kernels, stage_strides):
            layers.append(rep_conv(c_in, sizes[i + 1], tuple(kernel), stride))
            c_in = sizes[i + 1]
        stages.append(_seq([_seq(layers, "stage")]))
    layers = [_seq(stem, "stem"), _seq([_seq(stages, "stages")], "encoder")]
    if name.endswith("ForImageClassification"):
        layers += [{"type": "adaptiveavgpool2d", "name": "avg_pool", "output_size": 1}, {"type": "flatten"},
                   {"type": "linear", "name": "fc", "out_features": labels(c)}]
    else:
        layers.append({"type": "adaptiveavgpool2d", "name": "pooler", "output_size": 2})
    data = HFConfig({**c.data, "num_channels": c.size("stem_num_channels")}, c.source, c.path)
    return {"kind": "network", "input_shape": image_input(data), "layers": layers}


TEXTNET_MAPPERS = {"textnet": textnet}
