"""Exact parameters, forward FLOPs, kept activation bytes and inference state of an RWKV-4
block's time and channel mixing (`modelplan.specs.mixers.RWKVSpec`), keyed relative to the block:

    rwkv/{time_mix, wkv, channel_mix}

Parameters follow transformers 5.24 `RwkvSelfAttention` / `RwkvFeedForward`. FLOPs: the linears
as GEMMs; the WKV recurrence in its recurrent form (Peng et al. 2023, arXiv 2305.13048, eq. 19-20
and appendix: a_t = e^-w a_{t-1} + e^k v, b_t = e^-w b_{t-1} + e^k) as its two multiply-adds per
channel and token; token shift, exponentials and gating are element-wise (not counted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def rwkv_params(spec: "TransformerSpec") -> dict[str, int]:
    """RwkvSelfAttention and RwkvFeedForward."""
    m, h = spec.rwkv, spec.hidden
    a, i = m.attention_hidden, m.intermediate
    return {
        # key, value, receptance Linear(h, A), output Linear(A, h); time_mix_{key,value,receptance} (h each)
        "rwkv/time_mix": 3 * h * a + a * h + 3 * h,
        "rwkv/wkv": 2 * a,  # time_decay and time_first (A each)
        # key Linear(h, I), value Linear(I, h), receptance Linear(h, h); time_mix_{key,receptance}
        "rwkv/channel_mix": h * i + i * h + h * h + 2 * h,
    }


def rwkv_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Forward FLOPs of an RWKV-4 block's mixers (see the module docstring)."""
    m, h = spec.rwkv, spec.hidden
    a, i = m.attention_hidden, m.intermediate
    return {
        "rwkv/time_mix": 2 * tokens * (4 * h * a),
        "rwkv/wkv": 2 * 2 * tokens * a,
        "rwkv/channel_mix": 2 * tokens * (2 * h * i + h * h),
    }


def rwkv_kept_elements(spec: "TransformerSpec") -> int:
    """Values per token autograd keeps through the eager forward: time mixing's shifted input
    and three mixed inputs (4h), k, v, r (3A), the WKV output and the gated output (2A); channel
    mixing's shifted input and two mixed inputs (3h), the key output before and after the
    squared ReLU (2I), the receptance logits (h) and the value output (h)."""
    m, h = spec.rwkv, spec.hidden
    return 9 * h + 5 * m.attention_hidden + 2 * m.intermediate


def rwkv_state_elements(spec: "TransformerSpec") -> int:
    """Per-sequence inference state of one block (transformers' RWKV state): the last input of
    the time and the channel mixing (h each) and the WKV numerator, denominator and running
    maximum (A each)."""
    return 2 * spec.hidden + 3 * spec.rwkv.attention_hidden
