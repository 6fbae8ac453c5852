"""HF hierarchical transformers with spatial-reduction attention as network specs (`specs.network`)
on channels-first [C, H, W] maps: SegFormer's Mix Transformer encoder (Xie et al. 2021; transformers
5.24 modeling_segformer.py SegformerModel / SegformerForImageClassification) and PVT v2 (Wang et al.
2022; modeling_pvt_v2.py PvtV2Model / PvtV2ForImageClassification).

Per stage: the overlapping patch embedding (Conv2d(patch_sizes[i], strides[i], padding patch // 2) and
its LayerNorm), depths[i] blocks, the stage's LayerNorm. A block is an attention residual
(LayerNorm, the `attend` residual: q = query(x) over k / v = key / value of the reduced map, then the
output projection) and a Mix-FFN residual (LayerNorm, fc1, the 3x3 depthwise conv, act, fc2; PVT v2's
linear_attention adds a ReLU after fc1). The reduced map is Conv2d(k = s = sr_ratios[i]) + LayerNorm
where sr_ratios[i] > 1, else the map itself; PVT v2's linear_attention pools it to 7 x 7, then a 1x1
conv, LayerNorm and GELU. The classifier heads take the mean over the last map.

Per-token Linears are the 1x1 convs they equal; key and value (two Linears of one input) are one
conv to 2C of their stacked weights (the same parameters and FLOPs), the `attend` leaf's layout.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, image_input
from modelplan.specs.hf_resnet import IMAGE_SIZE, _seq
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"segformer": ("SegformerModel", "SegformerForImageClassification"),
         "pvt_v2": ("PvtV2Model", "PvtV2ForImageClassification")}
"""model_type -> the classes whose head is modelled; the first is the base model
(SegformerForSemanticSegmentation's all-MLP decoder upsamples bilinearly: refused by name)."""

_STAGES = {"num_channels": 3, "num_encoder_blocks": 4, "depths": [2, 2, 2, 2], "sr_ratios": [8, 4, 2, 1],
           "hidden_sizes": [32, 64, 160, 256], "patch_sizes": [7, 3, 3, 3], "strides": [4, 2, 2, 2],
           "num_attention_heads": [1, 2, 5, 8], "hidden_act": "gelu", "layer_norm_eps": 1e-6,
           "image_size": IMAGE_SIZE}
DEFAULTS = {"segformer": {**_STAGES, "mlp_ratios": [4, 4, 4, 4]},
            "pvt_v2": {**_STAGES, "mlp_ratios": [8, 8, 4, 4], "qkv_bias": True, "linear_attention": False}}
"""SegformerConfig / PvtV2Config defaults (transformers 5.24 configuration_segformer.py,
configuration_pvt_v2.py); SegformerConfig states no image size: hf_resnet's 224."""

KEYS = ("depths", "sr_ratios", "hidden_sizes", "patch_sizes", "strides", "num_attention_heads", "mlp_ratios")
LINEAR_POOL = 7  # PvtV2SelfAttention.pool = nn.AdaptiveAvgPool2d(7) under linear_attention


def _conv1x1(name: str | None, out: int, bias: bool = True, dims: int = 2) -> dict:
    """A per-token Linear as the 1x1 conv of a [C, H, W] map (dims 2) or a [C, L] sequence (dims 1)."""
    return {"type": f"conv{dims}d", "out_channels": out, "kernel_size": 1, "bias": bias,
            **({"name": name} if name else {})}


def _norm(name: str | None, eps: float) -> dict:
    return {"type": "layernorm2d", "eps": eps, **({"name": name} if name else {})}


def _reduced(dim: int, ratio: int, linear: bool, eps: float) -> list[dict]:
    """The keys' and values' map: pooled (linear attention), strided-conv reduced, or the input."""
    if linear:
        return [{"type": "adaptiveavgpool2d", "name": "pool", "output_size": LINEAR_POOL},
                _conv1x1("spatial_reduction", dim), _norm("layer_norm", eps), {"type": "gelu", "name": "act"}]
    if ratio > 1:
        return [{"type": "conv2d", "name": "spatial_reduction", "out_channels": dim, "kernel_size": ratio,
                 "stride": ratio}, _norm("layer_norm", eps)]
    return []


def block(dim: int, heads: int, ratio: int, ffn: int, act: str, eps: float, qkv_bias: bool = True,
          linear: bool = False, mix: bool = True, dims: int = 2) -> list[dict]:
    """One SegformerLayer / PvtV2BlockLayer (PVT's PvtLayer: `mix` False, a plain MLP; on the class
    token's [C, L] sequence `dims` 1): the attention and (Mix-)FFN residuals."""
    attend = {"type": "residual", "name": "attention", "combine": "attend", "heads": heads,
              "main": [_conv1x1("query", dim, qkv_bias, dims)],
              "shortcut": [*_reduced(dim, ratio, linear, eps), _conv1x1("key_value", 2 * dim, qkv_bias, dims)]}
    dwconv = [{"type": "conv2d", "name": "dwconv", "out_channels": ffn, "kernel_size": 3, "padding": 1, "groups": ffn}]
    mlp = [_conv1x1("fc1", ffn, dims=dims), *([{"type": "relu", "name": "relu"}] if linear else []),
           *(dwconv if mix else []), {"type": act, "name": "act"}, _conv1x1("fc2", dim, dims=dims)]
    return [{"type": "residual", "name": "attention",
             "main": [_norm("layernorm_before", eps), attend, _conv1x1("proj", dim, dims=dims)]},
            {"type": "residual", "name": "mlp", "main": [_norm("layernorm_after", eps), *mlp]}]


def _ratios(c: HFConfig) -> list[float]:
    """mlp_ratios: a list of positive numbers (PVT v2's are ints, a checkpoint may save floats)."""
    value = c.data.get("mlp_ratios")
    if not isinstance(value, list) or not all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0
                                              for x in value):
        raise SpecError(f"{c.source}: mlp_ratios: expected a list of positive numbers, got {value!r}")
    return value


