"""Exact parameters, forward FLOPs and kept activation bytes of the block stack's small options
(`modelplan.specs.extras.ExtrasSpec`), keyed as count.params keys them:

    embedding/{proj_in, token_extra, mask, frozen_position, concat/tables, concat/proj}   input side
    attention/{sub_norm, out_bias, relative}, mlp/{sub_norm, output_norm}, adapter/{layers, norm}   in a block

The widths they change (factored tables, the MLM transform's output, the decoder's input) are
read by count.params and count.flops through `table_width`, `token_width`, `transform_width` and
`decoder_width`. FLOPs count only GEMMs (the convention count.flops states): norms and bias adds
are free, a frozen table is a lookup.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.conformer import conformer_flops, conformer_kept_elements, conformer_params
from modelplan.count.encoder_inputs import input_block_flops, input_block_params
from modelplan.count.encoder_side import side_flops, side_kept_elements, side_params
from modelplan.count.conv_relative import conv_relative_flops, conv_relative_kept_elements, conv_relative_params
from modelplan.count.relative_attention import (relative_block_flops, relative_block_params,
                                                relative_embedding_flops, relative_embedding_params)
from modelplan.count.seq2seq import position_rows
from modelplan.specs.extras import table_width, token_width

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.transformer import TransformerSpec

_ATTENTION = ("full_attention", "sliding_attention", "chunked_attention")


def _norm(spec: "TransformerSpec", width: int) -> int:
    """One norm of the model's kind over `width` (count.blocks.norm_params)."""
    return width * (2 if spec.norm_bias else 1) if spec.norm_affine else 0


def position_table_params(spec: "TransformerSpec") -> int:
    """Every learned position-table parameter: count.seq2seq's rows per stack (BART's + 2) plus
    extras.position_offset rows in each table (BioGPT / OPT's + 2), each row table_width wide
    (ELECTRA embedding_size, else h); count.seq2seq.position_params is the h-wide baseline."""
    offset = spec.extras.position_offset if spec.extras is not None else 0
    return sum(rows + offset for rows in position_rows(spec) if rows) * table_width(spec)


def _concat_in(spec: "TransformerSpec") -> int:
    """Input width of RoCBert's map_inputs_layer: h plus every used table."""
    return spec.hidden + sum(t.width for t in spec.extras.concat_tables if t.used)


def embedding_extra_params(spec: "TransformerSpec") -> dict[str, int]:
    """Input-side parameters, keyed relative to `embedding/`."""
    x, h, out = spec.extras, spec.hidden, {}
    if x is None:
        return out
    if x.input_width is not None:  # ELECTRA embeddings_project / RemBERT embedding_hidden_mapping_in
        out["proj_in"] = x.input_width * h + (h if x.input_proj_bias else 0)
    out["token_extra"] = x.token_extra_rows * token_width(spec)  # CpmAntModel.input_embedding's prompt rows
    out["mask"] = h if x.mask_embedding else 0  # XLNetModel.mask_emb: (1, 1, h)
    if x.frozen_position_width is not None:  # RoFormerSinusoidalPositionalEmbedding(max_pos, head_dim)
        out["frozen_position"] = spec.max_positions * x.frozen_position_width
    out["concat/tables"] = sum(t.rows * t.width for t in x.concat_tables)  # nn.Embedding(rows, width) each
    if x.concat_proj:  # RoCBert map_inputs_layer: Linear(h + widths, h) with bias
        out["concat/proj"] = _concat_in(spec) * h + h
    rows = x.encoder_vocab or spec.vocab  # FSMT: src_vocab_size rows
    out["encoder_token"] = rows * token_width(spec) if x.encoder_token_table else 0  # T5Gemma encoder.embed_tokens
    out["contact_head"] = spec.layers * spec.heads + 1 if x.contact_head else 0  # EsmContactPredictionHead.regression
    out.update(relative_embedding_params(spec))  # DeBERTa's rel_embeddings, MPNet's table (count/relative_attention.py)
    out.update(side_params(spec, "embedding"))  # LayoutLM's 2-D tables, MarkupLM's XPath MLP (count/encoder_side.py)
    return out


