"""Kernels and tensor-parallel shard of MiniMax's lightning attention on one tp rank.

Heads split over tp (Megatron-style): qkv_proj and output_gate column-parallel, out_proj
row-parallel. The norm spans all H d channels: its weight is split with the heads and its
statistic needs one value per token from every rank (not priced: 4 bytes a token). The
projections and the block-wise attention's matmuls (Lightning Attention-2, Algorithm 1) are
GEMMs; SiLU, the decays, the norm and the gate are memory-bound passes.
"""

from __future__ import annotations

from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.transformer import TransformerSpec


def lightning_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of a lightning-attention mixer, heads split over tp."""
    m, h, tokens = spec.lightning, spec.hidden, b * s_q
    heads = -(-m.heads // tp)
    w, hd = heads * m.head_dim, m.head_dim
    blk = min(m.block_size, s_q)
    batch = b * -(-s_q // blk) * heads  # blocks x local heads
    gemms = [Gemm("lightning/in_proj", tokens, 4 * w, h),  # column-parallel: q, k, v and the gate
             Gemm("lightning/scan/qk", blk, blk, hd, batch),  # intra-block Q K^T
             Gemm("lightning/scan/intra", blk, hd, blk, batch),  # (Q K^T o M) V
             Gemm("lightning/scan/inter", blk, hd, hd, batch),  # Q KV: the earlier blocks' state
             Gemm("lightning/scan/state", hd, hd, blk, batch)]  # K^T V: the state update
    ew = [Elementwise("lightning/silu", tokens * 3 * w, 2 * d, 3 * d),
          Elementwise("lightning/norm", tokens * w, 2 * d, 3 * d),
          Elementwise("lightning/gate", tokens * w, 3 * d, 5 * d)]
    return gemms, ew, Gemm("lightning/out_proj", tokens, h, w)  # row-parallel


def lightning_shard(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements): everything split with the heads."""
    m, h = spec.lightning, spec.hidden
    w = -(-m.heads // tp) * m.head_dim
    return 4 * h * w + w + w * h, 0
