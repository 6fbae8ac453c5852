"""Exact parameters, forward FLOPs, kept activation bytes and inference state of Griffin's
recurrent block (`modelplan.specs.mixers.RGLRUSpec`; RecurrentGemma), keyed relative to the block:

    rglru/{in_proj, conv, gates, lru, out_proj}

Parameters follow transformers 5.24 `RecurrentGemmaRecurrentBlock` / `RecurrentGemmaRglru`.
FLOPs count the linears as GEMMs (the gates as `heads` block-diagonal GEMMs of w/heads), the
conv as k multiply-adds per channel and token and the linear recurrence h_t = a_t * h_{t-1} +
sqrt(1 - a_t^2) * (i_t * x_t) (De et al. 2024, arXiv 2402.19427, eq. 4) as its element-wise
multiply-add per channel and token; the gate non-linearities and the output gating are not counted.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

FP32_BYTES = 4


def rglru_params(spec: "TransformerSpec") -> dict[str, int]:
    """RecurrentGemmaRecurrentBlock's parameters."""
    m, h = spec.rglru, spec.hidden
    w = m.width
    return {
        "rglru/in_proj": 2 * (h * w + w),  # linear_y and linear_x: Linear(h, w) with bias
        "rglru/conv": w * m.conv_kernel + w,  # Conv1d(w, w, k, groups=w) with bias
        # input_gate_weight and recurrent_gate_weight (heads, w/heads, w/heads), their biases (heads, w/heads)
        "rglru/gates": 2 * (m.heads * m.block_width ** 2 + w),
        "rglru/lru": w,  # recurrent_param (w,)
        "rglru/out_proj": w * h + h,  # linear_out: Linear(w, h) with bias
    }


def rglru_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Forward FLOPs of the recurrent block (see the module docstring)."""
    m, h = spec.rglru, spec.hidden
    w = m.width
    return {
        "rglru/in_proj": 2 * tokens * h * 2 * w,
        "rglru/conv": 2 * tokens * w * m.conv_kernel,
        "rglru/gates": 2 * tokens * 2 * m.heads * m.block_width ** 2,  # two baddbmm of (w/H, w/H) per head
        "rglru/lru": 2 * tokens * w,  # a * h + x: one multiply-add per channel (eq. 4)
        "rglru/out_proj": 2 * tokens * w * h,
    }


def rglru_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """Bytes per token autograd keeps through the eager forward (no fused kernel in
    transformers): GeLU's input and output (2w), the conv input (w), the gates' input (the conv
    output, w), both gate outputs (2w), a, a^2 and 1 - a^2 (3w), the gated input and its
    normaliser (2w), the scan output (w) and linear_out's input (w), 13w at `d` bytes, plus the
    scan's fp32 state per step (w x 4 B)."""
    return 13 * spec.rglru.width * d + FP32_BYTES * spec.rglru.width


def rglru_state_elements(spec: "TransformerSpec") -> int:
    """Per-sequence inference state of one block: the conv window (w, k - 1) and the RG-LRU
    state (w) (transformers' conv1d_state and recurrent_states, the latter fp32 — counted here
    at the cache dtype like the other mixers' states)."""
    m = spec.rglru
    return m.width * (m.conv_kernel - 1) + m.width
