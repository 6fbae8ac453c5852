"""HF config mappers of classic types built from the block stack's small options
(`specs/extras.py`; transformers 5.24 modeling code): the BERT-shaped encoders electra, roformer,
rembert, roc_bert, xmod, bert-generation, big_bird, xlm and xlnet; with the decoders of
hf_n18small_dec.py (biogpt, gpt_neox_japanese, bitnet, modernbert-decoder, axk1, cpmant) they form
`N18SMALL_MAPPERS`. `N18SMALL_HEADS` (hf_n18small_heads.py) maps a type whose head classes differ
from BERT's / the generic decoder heads (`hf.apply_head`) to its own head reader."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS, GPT_STYLE
from modelplan.specs.hf_n18small_dec import N18SMALL_DECODERS
from modelplan.specs.hf_n18small_heads import N18SMALL_HEADS

_bert = GPT_MAPPERS["bert"]


def _factored(c: HFConfig, key: str) -> dict:
    """ELECTRA / RoFormer: tables of width embedding_size, embeddings_project Linear(E, h) only when
    E != h (ElectraModel / RoFormerModel `if config.embedding_size != config.hidden_size`)."""
    width = c.integer(key, c.size("hidden_size"))
    return {"input_width": width} if width != c.size("hidden_size") else {}


def _electra(c: HFConfig) -> dict:
    """ElectraModel: BERT's blocks on factored embeddings, no pooler; the generator head
    (ElectraGeneratorPredictions dense h -> E + LayerNorm(E), generator_lm_head Linear(E, vocab)
    tied, with bias) is BERT's MLM head at width E."""
    extras = _factored(c, "embedding_size")
    return {**_bert(c), "pooler": False, **({"extras": extras} if extras else {})}


