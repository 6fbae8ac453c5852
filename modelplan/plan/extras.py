"""The planner's side of the block stack's small options (`specs/extras.py`): their shards in
`plan/shard.py` and their kernels in `plan/kernels.py`, on one tensor-parallel rank.

Layout (no engine splits these, so none is split here): every extra parameter is replicated over
tp, its gradient a partial sum over tp under sequence parallelism (like the block's norms:
Korthikanti et al. 2022, sec. 4.2.2); X-MOD's adapter GEMMs run whole on every tp rank over the
rank's tokens; BitNet's sub-norms run over the local heads' output and the local MLP columns
(the whole-width statistic is one more reduction, not priced); the MoE output norm runs over the
block's hidden values; an MLM transform to width t is a replicated (tokens, t, h) GEMM before the
vocab-parallel logits, which read t features. The input-side projections (ELECTRA
embeddings_project, RoCBert map_inputs_layer) and XLNet's relative-position projection and scores
are counted in the shards but not priced as kernels (`UNPRICED`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.blocks import norm_params
from modelplan.count.extras import block_extra_params, embedding_extra_params, position_table_params
from modelplan.count.seq2seq import embedding_norms, position_params
from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.extras import decoder_width, head_tied, table_width, token_width, transform_width

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.specs.transformer import TransformerSpec

UNPRICED: frozenset[str] = frozenset({"extras.input_width", "extras.concat_tables", "extras.dense_head_per_token",
                                      "extras.xl_relative", "extras.side", "extras.conformer.relative=xl",
                                      "extras.conformer.relative=key"})
"""extras features whose compute the planner leaves out (noted as priced as baseline blocks)."""

PRICED_EXTRAS: frozenset[str] = frozenset({
    "extras.head_width", "extras.head_transform_bias=false", "extras.head_untied", "extras.position_offset",
    "extras.token_extra_rows", "extras.mask_embedding",
    "extras.frozen_position_width", "extras.sub_norms", "extras.moe_output_norm", "extras.no_input_norm_blocks",
    "extras.out_bias_blocks", "extras.adapter", "mlm_transform", "extras.relative.bias_table",
    "extras.relative.encoder_sliding", "extras.relative.global_projections", "extras.relative.qv_bias_only",
    "extras.relative.disentangled", "extras.relative.transient_global",  # their GEMMs: plan/relative_kernels.py
    "extras.weight_groups", "extras.cross_post_norm", "extras.encoder_token_table",
    "extras.contact_head", "extras.conformer",  # Conformer: conformer_kernels
    "extras.ada_norm_rank",  # shards only: its GEMMs run once a sequence
    "extras.act_params",  # shards only: two scalars, no GEMM
})
"""`specs.features` names this module prices (shards and kernels)."""


def block_shard(spec: "TransformerSpec", block: "Block", sp: bool) -> tuple[int, int]:
    """(local, partial-over-tp) elements of a block's extra parameters, all replicated; a block
    without its input norm holds one norm less."""
    extra = sum(block_extra_params(spec, block).values()) - block.no_input_norm * norm_params(spec, spec.hidden)
    return extra, extra if sp else 0


def embedding_extra(spec: "TransformerSpec") -> int:
    """Elements of `embedding/extra` beyond shard.py's baseline (count.seq2seq's h-wide position
    tables, the h-wide type table and embedding norms): the factored width, the offset rows, the
    frozen table, RoCBert's tables and map_inputs_layer."""
    h, w = spec.hidden, table_width(spec)
    position = position_table_params(spec) - position_params(spec)
    norm = embedding_norms(spec) * (norm_params(spec, w) - norm_params(spec, h))
    return position + spec.type_vocab * (w - h) + norm + sum(embedding_extra_params(spec).values())


def word_width(spec: "TransformerSpec") -> int:
    """Width of the vocab-split token table (ELECTRA embedding_size, else h)."""
    return token_width(spec) if spec.extras is not None or spec.inputs is not None else spec.hidden


def head_extra(spec: "TransformerSpec", vocab_local: int) -> tuple[int, int]:
    """(replicated, vocab-split) head elements beyond shard.py's baseline head (final norm, an
    untied Linear(h, vocab), the bias): the MLM transform (dense h -> t, bias, norm over t) and the
    decoder at its width, untied where the class never ties (0, 0 for a spec without either)."""
    if spec.extras is None and not spec.mlm_transform:
        return 0, 0
    h, t = spec.hidden, transform_width(spec)
    bias = spec.extras is None or spec.extras.head_transform_bias
    transform = h * t + (t if bias else 0) + norm_params(spec, t) if spec.mlm_transform else 0
    out = decoder_width(spec) * vocab_local if spec.lm_head and not head_tied(spec) else 0
    baseline = 0 if spec.tied_embeddings else h * vocab_local  # shard.py's head
    return transform, out - baseline


