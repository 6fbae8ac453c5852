"""Sub-spec of compressed convolutional attention's q/k convolutions (`TransformerSpec.cca`;
Figliolia et al. 2025, arXiv 2510.04476; transformers 5.24 `ZayaCCAProjection`, `ZayaQKNorm`):
q and k (heads + kv_heads heads of head_dim, C channels in all) pass a causal depthwise
Conv1d(C, C, depthwise_kernel, groups=C) and then a grouped Conv1d(C, C, grouped_kernel,
groups=heads + kv_heads), both with biases, before each adds back its own projection; the values
are half this token's v_proj_current, half the previous token's v_proj_delayed (the same widths
as one v_proj); q and k are L2-normed to sqrt(head_dim) and the keys scaled by a learned
temperature per kv head.
"""

from __future__ import annotations

from pydantic import Field

from modelplan.specs.base import Spec


class CCASpec(Spec):
    """The q/k convolutions of compressed convolutional attention."""

    depthwise_kernel: int = Field(2, gt=0)
    """Taps of the depthwise conv (HF cca_time0)."""
    grouped_kernel: int = Field(2, gt=0)
    """Taps of the grouped conv (HF cca_time1)."""
