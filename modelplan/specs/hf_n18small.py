"""HF config mappers of classic and 2026 types built from the block stack's small options
(`specs/extras.py`; transformers 5.24 modeling code): the BERT-shaped encoders electra, roformer,
rembert, roc_bert, xmod, bert-generation, big_bird, xlm and xlnet; the decoders biogpt, cpmant, gpt_neox_japanese, bitnet,
modernbert-decoder; and axk1 (DeepSeek-V3 blocks with a norm on every MoE output).

`N18SMALL_HEADS` maps a type whose head classes differ from BERT's / the generic decoder heads
(`hf.apply_head`) to its own head function."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS, GPT_STYLE, rotary_fraction
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_moe import MOE_MAPPERS, moe_placement

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
    adapter = dict(copies=len(languages), bottleneck=hidden // c.integer("adapter_reduction_factor", 2),
                   norm=c.flag("adapter_layer_norm", False))
    pre = c.flag("pre_norm", False)
    return {**_bert(c), "norm_placement": "pre" if pre else "post", "final_norm": pre, "extras": {"adapter": adapter}}


def _bert_generation(c: HFConfig) -> dict:
    """BertGenerationDecoder: BERT's blocks (word and position tables, embedding LayerNorm, no token
    types, no pooler) with BertGenerationOnlyLMHead: decoder Linear(h, vocab) tied to the word
    table, its vocab bias."""
    return {**_bert(c), "arch": "decoder", "type_vocab": 0, "pooler": False, "lm_head": True,
            "lm_head_bias": True, "tied_embeddings": c.flag("tie_word_embeddings", True)}


def _biogpt(c: HFConfig) -> dict:
    """BioGptForCausalLM: pre-LN blocks (biased q/k/v/out_proj, fc1/fc2), learned positions with 2
    offset rows (BioGptLearnedPositionalEmbedding(max_position_embeddings + 2)), final LayerNorm,
    embeddings scaled by sqrt(h) (scale_embedding), output_projection tied without bias."""
    hidden = c.size("hidden_size")
    return dict(
        layers=c.size("num_hidden_layers"), hidden=hidden, heads=c.size("num_attention_heads"),
        ffn_hidden=c.size("intermediate_size"), vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 1024), position="learned", **GPT_STYLE,
        norm_eps=c.number("layer_norm_eps", 1e-12), activation=c.activation("gelu", "hidden_act"),
        embedding_scale=hidden ** 0.5 if c.flag("scale_embedding", True) else None,
        tied_embeddings=c.flag("tie_word_embeddings", True), extras={"position_offset": 2},
        dropout=c.dropout(0.1, "hidden_dropout_prob", "attention_probs_dropout_prob"),
    )


def _gpt_neox_japanese(c: HFConfig) -> dict:
    """GPTNeoXJapaneseForCausalLM: sequential pre-LN blocks, bias-free query_key_value / dense and MLP
    (h -> h x intermediate_multiple_size), rotary on partial_rotary_factor of each head; the last
    block's attention holds dense_bias (h), added with the residual; final LayerNorm; embed_out tied."""
    hidden, layers = c.size("hidden_size"), c.size("num_hidden_layers")
    return dict(
        layers=layers, hidden=hidden, heads=c.size("num_attention_heads"),
        ffn_hidden=int(hidden * c.number("intermediate_multiple_size", 4)), vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048), position="rotary", rotary_fraction=rotary_fraction(c),
        **{**GPT_STYLE, "qkv_bias": False, "attn_out_bias": False, "mlp_bias": False},
        norm_eps=c.number("layer_norm_eps", 1e-5), activation=c.activation("gelu", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", True), extras={"out_bias_blocks": [layers - 1]},
        dropout=c.dropout(0.1, "attention_dropout", "hidden_dropout"),
    )


