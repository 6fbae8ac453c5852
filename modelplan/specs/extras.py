"""Small general options of the block stack that change a count without a mixer of their own
(`TransformerSpec.extras`), each the mechanism of one or more HF implementations (transformers 5.24):

- factored embeddings (ALBERT / ELECTRA / RoFormer / RemBERT): the token, position and token-type
  tables and the embedding LayerNorm are `input_width` wide, a Linear(input_width, h) maps them to
  the model width (`embeddings_project`, `embedding_hidden_mapping_in`); the MLM head's transform
  maps h -> `head_width` and the decoder reads `head_width` features;
- extra rows of the learned position table (BioGPT's and OPT's offset 2) and of the token table
  (CPM-Ant's prompt tokens);
- a frozen sinusoidal table stored as a parameter (RoFormer's `embed_positions`, head_dim wide);
- tables concatenated with the token embedding and mapped back to h (RoCBert's pronunciation and
  shape embeddings, `map_inputs_layer`);
- learned scalars of the MLP activation (Apertus' xIELU alpha_p, alpha_n);
- norms inside a block (BitNet's attn_sub_norm before o_proj, ffn_sub_norm before down_proj), a
  norm on the MoE output (A.X-K1's post_mlp_layernorm), blocks without an input norm
  (ModernBERT-decoder's first block), an attention output bias on some blocks only
  (GPT-NeoX-Japanese's last block);
- bottleneck adapters after every block's MLP, one per language, one of them run per token (X-MOD);
- Transformer-XL relative attention (XLNet: a position projection, three bias vectors and a
  segment table per block; a mask embedding);
- DeBERTa's disentangled attention, extra T5 bias tables, LED / LongT5 encoder attention
  (`relative`: specs/relative_attention.py), ALBERT's cross-layer sharing (`weight_groups`:
  specs/layer_sharing.py), T5Gemma's own encoder token table and post-cross-attention norm, ESM's
  contact head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field, model_validator

from modelplan.specs.base import Spec
from modelplan.specs.conformer import ConformerSpec
from modelplan.specs.conv_relative import ConvRelativeSpec
from modelplan.specs.encoder_side import EncoderSideSpec
from modelplan.specs.relative_attention import RelativeSpec, check_relative, relative_features

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


class ConcatTable(Spec):
    """An extra token table whose rows are concatenated with the token embedding (RoCBert)."""

    rows: int = Field(gt=0)
    """Table rows (HF pronunciation_vocab_size / shape_vocab_size)."""
    width: int = Field(gt=0)
    """Table width (HF pronunciation_embed_dim / shape_embed_dim)."""
    used: bool = True
    """Concatenated in the forward (HF enable_pronunciation / enable_shape); an unused table still
    holds its parameters."""


class AdapterSpec(Spec):
    """Bottleneck adapters after each block's MLP (X-MOD `XmodAdapter`: dense1 Linear(h, b) with
    bias, activation, dense2 Linear(b, h) with bias), `copies` per block, one run per token."""

    copies: int = Field(gt=0)
    """Adapters per block (HF len(languages))."""
    bottleneck: int = Field(gt=0)
    """b (HF hidden_size // adapter_reduction_factor)."""
    norm: bool = False
    """A LayerNorm of its own before the adapters (HF adapter_layer_norm)."""


class ExtrasSpec(Spec):
    """Small options of the block stack; every default is the baseline (no change to a count)."""

    input_width: int | None = Field(None, gt=0)
    """Width of the token / position / token-type tables and the embedding norm, mapped to hidden
    by a Linear(input_width, hidden) (ELECTRA embedding_size, RemBERT input_embedding_size)."""
    input_proj_bias: bool = True
    """Bias on that projection (nn.Linear's default in every such HF model)."""
    head_width: int | None = Field(None, gt=0)
    """Output width of the MLM head's transform (dense h -> head_width, its norm over head_width)
    and input width of the decoder (ELECTRA's generator embedding_size, RemBERT
    output_embedding_size); None: the token-table width. Unused without mlm_transform (RemBERT's
    classifier heads)."""
    head_transform_bias: bool = True
    """Bias on the MLM transform's dense (ModernBERT-decoder classifier_bias: false)."""
    head_untied: bool = False
    """The decoder is its own matrix whatever tie_word_embeddings says (RemBERT's heads declare no
    tied weights)."""
    dense_head_per_token: bool = False
    """The pooler-sized dense (h x h + bias) runs on every token, not the first one (ELECTRA's
    discriminator_predictions.dense before dense_prediction)."""
    token_extra_rows: int = Field(0, ge=0)
    """Rows of the token table beyond vocab that the head does not predict (CPM-Ant's
    prompt_types x prompt_length prompt tokens)."""
    position_offset: int = Field(0, ge=0)
    """Rows of the learned position table beyond max_positions (BioGPT / OPT: 2)."""
    frozen_position_width: int | None = Field(None, gt=0)
    """A max_positions x width sinusoidal table held as a parameter with requires_grad false
    (RoFormer embed_positions, width head_dim): in the total, not trainable, no compute."""
    concat_tables: list[ConcatTable] = Field(default_factory=list)
    """Tables concatenated with the token embedding (RoCBert pronunciation_embed, shape_embed)."""
    concat_proj: bool = False
    """A Linear(hidden + used table widths, hidden) with bias maps the concatenation back to hidden
    (RoCBert map_inputs_layer, concat_input)."""
    sub_norms: bool = False
    """A norm over the attention output before the output projection (q_width) and one over the
    MLP's inner activation before its down projection (ffn_hidden) in every block (BitNet b1.58,
    Ma et al. 2024 / transformers BitNetAttention.attn_sub_norm, BitNetMLP.ffn_sub_norm)."""
    attention_sub_norm: bool = True
    """With sub_norms: the attention's sub-norm too; false keeps only the MLP's (Kosmos-2.5's
    Kosmos2_5TextFFN.ffn_layernorm without an inner attention norm)."""
    act_params: int = Field(0, ge=0)
    """Learned scalars of the activation in every dense MLP (Apertus' xIELU, transformers
    XIELUActivation: alpha_p and alpha_n, 2); no compute of their own."""
    moe_output_norm: bool = False
    """A norm (h) on the output of every MoE MLP (A.X-K1 AXK1MoE.post_mlp_layernorm)."""
    no_input_norm_blocks: list[int] = Field(default_factory=list)
    """Blocks (0-based) whose attention input norm is an identity (ModernBERT-decoder: block 0)."""
    out_bias_blocks: list[int] = Field(default_factory=list)
    """Blocks (0-based) whose attention output projection carries a bias although attn_out_bias is
    false (GPT-NeoX-Japanese: dense_bias on the last block, added with the residual)."""
    adapter: AdapterSpec | None = None
    """Per-block bottleneck adapters (X-MOD)."""
    xl_relative: Literal["bi", "uni"] | None = None
    """Transformer-XL relative attention (Dai et al. 2019, sec. 3.3; XLNet `XLNetRelativeAttention`):
    per block a position projection r (h x q_width) of sinusoidal relative encodings, the content /
    position / segment biases r_w, r_r, r_s and a segment table seg_embed (2 rows), each q_width;
    the scores add q . r over 2 s relative positions ('bi') or s + 1 ('uni'). Use with position
    'none' and bias-free q/k/v/o."""
    mask_embedding: bool = False
    """One learned h-wide vector for masked positions (XLNet mask_emb)."""
    conv_relative: ConvRelativeSpec | None = None
    """Inkling's short convolutions and relative logits (`specs/conv_relative.py`)."""
    ada_norm_rank: int | None = Field(None, gt=0)
    """A time-conditioned scale on every block's MLP input: a bias-free Linear(h, r), GELU, Linear(r, h)
    of the sequence's conditioning vector, x * (1 + scale) (VoxtralRealtimeTextAdaRmsNorm, r 32):
    2 h r parameters a block, run once a sequence."""
    conformer: ConformerSpec | None = None
    """Conformer blocks: macaron feed-forward, convolution module, block norm (`specs/conformer.py`)."""
    encoder_token_table: bool = False
    """An encoder-decoder's encoder has a token table of its own beside the decoder's, which the head
    ties (T5Gemma: encoder.embed_tokens, decoder.embed_tokens)."""
    encoder_vocab: int | None = Field(None, gt=0)
    """Rows of that encoder token table when the source vocabulary differs from `vocab` (FSMT
    src_vocab_size beside tgt_vocab_size); None: vocab."""
    cross_post_norm: bool = False
    """A norm after each decoder block's cross-attention too (T5Gemma post_cross_attn_layernorm)."""
    contact_head: bool = False
    """ESM's contact-prediction regression, Linear(layers x heads, 1) with bias, held by EsmModel in
    every head class and not run by the masked-LM loss: parameters only."""
    weight_groups: int | None = Field(None, gt=0)
    """Distinct block weight sets the encoder's blocks share in order (ALBERT num_hidden_groups:
    `specs/layer_sharing.py`); None: every block its own."""
    relative: RelativeSpec | None = None
    """DeBERTa's disentangled attention, extra T5 bias tables, LED / LongT5 encoder attention
    (`specs/relative_attention.py`)."""
    side: EncoderSideSpec | None = None
    """Tables, linears and norms beside the block stack (LayoutLM, MarkupLM, GTE, ConvBERT, ...:
    `specs/encoder_side.py`)."""

    @model_validator(mode="after")
    def _check(self) -> "ExtrasSpec":
        for name in ("no_input_norm_blocks", "out_bias_blocks"):
            blocks = getattr(self, name)
            if any(i < 0 for i in blocks) or len(set(blocks)) != len(blocks):
                raise ValueError(f"extras.{name} ({blocks}) must list distinct block indices >= 0")
        if self.concat_proj and not self.concat_tables:
            raise ValueError("extras.concat_proj needs concat_tables (the tables it maps back to hidden)")
        return self


def table_width(spec: "TransformerSpec") -> int:
    """Width of the position / token-type tables and the embedding norm (ELECTRA embedding_size)."""
    x = spec.extras
    return x.input_width if x is not None and x.input_width is not None else spec.hidden

def token_width(spec: "TransformerSpec") -> int:
    """Width of the token table: the factored width, else embed_dim (OPT), else hidden; 0 for
    an image / audio encoder (`inputs`: no token table)."""
    x = spec.extras
    if spec.inputs is not None:
        return 0
    return x.input_width if x is not None and x.input_width is not None else spec.embed_dim

def transform_width(spec: "TransformerSpec") -> int:
    """Output width of the MLM head's dense (BERT: h; ELECTRA generator / RoFormer: embedding_size;
    RemBERT: output_embedding_size)."""
    x = spec.extras
    if x is not None and x.head_width is not None:
        return x.head_width
    return token_width(spec) if x is not None and x.input_width is not None else spec.hidden

def decoder_width(spec: "TransformerSpec") -> int:
    """Input width of the vocabulary projection: the MLM transform's output, else embed_dim."""
    return transform_width(spec) if spec.mlm_transform else spec.embed_dim

def per_token_dense(spec: "TransformerSpec") -> bool:
    """The pooler's dense runs on every token (extras.dense_head_per_token)."""
    return spec.extras is not None and spec.extras.dense_head_per_token


def head_tied(spec: "TransformerSpec") -> bool:
    """The decoder reuses the token table (tie_word_embeddings, unless the class never ties)."""
    return spec.tied_embeddings and not (spec.extras is not None and spec.extras.head_untied)

def extras_features(spec: "TransformerSpec") -> list[str]:
    """specs.features names of the options `spec` uses (the executor and planner name them)."""
    x = spec.extras
    if x is None:
        return []
    checks = {
        "extras.input_width": x.input_width is not None, "extras.head_width": x.head_width is not None,
        "extras.head_transform_bias=false": not x.head_transform_bias, "extras.head_untied": x.head_untied,
        "extras.dense_head_per_token": x.dense_head_per_token,
        "extras.position_offset": x.position_offset > 0, "extras.token_extra_rows": x.token_extra_rows > 0,
        "extras.frozen_position_width": x.frozen_position_width is not None,
        "extras.concat_tables": bool(x.concat_tables), "extras.sub_norms": x.sub_norms,
        "extras.moe_output_norm": x.moe_output_norm, "extras.act_params": x.act_params > 0,
        "extras.no_input_norm_blocks": bool(x.no_input_norm_blocks),
        "extras.out_bias_blocks": bool(x.out_bias_blocks), "extras.adapter": x.adapter is not None,
        "extras.xl_relative": x.xl_relative is not None, "extras.mask_embedding": x.mask_embedding,
        "extras.conv_relative": x.conv_relative is not None, "extras.conformer": x.conformer is not None,
        "extras.ada_norm_rank": x.ada_norm_rank is not None,
        "extras.weight_groups": x.weight_groups is not None, "extras.encoder_token_table": x.encoder_token_table,
        "extras.cross_post_norm": x.cross_post_norm, "extras.contact_head": x.contact_head,
        "extras.side": x.side is not None,
    }
    conformer = [f"extras.conformer.relative={x.conformer.relative}"] \
        if x.conformer is not None and x.conformer.relative != "none" else []
    return [name for name, used in checks.items() if used] + relative_features(x.relative) + conformer

def check_extras(spec: "TransformerSpec") -> None:
    """Raise ValueError naming the fields when the options contradict the rest of the spec."""
    x = spec.extras
    if x is None:
        return
    if x.input_width is not None and spec.embedding_dim is not None:
        raise ValueError("extras.input_width and embedding_dim both set (one embedding width, one projection)")
    if x.dense_head_per_token and not spec.pooler:
        raise ValueError("extras.dense_head_per_token needs pooler (it is the pooler-sized dense)")
    if spec.lm_head and head_tied(spec) and decoder_width(spec) != token_width(spec):
        raise ValueError(f"tied_embeddings: the decoder reads {decoder_width(spec)} features but the token "
                         f"table is {token_width(spec)} wide (set extras.head_untied)")
    if x.xl_relative is not None and (spec.mla is not None or spec.position != "none"):
        raise ValueError(f"extras.xl_relative is the position encoding: position must be 'none' (got '{spec.position}')"
                         " and attention q/k/v (no mla)")
    if x.sub_norms and spec.moe is not None:
        raise ValueError("extras.sub_norms with moe: a sub-norm inside routed experts is not modelled")
    for name in ("no_input_norm_blocks", "out_bias_blocks"):
        late = [i for i in getattr(x, name) if i >= spec.num_blocks]
        if late:
            raise ValueError(f"extras.{name}: block {late[0]} >= the model's {spec.num_blocks} blocks")
    if x.no_input_norm_blocks and spec.num_norms_per_layer < 2:
        raise ValueError("extras.no_input_norm_blocks needs blocks of two or more norms")
    check_relative(spec)
    if x.encoder_vocab is not None and not x.encoder_token_table:
        raise ValueError("extras.encoder_vocab sizes the encoder_token_table: set extras.encoder_token_table too")
    if (x.encoder_token_table or x.cross_post_norm) and spec.arch != "encoder_decoder":
        raise ValueError(f"extras.encoder_token_table / cross_post_norm are for arch 'encoder_decoder' (got '{spec.arch}')")
    if x.weight_groups is not None and (spec.arch != "encoder" or x.weight_groups > spec.layers):
        raise ValueError(f"extras.weight_groups ({x.weight_groups}) is for an encoder of at least as many layers "
                         f"(got arch '{spec.arch}', layers {spec.layers})")

