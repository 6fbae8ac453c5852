"""Kernels of DeepSeek-V4's attention on one tensor-parallel rank (count/compressed_attention.py
holds its counts and layout): the weight GEMMs, the core over the window's keys (a causal
sliding-window fused call) and over the compressed keys (a second, unmasked call), the
indexer's q . K scores and head-weighted sum over the s / m compressed keys, and the
memory-bound passes: the latent norms, rotary on q, the K = V head and the output, the
compressors' windowed softmax pooling and the indexer's fp32 top-k.
"""

from __future__ import annotations

from modelplan.count.attention import FusedAttention
from modelplan.count.compressed_attention import compressed_attention_gemms, compressed_keys
from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.transformer import TransformerSpec

FP32 = 4


def compressed_attention_kernels(spec: TransformerSpec, kind: str, tp: int, b: int, s_q: int, s: int, d: int,
                                 fused: bool) -> tuple[list[Gemm], list[Elementwise], list[Elementwise],
                                                       list[FusedAttention], Gemm]:
    """(gemms, elementwise, core, fused, out) of a block whose compressor is `kind`."""
    ca, dh, tokens = spec.compressed_attention, spec.dim_head, b * s_q
    heads = -(-spec.heads // tp)
    shapes = compressed_attention_gemms(spec, kind, tp, tokens)
    gemms = [Gemm(*shape) for shape in shapes[:-1]]
    entries = compressed_keys(spec, kind, s)
    window = min(s, spec.sliding_window or s)
    core, flash = [], []
    if fused:
        flash.append(FusedAttention("attention/core", b * heads, s_q, s, dh, True, window))
        if entries:
            flash.append(FusedAttention("attention/compressed_core", b * heads, s_q, entries, dh, False))
    else:
        keys = s + entries  # HF eager: the masked s x s window scores and the compressed keys
        gemms += [Gemm("attention/scores", s_q, keys, dh, b * heads), Gemm("attention/context", s_q, dh, keys, b * heads)]
        core.append(Elementwise("attention/softmax", b * heads * s_q * keys, 2 * d, 3 * d))
    ew = [Elementwise("attention/latent_norms", tokens * (ca.q_lora_rank + dh + heads * dh), 2 * d, 3 * d),
          Elementwise("attention/rotary", tokens * (2 * heads + 1) * dh, 2 * d, 2 * d)]
    if kind != "none":
        width = (2 if kind == "csa" else 1) * dh
        ew.append(Elementwise("attention/compressor/pool", tokens * 2 * width, 2 * d, 3 * d))
    if kind == "csa":
        n_c, hi, di = s // ca.csa_rate, ca.index_heads, ca.index_head_dim
        gemms += [Gemm("attention/indexer/scores", s_q, n_c, di, b * hi), Gemm("attention/indexer/sum", 1, n_c, hi, tokens)]
        ew.append(Elementwise("attention/indexer/topk", tokens * n_c, 2 * FP32, 2 * FP32))
    return gemms, ew, core, flash, Gemm(*shapes[-1])
