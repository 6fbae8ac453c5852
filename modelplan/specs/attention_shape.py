"""Attention sizes that differ by layer type (`TransformerSpec.attention_by_type`): MiMo-V2-Flash's
sliding blocks hold twice the kv heads of its full blocks and a sink logit per head, which its full
blocks lack (transformers 5.24 MiMoV2FlashAttention); Gemma 4's global blocks have wider heads
(global_head_dim), with attention_k_eq_v their own kv-head count and no v_proj (Gemma4TextAttention).

`for_block(spec, block)` is the spec one block is counted, priced and sharded with: the model's
spec with its layer type's sizes (and a K/V-sharing block's own MLP width) in place, so every
per-block formula stays one formula.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from modelplan.specs.base import Spec
from modelplan.specs.blocks import MLASpec

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec

AttentionLayerType = Literal["full_attention", "sliding_attention"]


class LayerTypeAttention(Spec):
    """Sizes of the attention blocks of one layer type; None keeps the model's value."""

    heads: int | None = Field(None, gt=0)
    """Query heads of these blocks."""
    kv_heads: int | None = Field(None, gt=0)
    """Key/value heads of these blocks (MiMo-V2-Flash sliding blocks: 2 x num_key_value_heads)."""
    head_dim: int | None = Field(None, gt=0)
    """Query/key head width of these blocks (Gemma 4 global blocks: global_head_dim)."""
    v_head_dim: int | None = Field(None, gt=0)
    """Value head width of these blocks."""
    sinks: bool | None = None
    """A learned sink logit per head in these blocks' softmax (MiMo-V2-Flash: sliding blocks only)."""
    value_is_key: bool | None = None
    """The keys double as the values: no v_proj (Gemma 4 attention_k_eq_v global blocks)."""
    mla: MLASpec | None = None
    """The latent attention of these blocks where the model's is MLA (dots.3's sliding blocks:
    their own ranks and head widths, no indexer); with `heads` the only other override."""


_FIELDS = {"heads": "heads", "kv_heads": "kv_heads", "head_dim": "head_dim", "v_head_dim": "v_head_dim",
           "sinks": "attention_sinks", "value_is_key": "value_is_key", "mla": "mla"}


def for_mixer(spec: "TransformerSpec", mixer: str) -> "TransformerSpec":
    """The spec a block of `mixer` is sized with (`spec` itself without an override for it)."""
    shapes = spec.attention_by_type
    if not shapes or mixer not in shapes:
        return spec
    shape = shapes[mixer]
    update = {field: getattr(shape, key) for key, field in _FIELDS.items() if getattr(shape, key) is not None}
    return spec.model_copy(update={**update, "attention_by_type": None})


def for_block(spec: "TransformerSpec", block) -> "TransformerSpec":
    """`for_mixer` of the block's mixer, with the MLP width of a K/V-sharing block where it has its
    own (Gemma 4 use_double_wide_mlp: 2 x intermediate_size, Gemma4TextMLP)."""
    spec = for_mixer(spec, block.mixer)
    if getattr(block, "indexer_reused", False):  # HY-V4 'shared' indexer blocks (count/mla_extras.py)
        indexer = spec.mla.indexer.model_copy(update={"reused": True})
        spec = spec.model_copy(update={"mla": spec.mla.model_copy(update={"indexer": indexer})})
    if getattr(block, "mla_nope", False):  # Mistral Large 4's NoPE blocks: the rope dims join the nope ones
        mla = spec.mla
        spec = spec.model_copy(update={"mla": mla.model_copy(update={
            "qk_nope_head_dim": mla.qk_nope_head_dim + mla.qk_rope_head_dim, "qk_rope_head_dim": 0})})
    if getattr(block, "mla_kv_reused", False):  # Mistral Large 4: an earlier block's latent, no kv_a
        spec = spec.model_copy(update={"mla": spec.mla.model_copy(update={"kv_reused": True})})
    if block.kv_shared and spec.kv_shared_ffn_hidden is not None:
        spec = spec.model_copy(update={"ffn_hidden": spec.kv_shared_ffn_hidden})
    return spec


def check_shapes(spec: "TransformerSpec") -> None:
    """Each layer type's heads divisible by its kv heads, and no override on MLA blocks."""
    for mixer, shape in (spec.attention_by_type or {}).items():
        if spec.mla is not None:
            others = [key for key in _FIELDS if key not in ("heads", "mla") and getattr(shape, key) is not None]
            if others:
                raise ValueError(f"attention_by_type.{mixer}: {', '.join(others)} do not apply to mla (set its mla)")
            continue
        if shape.mla is not None:
            raise ValueError(f"attention_by_type.{mixer}.mla needs an mla model")
        heads = shape.heads or spec.heads
        kv = shape.kv_heads or spec.num_kv_heads
        if heads % kv:
            raise ValueError(f"attention_by_type.{mixer}: kv_heads ({kv}) must divide heads ({heads})")