def _bitnet(c: HFConfig) -> dict:
    """BitNetForCausalLM: Llama blocks (GQA, squared-ReLU SwiGLU) with attn_sub_norm before o_proj
    and ffn_sub_norm before down_proj (RMSNorms). Its linears are nn.Linear of the full shape
    (ternary values are a quantisation of them), so the parameter count is the dense one; memory
    prices them as the training dtype's latent weights (BitNet b1.58 trains full-precision latents,
    Ma et al. 2024 sec. 2)."""
    return llama(c, extras={"sub_norms": True})  # hidden_act relu2 reads as relu (no count change)


def _modernbert_decoder(c: HFConfig) -> dict:
    """ModernBertDecoderForCausalLM: embedding LayerNorm, pre-LN blocks (q/k/v and Wo with
    attention_bias, gated Wi Linear(h, 2 f) and Wo with mlp_bias) whose block 0 has no attn_norm,
    sliding blocks of local_attention // 2 keys per layer_types (default: every third global),
    final LayerNorm, head dense (classifier_bias) + LayerNorm, decoder tied with decoder_bias."""
    layers, bias = c.size("num_hidden_layers"), c.flag("attention_bias", False)
    every = c.integer("global_attn_every_n_layers", 3)
    types = c.texts("layer_types", None) or ["sliding_attention" if i % every else "full_attention"
                                             for i in range(layers)]
    if len(types) != layers or set(types) - {"full_attention", "sliding_attention"}:
        raise SpecError(f"{c.source}: layer_types: expected {layers} entries of full_attention / sliding_attention")
    local = c.integer("local_attention", 128, nullable=True)
    sliding = "sliding_attention" in types and local
    return dict(
        layers=layers, hidden=c.size("hidden_size"), heads=c.size("num_attention_heads"),
        ffn_hidden=c.size("intermediate_size"), vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 8192), position="rotary",
        layer_types=types if sliding else None, sliding_window=local // 2 if sliding else None,
        norm="layernorm", norm_bias=c.flag("norm_bias", False), norm_eps=c.number("norm_eps", 1e-5),
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=c.flag("mlp_bias", False), gated_mlp=True,
        activation=c.activation("gelu", "hidden_activation"), embedding_norm=True,
        mlm_transform=True, lm_head_bias=c.flag("decoder_bias", True),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        extras={"no_input_norm_blocks": [0], "head_transform_bias": c.flag("classifier_bias", False)},
        rope_theta=_modernbert_theta(c), dropout=c.dropout(0.0, "attention_dropout", "mlp_dropout", "embedding_dropout"),
    )


def _modernbert_theta(c: HFConfig) -> float:
    """The global blocks' RoPE base (ModernBertDecoderConfig: rope_parameters.full_attention, 160000)."""
    params = c.sub("rope_parameters")
    full = params.sub("full_attention") if params is not None else None
    return full.number("rope_theta", 160000.0) if full is not None else c.number("global_rope_theta", 160000.0)


_AXK1 = dict(vocab_size=163840, num_hidden_layers=61, n_routed_experts=192, num_experts_per_tok=8,
             n_shared_experts=1, n_group=8, topk_group=4, q_lora_rank=1536, routed_scaling_factor=2.5,
             topk_method="noaux_tc", scoring_func="sigmoid")
"""AXK1Config's defaults where they differ from DeepseekV3Config's or are not keys of it (transformers 5.24)."""


