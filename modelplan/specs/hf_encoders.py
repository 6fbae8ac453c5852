"""HF config mappers of the most-downloaded BERT-successor encoders (transformers 5.24 modeling
code): distilbert, mpnet, ibert, deberta, deberta-v2 (DeBERTa-v3), modernbert, albert, flaubert, esm,
eurobert and nomic_bert. Each is BERT's encoder (`hf_gpt._bert`), XLM's (flaubert), Llama's blocks
(eurobert) or ModernBERT-decoder's (modernbert) with the differences its modeling file builds;
DeBERTa's disentangled attention and MPNet's bucket table are `specs/relative_attention.py` options,
ALBERT's sharing `specs/layer_sharing.py`. Their heads are BERT's (`hf.apply_head`) but for the
types in `ENCODER_HEADS` (ModernBERT's classifier heads keep the MLM head's dense + norm, ALBERT's
pre-training head, Flaubert's and EuroBERT's class names)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_funnel import FUNNEL_HEADS, FUNNEL_MAPPERS
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_n18small import N18SMALL_HEADS, N18SMALL_MAPPERS
from modelplan.specs.hf_n18small_dec import N18SMALL_DECODERS

_bert = GPT_MAPPERS["bert"]


def _distilbert(c: HFConfig) -> dict:
    """DistilBertModel: BERT's post-LN blocks (q_lin/k_lin/v_lin/out_lin, lin1/lin2, biased) over
    word + position embeddings and their LayerNorm; no token types, no pooler (its classifier heads'
    pre_classifier dense h x h has the pooler's size). sinusoidal_pos_embds fills the position table
    and freezes it: refused (the frozen table is not modelled)."""
    if c.flag("sinusoidal_pos_embds", False):
        raise SpecError(f"{c.source}: sinusoidal_pos_embds: true is not modelled (a frozen position table)")
    renamed = {"num_hidden_layers": c.size("n_layers"), "hidden_size": c.size("dim"),
               "num_attention_heads": c.size("n_heads"), "intermediate_size": c.size("hidden_dim"),
               "hidden_act": c.text("activation", "gelu"), "type_vocab_size": 0}
    fields = _bert(HFConfig({**c.data, **renamed}, c.source, c.path, c.defaults))
    return {**fields, "pooler": False, "dropout": c.dropout(0.1, "dropout", "attention_dropout")}


def _mpnet(c: HFConfig) -> dict:
    """MPNetModel: BERT's blocks (q/k/v/o biased), word + position tables (no token types), its pooler;
    MPNetEncoder holds one relative_attention_bias Embedding(relative_attention_num_buckets, heads)
    for every block (T5's bucketing, Song et al. 2020 sec. 2.3)."""
    return {**_bert(HFConfig({**c.data, "type_vocab_size": 0}, c.source, c.path, c.defaults)),
            "max_positions": c.integer("max_position_embeddings", 512),
            "relative_buckets": c.integer("relative_attention_num_buckets", 32),
            "extras": {"relative": {"bias_table": "encoder"}}}


def _pos_att_type(c: HFConfig) -> set[str]:
    """DebertaConfig.pos_att_type: a list or a 'c2p|p2c' string (lowercased, split on '|')."""
    raw = c.data.get("pos_att_type")
    kinds = [x.strip() for x in raw.lower().split("|")] if isinstance(raw, str) else c.texts("pos_att_type", None) or []
    unknown = set(kinds) - {"c2p", "p2c"}
    if unknown:
        raise SpecError(f"{c.source}: pos_att_type: unsupported {sorted(unknown)} (c2p, p2c)")
    return set(kinds)


def _deberta(v2: bool) -> Callable[[HFConfig], dict]:
    def mapper(c: HFConfig) -> dict:
        """DebertaModel / DebertaV2Model: BERT's post-LN blocks over word (+ position when
        position_biased_input, + token-type) embeddings and their LayerNorm, no pooler;
        relative_attention adds the disentangled terms (specs/relative_attention.py): v2 with
        pos_key_proj / pos_query_proj unless share_att_key, 2 x position_buckets rows when bucketed,
        its rel_embeddings LayerNorm and ConvLayer; v1 with pos_proj / pos_q_proj and in_proj's q_bias /
        v_bias. Heads: BERT's (the MLM head's transform, tied decoder, vocab bias; ContextPooler's
        dense for sequence classification)."""
        hidden = c.size("hidden_size")
        for key in ("embedding_size", "pooler_hidden_size"):
            if c.integer(key, hidden) != hidden:
                raise SpecError(f"{c.source}: {key}: {c.integer(key)} != hidden_size ({hidden}) is not modelled")
        if c.flag("talking_head", False):
            raise SpecError(f"{c.source}: talking_head: true is not modelled (head_logits_proj / head_weights_proj)")
        fields = _bert(HFConfig({"type_vocab_size": 0, **c.data}, c.source, c.path, c.defaults))
        fields.update(pooler=False, norm_eps=c.number("layer_norm_eps", 1e-7),
                      position="learned" if c.flag("position_biased_input", True) else "none")
        extras = _disentangled(c, v2) if c.flag("relative_attention", False) else None
        if not v2:  # DisentangledSelfAttention.in_proj Linear(h, 3h, bias=False) + q_bias + v_bias
            extras = {**(extras or {}), "qv_bias_only": True}
            fields["qkv_bias"] = False
        return {**fields, **({"extras": {"relative": extras}} if extras else {})}
    return mapper


def _disentangled(c: HFConfig, v2: bool) -> dict:
    """The relative-position sizes of DebertaEncoder / DebertaV2Encoder (see `_deberta`)."""
    kinds = _pos_att_type(c)
    rel = c.integer("max_relative_positions", -1)
    rel = rel if rel >= 1 else c.size("max_position_embeddings")
    buckets = c.integer("position_buckets", -1) if v2 else -1
    span = buckets if buckets > 0 else rel  # pos_ebd_size
    d = dict(positions=2 * span, c2p="c2p" in kinds, p2c="p2c" in kinds, span_capped=not v2)
    if v2:
        norms = [x.strip() for x in c.text("norm_rel_ebd", "none").lower().split("|")]
        d.update(norm="layer_norm" in norms, projections="shared" if c.flag("share_att_key", False) else "separate",
                 conv_kernel=c.integer("conv_kernel_size", 0), conv_groups=c.integer("conv_groups", 1))
    else:
        d["projections"] = "v1"
    return {"disentangled": d}


def _modernbert(c: HFConfig) -> dict:
    """ModernBertModel: ModernBERT-decoder's modules (embedding norm, pre-LN blocks, block 0 without
    attn_norm, gated Wi, final norm, the MLM head's dense + norm and tied decoder) as a bidirectional
    encoder; its sliding blocks see local_attention // 2 positions on either side
    (ModernBertAttention: sliding_window = local_attention // 2 + 1 in a bidirectional mask)."""
    fields = N18SMALL_DECODERS["modernbert-decoder"](c)
    if fields.get("sliding_window") is not None:
        fields["sliding_window"] = 2 * (c.integer("local_attention", 128) // 2) + 1
    return {**fields, "arch": "encoder", "max_positions": c.integer("max_position_embeddings", 8192)}


def _albert(c: HFConfig) -> dict:
    """AlbertModel: BERT's post-LN blocks (query/key/value/dense, ffn/ffn_output, biased) on
    embedding_size-wide word / position / token-type tables and LayerNorm, mapped to h by
    embedding_hidden_mapping_in Linear(E, h) with bias; num_hidden_groups weight sets shared by the
    blocks in order (specs/layer_sharing.py); its pooler; AlbertMLMHead: dense h -> E, LayerNorm(E),
    decoder Linear(E, vocab) tied, vocab bias (BERT's MLM head at width E)."""
    inner = c.integer("inner_group_num", 1)
    if inner != 1:
        raise SpecError(f"{c.source}: inner_group_num: {inner} is not modelled (every use of a group runs its "
                        f"{inner} layers)")
    layers, groups = c.size("num_hidden_layers"), c.integer("num_hidden_groups", 1)
    if not 0 < groups <= layers:
        raise SpecError(f"{c.source}: num_hidden_groups: {groups} must be in 1..num_hidden_layers ({layers})")
    extras = {"weight_groups": groups, "input_width": c.integer("embedding_size", 128)}  # the mapping even at E = h
    return {**_bert(c), "activation": c.activation("gelu_new", "hidden_act"), "extras": extras}


def _flaubert(c: HFConfig) -> dict:
    """FlaubertModel: XLM's modules (hf_n18small._xlm); pre_norm moves each block's LayerNorms before
    attention and the MLP (the same tensors: no count change). LayerDrop is a training-time skip:
    every block is counted."""
    fields = N18SMALL_MAPPERS["xlm"](c)
    return {**fields, "norm_placement": "pre"} if c.flag("pre_norm", False) else fields


def _flaubert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """XLM's heads under Flaubert's class names (the bare FlaubertModel)."""
    if (c.texts("architectures", None) or [""])[0] == "FlaubertModel":
        return {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    return N18SMALL_HEADS["xlm"](fields, c, apply_head, architecture)


def _esm(c: HFConfig) -> dict:
    """EsmModel (ESM-2, ESM-1b): pre-LN blocks (BERT's biased modules, attention.LayerNorm before the
    attention and LayerNorm before the MLP), emb_layer_norm_after as the final norm, an embedding
    LayerNorm only with emb_layer_norm_before, no token types, rotary q/k (base 10000, ESM's
    RotaryEmbedding) or a learned position table (absolute), its pooler, and contact_head; heads
    as BERT's (EsmLMHead: dense, LayerNorm, tied decoder, vocab bias)."""
    if c.flag("is_folding_model", False):
        raise SpecError(f"{c.source}: is_folding_model: true is not modelled (ESMFold's folding trunk)")
    if c.data.get("vocab_size") is None:  # EsmConfig.vocab_size defaults to None
        raise SpecError(f"{c.source}: vocab_size: missing (EsmConfig's default is None, so transformers cannot build "
                        f"EsmModel without it either; the ESM-2 and ESM-1b checkpoints set 33)")
    kind = c.text("position_embedding_type", "absolute")
    if kind not in ("absolute", "rotary"):
        raise SpecError(f"{c.source}: position_embedding_type: unsupported '{kind}' (absolute, rotary)")
    fields = _bert(HFConfig({**c.data, "type_vocab_size": 0}, c.source, c.path, c.defaults))
    rotary = {"position": "rotary", "rope_theta": 10000.0} if kind == "rotary" else {}
    return {**fields, **rotary, "norm_placement": "pre", "final_norm": True,
            "embedding_norm": bool(c.flag("emb_layer_norm_before", None)),  # EsmConfig: None (no norm) by default
            "max_positions": c.integer("max_position_embeddings", 1026), "extras": {"contact_head": True}}


def _eurobert(c: HFConfig) -> dict:
    """EuroBertModel: Llama's blocks (hf_llama.llama: RMSNorm pre-norm, rotary, gated MLP, GQA)
    attending in both directions, the final norm; no pooler."""
    from modelplan.specs.hf_llama import llama

    return {**llama(c), "arch": "encoder"}


def _eurobert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """EuroBertForMaskedLM (also without `architectures`): lm_head Linear(h, vocab, bias=mlp_bias), tied
    as tie_word_embeddings says (false by default); EuroBertModel bare; ...ForSequenceClassification:
    dense h x h and classifier Linear(h, num_labels), biased, on the pooled bos / mean token (both on
    every token before the mean of the logits for classifier_pooling 'late'); ...ForTokenClassification: Linear(h, labels)."""
    name = (c.texts("architectures", None) or ["EuroBertForMaskedLM"])[0]
    bare = {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    if name.endswith("ForMaskedLM"):
        return {**fields, "lm_head": True, "lm_head_bias": c.flag("mlp_bias", False),
                "tied_embeddings": c.flag("tie_word_embeddings", False)}
    if name.endswith("BertModel"):
        return bare
    if name.endswith("ForSequenceClassification"):
        pooling = c.text("classifier_pooling", "late")
        if pooling not in ("bos", "mean", "late"):
            raise SpecError(f"{c.source}: classifier_pooling: unsupported '{pooling}' (bos, mean, late)")
        extras = {**(fields.get("extras") or {}), "dense_head_per_token": pooling == "late"}
        late = pooling == "late"
        return {**bare, "pooler": True, "classifier": {"num_labels": c.num_labels(), "per_token": late}, "extras": extras}
    if name.endswith("ForTokenClassification"):
        return {**bare, "classifier": {"num_labels": c.num_labels(), "per_token": True}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for eurobert (EuroBertForMaskedLM, "
                    f"EuroBertModel, ...ForSequenceClassification, ...ForTokenClassification)")


def _nomic_bert(c: HFConfig) -> dict:
    """NomicBertModel (nomic-embed-text): BERT's post-LN blocks and embedding LayerNorm with bias-free
    q/k/v/o and a bias-free gated MLP (gate / up / down, hidden_act silu), rotary q/k of head_dim
    (rope_parameters), token types, no position table, no pooler (its sequence classifier adds
    one); heads as BERT's."""
    fields = _bert(c)
    return {**fields, "qkv_bias": False, "attn_out_bias": False, "mlp_bias": False, "gated_mlp": True,
            "activation": c.activation("silu", "hidden_act"), "position": "rotary", "pooler": False,
            "head_dim": c.integer("head_dim", fields["hidden"] // fields["heads"]),
            "max_positions": c.integer("max_position_embeddings", 2048)}


ENCODER_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "distilbert": _distilbert, "mpnet": _mpnet, "ibert": _bert,  # IBertModel: RoBERTa's tensors (quant_mode: buffers)
    "deberta": _deberta(False), "deberta-v2": _deberta(True), "modernbert": _modernbert,
    "albert": _albert, "flaubert": _flaubert, "esm": _esm,
    "eurobert": _eurobert, "nomic_bert": _nomic_bert, **FUNNEL_MAPPERS,
}

def _albert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BERT's heads; AlbertForPreTraining's sentence-order head (AlbertSOPHead) is Linear(h, num_labels)."""
    fields = apply_head(fields, c, architecture(c))
    names = c.texts("architectures", None) or [""]
    if names[0].endswith("ForPreTraining"):
        return {**fields, "classifier": {"num_labels": c.num_labels()}}
    return fields


def _modernbert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """ModernBertForMaskedLM (also without `architectures`), the bare ModernBertModel, and the
    classifier heads: ModernBertPredictionHead (the MLM head's dense + norm) then Linear(h, labels)
    with bias, on the pooled first / mean token (sequence classification: num_labels; multiple
    choice: 1) or on every token (token classification, question answering: num_labels)."""
    name = (c.texts("architectures", None) or ["ModernBertForMaskedLM"])[0]
    if name.endswith("ForMaskedLM"):
        return fields
    bare = {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    if name.endswith("BertModel"):
        return {**bare, "mlm_transform": False}
    heads = {"ForSequenceClassification": (c.num_labels(), False), "ForMultipleChoice": (1, False),
             "ForTokenClassification": (c.num_labels(), True), "ForQuestionAnswering": (c.num_labels(), True)}
    for suffix, (labels, per_token) in heads.items():
        if name.endswith(suffix):
            return {**bare, "classifier": {"num_labels": labels, "per_token": per_token}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for modernbert (ModernBertForMaskedLM, "
                    f"ModernBertModel, ...ForSequenceClassification, ...ForTokenClassification, "
                    f"...ForQuestionAnswering, ...ForMultipleChoice)")


ENCODER_HEADS: dict[str, Callable[..., dict]] = {**FUNNEL_HEADS, "modernbert": _modernbert_head, "albert": _albert_head,
                                                 "flaubert": _flaubert_head, "eurobert": _eurobert_head}
"""Types whose head classes `hf.apply_head` would misread (ModernBERT's, ALBERT's pre-training head)."""

ENCODER_UNMODELLED: dict[str, str] = {}
"""Encoder types transformers 5.24 ships that the spec cannot yet express exactly."""
