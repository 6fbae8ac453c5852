"""Leaves of the network stack whose attention is one context vector per sequence, not a score
matrix: MobileViT V2's separable self-attention and SwiftFormer's efficient additive attention.

Both read stacked projections of a [C_in, H, W] map (the 1x1 convs before them are ordinary conv
leaves) and cost O(positions x channels), never positions^2.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.errors import SpecError
from modelplan.specs.layers import LayerBase


class SeparableAttention(LayerBase):
    """MobileViT V2's separable self-attention (Mehta & Rastegari 2022b, sec. 3.2, eq. 1-3;
    transformers 5.24 modeling_mobilevitv2.py MobileViTV2LinearSelfAttention): the input
    [1 + 2 C, H, W] stacks one query channel q, keys k (C) and values v (C); per sequence
    s = softmax(q) over its positions, the context c = sum_positions s * k (C), the output
    relu(v) * c, [C, H, W]. No parameters (qkv_proj and out_proj are the convs around it)."""

    type: Literal["separableattention"]
    patch: int = Field(1, gt=0)
    """The sequences are the positions at one offset of the patch x patch patches (MobileViT's
    unfolding, softmax over dim -1 of (B, C, patch_area, n_patches)); 1: the whole map."""


class AdditiveAttention(LayerBase):
    """SwiftFormer's efficient additive attention (Shaker et al. 2023, sec. 3.2, eq. 4-6;
    transformers 5.24 modeling_swiftformer.py SwiftFormerEfficientAdditiveAttention) after its
    to_query / to_key Linears: the input [2 C, H, W] stacks q and k; q^ = q / ||q||, k^ = k / ||k||
    over the channels (F.normalize), the weights softmax(q^ w_g / sqrt(C)) over their own size-1
    axis (each is 1: transformers' dim=-1), the global query G = sum_positions q^, the output
    proj(G * k^) + q^, [C, H, W]. Parameters: w_g (C, 1), proj_weight (C, C), proj_bias (C)."""

    type: Literal["additiveattention"]


def output_shape(layer: SeparableAttention | AdditiveAttention, shape: tuple[int, ...], where: str
                 ) -> tuple[int, ...]:
    """[C, H, W] of a [1 + 2 C, H, W] (separable) or [2 C, H, W] (additive) input."""
    if isinstance(layer, SeparableAttention):
        if len(shape) != 3 or shape[0] < 3 or shape[0] % 2 == 0 or shape[1] % layer.patch or shape[2] % layer.patch:
            raise SpecError(f"{where}: needs a [1 + 2 C, H, W] input (odd channels >= 3) on a grid patch "
                            f"({layer.patch}) divides, got [{', '.join(map(str, shape))}]")
        return ((shape[0] - 1) // 2, *shape[1:])
    if len(shape) != 3 or shape[0] < 2 or shape[0] % 2:
        raise SpecError(f"{where}: needs a [2 C, H, W] input of stacked q and k, got [{', '.join(map(str, shape))}]")
    return (shape[0] // 2, *shape[1:])
