"""Kernels and tensor-parallel shard of xLSTM's mLSTM mixer on one tp rank.

Heads split over tp (Megatron-style, as attention): q, k, v, the output gate and the i / f gates
column-parallel, out_proj row-parallel (its bias replicated); the multi-head norm is per head, so
its weight splits with them. The chunkwise-parallel form's matmuls (TFLA, arXiv 2503.14376) are
GEMMs; the gating, the normaliser, the norm and the output gate are memory-bound passes.
"""

from __future__ import annotations

from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.transformer import TransformerSpec


def mlstm_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of an mLSTM mixer, heads split over tp."""
    m, h, tokens = spec.mlstm, spec.hidden, b * s_q
    heads = -(-m.heads // tp)
    dk, dv = m.qk_head_dim, m.v_head_dim
    chunk = min(m.chunk_size, s_q)
    batch = b * -(-s_q // chunk) * heads  # chunks x local heads
    gemms = [Gemm("mlstm/in_proj", tokens, heads * (2 * dk + 2 * dv + 2), h),  # q, k, v, o, i, f
             Gemm("mlstm/scan/qk", chunk, chunk, dk, batch),  # intra-chunk Q K^T
             Gemm("mlstm/scan/intra", chunk, dv, chunk, batch),  # (Q K^T o D) V
             Gemm("mlstm/scan/inter", chunk, dv, dk, batch),  # Q C: the earlier chunks' memory
             Gemm("mlstm/scan/state", dk, dv, chunk, batch)]  # K^T V: the chunk-state update
    ew = [Elementwise("mlstm/gates", tokens * heads * chunk, 2 * d, 3 * d),  # decay matrix D per chunk row
          Elementwise("mlstm/norm", tokens * heads * dv, 2 * d, 3 * d),
          Elementwise("mlstm/ogate", tokens * heads * dv, 3 * d, 5 * d)]
    return gemms, ew, Gemm("mlstm/out_proj", tokens, h, heads * dv)  # row-parallel


def mlstm_shard(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements): the out_proj bias and the block norms' biases are
    replicated (partial sums under sequence parallelism)."""
    m, h = spec.mlstm, spec.hidden
    heads = -(-m.heads // tp)
    width = heads * (2 * m.qk_head_dim + 2 * m.v_head_dim)
    numel = h * width + 2 * (h + 1) * heads + heads * m.v_head_dim + heads * m.v_head_dim * h
    replicated = 3 * h if m.bias else 0
    numel += (width + heads * m.v_head_dim) * (1 if m.bias else 0) + replicated
    return numel, replicated if sp else 0
