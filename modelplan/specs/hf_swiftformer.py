"""HF SwiftFormer (Shaker et al. 2023; transformers 5.24 modeling_swiftformer.py SwiftFormerModel /
SwiftFormerForImageClassification) as a network spec (`specs.network`) on channels-first maps.

The patch embedding: two 3x3 stride-2 convs, each with BatchNorm and ReLU. Per stage depths[i] blocks:
SwiftFormerConvEncoders (x + layer_scale * (depthwise 3x3, BatchNorm, 1x1, GELU, 1x1)) and, last, a
SwiftFormerEncoderBlock: the local representation (the same residual), then x + layer_scale_1 *
attn(x) and x + layer_scale_2 * mlp(x) (without use_layer_scale, the plain sums). attn: to_query and
to_key (per-token Linears, here one 1x1 conv to the stacked 2 C channels: the same parameters),
`specs.context_attention.AdditiveAttention` (w_g, proj), final (a 1x1 conv); mlp: BatchNorm, fc1,
act, fc2 (1x1 convs). Between stages where downsamples[i] or the width changes: conv + BatchNorm.
The classifier: BatchNorm, the mean over the grid, head and dist_head.

Not as transformers computes it: the logits are head(x) + dist_head(x) (the residual sum of the two
Linears), transformers' (head(x) + dist_head(x)) / 2; the parameters and FLOPs are equal. Stochastic
depth (drop_path_rate) is the identity at inference and not modelled.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, dropout, network
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"swiftformer": ("SwiftFormerModel", "SwiftFormerForImageClassification")}
"""model_type -> the classes modelled."""

DEFAULTS = {"swiftformer": {"image_size": 224, "num_channels": 3, "depths": [3, 3, 6, 4], "embed_dims": [48, 56, 112, 220],
                            "mlp_ratio": 4, "downsamples": [True, True, True, True], "hidden_act": "gelu",
                            "down_patch_size": 3, "down_stride": 2, "down_pad": 1, "drop_mlp_rate": 0.0,
                            "drop_conv_encoder_rate": 0.0, "use_layer_scale": True, "batch_norm_eps": 1e-5}}
"""SwiftFormerConfig defaults (transformers 5.24 configuration_swiftformer.py)."""


def _conv(name: str, out: int, kernel: int = 1, stride: int = 1, padding: int = 0, groups: int = 1) -> dict:
    return {"type": "conv2d", "name": name, "out_channels": out, "kernel_size": kernel, "stride": stride,
            "padding": padding, "groups": groups}


def local(dim: int, hidden: int, eps: float, p: float) -> dict:
    """SwiftFormerConvEncoder (hidden = mlp_ratio x dim) / SwiftFormerLocalRepresentation (hidden = dim):
    x + layer_scale * (depthwise 3x3, BatchNorm, 1x1, GELU, 1x1)."""
    return {"type": "residual", "main": [
        _conv("depth_wise_conv", dim, 3, padding=1, groups=dim), {"type": "batchnorm2d", "name": "norm", "eps": eps},
        _conv("point_wise_conv1", hidden), {"type": "gelu", "name": "act"}, _conv("point_wise_conv2", dim),
        {"type": "layerscale", "name": "layer_scale"}, *dropout(p, "drop_path")]}


def encoder_block(c: HFConfig, dim: int, eps: float) -> list[dict]:
    """SwiftFormerEncoderBlock: the local representation, the attention and MLP residuals."""
    scale = c.flag("use_layer_scale")
    p, hidden = c.number("drop_mlp_rate"), int(c.number("mlp_ratio", positive=True) * dim)
    attn = _seq([_conv("to_query_key", 2 * dim), {"type": "additiveattention", "name": "attention"},
                 _conv("final", dim)], "attn")
    mlp = _seq([{"type": "batchnorm2d", "name": "norm1", "eps": eps}, _conv("fc1", hidden),
                {"type": activation(c), "name": "act"}, *dropout(p, "drop"), _conv("fc2", dim), *dropout(p, "drop_2")], "linear")
    gate = lambda i: [{"type": "layerscale", "name": f"layer_scale_{i}"}] if scale else []  # noqa: E731
    return [_seq([local(dim, dim, eps, 0.0)], "local_representation"),
            {"type": "residual", "main": [attn, *gate(1)]}, {"type": "residual", "main": [mlp, *gate(2)]}]


def _check(c: HFConfig, depths: list[int], dims: list[int], downsamples: list) -> None:
    if (not isinstance(downsamples, list) or len(dims) != len(depths) or len(downsamples) < len(depths) - 1
            or min(depths) < 1 or min(dims) < 1):
        raise SpecError(f"{c.source}: depths: {depths}, embed_dims {dims} and downsamples {downsamples} must have one "
                        f"entry per stage (downsamples at least one fewer), depths and widths positive")


def swiftformer(c: HFConfig) -> dict:
    """SwiftFormerModel (the last map) or SwiftFormerForImageClassification, as a network spec."""
    name = architecture(c, "swiftformer", HEADS)
    c = with_defaults(c, "swiftformer", DEFAULTS)
    depths, dims, downsamples = c.ints("depths"), c.ints("embed_dims"), c.data["downsamples"]
    _check(c, depths, dims, downsamples)
    eps, p_conv = c.number("batch_norm_eps", positive=True), c.number("drop_conv_encoder_rate")
    hidden = lambda dim: int(c.number("mlp_ratio", positive=True) * dim)  # noqa: E731
    embed = []
    for i, out in enumerate((dims[0] // 2, dims[0])):  # SwiftFormerPatchEmbedding
        embed += [_conv(str(3 * i), out, 3, 2, 1), {"type": "batchnorm2d", "name": str(3 * i + 1), "eps": eps},
                  {"type": "relu", "name": str(3 * i + 2)}]
    stages = []  # SwiftFormerEncoder.network
    for i, (depth, dim) in enumerate(zip(depths, dims)):
        blocks = [local(dim, hidden(dim), eps, p_conv) for _ in range(depth - 1)]
        blocks.append(_seq(encoder_block(c, dim, eps)))
        stages.append(_seq([_seq(blocks, "blocks")]))
        if i < len(depths) - 1 and (downsamples[i] or dims[i] != dims[i + 1]):  # SwiftFormerEmbeddings
            k, s, pad = c.size("down_patch_size"), c.size("down_stride"), c.integer("down_pad")
            stages.append(_seq([_conv("proj", dims[i + 1], k, s, pad),
                                {"type": "batchnorm2d", "name": "norm", "eps": eps}]))
    layers = [_seq([_seq(embed, "patch_embedding")], "patch_embed"), _seq([_seq(stages, "network")], "encoder")]
    if name.endswith("ForImageClassification"):
        classes = labels(c)
        layers += [{"type": "batchnorm2d", "name": "norm", "eps": eps},
                   {"type": "adaptiveavgpool2d", "output_size": 1}, {"type": "flatten"},
                   {"type": "residual", "name": "heads", "main": [{"type": "linear", "name": "head", "out_features": classes}],
                    "shortcut": [{"type": "linear", "name": "dist_head", "out_features": classes}]}]
    return network(c, layers)


SWIFTFORMER_MAPPERS = {"swiftformer": swiftformer}