def reduced_attention(c: HFConfig) -> dict:
    """SegformerModel / PvtV2Model (the last stage's map) or ...ForImageClassification, as a network spec."""
    kind = c.text("model_type")
    name = architecture(c, kind, HEADS)
    c = with_defaults(c, kind, DEFAULTS)
    stages = c.size("num_encoder_blocks")
    lists = [c.ints(key) for key in KEYS[:-1]] + [_ratios(c)]
    if any(len(v) < stages for v in lists):
        raise SpecError(f"{c.source}: num_encoder_blocks: {stages} needs that many entries in "
                        + ", ".join(f"{k} ({len(v)})" for k, v in zip(KEYS, lists)))
    act, v2 = activation(c), kind == "pvt_v2"
    eps = c.number("layer_norm_eps", positive=True) if v2 else 1e-5  # SegFormer's nn.LayerNorm(hidden) default
    qkv_bias, linear = (c.flag("qkv_bias"), c.flag("linear_attention")) if v2 else (True, False)
    layers = []
    for i in range(stages):
        depth, ratio, dim, patch, stride, heads, mlp_ratio = (v[i] for v in lists)
        if min(dim, patch, stride, heads, ratio) < 1 or depth < 0:
            raise SpecError(f"{c.source}: stage {i}: " + ", ".join(f"{k} {v[i]}" for k, v in zip(KEYS, lists))
                            + " must be positive (depths >= 0)")
        if dim % heads:
            raise SpecError(f"{c.source}: num_attention_heads: {heads} must divide stage {i}'s hidden size {dim}")
        embed = _seq([{"type": "conv2d", "name": "proj", "out_channels": dim, "kernel_size": patch, "stride": stride,
                       "padding": patch // 2}, _norm("layer_norm", eps)], "patch_embeddings")
        blocks = [_seq(block(dim, heads, ratio, int(dim * mlp_ratio), act, eps, qkv_bias, linear), str(j))
                  for j in range(depth)]
        layers.append(_seq([embed, *([_seq(blocks, "blocks")] if blocks else []), _norm("layer_norm", eps)], str(i)))
    layers = [_seq(layers, "stages")]
    if name.endswith("ForImageClassification"):
        layers += [{"type": "adaptiveavgpool2d", "name": "pool", "output_size": 1}, {"type": "flatten"},
                   {"type": "linear", "name": "classifier", "out_features": labels(c)}]
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


REDUCED_ATTENTION_MAPPERS = {"segformer": reduced_attention, "pvt_v2": reduced_attention}
