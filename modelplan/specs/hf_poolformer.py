"""HF PoolFormer (Yu et al. 2022, MetaFormer; transformers 5.24 modeling_poolformer.py PoolFormerModel
/ PoolFormerForImageClassification) as a network spec: per stage a patch-embedding conv
(patch_sizes[i], strides[i], padding[i]) and depths[i] layers, each x + layer_scale_1 * (pool(n) - n),
n = GroupNorm(1)(x), pool a pool_size average with stride 1, then x + layer_scale_2 *
conv2(act(conv1(GroupNorm(1)(x)))) (1x1 convs to int(hidden * mlp_ratio) and back); the classifier
head: GroupNorm(1), the mean over the grid, Linear(hidden_sizes[-1], num_labels).

transformers pools with count_include_pad=False (border windows average their in-image values);
the network stack's pool divides by the kernel: the same shapes and FLOPs, other border values.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, image_input
from modelplan.specs.hf_resnet import IMAGE_SIZE, _seq
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"poolformer": ("PoolFormerModel", "PoolFormerForImageClassification")}
DEFAULTS = {"poolformer": {"num_channels": 3, "pool_size": 3, "mlp_ratio": 4.0, "depths": [2, 2, 6, 2],
                           "hidden_sizes": [64, 128, 320, 512], "patch_sizes": [7, 3, 3, 3], "strides": [4, 2, 2, 2],
                           "padding": [2, 1, 1, 1], "num_encoder_blocks": 4, "hidden_act": "gelu",
                           "use_layer_scale": True, "image_size": IMAGE_SIZE}}
"""PoolFormerConfig defaults (transformers 5.24 configuration_poolformer.py); it states no image size
it uses: hf_resnet's 224."""


def _layer(c: HFConfig, dim: int, act: str, scale: bool) -> list[dict]:
    """PoolFormerLayer: the pooling and the MLP residuals."""
    k = c.size("pool_size")
    if k % 2 == 0:
        raise SpecError(f"{c.source}: pool_size: {k} must be odd (stride-1 pooling with padding {k // 2} keeps the grid)")
    ls = lambda i: [{"type": "layerscale", "name": f"layer_scale_{i}"}] if scale else []  # noqa: E731
    pool = {"type": "residual", "name": "pooling", "combine": "sub",
            "main": [{"type": "avgpool2d", "name": "pool", "kernel_size": k, "stride": 1, "padding": k // 2}]}
    mlp = [{"type": "conv2d", "name": "conv1", "out_channels": int(dim * c.number("mlp_ratio", positive=True)),
            "kernel_size": 1}, {"type": act, "name": "act_fn"}, {"type": "conv2d", "name": "conv2", "out_channels": dim,
                                                                  "kernel_size": 1}]
    norm = lambda name: {"type": "groupnorm", "name": name, "num_groups": 1}  # noqa: E731  PoolFormerGroupNorm
    return [{"type": "residual", "main": [norm("before_norm"), pool, *ls(1)]},
            {"type": "residual", "main": [norm("after_norm"), _seq(mlp, "output"), *ls(2)]}]


def poolformer(c: HFConfig) -> dict:
    """PoolFormerModel (the last stage's map) or PoolFormerForImageClassification, as a network spec."""
    name = architecture(c, "poolformer", HEADS)
    c = with_defaults(c, "poolformer", DEFAULTS)
    keys = ("depths", "hidden_sizes", "patch_sizes", "strides", "padding")
    lists = [c.ints(key) for key in keys]
    stages = c.size("num_encoder_blocks")
    if any(len(v) < stages for v in lists):
        raise SpecError(f"{c.source}: num_encoder_blocks: {stages} needs that many entries in "
                        + ", ".join(f"{k} ({len(v)})" for k, v in zip(keys, lists)))
    act, scale = activation(c), c.flag("use_layer_scale")
    embeddings, blocks = [], []
    for i in range(stages):
        depth, dim, kernel, stride, pad = (v[i] for v in lists)
        embeddings.append({"type": "conv2d", "name": "projection", "out_channels": dim, "kernel_size": kernel,
                           "stride": stride, "padding": pad})
        blocks.append([_seq(_layer(c, dim, act, scale), str(j)) for j in range(depth)])
    stage_layers = [_seq([_seq([embeddings[i]], "patch_embeddings"), *([_seq(b, "block")] if b else [])], str(i))
                    for i, b in enumerate(blocks)]
    layers = [_seq([_seq(stage_layers, "stages")], "encoder")]
    if name.endswith("ForImageClassification"):
        layers += [{"type": "groupnorm", "name": "norm", "num_groups": 1},
                   {"type": "adaptiveavgpool2d", "name": "pool", "output_size": 1}, {"type": "flatten"},
                   {"type": "linear", "name": "classifier", "out_features": labels(c)}]
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


POOLFORMER_MAPPERS = {"poolformer": poolformer}
