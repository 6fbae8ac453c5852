"""Swin Transformer towers (transformers 5.24 modeling_swin.py SwinModel, modeling_donut_swin.py
DonutSwinModel) as the layers of a `VisionSpec.tower`: a patch conv + LayerNorm, then per stage
`depths[i]` blocks (LayerNorm, window attention with a ((2w - 1)^2, heads) relative-position bias
table, dense, LayerNorm, MLP of mlp_ratio) and, between stages, SwinPatchMerging (LayerNorm(4C),
reduction Linear(4C, 2C, bias=False) over each 2 x 2 neighbourhood). Attention runs on the grid
padded to a multiple of the window (SwinLayer.maybe_pad); a stage whose grid is no larger than the
window attends over the whole grid (set_shift_and_window_size); shifting moves no FLOPs."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv, _rows
from modelplan.specs.hf_vision import _linear, _norm

SWIN_DEFAULTS = {"image_size": 224, "patch_size": 4, "num_channels": 3, "embed_dim": 96, "depths": [2, 2, 6, 2],
                 "num_heads": [3, 6, 12, 24], "window_size": 7, "mlp_ratio": 4.0, "qkv_bias": True,
                 "use_absolute_embeddings": False}
"""SwinConfig / DonutSwinConfig defaults (transformers 5.24)."""


def _pad(n: int, window: int) -> int:
    return -(-n // window) * window


def image_sides(v: HFConfig) -> tuple[int, int]:
    """(height, width) in pixels of image_size: an int or [height, width] (Donut saves [2560, 1920])."""
    value = v.data.get("image_size")
    if isinstance(value, list) and len(value) == 2:
        return tuple(HFConfig({"image_size": x}, v.source, v.path).size("image_size") for x in value)
    side = v.size("image_size")
    return side, side


def swin_tower(v: HFConfig, donut: bool) -> tuple[dict, int]:
    """(VisionSpec fields, output tokens) of SwinModel's tower (a layernorm after the last stage)
    or, `donut`, DonutSwinModel's (no final norm, one more position row)."""
    v = HFConfig({**SWIN_DEFAULTS, **v.data}, v.source, v.path)
    depths, heads = v.ints("depths"), v.ints("num_heads")
    if len(depths) != len(heads) or not depths:
        raise SpecError(f"{v.source}: {v.path}num_heads: expected one entry per stage ({len(depths)}), got {heads}")
    height, width = image_sides(v)
    p, c, window = v.size("patch_size"), v.size("embed_dim"), v.size("window_size")
    ratio = v.number("mlp_ratio", positive=True)
    rows, cols = -(-height // p), -(-width // p)  # SwinPatchEmbeddings.maybe_pad to a multiple of patch_size
    layers = [_conv("embeddings/patch", v.size("num_channels"), c, p, rows * cols),
              _rows(_norm("embeddings/norm", c), rows * cols)]
    if v.flag("use_absolute_embeddings"):  # position_embeddings: (patches, C) in SwinEmbeddings, (patches + 1, C) in Donut's
        positions = (height // p) * (width // p) + int(donut)
        layers.append(dict(name="embeddings/position", kind="vector", in_features=positions * c))
    for i, (depth, n_heads) in enumerate(zip(depths, heads)):
        dim = c * 2 ** i
        if dim % n_heads:
            raise SpecError(f"{v.source}: {v.path}num_heads: {n_heads} must divide stage {i}'s width {dim}")
        w = min(rows, cols) if min(rows, cols) <= window else window  # set_shift_and_window_size
        n, padded, s = rows * cols, _pad(rows, w) * _pad(cols, w), f"stage{i}"
        ffn = int(ratio * dim)  # SwinIntermediate: Linear(dim, int(mlp_ratio * dim))
        if depth:
            layers += [
                _rows(_norm(f"{s}/norms", dim, copies=2 * depth), n),
                _rows(_linear(f"{s}/attention/qkv", dim, dim, v.flag("qkv_bias"), copies=3 * depth), padded),
                dict(name=f"{s}/attention/relative_position_bias_table", kind="vector",
                     in_features=(2 * window - 1) ** 2 * n_heads, copies=depth),
                dict(name=f"{s}/attention/scores", kind="attention", in_features=dim, keys=w * w, rows=padded,
                     copies=depth),
                _rows(_linear(f"{s}/attention/dense", dim, dim, True, copies=depth), padded),
                _rows(_linear(f"{s}/mlp/fc1", dim, ffn, True, copies=depth), n),
                _rows(_linear(f"{s}/mlp/fc2", ffn, dim, True, copies=depth), n)]
        if i < len(depths) - 1:  # SwinPatchMerging pads odd sides by one, then 4C -> 2C
            rows, cols = -(-rows // 2), -(-cols // 2)
            layers += [_rows(_norm(f"{s}/downsample/norm", 4 * dim), rows * cols),
                       _rows(_linear(f"{s}/downsample/reduction", 4 * dim, 2 * dim, False), rows * cols)]
    out = c * 2 ** (len(depths) - 1)
    if not donut:
        layers.append(_rows(_norm("layernorm", out), rows * cols))
    tower = dict(layers=sum(depths) or 1, hidden=out, heads=heads[-1], ffn_hidden=int(ratio * out),
                 patch_size=p * 2 ** (len(depths) - 1), image_size=height, channels=v.size("num_channels"),
                 tower=layers, connector=[])
    return tower, rows * cols