def frozen_params(spec: "TransformerSpec") -> int:
    """Parameters with requires_grad false (RoFormer's sinusoidal table)."""
    x = spec.extras
    return spec.max_positions * x.frozen_position_width if x is not None and x.frozen_position_width else 0


def block_extra_params(spec: "TransformerSpec", block: "Block") -> dict[str, int]:
    """One block's extra parameters, keyed relative to the block (WavLM's gate: count.encoder_inputs)."""
    x, h, out = spec.extras, spec.hidden, input_block_params(spec)
    if x is None:
        return out
    attention = block.mixer in _ATTENTION and spec.mla is None
    if x.sub_norms and x.attention_sub_norm and attention:  # BitNetAttention.attn_sub_norm: RMSNorm over the attention output
        out["attention/sub_norm"] = _norm(spec, spec.q_width)
    if block.out_bias and not spec.attn_out_bias:  # GPTNeoXJapaneseAttention.dense_bias: (h,)
        out["attention/out_bias"] = h
    if x.sub_norms and block.mlp and not block.moe:  # BitNetMLP.ffn_sub_norm: RMSNorm(intermediate_size)
        out["mlp/sub_norm"] = _norm(spec, spec.ffn_hidden)
    if x.moe_output_norm and block.moe:  # AXK1MoE.post_mlp_layernorm: RMSNorm(h)
        out["mlp/output_norm"] = _norm(spec, h)
    if x.act_params and block.mlp and not block.moe:  # XIELUActivation.alpha_p, alpha_n: (1,) each
        out["mlp/act"] = x.act_params
    if x.xl_relative is not None and attention:  # XLNetRelativeAttention.r (h, n, d), r_w/r_r/r_s_bias, seg_embed
        out["attention/relative"] = spec.hidden * spec.q_width + 5 * spec.q_width
    a = x.adapter
    if a is not None:  # XmodOutput.adapter_modules: per language Linear(h, b) + Linear(b, h), biases
        out["adapter/layers"] = a.copies * (2 * h * a.bottleneck + a.bottleneck + h)
        out["adapter/norm"] = _norm(spec, h) if a.norm else 0  # adapter_layer_norm
    if x.conv_relative is not None:  # Inkling (count/conv_relative.py)
        out.update(conv_relative_params(spec, block))
    if x.conformer is not None:  # macaron FFN, conv module, block norm (count/conformer.py)
        out.update(conformer_params(spec, block))
    if x.ada_norm_rank is not None and block.mlp:  # VoxtralRealtimeTextAdaRmsNorm linear1 (h, r), linear2 (r, h)
        out["mlp/ada_norm"] = 2 * h * x.ada_norm_rank
    if x.cross_post_norm and block.cross:  # T5GemmaDecoderLayer.post_cross_attn_layernorm
        out["cross_attention/post_norm"] = _norm(spec, h)
    out.update(relative_block_params(spec, block))  # DeBERTa, UMT5, LED, LongT5 (count/relative_attention.py)
    out.update(side_params(spec, "block"))  # GTE's down bias, ConvBERT's conv heads (count/encoder_side.py)
    if not block.cross:  # an encoder-decoder's encoder blocks only (PegasusX)
        out.update(side_params(spec, "encoder_block"))
    if block.cross or spec.arch == "decoder":  # ProphetNet's decoder blocks
        out.update(side_params(spec, "decoder_block"))
    return out


