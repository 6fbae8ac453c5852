"""The attention combine of the network stack (`specs.layers.Attend`: queries from a residual's
main branch over keys and values from its shortcut, PVT / SegFormer spatial-reduction attention,
Wang et al. 2021 sec. 3.3): its parameters, FLOPs and what its backward keeps, per sample.

- P query positions, M key positions (M / patch^2 of them for each query under `patch`, M / blocks
  under `window`: the
  positions at its offset), C = heads x d query / key channels, C_v = heads x d_v value channels;
- matmul FLOPs: q k^T 2 * heads * P * M * d, p v 2 * heads * P * M * d_v;
- other FLOPs per score: the 1 / sqrt(d) scale 1, LeViT's bias add 1, softmax 5 (as
  `count.window_attention`);
- parameters: LeViT's attention_biases, heads x the distinct (|row offset|, |column offset|)
  pairs (LevitAttention / LevitAttentionSubsample, transformers modeling_levit.py);
- kept for backward (eager attention, as torch's autograd keeps it): q, the stacked k / v and the
  softmax probabilities, heads x P x M floats.
"""

from __future__ import annotations

import itertools
import math

from modelplan.count.window_attention import SOFTMAX_FLOPS
from modelplan.specs.layers import Attend


def widths(keys_values: tuple[int, ...], output: tuple[int, ...]) -> tuple[int, int]:
    """(C, C_v): query / key channels and value channels of an attend leaf's shapes."""
    return keys_values[0] - output[0], output[0]


def groups(layer: Attend, keys_values: tuple[int, ...]) -> int:
    """The separate attentions per sample and head: patch^2 offsets, the window blocks, else 1."""
    if layer.window:
        return math.prod(m // layer.window for m in keys_values[1:])
    return layer.patch ** 2


def scores(layer: Attend, keys_values: tuple[int, ...], output: tuple[int, ...]) -> int:
    """Attention scores per sample: heads x query positions x the key positions each attends."""
    return layer.heads * math.prod(output[1:]) * (math.prod(keys_values[1:]) // groups(layer, keys_values))


def offset_index(queries: tuple[int, int], keys: tuple[int, int], stride: int) -> tuple[int, list[list[int]]]:
    """(number of distinct offsets, index [query][key] into them) of LeViT's attention biases, in
    transformers' order (modeling_levit.py: itertools.product of the grids, offsets numbered as first
    met): query (i, j) sits at (i stride, j stride) of the keys' grid."""
    numbered: dict[tuple[int, int], int] = {}
    rows = []
    for qi, qj in itertools.product(range(queries[0]), range(queries[1])):
        row = []
        for ki, kj in itertools.product(range(keys[0]), range(keys[1])):
            row.append(numbered.setdefault((abs(qi * stride - ki), abs(qj * stride - kj)), len(numbered)))
        rows.append(row)
    return len(numbered), rows


def param_shapes(layer: Attend, keys_values: tuple[int, ...], output: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """LeViT's (heads, distinct offsets) attention_biases, or nothing."""
    if not layer.offset_bias:
        return {}
    n, _ = offset_index(output[1:], keys_values[1:], layer.offset_bias)
    return {"attention_biases": (layer.heads, n)}


def forward_flops(layer: Attend, keys_values: tuple[int, ...], output: tuple[int, ...]) -> tuple[int, int]:
    """(matmul FLOPs, other FLOPs) of one sample (module docstring)."""
    n = scores(layer, keys_values, output)
    c, c_v = widths(keys_values, output)
    return 2 * n * (c + c_v) // layer.heads, (1 + int(layer.offset_bias > 0) + SOFTMAX_FLOPS) * n


def saved_elements(layer: Attend, keys_values: tuple[int, ...], output: tuple[int, ...]) -> int:
    """Float elements kept for backward: q, k / v and the probabilities."""
    c, _ = widths(keys_values, output)
    return c * math.prod(output[1:]) + math.prod(keys_values) + scores(layer, keys_values, output)
