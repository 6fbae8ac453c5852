"""Per-rank parameter counts the planner needs: one block, the embedding and the head on one
TP rank (activation bytes come from `modelplan.count.memory`, Korthikanti et al. 2022).

Parameter shards follow Megatron-LM: column-parallel weights and biases split over tp,
row-parallel weights split, row-parallel biases and norms replicated; the (padded) vocabulary is
split over tp; with tied embeddings and pp > 1 the last stage keeps its own copy of the word
embeddings for the head (Megatron's `word_embeddings` on the last stage).
"""

from __future__ import annotations

from modelplan.plan.kernels import local_kv_heads
from modelplan.specs.transformer import TransformerSpec


def layer_params_per_rank(spec: TransformerSpec, tp: int) -> int:
    """Parameters of one dense block held by one TP rank (replicated pieces counted in full)."""
    h, dh = spec.hidden, spec.dim_head
    heads_local = spec.heads // tp
    kv_local = local_kv_heads(spec.num_kv_heads, tp)
    ffn_local = spec.ffn_hidden // tp
    n_in = 2 if spec.gated_mlp else 1
    qkv_out = (heads_local + 2 * kv_local) * dh
    params = h * qkv_out + (qkv_out if spec.qkv_bias else 0)  # column-parallel QKV
    params += heads_local * dh * h + (h if spec.attn_out_bias else 0)  # row-parallel, bias replicated
    params += h * n_in * ffn_local + (n_in * ffn_local if spec.mlp_bias else 0)  # column-parallel
    params += ffn_local * h + (h if spec.mlp_bias else 0)  # row-parallel, bias replicated
    params += spec.num_norms_per_layer * h * (2 if spec.norm_bias else 1)  # replicated norms
    return params


def embedding_params_per_rank(spec: TransformerSpec, tp: int, vocab_padded: int) -> int:
    """First stage: vocab-parallel token embedding, replicated position/type tables and norm."""
    h = spec.hidden
    params = vocab_padded // tp * h
    if spec.position == "learned":
        params += spec.max_positions * h
    params += spec.type_vocab * h
    if spec.embedding_norm:
        params += h * (2 if spec.norm_bias else 1)
    return params


def head_params_per_rank(spec: TransformerSpec, tp: int, vocab_padded: int, pp: int) -> int:
    """Last stage: final norm and the output projection (a second copy when tied and pp > 1)."""
    h = spec.hidden
    params = h * (2 if spec.norm_bias else 1) if spec.final_norm else 0
    if spec.lm_head and (not spec.tied_embeddings or pp > 1):
        params += vocab_padded // tp * h
    if spec.lm_head_bias:
        params += vocab_padded // tp
    if spec.pooler:
        params += h * h + h
    if spec.mlm_transform:
        params += h * h + h + h * (2 if spec.norm_bias else 1) + vocab_padded // tp
    return params
