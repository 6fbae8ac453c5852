"""The one tensor-parallel rule for key/value heads, for every attention kind.

- GQA / MHA: tp divides kv_heads, or tp is a multiple of kv_heads and each KV head is replicated
  on tp / kv_heads ranks (Megatron-core's GQA `num_query_groups` replication, vLLM's
  `num_kv_head_replicas = max(1, tp_size // total_num_kv_heads)`);
- MQA (kv_heads = 1): every tp is a multiple of 1: the one head is replicated on every rank;
- MLA (DeepSeek-V2 sec. 2.1.2): there are no KV heads to divide: the cached latent (d_c + d_h^R
  per token) is replicated on every TP rank, and the per-head K, V that kv_b up-projects from it
  are split with the query heads, so the heads rule (tp divides heads) is the whole rule.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def attention_kv_heads(spec: "TransformerSpec") -> int:
    """K/V heads the attention core reads: the query heads for MLA (kv_b emits one K, V per head,
    DeepSeek-V2 eq. 12-13), else kv_heads (MHA default: heads)."""
    return spec.heads if spec.mla is not None else spec.num_kv_heads


def tp_kv_heads_problem(spec: "TransformerSpec", tp: int) -> str | None:
    """Why `tp` cannot split this model's KV heads (None: it can, replicated or not)."""
    if spec.mla is not None:  # no KV heads: the latent is held whole, K, V split with the heads
        return None
    kv = spec.num_kv_heads
    if (kv % tp == 0) if tp <= kv else (tp % kv == 0):
        return None
    return f"tp ({tp}) must divide kv_heads ({kv}) or be a multiple of it (KV heads replicated)"


def tp_fits_kv_heads(spec: "TransformerSpec", tp: int) -> bool:
    """`tp_kv_heads_problem` is None."""
    return tp_kv_heads_problem(spec, tp) is None


def kv_heads_replicas(spec: "TransformerSpec", tp: int) -> int:
    """TP ranks holding each KV head: tp / kv_heads when tp exceeds them (replicated), else 1;
    1 for MLA (no KV heads; its latent is on every rank, `count/serve.py`)."""
    kv = attention_kv_heads(spec)
    return tp // kv if tp > kv and spec.mla is None else 1
