"""HF config mapper of Funnel-Transformer (`funnel`, Dai et al. 2020; transformers 5.24
modeling_funnel.py), counted exactly, its compute priced as a full-length stack.

FunnelEmbeddings: a word table and a LayerNorm (no position or token-type table: token types
enter through each block's seg_embed). FunnelLayer: FunnelRelMultiheadAttention (bias-free q_head,
biased k_head / v_head of n_head x d_head, Transformer-XL's r_kernel (d_model, n_head, d_head),
r_w / r_r / r_s biases and seg_embed (2, n_head, d_head): the block stack's `xl_relative` option,
which holds the same h x q_width + 5 q_width; the k / v biases as a `side` vector), biased post_proj
and LayerNorm, then FunnelPositionwiseFFN (biased linear_1 -> d_inner -> linear_2, LayerNorm):
post-LN blocks, no final norm. FunnelEncoder holds sum(block_sizes) blocks; FunnelModel adds
FunnelDecoder's num_decoder_layers blocks of the same shape; FunnelBaseModel (the sequence and
multiple-choice classifiers) has none. Approximation: between block groups the encoder pools
the sequence to half its length (the decoder upsamples it back), which the FLOPs, priced at the
full length in every block, do not follow: they overcount the pooled groups.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE

_BASE = ("ForSequenceClassification", "ForMultipleChoice", "BaseModel")
"""Head classes over FunnelBaseModel (no decoder blocks); the others wrap FunnelModel."""


def _funnel(c: HFConfig) -> dict:
    """FunnelModel's encoder blocks (the decoder's are added by the head reader, `_funnel_head`)."""
    sizes = c.data.get("block_sizes", [4, 4, 4])
    if not isinstance(sizes, list) or not sizes or not all(isinstance(n, int) and n > 0 for n in sizes):
        raise SpecError(f"{c.source}: block_sizes: expected a list of block counts > 0, got {sizes!r}")
    repeats = c.data.get("block_repeats")
    if repeats is not None and repeats != [1] * len(sizes):
        raise SpecError(f"{c.source}: block_repeats: {repeats!r}: blocks run more than once (weights reused) "
                        "are not modelled for funnel")
    heads, head_dim = c.size("n_head"), c.size("d_head")
    return dict(
        arch="encoder", layers=sum(sizes), hidden=c.size("d_model"), heads=heads, head_dim=head_dim,
        ffn_hidden=c.size("d_inner"), vocab=c.size("vocab_size"), max_positions=512,  # no table: caps nothing
        position="none", type_vocab=0, **{**GPT_STYLE, "qkv_bias": False}, norm_placement="post",
        norm_eps=c.number("layer_norm_eps", 1e-9), activation=c.activation("gelu_new", "hidden_act"),
        embedding_norm=True, final_norm=False, pooler=False, lm_head=False,
        extras={"xl_relative": "bi", "side": {"block": [dict(name="attention/kv_bias", params=2 * heads * head_dim)]}},
        dropout=c.dropout(0.1, "hidden_dropout", "attention_dropout"),
    )


def _funnel_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """FunnelForMaskedLM: lm_head Linear(d_model, vocab) with bias, no transform, tied unless
    tie_word_embeddings is false; FunnelForPreTraining: the discriminator (dense d x d with bias on
    every token, dense_prediction Linear(d, 1)); FunnelClassificationHead (linear_hidden d x d on
    the first token, linear_out) for sequence classification and multiple choice over
    FunnelBaseModel; the token-classification and QA linears as `hf.apply_head` reads them."""
    name = architecture(c) or "FunnelModel"
    if not name.endswith(_BASE):
        fields = {**fields, "layers": fields["layers"] + c.integer("num_decoder_layers", 2)}
    if name.endswith("ForMaskedLM"):
        return {**fields, "lm_head": True, "lm_head_bias": True, "tied_embeddings": c.flag("tie_word_embeddings", True)}
    if name.endswith("ForPreTraining"):
        extras = {**fields["extras"], "dense_head_per_token": True}
        return {**fields, "pooler": True, "extras": extras, "classifier": {"num_labels": 1, "per_token": True}}
    return apply_head(fields, c, "FunnelModel" if name.endswith("BaseModel") else name)


FUNNEL_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"funnel": _funnel}
FUNNEL_HEADS: dict[str, Callable[..., dict]] = {"funnel": _funnel_head}
