"""Kernels of DeepSeek Sparse Attention (DeepSeek-V3.2-Exp report, sec. 2.1): the lightning
indexer, replicated on every tp rank (its weights are small: count/blocks.py
`attention/indexer`), and the main MLA core over the indexer's top-k keys.

The indexer's projections and its q . k scores are GEMMs (count/block_flops.py indexer_flops);
the relu-weighted logits and the top-k selection are one memory-bound pass over the s_q x s
fp32 logits. The sparse core is priced as a fused kernel seeing index_topk keys a query (the
FLOPs of FlashMLA's sparse kernel; a causal window of topk keys has the same count).
"""

from __future__ import annotations

import dataclasses

from modelplan.count.attention import FusedAttention
from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.transformer import TransformerSpec

FP32 = 4


def indexer_gemms(spec: TransformerSpec, b: int, s_q: int, s: int) -> list[Gemm]:
    """wq_b, wk, weights_proj, then per index head q . k over the s keys and the head-weighted sum."""
    mla, h, tokens = spec.mla, spec.hidden, b * s_q
    ix = mla.indexer
    keys = -(-s // ix.kpool) if ix.kpool else s  # GLM-5-Next: one pooled key per kpool tokens
    pool = [Gemm("attention/indexer/pool_gate", tokens, ix.head_dim, h)] if ix.kpool else []
    q_in = h if ix.query_from_hidden else mla.q_lora_rank  # Mistral Large 4: wq_b over the block input
    return [Gemm("attention/indexer/q", tokens, ix.heads * ix.head_dim, q_in),
            Gemm("attention/indexer/k", tokens, ix.head_dim, h),
            Gemm("attention/indexer/weights", tokens, ix.heads, h), *pool,
            Gemm("attention/indexer/scores", s_q, keys, ix.head_dim, b * ix.heads),
            Gemm("attention/indexer/sum", 1, keys, ix.heads, tokens)]


def indexer_elementwise(spec: TransformerSpec, b: int, s_q: int, s: int) -> list[Elementwise]:
    """The fp32 index logits: written, then read by top-k (forward and the backward's recompute)."""
    return [Elementwise("attention/indexer/topk", b * s_q * s, 2 * FP32, 2 * FP32)]


def sparse_core(spec: TransformerSpec, flash: list[FusedAttention]) -> list[FusedAttention]:
    """The fused MLA core seeing at most index_topk keys a query."""
    ix = spec.mla.indexer
    topk = ix.topk + (ix.kpool - 1 if ix.kpool and ix.kpool_tail else 0)  # GLM-5-Next's tail pool
    return [dataclasses.replace(f, window=topk if f.window is None else min(f.window, topk)) for f in flash]