def embedding_extra_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Input-side forward FLOPs, keyed relative to `embedding/` (lookups free)."""
    x, h, out = spec.extras, spec.hidden, {}
    if x is None:
        return out
    if x.input_width is not None:
        out["proj_in"] = 2 * tokens * x.input_width * h  # (t, E) @ (E, h)
    if x.concat_proj:
        out["concat/proj"] = 2 * tokens * _concat_in(spec) * h  # (t, h + widths) @ (h + widths, h)
    out.update(relative_embedding_flops(spec, tokens))  # DeBERTa-v2's ConvLayer
    out.update(side_flops(spec, "embedding", tokens, 0))  # per token only: MarkupLM's XPath MLP (count/encoder_side.py)
    return out


def relative_positions(spec: "TransformerSpec", seq_len: int) -> int:
    """Relative positions a Transformer-XL query is scored against (XLNetModel.relative_positional_encoding
    without memory: arange(klen, -qlen, -1) for 'bi', arange(klen, -1, -1) for 'uni')."""
    return 2 * seq_len if spec.extras.xl_relative == "bi" else seq_len + 1


def block_extra_flops(spec: "TransformerSpec", block: "Block", tokens: int, seq_len: int) -> dict[str, int]:
    """One block's extra forward FLOPs: each token runs one adapter, (t, h) @ (h, b) and back;
    Transformer-XL's position projection (P b, h) @ (h, q) over the P relative positions of each of
    the b sequences and the position scores (q + r_r) . r, (t, d) @ (d, P) per head (the segment
    term, only with token types, is not counted)."""
    x, out = spec.extras, input_block_flops(spec, tokens)  # WavLM's gate (count.encoder_inputs)
    if x is None:
        return out
    if x.adapter is not None:
        out["adapter/layers"] = 2 * tokens * 2 * spec.hidden * x.adapter.bottleneck
    if x.xl_relative is not None and block.mixer in _ATTENTION:
        positions = relative_positions(spec, seq_len)
        out["attention/relative_proj"] = 2 * (tokens // seq_len) * positions * spec.hidden * spec.q_width
        out["attention/relative_score"] = 2 * tokens * positions * spec.q_width
    if x.conv_relative is not None:  # Inkling (count/conv_relative.py)
        out.update(conv_relative_flops(spec, block, tokens))
    if x.conformer is not None:  # macaron FFN, conv module, relative positions (count/conformer.py)
        out.update(conformer_flops(spec, block, tokens, seq_len))
    if x.ada_norm_rank is not None and block.mlp:  # one conditioning vector a sequence: (1, h) @ (h, r) and back
        out["mlp/ada_norm"] = 2 * (tokens // seq_len) * 2 * spec.hidden * x.ada_norm_rank
    out.update(relative_block_flops(spec, block, tokens, seq_len))  # DeBERTa c2p / p2c, LongT5 globals
    out.update(side_flops(spec, "block", tokens, seq_len))  # ConvBERT's conv heads, LiLT's layout stream
    if not block.cross:
        out.update(side_flops(spec, "encoder_block", tokens, seq_len))
    if block.cross or spec.arch == "decoder":
        out.update(side_flops(spec, "decoder_block", tokens, seq_len))
    return out


def block_extra_kept_bytes(spec: "TransformerSpec", block: "Block", d: int) -> int:
    """Bytes per token these options keep for backward (16-bit values of `d` bytes, eager autograd):
    each sub-norm's input (q_width, ffn_hidden), the MoE output norm's input (h), the adapter's
    input (h, plus its norm's input), its bottleneck output and activation (2 b). Not split by tp."""
    x, h, out = spec.extras, spec.hidden, 0
    if x is None:
        return 0
    if x.sub_norms:
        out += (spec.q_width if block.mixer in _ATTENTION and x.attention_sub_norm else 0) \
            + (spec.ffn_hidden if block.mlp and not block.moe else 0)
    if x.moe_output_norm and block.moe:
        out += h
    if x.adapter is not None:
        out += h * (2 if x.adapter.norm else 1) + 2 * x.adapter.bottleneck
    if x.xl_relative is not None and block.mixer in _ATTENTION:
        out += 2 * spec.q_width  # q + r_w and q + r_r (the s x P position scores: not counted)
    if x.conv_relative is not None:  # Inkling (count/conv_relative.py)
        out += conv_relative_kept_elements(spec, block)
    out += side_kept_elements(spec)  # the side linears' inputs (count/encoder_side.py)
    if x.conformer is not None:  # (count/conformer.py)
        out += conformer_kept_elements(spec, block)
    return d * out

