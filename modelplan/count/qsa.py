"""Exact parameters, forward FLOPs and kept activation bytes of the token indexer on q/k/v
attention (`modelplan.specs.qsa.TokenIndexerSpec`; transformers 5.24 `Qwen4ExpTextQSAIndexer`),
keyed relative to the block as `attention/indexer`, `attention/indexer/proj`, `attention/indexer/score`.

FLOPs count index_qk_proj as a GEMM and each query's q . k over the s / compress_ratio pooled
keys of its H index heads (the relu, the head sum and the top-k are element-wise); the block's
attention then reads `read_keys` keys a query.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def qsa_params(spec: "TransformerSpec") -> dict[str, int]:
    """index_qk_proj Linear(h, (H + 1) d, bias=False), q_layernorm and k_layernorm RMSNorm(d)."""
    ix = spec.token_indexer
    if ix is None:
        return {}
    return {"attention/indexer": spec.hidden * (ix.heads + 1) * ix.head_dim + 2 * ix.head_dim}


def qsa_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """index_qk_proj (t, h) @ (h, (H + 1) d); per query H index heads against s / ratio pooled keys."""
    ix = spec.token_indexer
    if ix is None:
        return {}
    return {"attention/indexer/proj": 2 * tokens * spec.hidden * (ix.heads + 1) * ix.head_dim,
            "attention/indexer/score": 2 * tokens * (seq_len // ix.compress_ratio) * ix.heads * ix.head_dim}


def read_keys(spec: "TransformerSpec", keys: int) -> int:
    """Keys a query of an indexed full-attention block reads: the budget's blocks and the tail."""
    ix = spec.token_indexer
    return keys if ix is None else min(keys, ix.budget + ix.compress_ratio - 1)


def qsa_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """The index queries and key, before and after their norms (2 (H + 1) d values a token)."""
    ix = spec.token_indexer
    return d * 2 * (ix.heads + 1) * ix.head_dim if ix is not None else 0
