"""Window attention of the network stack (`specs.layers.WindowAttention`, Swin Transformer, Liu et
al. 2021 sec. 3.2): its geometry, parameters, FLOPs and what its backward keeps, per sample.

- the grid is padded to multiples of the window w: Hp x Wp positions, (Hp / w)(Wp / w) windows
  of w^2 tokens; each token scores the w^2 tokens of its window in every head;
- matmul FLOPs: q k^T and p v, each 2 * tokens * w^2 * C (C = heads x head_dim);
- other FLOPs per score: the 1 / sqrt(d) scale 1, the relative bias add 1, the shift mask add 1,
  softmax 5 (as `network_layers` counts softmax);
- kept for backward (eager attention, as torch's autograd keeps it): the q / k / v input and the
  softmax probabilities, heads x tokens x w^2 floats.
"""

from __future__ import annotations

import math

from modelplan.specs.layers import WindowAttention

SOFTMAX_FLOPS = 5  # max, subtract, exp, sum, divide (count/network_layers.py)


def padded_grid(layer: WindowAttention, shape: tuple[int, ...]) -> tuple[int, int]:
    """(Hp, Wp): the [3C, H, W] input's grid padded to multiples of window_size."""
    w = layer.window_size
    return -(-shape[1] // w) * w, -(-shape[2] // w) * w


def scores(layer: WindowAttention, shape: tuple[int, ...]) -> int:
    """Attention scores per sample: heads x padded tokens x window_size^2."""
    return layer.heads * math.prod(padded_grid(layer, shape)) * layer.window_size ** 2


def param_shapes(layer: WindowAttention, channels: int) -> dict[str, tuple[int, ...]]:
    """The ((2 w - 1)^2, heads) relative position bias table (SwinRelativePositionBias) or Swin V2's
    continuous-bias MLP, logit scales and q / v biases (Swinv2SelfAttention), by torch shape."""
    side, out = 2 * layer.window_size - 1, {}
    if layer.relative_bias and layer.bias_mlp:
        m = layer.bias_mlp
        out.update(cpb_fc1_weight=(m, 2), cpb_fc1_bias=(m,), cpb_fc2_weight=(layer.heads, m))
    elif layer.relative_bias:
        out["relative_position_bias_table"] = (side * side, layer.heads)
    if layer.cosine:
        out["logit_scale"] = (layer.heads, 1, 1)
    if layer.qv_bias:
        out.update(q_bias=(channels // 3,), v_bias=(channels // 3,))
    return out


def forward_flops(layer: WindowAttention, shape: tuple[int, ...]) -> tuple[int, int]:
    """(matmul FLOPs, other FLOPs) of one sample (module docstring; Swin V2's cosine attention adds
    3 per q and k element for their norms, its q / v biases 1 per q and v element; its bias MLP
    runs once per forward on (2 w - 1)^2 coordinates, not per sample, and is not counted)."""
    n = scores(layer, shape)
    head_dim = shape[0] // 3 // layer.heads
    per_score = 1 + int(layer.relative_bias) + int(layer.shift > 0) + SOFTMAX_FLOPS
    width, tokens, positions = shape[0] // 3, math.prod(padded_grid(layer, shape)), math.prod(shape[1:])
    extra = 3 * 2 * tokens * width * int(layer.cosine) + 2 * positions * width * int(layer.qv_bias)
    return 2 * 2 * n * head_dim, per_score * n + extra


def saved_elements(layer: WindowAttention, shape: tuple[int, ...]) -> int:
    """Float elements kept for backward: the input and the probabilities."""
    return math.prod(shape) + scores(layer, shape)
