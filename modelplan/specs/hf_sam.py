"""The SAM ViT image encoder (Kirillov et al. 2023; transformers 5.24 modeling_got_ocr2.py
GotOcr2VisionEncoder, the SamVisionEncoder shape) as the layers of a `VisionSpec.tower`: a patch conv,
a learned (grid, grid, h) position table, blocks of LayerNorm + fused qkv + attention + proj and
LayerNorm + lin1 / lin2, windowed (window_size x window_size windows of the grid padded to a
multiple of it) except the global_attn_indexes blocks, each with decomposed relative positions
(rel_pos_h / rel_pos_w tables of (2 size - 1, head_dim), size the window or the grid side; the
query scores them in two einsums, MViTv2, Li et al. 2022 eq. 4), then the neck: a 1x1 conv to
output_channels, LayerNorm, a 3x3 conv, LayerNorm (both convs bias-free)."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv, _rows
from modelplan.specs.hf_vision import _linear, _norm


def _block(name: str, h: int, mlp: int, heads: int, side: int, window: int, copies: int, bias: bool,
           rel: bool) -> list[dict]:
    """`copies` blocks on a side x side grid attending in window x window windows (window = side:
    global attention over the unpadded grid)."""
    n = side * side
    padded = (-(-side // window) * window) ** 2  # GotOcr2VisionLayer.window_partition pads to a multiple
    out = [_rows(_norm(f"{name}/norms", h, copies=2 * copies), n),
           _rows(_linear(f"{name}/attn/qkv", h, 3 * h, bias, copies=copies), padded),
           dict(name=f"{name}/attn/scores", kind="attention", in_features=h, keys=window * window, rows=padded,
                copies=copies),
           _rows(_linear(f"{name}/attn/proj", h, h, True, copies=copies), padded),
           _rows(_linear(f"{name}/mlp/lin1", h, mlp, True, copies=copies), n),
           _rows(_linear(f"{name}/mlp/lin2", mlp, h, True, copies=copies), n)]
    if rel:  # rel_h and rel_w: (q, hd) @ (hd, window) per head and axis = 2 x 2 x window x h per token
        out += [dict(name=f"{name}/attn/rel_pos", kind="vector", in_features=2 * (2 * window - 1) * (h // heads),
                     copies=copies),
                dict(name=f"{name}/attn/rel_pos_scores", kind="attention", in_features=h, keys=window, rows=padded,
                     copies=copies)]
    return out


def sam_tower(v: HFConfig) -> tuple[dict, int, int]:
    """(VisionSpec fields, output grid side, output channels) of a SAM ViT encoder with its neck."""
    h, layers, heads = v.size("hidden_size"), v.size("num_hidden_layers"), v.size("num_attention_heads")
    image, patch, window = v.size("image_size"), v.size("patch_size"), v.integer("window_size")
    if h % heads:
        raise SpecError(f"{v.source}: {v.path}num_attention_heads: {heads} must divide hidden_size {h}")
    side, out = image // patch, v.size("output_channels")
    full = set(v.ints("global_attn_indexes"))
    if any(not 0 <= i < layers for i in full):
        raise SpecError(f"{v.source}: {v.path}global_attn_indexes: {sorted(full)} must be block indexes below {layers}")
    bias, rel, mlp = v.flag("qkv_bias"), v.flag("use_rel_pos"), v.size("mlp_dim")
    tower = [_conv("patch_embed", v.size("num_channels"), h, patch, side * side)]
    if v.flag("use_abs_pos"):
        tower.append(dict(name="pos_embed", kind="vector", in_features=side * side * h))
    windowed = layers - len(full)
    if window and windowed:
        tower += _block("windowed", h, mlp, heads, side, window, windowed, bias, rel)
    if not window and windowed:  # window_size 0: every block attends globally
        full = set(range(layers))
    if full:
        tower += _block("global", h, mlp, heads, side, side, len(full), bias, rel)
    n = side * side
    tower += [_conv("neck/conv1", h, out, 1, n, bias=False), _rows(_norm("neck/layer_norm1", out), n),
              _conv("neck/conv2", out, out, 3, n, bias=False), _rows(_norm("neck/layer_norm2", out), n)]
    fields = dict(layers=layers, hidden=out, heads=heads, ffn_hidden=mlp, patch_size=patch, image_size=image,
                  channels=v.size("num_channels"), tower=tower, connector=[])
    return fields, side, out
