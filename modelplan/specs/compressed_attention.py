"""Sub-spec of DeepSeek-V4's attention (`TransformerSpec.compressed_attention`; DeepSeek-V4 paper
sec. 2.3; transformers 5.24 `DeepseekV4Attention`):

- shared-KV multi-query attention: a low-rank query (q_a_proj Linear(h, r), q_a_norm, q_b_proj
  Linear(r, heads d), a weight-free norm), one key/value head (kv_proj Linear(h, d), kv_norm) read
  as both key and value, a sink logit per head, partial rotary; every block attends to a sliding
  window of `sliding_window` keys;
- a grouped low-rank output: o_a_proj maps each of `o_groups` groups of heads d / g channels to
  `o_lora_rank` (one block-diagonal weight), o_b_proj Linear(g o_lora_rank, h);
- on 'hca' blocks (heavily compressed attention, sec. 2.3.2) a compressor pools every `hca_rate`
  tokens into one extra key (kv_proj, gate_proj Linear(h, d), position_bias (rate, d), kv_norm);
- on 'csa' blocks (compressed sparse attention, sec. 2.3.1) a compressor over overlapping windows
  of 2 `csa_rate` tokens (kv_proj, gate_proj Linear(h, 2 d), position_bias (rate, 2 d), kv_norm)
  and a lightning indexer with its own compressor at index_head_dim (kv_proj, gate_proj
  Linear(h, 2 d^I), position_bias (rate, 2 d^I), kv_norm), index queries q_b_proj Linear(r, H^I
  d^I) from the query latent and weights_proj Linear(h, H^I): each query reads its top
  `index_topk` compressed keys.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec

Compressor = Literal["none", "csa", "hca"]


class CompressedAttentionSpec(Spec):
    """DeepSeek-V4's attention; `TransformerSpec.heads` query heads of `head_dim`, one kv head."""

    q_lora_rank: int = Field(gt=0)
    """r: the query latent (HF q_lora_rank)."""
    o_groups: int = Field(gt=0)
    """g: head groups of the grouped output projection (HF o_groups)."""
    o_lora_rank: int = Field(gt=0)
    """d_g: each group's output width (HF o_lora_rank)."""
    csa_rate: int = Field(4, gt=0)
    """m: tokens a CSA compressed key stands for (HF compress_rates['compressed_sparse_attention'])."""
    hca_rate: int = Field(128, gt=0)
    """m': tokens an HCA compressed key stands for (HF compress_rates['heavily_compressed_attention'])."""
    index_heads: int = Field(64, gt=0)
    """H^I (HF index_n_heads)."""
    index_head_dim: int = Field(128, gt=0)
    """d^I (HF index_head_dim)."""
    index_topk: int = Field(512, gt=0)
    """Compressed keys a CSA query reads (HF index_topk)."""
    compressors: list[Compressor] = Field(min_length=1)
    """Each block's compressor (HF layer_types: sliding_attention -> none,
    compressed_sparse_attention -> csa, heavily_compressed_attention -> hca)."""


def check_compressed(spec) -> None:
    """Raise ValueError naming the fields when compressed_attention contradicts the spec."""
    ca = spec.compressed_attention
    if ca is None:
        return
    if spec.mla is not None or spec.num_kv_heads != 1:
        raise ValueError(f"compressed_attention is shared-KV multi-query attention: kv_heads must be 1 "
                         f"(got {spec.num_kv_heads}) and mla unset")
    if len(ca.compressors) != spec.layers:
        raise ValueError(f"compressed_attention.compressors: {len(ca.compressors)} entries for {spec.layers} layers")
    if spec.q_width % ca.o_groups:
        raise ValueError(f"compressed_attention.o_groups ({ca.o_groups}) must divide heads x head_dim ({spec.q_width})")
    if set(spec.layer_types or ()) != {"sliding_attention"}:
        raise ValueError("compressed_attention: every block's layer type is sliding_attention (its window branch)")
