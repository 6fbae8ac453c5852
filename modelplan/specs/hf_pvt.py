"""HF PVT (Wang et al. 2021, Pyramid Vision Transformer; transformers 5.24 modeling_pvt.py PvtModel /
PvtForImageClassification) as a network spec (`specs.network`), on hf_reduced_attention's blocks.

Per stage: the patch embedding (Conv2d(kernel strides[i], stride patch_sizes[i]) and its LayerNorm),
the learned position table added, depths[i] PvtLayers (the spatial-reduction attention residual of
hf_reduced_attention.block and a plain MLP residual: dense1, act, dense2). The last stage runs on
the [C, 1 + L] token sequence: the map flattened, the class token put first, a table of 1 + L
positions; its per-token Linears are 1x1 conv1d's. Then the encoder's LayerNorm; the classifier reads
the class token.

Refused by name: a position table that transformers would resize bilinearly to the grid (image_size
other than the one the tables are built for), a last stage with spatial reduction (transformers
reshapes its 1 + L tokens as a map), dropout (not placed here).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, image_input
from modelplan.specs.hf_reduced_attention import _norm, _ratios, block
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"pvt": ("PvtModel", "PvtForImageClassification")}
"""model_type -> the classes whose head is modelled; the first is the base model."""

DEFAULTS = {"pvt": {"image_size": 224, "num_channels": 3, "num_encoder_blocks": 4, "depths": [2, 2, 2, 2],
                    "sequence_reduction_ratios": [8, 4, 2, 1], "hidden_sizes": [64, 128, 320, 512],
                    "patch_sizes": [4, 2, 2, 2], "strides": [4, 2, 2, 2], "num_attention_heads": [1, 2, 5, 8],
                    "mlp_ratios": [8, 8, 4, 4], "hidden_act": "gelu", "hidden_dropout_prob": 0.0,
                    "attention_probs_dropout_prob": 0.0, "layer_norm_eps": 1e-6, "qkv_bias": True}}
"""PvtConfig defaults (transformers 5.24 configuration_pvt.py)."""

KEYS = ("depths", "sequence_reduction_ratios", "hidden_sizes", "patch_sizes", "strides", "num_attention_heads")


def pvt(c: HFConfig) -> dict:
    """PvtModel (the encoder's last hidden state) or PvtForImageClassification, as a network spec."""
    name = architecture(c, "pvt", HEADS)
    c = with_defaults(c, "pvt", DEFAULTS)
    stages, ratios = c.size("num_encoder_blocks"), _ratios(c)
    lists = [c.ints(key) for key in KEYS]
    if any(len(v) < stages for v in lists + [ratios]):
        raise SpecError(f"{c.source}: num_encoder_blocks: {stages} needs that many entries in "
                        + ", ".join(f"{k} ({len(v)})" for k, v in zip(KEYS + ("mlp_ratios",), lists + [ratios])))
    for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
        if c.number(key) > 0:
            raise SpecError(f"{c.source}: {key}: dropout not modelled for PVT; 0 is")
    act, eps, bias = activation(c), c.number("layer_norm_eps", positive=True), c.flag("qkv_bias")
    sides, layers = list(image_sides(c)), []
    grid = sides
    for i in range(stages):
        depth, reduction, dim, patch, kernel, heads = (v[i] for v in lists)
        if min(reduction, dim, patch, kernel, heads) < 1 or depth < 0 or dim % heads:
            raise SpecError(f"{c.source}: stage {i}: " + ", ".join(f"{k} {v[i]}" for k, v in zip(KEYS, lists))
                            + " must be positive, num_attention_heads dividing hidden_sizes")
        table = [(s if i == 0 else s // 2 ** (i + 1)) // patch for s in sides]  # PvtEncoder's table sizes
        grid = [(g - kernel) // patch + 1 for g in grid]
        if grid != table:
            raise SpecError(f"{c.source}: image_size: stage {i}'s {grid[0]} x {grid[1]} grid differs from the "
                            f"{table[0]} x {table[1]} position table (transformers' bilinear resize not modelled)")
        last = i == stages - 1
        if last and reduction > 1:
            raise SpecError(f"{c.source}: sequence_reduction_ratios: the class-token stage's {reduction} (a "
                            f"reduction of its 1 + L tokens as a map) not modelled; 1 is")
        embed = [{"type": "conv2d", "name": "projection", "out_channels": dim, "kernel_size": kernel, "stride": patch},
                 _norm("layer_norm", eps)]
        if last:
            embed += [{"type": "flatten", "start_dim": 1}, {"type": "clstoken", "name": "cls_token"}]
        embed.append({"type": "positionembedding", "name": "position_embeddings"})
        blocks = [_seq(block(dim, heads, reduction, int(dim * ratios[i]), act, eps, bias, mix=False,
                             dims=1 if last else 2), str(j)) for j in range(depth)]
        layers.append(_seq([_seq(embed, "patch_embeddings"), *([_seq(blocks, "block")] if blocks else [])], str(i)))
    layers = [_seq([_seq(layers, "stages"), _norm("layer_norm", eps)], "encoder")]
    if name.endswith("ForImageClassification"):
        layers += [{"type": "select", "name": "cls", "index": 0},
                   {"type": "linear", "name": "classifier", "out_features": labels(c)}]
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


PVT_MAPPERS = {"pvt": pvt}