def _roformer(c: HFConfig) -> dict:
    """RoFormerModel: BERT's blocks with rotary q/k (no learned position table), the token and
    token-type tables at embedding_size (+ embeddings_project when it differs from h), no pooler,
    and RoFormerSinusoidalPositionalEmbedding(max_position_embeddings, h // heads): a frozen
    nn.Embedding, a parameter sum(p.numel()) counts."""
    fields = _bert(c)
    extras = {**_factored(c, "embedding_size"),
              "frozen_position_width": fields["hidden"] // fields["heads"]}
    return {**fields, "max_positions": c.integer("max_position_embeddings", 1536), "position": "rotary",
            "rope_theta": 10000.0, "pooler": False, "extras": extras}  # RoFormer: base 10000 (Su et al. 2021)


def _rembert(c: HFConfig) -> dict:
    """RemBertModel: BERT's blocks on input_embedding_size-wide tables, always mapped by
    encoder.embedding_hidden_mapping_in Linear(E_in, h); its LM head (RemBertLMPredictionHead: dense
    h -> output_embedding_size, LayerNorm, decoder Linear(E_out, vocab) with bias) ties nothing."""
    extras = dict(input_width=c.integer("input_embedding_size", 256),
                  head_width=c.integer("output_embedding_size", 1664), head_untied=True)
    return {**_bert(c), "extras": extras}


def _roc_bert(c: HFConfig) -> dict:
    """RoCBertModel: BERT with pronunciation_embed (pronunciation_vocab_size x pronunciation_embed_dim)
    and shape_embed tables; with concat_input their rows are concatenated with the word embedding and
    map_inputs_layer Linear(h + dims, h) maps them back before the embedding LayerNorm."""
    tables = [dict(rows=c.integer("pronunciation_vocab_size", 910), width=c.integer("pronunciation_embed_dim", 768),
                   used=c.flag("enable_pronunciation", True)),
              dict(rows=c.integer("shape_vocab_size", 24858), width=c.integer("shape_embed_dim", 512),
                   used=c.flag("enable_shape", True))]
    return {**_bert(c), "extras": dict(concat_tables=tables, concat_proj=c.flag("concat_input", True))}


def _xmod(c: HFConfig) -> dict:
    """XmodModel: RoBERTa's modules plus, after every block's output, one XmodAdapter per language
    (Linear(h, h // adapter_reduction_factor), Linear back, biases), with its own LayerNorm when
    adapter_layer_norm; pre_norm moves the LayerNorms before the sublayers and adds the encoder's
    final LayerNorm (the same parameters, one norm more)."""
    hidden, languages = c.size("hidden_size"), c.texts("languages", ["en_XX"])
    if not languages:
        raise SpecError(f"{c.source}: languages: empty (X-MOD needs one adapter per language)")
    adapter = dict(copies=len(languages), bottleneck=hidden // c.divisor("adapter_reduction_factor", 2),
                   norm=c.flag("adapter_layer_norm", False))
    pre = c.flag("pre_norm", False)
    return {**_bert(c), "norm_placement": "pre" if pre else "post", "final_norm": pre, "extras": {"adapter": adapter}}


def _bert_generation(c: HFConfig) -> dict:
    """BertGenerationDecoder: BERT's blocks (word and position tables, embedding LayerNorm, no token
    types, no pooler) with BertGenerationOnlyLMHead: decoder Linear(h, vocab) tied to the word
    table, its vocab bias; untied, `bias` stays beside decoder.bias (_tied_weights_keys tie the two
    only under tie_word_embeddings; transformers 5.24 modeling_bert_generation.py)."""
    tied = c.flag("tie_word_embeddings", True)
    return {**_bert(c), "arch": "decoder", "type_vocab": 0, "pooler": False, "lm_head": True,
            "lm_head_bias": True, "tied_embeddings": tied, "head_bias_copy": not tied}


def _big_bird(c: HFConfig) -> dict:
    """BigBirdModel: BERT's modules (q/k/v bias use_bias, embeddings x sqrt(h) with
    rescale_embeddings) and its pooler in every head class. block_sparse attention (Zaheer et al.
    2020, sec. 2: per query block 3 sliding, 2 global and num_random_blocks random key blocks) is
    priced as a window of (5 + r) x block_size keys a query, the global query blocks' full rows not
    counted; transformers runs original_full when seq_len <= (5 + 2 r) x block_size."""
    hidden, fields = c.size("hidden_size"), _bert(c)
    fields.update(max_positions=c.integer("max_position_embeddings", 4096), qkv_bias=c.flag("use_bias", True),
                  activation=c.activation("gelu_new", "hidden_act"),
                  embedding_scale=hidden ** 0.5 if c.flag("rescale_embeddings", False) else None)
    kind = c.text("attention_type", "block_sparse")
    if kind not in ("block_sparse", "original_full"):
        raise SpecError(f"{c.source}: attention_type: unsupported '{kind}' (block_sparse, original_full)")
    if kind == "block_sparse":
        window = (5 + c.integer("num_random_blocks", 3)) * c.integer("block_size", 64)
        fields.update(layer_types=["sliding_attention"], sliding_window=window)
    return fields


def _xlm(c: HFConfig) -> dict:
    """XLMModel: post-LN blocks (q_lin/k_lin/v_lin/out_lin and lin1 -> 4 emb_dim -> lin2, all biased;
    GELU or ReLU), learned positions (sinusoidal_embeddings only initialises them), a language table
    (n_langs rows when use_lang_emb and n_langs > 1) and layer_norm_emb; XLMPredLayer proj
    Linear(emb_dim, vocab) with bias, tied to the embeddings (_tied_weights_keys: only under
    tie_word_embeddings). The adaptive softmax (asm) is refused."""
    if c.flag("asm", False):
        raise SpecError(f"{c.source}: asm: true is not supported (XLMPredLayer's AdaptiveLogSoftmaxWithLoss)")
    hidden, langs = c.size("emb_dim", "hidden_size"), c.integer("n_langs", 1)
    return dict(
        arch="decoder" if c.flag("causal", False) else "encoder",
        layers=c.size("n_layers", "num_hidden_layers"), hidden=hidden, heads=c.size("n_heads", "num_attention_heads"),
        ffn_hidden=4 * hidden, vocab=c.size("vocab_size", "n_words"),
        max_positions=c.integer("max_position_embeddings", 512), position="learned",
        type_vocab=langs if langs > 1 and c.flag("use_lang_emb", True) else 0, **GPT_STYLE,
        norm_placement="post", norm_eps=c.number("layer_norm_eps", 1e-12),
        activation="gelu" if c.flag("gelu_activation", True) else "relu", embedding_norm=True, final_norm=False,
        lm_head=True, lm_head_bias=True, tied_embeddings=c.flag("tie_word_embeddings", True),
        dropout=c.dropout(0.1, "dropout", "attention_dropout"),
    )


def _xlnet(c: HFConfig) -> dict:
    """XLNetModel: word_embedding, mask_emb, post-LN blocks of XLNetRelativeAttention (bias-free q, k,
    v, o of n_head x d_head, Transformer-XL's r projection, r_w / r_r / r_s biases, seg_embed, its
    LayerNorm) and XLNetFeedForward (biased layer_1 -> d_inner -> layer_2, LayerNorm); no final
    norm; XLNetLMHeadModel.lm_loss Linear(h, vocab) with bias, its weight tied unless tie_word_embeddings is
    false (_tied_weights_keys, transformers 5.24 modeling_xlnet.py). Without memory (mem_len is
    inference-time caching) and without target_mapping (the two-stream query path)."""
    kind = c.text("attn_type", "bi")
    if kind not in ("bi", "uni"):
        raise SpecError(f"{c.source}: attn_type: unsupported '{kind}' (bi, uni)")
    hidden, heads = c.size("d_model", "hidden_size"), c.size("n_head", "num_attention_heads")
    if hidden % heads:
        raise SpecError(f"{c.source}: n_head: {heads} does not divide d_model ({hidden})")
    return dict(
        arch="encoder" if kind == "bi" else "decoder",  # bi: every query sees every key (permutation LM)
        layers=c.size("n_layer", "num_hidden_layers"), hidden=hidden, heads=heads, head_dim=hidden // heads,
        ffn_hidden=c.integer("d_inner", 4096), vocab=c.size("vocab_size"),
        max_positions=512,  # XLNet's pre-training length; no table, so it caps nothing
        position="none", **{**GPT_STYLE, "qkv_bias": False, "attn_out_bias": False}, norm_placement="post",
        norm_eps=c.number("layer_norm_eps", 1e-12), activation=c.activation("gelu", "ff_activation"),
        final_norm=False, tied_embeddings=c.flag("tie_word_embeddings", True), lm_head_bias=True,
        extras={"xl_relative": kind, "mask_embedding": True}, dropout=c.dropout(0.1, "dropout"),
    )


N18SMALL_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "electra": _electra, "roformer": _roformer, "rembert": _rembert, "roc_bert": _roc_bert, "xmod": _xmod,
    "bert-generation": _bert_generation, "big_bird": _big_bird, "xlm": _xlm, "xlnet": _xlnet, **N18SMALL_DECODERS,
}

__all__ = ["N18SMALL_HEADS", "N18SMALL_MAPPERS"]
