"""Exact parameters, forward FLOPs, kept activation bytes and inference state of LFM2's gated
short-convolution mixer (`modelplan.specs.mixers.ShortConvSpec`), keyed relative to the block:

    short_conv/{in_proj, conv, out_proj}

transformers 5.24 `Lfm2ShortConv` / `Lfm2MoeShortConv`: in_proj Linear(h, 3h) to B, C, x;
y = C * causal_conv1d(B * x) over a depthwise Conv1d(h, h, L, groups=h); out_proj Linear(h, h);
every one with a bias when conv_bias. No recurrence: the conv's window is its only state.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def short_conv_params(spec: "TransformerSpec") -> dict[str, int]:
    """Lfm2ShortConv's parameters (transformers 5.24)."""
    m, h = spec.short_conv, spec.hidden
    bias = 1 if m.bias else 0
    return {
        "short_conv/in_proj": h * 3 * h + bias * 3 * h,  # Linear(h, 3h, bias=conv_bias)
        "short_conv/conv": h * m.conv_kernel + bias * h,  # Conv1d(h, h, L, groups=h): weight (h, 1, L)
        "short_conv/out_proj": h * h + bias * h,  # Linear(h, h, bias=conv_bias)
    }


def short_conv_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Forward FLOPs: in_proj and out_proj as GEMMs, the depthwise conv as L multiply-adds per
    channel and token (2 FLOPs each, as Mamba-2's conv in count/mixers.py); the two gating
    products B * x and C * y are element-wise and not counted (as Mamba-2's gating)."""
    m, h = spec.short_conv, spec.hidden
    return {
        "short_conv/in_proj": 2 * tokens * h * 3 * h,
        "short_conv/conv": 2 * tokens * h * m.conv_kernel,
        "short_conv/out_proj": 2 * tokens * h * h,
    }


def short_conv_kept_elements(spec: "TransformerSpec") -> int:
    """Values per token autograd keeps for backward through Lfm2ShortConv's forward (no fused
    kernel): the in_proj output B, C, x (3h, read by both products' backward), the conv input
    B * x (h; causal_conv1d_fn saves its input), the conv output (h, for C * y) and out_proj's
    input (h)."""
    return 6 * spec.hidden


def short_conv_state_elements(spec: "TransformerSpec") -> int:
    """Per-sequence inference state of one block: transformers' conv_states (h, L) (Lfm2's
    hybrid cache keeps the last L conv inputs), whatever the length."""
    return spec.hidden * spec.short_conv.conv_kernel