def _axk1(c: HFConfig) -> dict:
    """AXK1ForCausalLM (A.X-K1): DeepSeek-V3 blocks (MLA, sigmoid experts with groups and a correction
    buffer, one shared expert) placed by mlp_layer_types (default: first_k_dense_replace 1, moe_layer_freq
    1), each AXK1MoE ending in post_mlp_layernorm (RMSNorm(h)); no MTP modules."""
    layers = c.integer("num_hidden_layers", 61)
    first, freq = c.integer("first_k_dense_replace", 1), c.integer("moe_layer_freq", 1)
    kinds = c.texts("mlp_layer_types", None) or ["sparse" if i >= first and i % freq == 0 else "dense"
                                                 for i in range(layers)]
    if len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
        raise SpecError(f"{c.source}: mlp_layer_types: expected {layers} entries of dense / sparse, got {kinds!r}")
    data = {**_AXK1, **c.data, "num_nextn_predict_layers": 0, "first_k_dense_replace": 0, "moe_layer_freq": 1}
    fields = MOE_MAPPERS["deepseek_v3"](HFConfig(data, c.source, c.path, c.defaults))
    sparse = [i for i, kind in enumerate(kinds) if kind == "sparse"]
    if not sparse:
        return {**fields, "moe": None}
    moe = {**fields["moe"], "first_dense_layers": 0, "layer_freq": 1, "layers": None, **moe_placement(layers, sparse)}
    return {**fields, "moe": moe, "extras": {"moe_output_norm": True}}


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
    Linear(emb_dim, vocab) with bias, tied to the embeddings. The adaptive softmax (asm) is refused."""
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
        lm_head=True, lm_head_bias=True, tied_embeddings=True,
        dropout=c.dropout(0.1, "dropout", "attention_dropout"),
    )


def _cpmant(c: HFConfig) -> dict:
    """CpmAntForCausalLM (CPM-Ant): pre-norm blocks of weight-only RMS LayerNorms
    (CpmAntLayerNorm), bias-free project_q/k/v / attention_out of num_attention_heads x dim_head,
    a GELU-gated w_0 / w_1 -> w_out FFN, output_layernorm; input_embedding holds vocab_size +
    prompt_types x prompt_length rows, segment_embedding segment_types rows; one
    CpmAntSegmentPositionEmbedding table (segment_types^2 + position_bias_num_buckets, heads) read by
    every block (counted in block 0, as T5's relative bias); lm_head Linear(h, vocab) of its own
    (the class ties nothing)."""
    segments = c.integer("segment_types", 32)
    return dict(
        layers=c.size("num_hidden_layers"), hidden=c.size("hidden_size"), heads=c.size("num_attention_heads"),
        head_dim=c.integer("dim_head", 128), ffn_hidden=c.integer("dim_ff", 10240), vocab=c.size("vocab_size"),
        position="relative", relative_buckets=segments * segments + c.integer("position_bias_num_buckets", 512),
        relative_max_distance=c.integer("position_bias_max_distance", 2048), max_positions=c.integer("position_bias_max_distance", 2048),
        type_vocab=segments, norm="rmsnorm", norm_eps=c.number("eps", 1e-6), gated_mlp=True, activation="gelu",
        tied_embeddings=False,
        extras={"token_extra_rows": c.integer("prompt_types", 32) * c.integer("prompt_length", 32)},
        dropout=c.dropout(0.0, "dropout_p"),
    )


def _xlnet(c: HFConfig) -> dict:
    """XLNetModel: word_embedding, mask_emb, post-LN blocks of XLNetRelativeAttention (bias-free q, k,
    v, o of n_head x d_head, Transformer-XL's r projection, r_w / r_r / r_s biases, seg_embed, its
    LayerNorm) and XLNetFeedForward (biased layer_1 -> d_inner -> layer_2, LayerNorm); no final
    norm; XLNetLMHeadModel.lm_loss Linear(h, vocab) with bias, tied. Without memory (mem_len is
    inference-time caching) and without target_mapping (the two-stream query path)."""
    kind = c.text("attn_type", "bi")
    if kind not in ("bi", "uni"):
        raise SpecError(f"{c.source}: attn_type: unsupported '{kind}' (bi, uni)")
    hidden, heads = c.size("d_model", "hidden_size"), c.size("n_head", "num_attention_heads")
    if hidden % heads:
        raise SpecError(f"{c.source}: n_head: {heads} does not divide d_model ({hidden})")
    return dict(
        layers=c.size("n_layer", "num_hidden_layers"), hidden=hidden, heads=heads, head_dim=hidden // heads,
        ffn_hidden=c.integer("d_inner", 4096), vocab=c.size("vocab_size"), max_positions=c.integer("n_positions", 512) if c.has("n_positions") else 512,
        position="none", **{**GPT_STYLE, "qkv_bias": False, "attn_out_bias": False}, norm_placement="post",
        norm_eps=c.number("layer_norm_eps", 1e-12), activation=c.activation("gelu", "ff_activation"),
        final_norm=False, tied_embeddings=True, lm_head_bias=True,
        extras={"xl_relative": kind, "mask_embedding": True}, dropout=c.dropout(0.1, "dropout"),
    )


N18SMALL_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "big_bird": _big_bird, "xlm": _xlm, "cpmant": _cpmant, "xlnet": _xlnet,
    "electra": _electra, "roformer": _roformer, "rembert": _rembert, "roc_bert": _roc_bert, "xmod": _xmod,
    "bert-generation": _bert_generation, "biogpt": _biogpt, "gpt_neox_japanese": _gpt_neox_japanese,
    "bitnet": _bitnet, "modernbert-decoder": _modernbert_decoder, "axk1": _axk1,
}


def _arch(c: HFConfig) -> str | None:
    names = c.texts("architectures", None)
    return names[0] if names else None


def _electra_head(fields: dict, c: HFConfig) -> dict:
    """ElectraForPreTraining: the discriminator head (dense h x h with bias on every token,
    dense_prediction Linear(h, 1)): a per-token pooler-sized dense and a one-label classifier."""
    from modelplan.specs.hf import apply_head, _architecture

    name = _arch(c)
    if name is not None and name.endswith("ForPreTraining"):
        extras = {**fields.get("extras", {}), "dense_head_per_token": True}
        return {**fields, "lm_head": False, "tied_embeddings": False, "pooler": True, "extras": extras,
                "classifier": {"num_labels": 1, "per_token": True}}
    return apply_head(fields, c, _architecture(c))


def _roc_bert_head(fields: dict, c: HFConfig) -> dict:
    """RoCBertForPreTraining: pooler and the MLM head (no next-sentence classifier)."""
    from modelplan.specs.hf import apply_head, _architecture

    name = _arch(c)
    if name is not None and name.endswith("ForPreTraining"):
        return {**apply_head(fields, c, "RoCBertForMaskedLM"), "pooler": True}
    return apply_head(fields, c, _architecture(c))


def _roformer_head(fields: dict, c: HFConfig) -> dict:
    """RoFormerForMultipleChoice: RoFormerSequenceSummary without a projection (RoFormerConfig has no
    summary_use_proj), then classifier Linear(h, 1): no pooler-sized dense. RoFormerForQuestionAnswering
    sets config.num_labels = 2 before building qa_outputs."""
    from modelplan.specs.hf import apply_head, _architecture

    fields = apply_head(fields, c, _architecture(c))
    name = _arch(c) or ""
    if name.endswith("ForMultipleChoice"):
        return {**fields, "pooler": False}
    if name.endswith("ForQuestionAnswering"):
        return {**fields, "classifier": {"num_labels": 2, "per_token": True}}
    return fields


def _generation_head(fields: dict, c: HFConfig) -> dict:
    """BertGenerationDecoder (LM head; also without `architectures`) or BertGenerationEncoder (bare)."""
    name = _arch(c)
    if name is None or name.endswith("Decoder"):
        return fields
    if name.endswith("Encoder"):
        return {**fields, "arch": "encoder", "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for bert-generation "
                    "(BertGenerationDecoder, BertGenerationEncoder)")


def _causal_only(model_type: str, lm_suffix: str, bare: str) -> Callable[[dict, HFConfig], dict]:
    """A decoder type read as its causal LM (also without `architectures`) or its bare model."""
    def head(fields: dict, c: HFConfig) -> dict:
        name = _arch(c)
        if name is None or name.endswith(lm_suffix):
            return fields
        if name.endswith(bare):
            return {**fields, "lm_head": False, "lm_head_bias": False, "mlm_transform": False, "tied_embeddings": False}
        raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for {model_type} "
                        f"(...{lm_suffix}, ...{bare})")
    return head


def _big_bird_head(fields: dict, c: HFConfig) -> dict:
    """BigBird's heads keep BigBirdModel's pooler (add_pooling_layer defaults to true in every
    head class but question answering); its sequence-classification head (dense + out_proj beside
    the pooler) and question-answering head are refused."""
    from modelplan.specs.hf import apply_head, _architecture

    name = _arch(c) or "BigBirdModel"
    if name.endswith(("ForSequenceClassification", "ForQuestionAnswering")):
        raise SpecError(f"{c.source}: architectures: '{name}' is not supported for big_bird (its head beside "
                        "the pooler is not modelled)")
    return {**apply_head(fields, c, _architecture(c)), "pooler": True}


def _xlm_head(fields: dict, c: HFConfig) -> dict:
    """XLMWithLMHeadModel (also without `architectures`), the bare XLMModel, and the heads that are
    one Linear(h, num_labels): XLMForSequenceClassification's sequence_summary (first token,
    summary_use_proj and summary_proj_to_labels), XLMForTokenClassification, XLMForQuestionAnsweringSimple."""
    name = _arch(c)
    if name is None or name.endswith("WithLMHeadModel"):
        return fields
    bare = {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    if name == "XLMModel":
        return bare
    labels = c.num_labels()
    if name.endswith(("ForTokenClassification", "ForQuestionAnsweringSimple")):
        return {**bare, "classifier": {"num_labels": labels, "per_token": True}}
    if (name.endswith("ForSequenceClassification") and c.flag("summary_use_proj", True)
            and c.flag("summary_proj_to_labels", True) and c.text("summary_type", "first") == "first"):
        return {**bare, "classifier": {"num_labels": labels}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for xlm (XLMWithLMHeadModel, XLMModel, "
                    "XLMForSequenceClassification with its default summary, XLMForTokenClassification, "
                    "XLMForQuestionAnsweringSimple)")


def _xlnet_head(fields: dict, c: HFConfig) -> dict:
    """XLNetLMHeadModel (also without `architectures`), the bare XLNetModel, and the heads built from
    XLNetSequenceSummary (summary_use_proj: Linear(h, h), a pooler on the last token) + logits_proj
    (sequence classification, multiple choice) or one per-token Linear (token classification, simple QA)."""
    name = _arch(c)
    if name is None or name.endswith("LMHeadModel"):
        return fields
    bare = {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    if name == "XLNetModel":
        return bare
    labels = c.num_labels()
    if name.endswith(("ForTokenClassification", "ForQuestionAnsweringSimple")):
        return {**bare, "classifier": {"num_labels": labels, "per_token": True}}
    pooled = {"ForSequenceClassification": labels, "ForMultipleChoice": 1}
    for suffix, n in pooled.items():
        if name.endswith(suffix) and c.flag("summary_use_proj", True) and not c.flag("summary_proj_to_labels", False):
            return {**bare, "pooler": True, "classifier": {"num_labels": n}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for xlnet (XLNetLMHeadModel, XLNetModel, "
                    "XLNetForSequenceClassification, XLNetForMultipleChoice, XLNetForTokenClassification, "
                    "XLNetForQuestionAnsweringSimple)")


N18SMALL_HEADS: dict[str, Callable[[dict, HFConfig], dict]] = {
    "xlnet": _xlnet_head,
    "big_bird": _big_bird_head, "xlm": _xlm_head, "cpmant": _causal_only("cpmant", "ForCausalLM", "CpmAntModel"),
    "electra": _electra_head, "roc_bert": _roc_bert_head, "roformer": _roformer_head, "bert-generation": _generation_head,
    "modernbert-decoder": _causal_only("modernbert-decoder", "ForCausalLM", "DecoderModel"),
}
"""Types whose head classes `hf.apply_head` would misread: each function gets the mapped body and
the config and returns the fields with the head `architectures[0]` names."""
