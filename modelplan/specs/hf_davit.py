"""Florence-2's DaViT vision tower (transformers 5.24 modeling_florence2.py, Florence2VisionBackbone)
as the layers of a `VisionSpec.tower`: per stage a conv embedding (Conv2d + LayerNorm before or
after it) and `depths[i]` blocks, each a spatial block (depthwise 3x3 conv, LayerNorm, window
attention over window_size^2 tokens, depthwise conv, LayerNorm, fc1 / fc2 MLP) and a channel block
(the same around grouped channel attention: each of num_groups groups scores its channels over
all tokens). Windows are cut after padding the grid to a multiple of window_size, so q / k / v and
the projection run on the padded grid (Florence2VisionWindowAttention.forward)."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_vision import _linear, _norm

DAVIT_DEFAULTS = {"in_channels": 3, "depths": [1, 1, 9, 1], "patch_size": [7, 3, 3, 3], "patch_stride": [4, 2, 2, 2],
                  "patch_padding": [3, 1, 1, 1], "patch_prenorm": [False, True, True, True],
                  "embed_dim": [128, 256, 512, 1024], "num_heads": [4, 8, 16, 32], "num_groups": [4, 8, 16, 32],
                  "window_size": 12, "mlp_ratio": 4.0, "qkv_bias": True, "projection_dim": 1024,
                  "max_position_embeddings": 50}
"""Florence2VisionConfig defaults (transformers 5.24)."""


def _conv(name: str, n_in: int, n_out: int, kernel: int, rows: int, groups: int = 1, copies: int = 1,
          bias: bool = True) -> dict:
    """A Conv2d(n_in, n_out, kernel, groups) tower layer with `rows` output positions per image."""
    return dict(name=name, kind="conv", in_features=n_in, out_features=n_out, kernel=kernel, groups=groups,
                bias=bias, rows=rows, copies=copies)


def _rows(layer: dict, rows: int) -> dict:
    return {**layer, "rows": rows}


def _stage(i: int, width: int, ffn: int, side: int, depth: int, heads: int, groups: int, window: int,
           qkv_bias: bool) -> list[dict]:
    """The `depth` blocks of stage i on a side x side grid (each block a spatial + a channel block)."""
    n = side * side
    padded = (-(-side // window) * window) ** 2  # F.pad to a multiple of window_size
    if width % heads or width % groups:
        raise SpecError(f"vision_config: num_heads ({heads}) and num_groups ({groups}) must divide embed_dim "
                        f"({width}) of stage {i}")
    s = f"stage{i}"
    both = 2 * depth  # spatial and channel block
    return [
        _conv(f"{s}/dwconv", width, width, 3, n, groups=width, copies=2 * both),  # conv1, conv2 per block
        _rows(_norm(f"{s}/norms", width, copies=2 * both), n),
        _rows(_linear(f"{s}/window_attn/qkv", width, 3 * width, qkv_bias, copies=depth), padded),
        dict(name=f"{s}/window_attn/scores", kind="attention", in_features=width, keys=window * window,
             rows=padded, copies=depth),
        _rows(_linear(f"{s}/window_attn/proj", width, width, True, copies=depth), padded),
        _rows(_linear(f"{s}/channel_attn/qkv", width, 3 * width, qkv_bias, copies=depth), n),
        dict(name=f"{s}/channel_attn/scores", kind="attention", in_features=width, keys=width // groups,
             rows=n, copies=depth),
        _rows(_linear(f"{s}/channel_attn/proj", width, width, True, copies=depth), n),
        _rows(_linear(f"{s}/ffn/fc1", width, ffn, True, copies=both), n),
        _rows(_linear(f"{s}/ffn/fc2", ffn, width, True, copies=both), n),
    ]


def davit_tower(v: HFConfig, image_size: int) -> tuple[list[dict], int, int]:
    """(tower layers, output side, total stride) of a DaViT on an image_size x image_size image."""
    lists = {key: v.data[key] for key in ("depths", "patch_size", "patch_stride", "patch_padding", "patch_prenorm",
                                          "embed_dim", "num_heads", "num_groups")}
    stages = len(lists["embed_dim"])
    for key, value in lists.items():
        if not isinstance(value, list) or len(value) != stages:
            raise SpecError(f"{v.source}: {v.path}{key}: expected a list of {stages} entries (one per stage), got {value!r}")
    depths, kernels, strides, pads = (v.ints(key) for key in ("depths", "patch_size", "patch_stride", "patch_padding"))
    widths, heads, groups = (v.ints(key) for key in ("embed_dim", "num_heads", "num_groups"))
    window, ratio, bias = v.integer("window_size"), v.number("mlp_ratio", positive=True), v.flag("qkv_bias")
    layers, side, width, stride = [], image_size, v.integer("in_channels"), 1
    for i in range(stages):
        if min(widths[i], heads[i], groups[i], kernels[i], strides[i]) < 1 or depths[i] < 0 or pads[i] < 0:
            raise SpecError(f"{v.source}: {v.path}: stage {i} sizes must be positive, got embed_dim {widths[i]}, "
                            f"num_heads {heads[i]}, num_groups {groups[i]}, patch_size {kernels[i]}, "
                            f"patch_stride {strides[i]}")
        out = (side + 2 * pads[i] - kernels[i]) // strides[i] + 1  # Conv2d output side
        if out < 1:
            raise SpecError(f"{v.source}: {v.path}patch_size: stage {i} leaves no output for a {side} px input")
        prenorm = bool(v.data["patch_prenorm"][i])
        layers += [_conv(f"stage{i}/conv_embed", width, widths[i], kernels[i], out * out),
                   _rows(_norm(f"stage{i}/conv_embed/norm", width if prenorm else widths[i]),
                         side * side if prenorm else out * out)]
        side, width, stride = out, widths[i], stride * strides[i]
        # Florence2VisionMLP: int(embed_dim * mlp_ratio)
        layers += _stage(i, width, int(width * ratio), side, depths[i], heads[i], groups[i], window, bias) if depths[i] else []
    return layers, side, stride
