"""The context-vector attention leaves of the network stack (`specs.context_attention`): their
parameters, FLOPs and what their backward keeps, per sample. P positions, C output channels.

- separable (MobileViTV2LinearSelfAttention.forward, transformers 5.24): softmax 5 per query
  score (P), then per element of the C x P keys / values k * s 1, the sum over positions 1,
  relu(v) 1, relu(v) * c 1: 5 P + 4 C P other FLOPs, no matmul; kept: the input and the scores.
- additive (SwiftFormerEfficientAdditiveAttention.forward): F.normalize of q and k 3 per element
  (square, sum, divide; the P norms not counted), q^ @ w_g 2 C P and proj 2 C^2 P matmul FLOPs
  (aten.mm, as FlopCounterMode counts them), then the scale 1 and softmax 5 per weight (P), the
  weighted sum over positions 2 per element, G * k^ 1, proj's bias 1 and + q^ 1: 11 C P + 6 P
  other; parameters w_g (C, 1), proj_weight (C, C), proj_bias (C); kept: the input and proj's
  input G * k^.
"""

from __future__ import annotations

import math

from modelplan.count.window_attention import SOFTMAX_FLOPS
from modelplan.specs.context_attention import AdditiveAttention, SeparableAttention

Layer = SeparableAttention | AdditiveAttention


def param_shapes(layer: Layer, output: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """SwiftFormer's w_g and proj (torch layout: weight (out, in)); none for the separable leaf."""
    if isinstance(layer, SeparableAttention):
        return {}
    c = output[0]
    return {"w_g": (c, 1), "proj_weight": (c, c), "proj_bias": (c,)}


def forward_flops(layer: Layer, output: tuple[int, ...]) -> tuple[int, int]:
    """(matmul FLOPs, other FLOPs) of one sample (module docstring)."""
    c, p = output[0], math.prod(output[1:])
    if isinstance(layer, SeparableAttention):
        return 0, SOFTMAX_FLOPS * p + 4 * c * p
    return 2 * c * p + 2 * c * c * p, 11 * c * p + (1 + SOFTMAX_FLOPS) * p


def saved_elements(layer: Layer, input_shape: tuple[int, ...], output: tuple[int, ...]) -> int:
    """Float elements kept for backward: the input and the scores (separable) or proj's input (additive)."""
    kept = math.prod(output[1:]) if isinstance(layer, SeparableAttention) else math.prod(output)
    return math.prod(input_shape) + kept
