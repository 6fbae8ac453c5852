"""FocalNet's focal modulation as a leaf of the network stack (Yang et al. 2022, "Focal Modulation
Networks", sec. 3.2, eq. 4-7; transformers 5.24 modeling_focalnet.py FocalNetModulation after its
projection_in): the input [2 C + L + 1, H, W] stacks the query q (C), the context c_0 (C) and L + 1
gates g; per level l the context c_l = GELU(depthwise conv_l(c_{l-1})) (kernel focal_factor l +
focal_window, padding kernel // 2, bias-free), the global context GELU(mean over the grid of c_L);
the aggregate sum_l c_l g_l + global g_L (divided by L + 1 with normalize_modulator), projection_context
(a biased 1x1 conv) of it the modulator m, the output q * m, [C, H, W]. Parameters: focal_weight_<l>
(C, 1, k_l, k_l), context_weight (C, C, 1, 1), context_bias (C), in torch's layout.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.errors import SpecError
from modelplan.specs.layers import LayerBase


class FocalModulation(LayerBase):
    """FocalNetModulation between projection_in and the optional LayerNorm / projection_out (module docstring)."""

    type: Literal["focalmodulation"]
    focal_level: int = Field(ge=0)
    """L: the hierarchical depthwise-conv levels."""
    focal_window: int = Field(gt=0)
    """The first level's kernel."""
    focal_factor: int = Field(2, ge=0)
    """Kernel growth per level (FocalNetModulation's focal_factor, 2)."""
    normalize_modulator: bool = False
    """Divide the aggregate by L + 1."""

    def kernels(self) -> list[int]:
        """Each level's kernel size."""
        return [self.focal_factor * level + self.focal_window for level in range(self.focal_level)]


def output_shape(layer: FocalModulation, shape: tuple[int, ...], where: str) -> tuple[int, ...]:
    """[C, H, W] of a [2 C + L + 1, H, W] input."""
    c = (shape[0] - layer.focal_level - 1) // 2 if shape else 0
    if len(shape) != 3 or c < 1 or 2 * c + layer.focal_level + 1 != shape[0]:
        raise SpecError(f"{where}: needs a [2 C + focal_level + 1, H, W] input (q, context, gates), focal_level "
                        f"{layer.focal_level}, got [{', '.join(map(str, shape))}]")
    if any(k % 2 == 0 for k in layer.kernels()):
        raise SpecError(f"{where}: kernels {layer.kernels()} (focal_window {layer.focal_window}, focal_factor "
                        f"{layer.focal_factor}) must be odd: padding k // 2 grows the grid of an even one "
                        f"(transformers fails on that)")
    return (c, *shape[1:])
