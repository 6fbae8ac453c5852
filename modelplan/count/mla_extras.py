"""Exact parameters, forward FLOPs and kept activation bytes of what HY-V4 adds to Multi-head
Latent Attention (transformers 5.24 `HYV4Attention`), keyed relative to the block:

    attention/{head_gate, sinks}

- a per-channel output gate: gate_proj Linear(h, heads * v_head_dim, bias=False) on the block
  input, the core output times sigmoid(gate) before o_proj (`TransformerSpec.head_gate` 'element'
  on an MLA spec; one value a head, 'head', is Linear(h, heads));
- a learned sink logit per head in the softmax (`attention_sinks`, gpt-oss style `sinks`).

And the lightning indexer of a block that reuses an earlier block's top-k (HY-V4 / GLM-MoE-DSA
indexer_types 'shared': `IndexerSpec.layers`): `own_indexer` is None there, so the block holds
no indexer weights and runs no indexer, while its attention still reads index_topk keys.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.specs.blocks import IndexerSpec
    from modelplan.specs.transformer import TransformerSpec


def own_indexer(spec: "TransformerSpec") -> "IndexerSpec | None":
    """The indexer this (per-block, `for_block`) spec runs itself; None without one or when it
    reuses an earlier block's selection."""
    mla = spec.mla
    if mla is None or mla.indexer is None or mla.indexer.reused:
        return None
    return mla.indexer


def mla_gate_width(spec: "TransformerSpec", heads: int | None = None) -> int:
    """Output features of an MLA block's gate_proj for `heads` heads: heads or heads * v_head_dim."""
    heads = spec.heads if heads is None else heads
    if spec.head_gate is None:
        return 0
    return heads if spec.head_gate == "head" else heads * spec.mla.v_head_dim


def mla_extra_params(spec: "TransformerSpec") -> dict[str, int]:
    """HYV4Attention.gate_proj and sinks (heads,); dots.3's g_proj Linear(h, heads) and its
    k_rope_only_layernorm RMSNorm(qk_rope_head_dim)."""
    return {"attention/head_gate": spec.hidden * mla_gate_width(spec),
            "attention/sinks": spec.heads if spec.attention_sinks else 0,
            "attention/kv/rope_norm": spec.mla.qk_rope_head_dim if spec.mla.rope_key_norm else 0,
            # MistralLarge4TextSoftmaxScaling: scale and bias (heads,) each
            "attention/softmax_scales": 2 * spec.heads if spec.mla.softmax_scales else 0}


def mla_embedding_params(spec: "TransformerSpec") -> dict[str, int]:
    """MistralLarge4TextRotaryEmbedding.alpha (qk_rope_head_dim / 2), keyed relative to `embedding/`."""
    mla = spec.mla
    return {"rotary_alpha": mla.qk_rope_head_dim // 2} if mla is not None and mla.rotary_alpha else {}


def mla_extra_shard(spec: "TransformerSpec", local_heads: int) -> tuple[int, int]:
    """(split with the heads, replicated) elements of those on one tp rank: the gate and the sinks
    colwise (HYV4Config / Dots3NoteTextConfig base_model_tp_plan), the rope-key norm replicated."""
    split = spec.hidden * mla_gate_width(spec, local_heads) + (local_heads if spec.attention_sinks else 0)
    split += 2 * local_heads if spec.mla.softmax_scales else 0  # Mistral Large 4's scales: with the heads
    return split, spec.mla.qk_rope_head_dim if spec.mla.rope_key_norm else 0


def mla_extra_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """gate_proj (t, h) @ (h, heads v_head_dim); the sigmoid product is element-wise."""
    return {"attention/head_gate": 2 * tokens * spec.hidden * mla_gate_width(spec)} if spec.head_gate else {}


def mla_extra_kept_bytes(spec: "TransformerSpec", d: int) -> int:
    """The gate logits and the ungated core output, kept for attn * sigmoid(gate) (eager autograd;
    split by tp with the heads)."""
    return d * 2 * mla_gate_width(spec) if spec.head_gate else 0
