"""Exact parameters and forward FLOPs of the relative-position and long-input attention options
(`modelplan.specs.relative_attention`), keyed as count.params / count.flops key them:

    embedding/relative/{table, norm, bias_table, conv}          encoder-wide (DeBERTa, MPNet)
    attention/relative/{proj, qv_bias, bias_table, global_proj, global_bias, global_norm}   in a block

FLOPs count GEMMs only (count.flops' convention): lookups, bias adds, norms and gathers are free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.relative_attention import DisentangledSpec
    from modelplan.specs.transformer import TransformerSpec

_ATTENTION = ("full_attention", "sliding_attention", "chunked_attention")


def _rel(spec: "TransformerSpec"):
    return spec.extras.relative if spec.extras is not None else None


def _norm(spec: "TransformerSpec", width: int) -> int:
    """One norm of the model's kind over `width` (count.blocks.norm_params)."""
    return width * (2 if spec.norm_bias else 1) if spec.norm_affine else 0


def _projected(d: "DisentangledSpec") -> int:
    """Relative-position projections a block runs: one for c2p (position keys), one for p2c."""
    return int(d.c2p) + int(d.p2c)


def relative_embedding_params(spec: "TransformerSpec") -> dict[str, int]:
    """Encoder-wide parameters, keyed relative to `embedding/`."""
    x, h, out = _rel(spec), spec.hidden, {}
    if x is None:
        return out
    d = x.disentangled
    if d is not None:
        out["relative/table"] = d.positions * h  # DebertaV2Encoder.rel_embeddings: Embedding(2k, h)
        out["relative/norm"] = _norm(spec, h) if d.norm else 0  # DebertaV2Encoder.LayerNorm (norm_rel_ebd)
        if d.conv_kernel:  # ConvLayer: Conv1d(h, h, k, groups) weight + bias, its LayerNorm(h)
            out["relative/conv"] = h * (h // d.conv_groups) * d.conv_kernel + h + _norm(spec, h)
    if x.bias_table == "encoder":  # MPNetEncoder.relative_attention_bias: Embedding(buckets, heads)
        out["relative/bias_table"] = spec.relative_buckets * spec.heads
    return out


def relative_block_params(spec: "TransformerSpec", block: "Block") -> dict[str, int]:
    """One block's parameters, keyed relative to the block."""
    x, h, out = _rel(spec), spec.hidden, {}
    if x is None or block.mixer not in _ATTENTION:
        return out
    q, kv = spec.q_width, spec.kv_width
    d = x.disentangled
    if d is not None:
        if d.projections == "separate":  # DisentangledSelfAttention.pos_key_proj / pos_query_proj, biased
            out["attention/relative/proj"] = _projected(d) * (h * q + q)
        elif d.projections == "v1":  # Deberta pos_proj (no bias) for c2p, pos_q_proj (bias) for p2c
            out["attention/relative/proj"] = (h * q if d.c2p else 0) + (h * q + q if d.p2c else 0)
    out["attention/relative/qv_bias"] = 2 * q if x.qv_bias_only else 0  # Deberta q_bias, v_bias
    if x.bias_table == "every_block" and not block.relative_bias:  # UMT5Attention.relative_attention_bias
        out["attention/relative/bias_table"] = spec.relative_buckets * spec.heads
    if not block.cross:  # encoder blocks of the encoder-decoder
        if x.global_projections:  # LEDEncoderSelfAttention.query_global / key_global / value_global
            out["attention/relative/global_proj"] = h * (q + 2 * kv) + q + 2 * kv
        if x.transient_global:  # LongT5TransientGlobalAttention
            out["attention/relative/global_norm"] = _norm(spec, h)  # global_input_layer_norm
            # global_relative_attention_bias beside relative_attention_bias, first block only
            out["attention/relative/global_bias"] = spec.relative_buckets * spec.heads if block.relative_bias else 0
    return out


def scored_positions(d: "DisentangledSpec", seq_len: int) -> int:
    """Relative positions each query is scored against: 2 att_span (DeBERTa-v2 att_span =
    pos_ebd_size; v1 att_span = min(seq_len, max_relative_positions))."""
    span = d.positions // 2
    return 2 * (min(seq_len, span) if d.span_capped else span)


def relative_embedding_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """Encoder-wide forward FLOPs: DeBERTa-v2's ConvLayer, (t, h k / groups) @ (h k / groups, h)."""
    x = _rel(spec)
    d = x.disentangled if x is not None else None
    if d is None or not d.conv_kernel:
        return {}
    return {"relative/conv": 2 * tokens * spec.hidden * (spec.hidden // d.conv_groups) * d.conv_kernel}


def relative_block_flops(spec: "TransformerSpec", block: "Block", tokens: int, seq_len: int) -> dict[str, int]:
    """One block's forward FLOPs (He et al. 2021 eq. 4; Guo et al. 2022 sec. 3.1.2):

    DeBERTa: the P relative embeddings through each position projection, (P, h) @ (h, q) once a
    sequence (transformers runs it once a forward call, so this is exact at micro-batch 1 and an
    upper bound above), and the c2p / p2c scores, per head (t, d) @ (d, P); LongT5 transient-global:
    the one-hot aggregation of each block of `g` tokens into s / g summaries, (s/g, s) @ (s, h) a
    sequence, their k / v projections and every query's scores over them (QK^T and AV)."""
    x, out = _rel(spec), {}
    if x is None or block.mixer not in _ATTENTION:
        return out
    sequences = tokens // seq_len
    d = x.disentangled
    if d is not None:
        positions = scored_positions(d, seq_len)
        out["attention/relative/proj"] = _projected(d) * 2 * sequences * positions * spec.hidden * spec.q_width
        out["attention/relative/score"] = _projected(d) * 2 * tokens * positions * spec.q_width
    if x.transient_global and not block.cross:
        summaries = seq_len // x.transient_global  # LongT5: num_globals = seq_len // global_block_size
        out["attention/relative/global_aggregate"] = 2 * tokens * summaries * spec.hidden
        out["attention/relative/global_kv"] = 2 * sequences * summaries * spec.hidden * 2 * spec.kv_width
        out["attention/relative/global_score"] = 2 * tokens * summaries * (spec.q_width + spec.o_width)
    return out
