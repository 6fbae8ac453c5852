"""FocalNet's focal modulation leaf (`specs.focal_modulation`): parameters, FLOPs and what backward
keeps, per sample; C channels, P = H W positions, L levels of kernels k_l.

- matmul FLOPs (aten.convolution, as FlopCounterMode counts them): each level's depthwise conv
  2 C P k_l^2, projection_context 2 C^2 P;
- other FLOPs (FocalNetModulation.forward): per level GELU, c_l * g_l and the running sum 3 C P; the
  grid mean C P, the global GELU C, its gate product and sum 2 C P, the normalisation C P when set,
  projection_context's bias C P, q * m C P;
- kept: the input, every level's pre-GELU conv output (C P each) and the aggregate (C P).
"""

from __future__ import annotations

import math

from modelplan.specs.focal_modulation import FocalModulation


def param_shapes(layer: FocalModulation, output: tuple[int, ...]) -> dict[str, tuple[int, ...]]:
    """The depthwise kernels and projection_context, torch layout."""
    c = output[0]
    shapes = {f"focal_weight_{level}": (c, 1, k, k) for level, k in enumerate(layer.kernels())}
    return shapes | {"context_weight": (c, c, 1, 1), "context_bias": (c,)}


def forward_flops(layer: FocalModulation, output: tuple[int, ...]) -> tuple[int, int]:
    """(matmul FLOPs, other FLOPs) of one sample (module docstring)."""
    c, p = output[0], math.prod(output[1:])
    matmul = sum(2 * c * p * k * k for k in layer.kernels()) + 2 * c * c * p
    other = (3 * layer.focal_level + 5 + int(layer.normalize_modulator)) * c * p + c
    return matmul, other


def saved_elements(layer: FocalModulation, input_shape: tuple[int, ...], output: tuple[int, ...]) -> int:
    """Float elements kept for backward (module docstring)."""
    return math.prod(input_shape) + (layer.focal_level + 1) * math.prod(output)
