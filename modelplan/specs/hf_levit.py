"""HF LeViT (Graham et al. 2021; transformers 5.24 modeling_levit.py LevitModel /
LevitForImageClassification) as a network spec (`specs.network`) on channels-first [C, H, W] maps.

The patch embedding: four Conv2d(kernel_size, stride, padding, no bias) + BatchNorm2d, Hardswish
between them. Per stage depths[i] attention residuals (LevitAttention: q / k / v from one bias-free
Linear + BatchNorm1d, here the query conv and the key / value conv, each with its BatchNorm: the same
parameters; per head key_dim-wide queries and keys and attention_ratio x key_dim-wide values; the
learned attention biases per head and grid offset; Hardswish; the projection Linear + BatchNorm) and,
with mlp_ratio > 0, MLP residuals (Linear + BN, Hardswish, Linear + BN); between stages the
subsampling attention (queries from every second position: a stride-2 1x1 conv, keys and values
from all; attention ratio 4, no residual) and an MLP residual of ratio 2 (LevitConfig.down_ops).
BatchNorm1d over the (batch x tokens, C) rows is BatchNorm2d over the map. The head: the mean over
the tokens, then LevitClassificationLayer (BatchNorm1d, Linear).

Not counted as transformers holds them: one BatchNorm per q / k / v Linear is two here, so the
buffers (num_batches_tracked) differ by one per attention; the parameters and FLOPs are equal.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import image_input
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"levit": ("LevitModel", "LevitForImageClassification")}
"""model_type -> the classes whose head is modelled (LevitForImageClassificationWithTeacher averages
two heads' logits: refused)."""

DEFAULTS = {"levit": {"image_size": 224, "num_channels": 3, "kernel_size": 3, "stride": 2, "padding": 1,
                      "patch_size": 16, "hidden_sizes": [128, 256, 384], "num_attention_heads": [4, 8, 12],
                      "depths": [4, 4, 4], "key_dim": [16, 16, 16], "mlp_ratio": [2, 2, 2],
                      "attention_ratio": [2, 2, 2]}}
"""LevitConfig defaults (transformers 5.24 configuration_levit.py)."""

KEYS = ("hidden_sizes", "num_attention_heads", "depths", "key_dim", "mlp_ratio", "attention_ratio")
STAGES = 3  # LevitConfig.down_ops: two subsampling joins, so LevitEncoder builds exactly three stages
DOWN_RATIO, DOWN_MLP, DOWN_STRIDE = 4, 2, 2  # LevitConfig.__post_init__ down_ops: ["Subsample", kd, h // kd, 4, 2, 2]


def linear_bn(out: int, name: str | None = None, stride: int = 1) -> dict:
    """MLPLayerWithBN: a bias-free Linear (a 1x1 conv; stride 2: LevitSubsample's every second
    position first) and BatchNorm1d over the tokens."""
    return _seq([{"type": "conv2d", "name": "linear", "out_channels": out, "kernel_size": 1, "stride": stride,
                  "bias": False}, {"type": "batchnorm2d", "name": "batch_norm"}], name)


def attention(dim_out: int, key_dim: int, heads: int, ratio: int, stride: int) -> list[dict]:
    """LevitAttention (stride 1) / LevitAttentionSubsample (stride 2): the attend residual,
    Hardswish, the projection."""
    attend = {"type": "residual", "name": "attention", "combine": "attend", "heads": heads, "offset_bias": stride,
              "main": [linear_bn(heads * key_dim, "queries", stride)],
              "shortcut": [linear_bn(heads * key_dim * (1 + ratio), "keys_values")]}
    return [attend, {"type": "hardswish", "name": "activation"}, linear_bn(dim_out, "projection")]


def mlp(dim: int, ratio: int) -> dict:
    """LevitResidualLayer(LevitMLPLayer): x + linear_down(hardswish(linear_up(x)))."""
    return {"type": "residual", "main": [linear_bn(dim * ratio, "linear_up"), {"type": "hardswish", "name": "activation"},
                                         linear_bn(dim, "linear_down")]}


def levit(c: HFConfig) -> dict:
    """LevitModel (the mean over the tokens) or LevitForImageClassification, as a network spec."""
    name = architecture(c, "levit", HEADS)
    c = with_defaults(c, "levit", DEFAULTS)
    lists = [c.ints(key) for key in KEYS]
    stages = len(lists[0])
    if stages != STAGES or any(len(v) != stages for v in lists) or min(min(v) for v in lists) < 0 \
            or min(lists[0] + lists[1]) < 1:
        raise SpecError(f"{c.source}: hidden_sizes: the per-stage lists must have {STAGES} entries each (LevitConfig's "
                        f"two down_ops join three stages), sizes and heads positive: "
                        + ", ".join(f"{k} {v}" for k, v in zip(KEYS, lists)))
    k, s, p, patch = c.size("kernel_size"), c.size("stride"), c.integer("padding"), c.size("patch_size")
    sides = list(image_sides(c))
    for _ in range(4):  # the four patch-embedding convs
        sides = [(x + 2 * p - k) // s + 1 for x in sides]
    if sides[0] != sides[1] or sides[0] != c.size("image_size") // patch:
        raise SpecError(f"{c.source}: patch_size: the patch embedding leaves a {sides[0]} x {sides[1]} grid, the "
                        f"attention biases are built for image_size // patch_size = {c.size('image_size') // patch} "
                        f"per side (transformers fails on that)")
    sizes, key_dim = lists[0], lists[3]
    embed = []
    for i, width in enumerate((sizes[0] // 8, sizes[0] // 4, sizes[0] // 2, sizes[0])):
        embed.append(_seq([{"type": "conv2d", "name": "convolution", "out_channels": width, "kernel_size": k,
                            "stride": s, "padding": p, "bias": False},
                           {"type": "batchnorm2d", "name": "batch_norm"}], f"embedding_layer_{i + 1}"))
        if i < 3:
            embed.append({"type": "hardswish", "name": f"activation_layer_{i + 1}"})
    encoder = []
    for i, (dim, heads, depth, kd, mlp_ratio, ratio) in enumerate(zip(*lists)):
        layers = []
        for _ in range(depth):
            layers.append({"type": "residual", "main": attention(dim, kd, heads, ratio, 1)})
            if mlp_ratio > 0:
                layers.append(mlp(dim, mlp_ratio))
        if i < stages - 1:  # down_ops: the subsampling attention into the next stage's width, its MLP
            if dim % key_dim[0]:
                raise SpecError(f"{c.source}: key_dim: {key_dim[0]} must divide hidden_sizes[{i}] ({dim}): the "
                                f"subsampling attention has hidden_sizes[{i}] // key_dim[0] heads")
            layers += [_seq(attention(sizes[i + 1], key_dim[0], dim // key_dim[0], DOWN_RATIO, DOWN_STRIDE)),
                       mlp(sizes[i + 1], DOWN_MLP)]
        if layers:
            encoder.append(_seq([_seq(layers, "layers")], str(i)))
    layers = [_seq(embed, "patch_embeddings"), _seq([_seq(encoder, "stages")], "encoder"),
              {"type": "adaptiveavgpool2d", "name": "pooler", "output_size": 1}, {"type": "flatten"}]
    if name.endswith("ForImageClassification"):
        layers.append(_seq([{"type": "batchnorm1d", "name": "batch_norm"},
                            {"type": "linear", "name": "linear", "out_features": labels(c)}], "classifier"))
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


LEVIT_MAPPERS = {"levit": levit}
