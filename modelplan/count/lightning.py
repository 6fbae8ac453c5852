"""Exact parameters, forward FLOPs, kept activation bytes and inference state of MiniMax's
lightning attention (`modelplan.specs.mixers.LightningSpec`), keyed relative to the block:

    lightning/{in_proj, scan, norm, out_proj}

Parameters follow transformers 5.24 `MiniMaxLightningAttention` (qkv_proj, output_gate,
norm, out_proj; the decay rates are buffers). FLOPs: the projections as GEMMs; the block-wise
linear attention of Lightning Attention-2 (Qin et al. 2024, arXiv 2401.04658, Algorithm 1) as
its matmuls, per token and head with block length B: the intra-block Q K^T and (Q K^T o M) V
(B x d each) and the inter-block Q KV and the state update K^T V (d x d each); the decays and
the output gate are element-wise (not counted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def lightning_params(spec: "TransformerSpec") -> dict[str, int]:
    """MiniMaxLightningAttention's parameters."""
    m, h = spec.lightning, spec.hidden
    w = m.width
    return {
        "lightning/in_proj": h * 3 * w + h * w,  # qkv_proj Linear(h, 3 H d) and output_gate Linear(h, H d)
        "lightning/norm": w,  # MiniMaxRMSNorm(H d)
        "lightning/out_proj": w * h,  # Linear(H d, h)
    }


def lightning_scan_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> int:
    """4 B d + 4 d^2 per token and head (a sequence shorter than a block is one block)."""
    m = spec.lightning
    b = min(m.block_size, seq_len)
    return tokens * m.heads * (4 * b * m.head_dim + 4 * m.head_dim ** 2)


def lightning_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of a lightning-attention mixer."""
    m, h = spec.lightning, spec.hidden
    return {
        "lightning/in_proj": 2 * tokens * h * 4 * m.width,
        "lightning/scan": lightning_scan_flops(spec, tokens, seq_len),
        "lightning/out_proj": 2 * tokens * m.width * h,
    }


def lightning_kept_elements(spec: "TransformerSpec") -> int:
    """Values per token kept for backward: the qkv_proj output before and after SiLU (6 H d),
    the gate logits (H d), the attention output (the norm's input, H d) and the gated norm
    output (out_proj's input, H d); the block states are recomputed (Lightning Attention-2's
    backward, Algorithm 2)."""
    return 9 * spec.lightning.width


def lightning_state_elements(spec: "TransformerSpec") -> int:
    """Per-sequence inference state of one block: the d x d key-value state of every head
    (transformers' MiniMaxCache linear_cache (H, d, d)), whatever the length."""
    m = spec.lightning
    return m.heads * m.head_dim ** 2
