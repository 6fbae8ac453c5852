"""Relative-position and long-input attention options of encoders and encoder-decoders beyond T5's
first-block bias table (`ExtrasSpec.relative`), each the mechanism of one or more HF
implementations (transformers 5.24):

- DeBERTa's disentangled attention (He et al. 2021, arXiv 2006.03654, sec. 3.1 eq. 2-4; DeBERTa-v2/v3:
  modeling_deberta_v2.py `DisentangledSelfAttention`): a table of 2k relative-position embeddings
  for the whole encoder (`rel_embeddings`, with its LayerNorm when norm_rel_ebd), projected per
  block to position keys (content-to-position, c2p) and position queries (p2c) by the block's own
  query/key projections (share_att_key) or by projections of their own; DeBERTa-v2's ConvLayer
  after the first block; DeBERTa (v1)'s bias-free in_proj with separate q_bias / v_bias;
- a T5 bucket table (relative_buckets x heads) in every block (UMT5) or one for a whole encoder
  beside learned positions (MPNet `MPNetEncoder.relative_attention_bias`);
- encoder blocks of an encoder-decoder attending within `sliding_window` (LED's Longformer
  attention, LongT5's local attention) while the decoder attends to the full sequence, LED's
  separate query_global / key_global / value_global projections, and LongT5's transient-global
  tokens (Guo et al. 2022, arXiv 2112.07916, sec. 3.1.2: one summary token per `global_block`
  input tokens, its own bias table and a global_input_layer_norm in every encoder block).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec


class DisentangledSpec(Spec):
    """DeBERTa's relative-position terms (module docstring): sizes that change a count."""

    positions: int = Field(gt=0)
    """Rows of rel_embeddings: 2 x position_buckets, else 2 x max_relative_positions."""
    norm: bool = False
    """A LayerNorm over rel_embeddings (HF norm_rel_ebd 'layer_norm')."""
    c2p: bool = True
    """Content-to-position scores q_c . k_r (HF pos_att_type 'c2p')."""
    p2c: bool = True
    """Position-to-content scores k_c . q_r (HF pos_att_type 'p2c')."""
    projections: Literal["shared", "separate", "v1"] = "shared"
    """shared: the block's query_proj / key_proj project the positions (share_att_key); separate:
    pos_key_proj (c2p) and pos_query_proj (p2c), h x q_width with bias (DeBERTa-v2); v1: pos_proj
    (c2p, no bias) and pos_q_proj (p2c, with bias) (DeBERTa)."""
    span_capped: bool = False
    """The scored span is min(seq_len, positions / 2) each side (DeBERTa v1 att_span); else
    positions / 2 whatever the length (DeBERTa-v2 pos_ebd_size)."""
    conv_kernel: int = Field(0, ge=0)
    """DeBERTa-v2 ConvLayer after the first block: Conv1d(h, h, conv_kernel, groups) with bias and
    a LayerNorm (HF conv_kernel_size; 0: none)."""
    conv_groups: int = Field(1, gt=0)
    """Groups of that convolution (HF conv_groups)."""


class RelativeSpec(Spec):
    """The options of the module docstring; every default is the baseline (no change to a count)."""

    disentangled: DisentangledSpec | None = None
    """DeBERTa's disentangled attention."""
    qv_bias_only: bool = False
    """DeBERTa (v1): in_proj Linear(h, 3 q_width) without bias plus q_bias and v_bias vectors (use
    with qkv_bias false)."""
    bias_table: Literal["every_block", "encoder"] | None = None
    """every_block: a T5 bucket table (relative_buckets x heads) in every self-attention block (UMT5;
    with position 'relative', whose first-block tables count.blocks already holds); encoder: one
    table for the whole encoder beside learned positions (MPNet)."""
    encoder_sliding: bool = False
    """The encoder blocks of an encoder-decoder are sliding_attention over `sliding_window` keys
    (LED attention_window + 1, LongT5 3 x block_len); its decoder blocks attend to every position."""
    global_projections: bool = False
    """LED's encoder blocks also hold query_global, key_global and value_global (h x q_width with
    bias), run only for global tokens (none by default: not in the FLOPs)."""
    transient_global: int | None = Field(None, gt=0)
    """LongT5 transient-global: tokens per global summary (HF global_block_size); the first encoder
    block holds global_relative_attention_bias (relative_buckets x heads), every encoder block a
    global_input_layer_norm (h)."""


def relative_features(x: RelativeSpec | None) -> list[str]:
    """specs.features names of the options used (the executor and planner name them)."""
    if x is None:
        return []
    checks = {
        "extras.relative.disentangled": x.disentangled is not None,
        "extras.relative.qv_bias_only": x.qv_bias_only,
        "extras.relative.bias_table": x.bias_table is not None,
        "extras.relative.encoder_sliding": x.encoder_sliding,
        "extras.relative.global_projections": x.global_projections,
        "extras.relative.transient_global": x.transient_global is not None,
    }
    return [name for name, used in checks.items() if used]


def check_relative(spec) -> None:
    """Raise ValueError naming the fields when the options contradict the rest of the spec."""
    x = spec.extras.relative
    if x is None:
        return
    if x.bias_table == "every_block" and spec.position != "relative":
        raise ValueError("extras.relative.bias_table 'every_block' adds to T5's tables: position must be 'relative'")
    if x.bias_table == "encoder" and (spec.position == "relative" or spec.arch != "encoder"):
        raise ValueError("extras.relative.bias_table 'encoder' is one table beside the positions of an encoder "
                         f"(got position '{spec.position}', arch '{spec.arch}')")
    if x.encoder_sliding and spec.arch != "encoder_decoder":
        raise ValueError(f"extras.relative.encoder_sliding is for arch 'encoder_decoder' (got '{spec.arch}'; "
                         "an encoder's sliding blocks are layer_types)")
    if x.encoder_sliding and spec.sliding_window is None:
        raise ValueError("extras.relative.encoder_sliding needs sliding_window (the encoder's keys per query)")
    if x.transient_global and spec.position != "relative":
        raise ValueError("extras.relative.transient_global adds a T5 bias table: position must be 'relative'")
    d = x.disentangled
    if x.qv_bias_only and spec.qkv_bias:
        raise ValueError("extras.relative.qv_bias_only replaces the q/k/v biases: qkv_bias must be false")
    if d is not None and spec.hidden % d.conv_groups:
        raise ValueError(f"extras.relative.disentangled.conv_groups ({d.conv_groups}) must divide hidden "
                         f"({spec.hidden})")


def encoder_sliding(spec, index: int) -> bool:
    """Whether block `index` is an encoder block that attends within sliding_window (LED, LongT5)."""
    x = spec.extras.relative if spec.extras is not None else None
    return x is not None and x.encoder_sliding and index < spec.layers
