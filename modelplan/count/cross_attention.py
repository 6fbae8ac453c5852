"""The attention combine of the network stack (`specs.network.Attend`: queries from a residual's
main branch over keys and values from its shortcut, PVT / SegFormer spatial-reduction attention,
Wang et al. 2021 sec. 3.3): its FLOPs and what its backward keeps, per sample.

- P query positions, M key positions (M / patch^2 of them for each query under `patch`: the
  positions at its offset), C = heads x head_dim query channels;
- matmul FLOPs: q k^T and p v, each 2 * P * M * C;
- other FLOPs per score: the 1 / sqrt(d) scale 1 and softmax 5 (as `count.window_attention`);
- kept for backward (eager attention, as torch's autograd keeps it): q, the stacked k / v and the
  softmax probabilities, heads x P x M floats.
"""

from __future__ import annotations

import math

from modelplan.count.window_attention import SOFTMAX_FLOPS
from modelplan.specs.network import Attend


def scores(layer: Attend, keys_values: tuple[int, ...], queries: tuple[int, ...]) -> int:
    """Attention scores per sample: heads x query positions x the key positions each attends."""
    return layer.heads * math.prod(queries[1:]) * (math.prod(keys_values[1:]) // layer.patch ** 2)


def forward_flops(layer: Attend, keys_values: tuple[int, ...], queries: tuple[int, ...]) -> tuple[int, int]:
    """(matmul FLOPs, other FLOPs) of one sample (module docstring)."""
    n = scores(layer, keys_values, queries)
    head_dim = queries[0] // layer.heads
    return 2 * 2 * n * head_dim, (1 + SOFTMAX_FLOPS) * n


def saved_elements(layer: Attend, keys_values: tuple[int, ...], queries: tuple[int, ...]) -> int:
    """Float elements kept for backward: q, k / v and the probabilities."""
    return math.prod(queries) + math.prod(keys_values) + scores(layer, keys_values, queries)