def layer_extra_kernels(spec: "TransformerSpec", block: "Block", tp: int, tokens: int, hidden_values: int,
                        d: int) -> tuple[list[Gemm], list[Elementwise]]:
    """The extra GEMMs and memory-bound passes of one block (layout above); norms as fused
    kernels (fwd reads x, writes y; bwd reads x, dy, writes dx)."""
    x, h = spec.extras, spec.hidden
    if x is None:
        return [], []
    gemms, ew = [], []
    if x.sub_norms:
        if block.mixer in ("full_attention", "sliding_attention", "chunked_attention") and x.attention_sub_norm:
            ew.append(Elementwise("attention/sub_norm", tokens * spec.q_width // tp, 2 * d, 3 * d))
        if block.mlp and not block.moe:
            ew.append(Elementwise("mlp/sub_norm", tokens * spec.ffn_hidden // tp, 2 * d, 3 * d))
    if x.moe_output_norm and block.moe:
        ew.append(Elementwise("mlp/output_norm", hidden_values, 2 * d, 3 * d))
    a = x.adapter
    if a is not None:  # XmodAdapter: dense1 (t, h) @ (h, b), activation, dense2 (t, b) @ (b, h)
        gemms += [Gemm("adapter/in", tokens, a.bottleneck, h), Gemm("adapter/out", tokens, h, a.bottleneck)]
        ew.append(Elementwise("adapter/act", tokens * a.bottleneck, 2 * d, 3 * d))
        if a.norm:
            ew.append(Elementwise("adapter/norm", hidden_values, 2 * d, 3 * d))
    if x.conformer is not None:
        conformer = conformer_kernels(spec, tokens, d)
        gemms, ew = gemms + conformer[0], ew + conformer[1]
    return gemms, ew


def conformer_kernels(spec: "TransformerSpec", tokens: int, d: int) -> tuple[list[Gemm], list[Elementwise]]:
    """A Conformer block's additions (count/conformer.py), whole on every tp rank over the rank's
    tokens: ffn1's two GEMMs, its activation and norm; the conv module's pointwise GEMMs (t, h) @
    (h, 2c) and (t, c) @ (c, h), its pre-norm, GLU, depthwise conv (k taps a channel: memory-bound),
    post-depthwise norm and activation as passes; the block norm. Transformer-XL's position GEMMs
    are not priced (`extras.conformer.relative=xl`)."""
    m, h = spec.extras.conformer, spec.hidden
    f, c = spec.ffn_hidden, m.conv.channels or spec.hidden
    gemms = [Gemm("conformer/conv/pointwise1", tokens, 2 * c, h), Gemm("conformer/conv/pointwise2", tokens, h, c)]
    ew = [Elementwise("conformer/conv/norm", tokens * h, 2 * d, 3 * d),
          Elementwise("conformer/conv/glu", tokens * 2 * c, 1.5 * d, 2.5 * d),
          Elementwise("conformer/conv/depthwise", tokens * c, 2 * d, 3 * d),
          Elementwise("conformer/conv/depthwise_norm", tokens * c, 2 * d, 3 * d),
          Elementwise("conformer/conv/act", tokens * c, 2 * d, 3 * d)]
    if m.macaron:  # ffn1: the block's MLP shape
        n_in = 2 if spec.gated_mlp else 1
        gemms += [Gemm("conformer/ffn1/in", tokens, n_in * f, h), Gemm("conformer/ffn1/out", tokens, h, f)]
        ew += [Elementwise("conformer/ffn1/act", tokens * f, 2 * d, 3 * d),
               Elementwise("conformer/ffn1_norm", tokens * h, 2 * d, 3 * d)]
    if m.block_norm:
        ew.append(Elementwise("conformer/block_norm", tokens * h, 2 * d, 3 * d))
    return gemms, ew


def head_transform_kernels(spec: "TransformerSpec", tokens: int, d: int) -> tuple[list[Gemm], list[Elementwise]]:
    """BERT's MLM transform before the logits: dense (tokens, h) @ (h, t) on every tp rank, its
    activation and norm over t."""
    if not spec.mlm_transform:
        return [], []
    t = transform_width(spec)
    return ([Gemm("head/transform", tokens, t, spec.hidden)],
            [Elementwise("head/transform/act", tokens * t, 2 * d, 3 * d),
             Elementwise("head/transform/norm", tokens * t, 2 * d, 3 * d)])
