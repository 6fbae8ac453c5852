"""Exact parameters, forward FLOPs, kept activation bytes and inference state of xLSTM's mLSTM
mixer (`modelplan.specs.mlstm.MLSTMSpec`), keyed relative to the block:

    mlstm/{in_proj, gates, scan, norm, out_proj, norm_bias}

Parameters follow transformers 5.24 `xLSTMLayer` and `xLSTMBlock` (weight_mode single or fused:
the same sizes). FLOPs: the projections as GEMMs; the chunkwise-parallel mLSTM (Beck et al. 2025,
"Tiled Flash Linear Attention", arXiv 2503.14376, sec. 3, chunk length L) as its matmuls, per token
and head: the intra-chunk Q K^T (L d_qk) and its product with V (L d_v), the inter-chunk Q C and
the chunk-state update K^T V (d_qk d_v each); the gates' cumulative sums, the exponentials and the
normaliser are element-wise (not counted).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

FP32_BYTES = 4


def mlstm_params(spec: "TransformerSpec") -> dict[str, int]:
    """xLSTMLayer's parameters, and the biases of the block's two RMSNorms when use_bias."""
    m, h = spec.mlstm, spec.hidden
    width = 2 * m.qk_dim + 2 * m.v_dim  # q, k, v, ogate_preact (or the fused qkv_opreact)
    return {
        "mlstm/in_proj": h * width + (width if m.bias else 0),
        "mlstm/gates": 2 * (h * m.heads + m.heads),  # igate_preact, fgate_preact: Linear(h, H) with bias
        "mlstm/norm": m.v_dim * (2 if m.bias else 1),  # xLSTMMultiHeadLayerNorm: weight (and bias) over v_dim
        "mlstm/out_proj": m.v_dim * h + (h if m.bias else 0),
        "mlstm/norm_bias": 2 * h if m.bias else 0,  # norm_mlstm, norm_ffn: xLSTMRMSNorm(use_bias) biases
    }


def mlstm_scan_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> int:
    """2 L (d_qk + d_v) + 4 d_qk d_v per token and head (a sequence shorter than a chunk is one)."""
    m = spec.mlstm
    chunk = min(m.chunk_size, seq_len)
    dk, dv = m.qk_head_dim, m.v_head_dim
    return tokens * m.heads * (2 * chunk * (dk + dv) + 4 * dk * dv)


def mlstm_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of an mLSTM mixer."""
    m, h = spec.mlstm, spec.hidden
    return {
        "mlstm/in_proj": 2 * tokens * h * (2 * m.qk_dim + 2 * m.v_dim),  # (t, h) @ (h, 2 qk + 2 v)
        "mlstm/gates": 2 * tokens * h * 2 * m.heads,  # (t, h) @ (h, 2H)
        "mlstm/scan": mlstm_scan_flops(spec, tokens, seq_len),
        "mlstm/out_proj": 2 * tokens * m.v_dim * h,  # (t, v) @ (v, h)
    }


def mlstm_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """Bytes per token autograd keeps through the chunkwise native-autograd kernel (an estimate):
    q, k, v, the output-gate logits, the i / f gate logits (2 qk + 2 v + 2 H), the memory's output
    (the norm's input), the norm output and the gated product (out_proj's input) (3 v) at `d` bytes,
    and each chunk's fp32 state C (H d_qk d_v a chunk: that divided by L a token)."""
    m = spec.mlstm
    elements = 2 * m.qk_dim + 5 * m.v_dim + 2 * m.heads
    return d * elements + FP32_BYTES * m.heads * m.qk_head_dim * m.v_head_dim // m.chunk_size


def mlstm_state_elements(spec: "TransformerSpec") -> int:
    """Per-sequence inference state of one block: the memory C (H, d_qk, d_v), the normaliser n
    (H, d_qk) and the stabiliser m (H) (transformers' xLSTMCache rnn_state)."""
    m = spec.mlstm
    return m.heads * (m.qk_head_dim * m.v_head_dim + m.qk_head_dim + 1)
