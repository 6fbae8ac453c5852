"""HF config mappers of the T5 and BART successors (transformers 5.24 modeling code): umt5, longt5,
switch_transformers (T5's modules, `hf_other._t5`), led, m2m_100 and nllb-moe (BART's, `hf_n18encdec._stacks`),
t5gemma (Gemma 2's, `hf_llama`) and the encoder longformer (RoBERTa's with LED's attention), with
the differences each modeling file builds; the attention options are `specs/relative_attention.py`."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_n18encdec import _stacks, _untied_tables
from modelplan.specs.hf_other import OTHER_MAPPERS

_bert = GPT_MAPPERS["bert"]


def _relative(fields: dict, **options) -> dict:
    """`fields` with extras.relative options added."""
    extras = dict(fields.get("extras") or {})
    extras["relative"] = {**extras.get("relative", {}), **options}
    return {**fields, "extras": extras}


def _umt5(c: HFConfig) -> dict:
    """UMT5ForConditionalGeneration: mT5's modules (gated-gelu default) with a relative_attention_bias
    table in every self-attention block of both stacks (UMT5Attention: has_relative_attention_bias
    always true); UMT5EncoderModel: the encoder alone."""
    fields = OTHER_MAPPERS["mt5"](c)
    return _relative(fields, bias_table="every_block")


def _longt5(c: HFConfig) -> dict:
    """LongT5ForConditionalGeneration: T5's modules whose encoder attends locally (LongT5LocalAttention:
    blocks of block_len = local_radius + 1 queries over 3 blocks of keys, Guo et al. 2022 sec. 3.1.1) or
    also to one summary token per global_block_size tokens (transient-global: its own bias table
    in the first block and a global_input_layer_norm in every encoder block, sec. 3.1.2)."""
    kind = c.text("encoder_attention_type", "local")
    if kind not in ("local", "transient-global"):
        raise SpecError(f"{c.source}: encoder_attention_type: unsupported '{kind}' (local, transient-global)")
    fields = OTHER_MAPPERS["t5"](c)
    window = 3 * (c.integer("local_radius", 127) + 1)  # keys per query: the block and its two neighbours
    options = {"transient_global": c.integer("global_block_size", 16)} if kind == "transient-global" else {}
    if fields["arch"] == "encoder":  # LongT5EncoderModel: every block is an encoder block
        fields = {**fields, "layer_types": ["sliding_attention"], "sliding_window": window}
        return _relative(fields, **options) if options else fields
    return _relative({**fields, "sliding_window": window}, encoder_sliding=True, **options)


def _switch_transformers(c: HFConfig) -> dict:
    """SwitchTransformersForConditionalGeneration: T5 v1.0's modules (dense_act_fn, no gate) whose
    sparse blocks swap the MLP for a Switch layer (Fedus et al. 2021 sec. 2.1: router
    Linear(h, num_experts, router_bias), top-1, the output scaled by the router probability):
    encoder block i is sparse when i % step == 1 (or step == 1), step = num_layers //
    num_sparse_encoder_layers, and likewise the decoder. Untied (tie_word_embeddings false), each stack's
    embed_tokens and lm_head are their own beside `shared` (SwitchTransformersModel._tied_weights_keys,
    transformers 5.24 modeling_switch_transformers.py)."""
    layers = c.size("num_layers")
    # SwitchTransformersConfig: num_decoder_layers 12 by default, None -> num_layers
    decoder = c.integer("num_decoder_layers", 12, nullable=True) or layers
    fields = OTHER_MAPPERS["t5"](HFConfig({**c.data, "feed_forward_proj": c.text("dense_act_fn", "relu")},
                                          c.source, c.path, c.defaults))
    if fields["arch"] == "encoder":
        decoder = 0
    sparse = []
    stacks = ((0, layers, "num_sparse_encoder_layers"), (layers, decoder, "num_sparse_decoder_layers"))
    for offset, stack, key in stacks:
        count = c.integer(key, 3)
        step = stack // count if count else stack  # SwitchTransformersConfig.__post_init__ (its 'HACK' for 0)
        # SwitchTransformersStack: is_sparse = i % step == 1 or step == 1 (so 0 sparse layers still make block 1 sparse)
        sparse += [offset + i for i in range(stack) if step > 0 and (i % step == 1 or step == 1)]
    fields["decoder_layers"] = decoder or None
    if not c.flag("tie_word_embeddings", True):  # SwitchTransformersConfig does not force the tie (T5Config does)
        if not decoder:
            raise SpecError(f"{c.source}: tie_word_embeddings: false is not modelled for the encoder alone "
                            f"(its embed_tokens beside `shared`)")
        fields["tied_embeddings"] = False
        fields["seq2seq"] = {**(fields.get("seq2seq") or {}), "own_token_tables": 2}
    if sparse:
        fields["moe"] = dict(num_experts=c.size("num_experts"), top_k=1, expert_ffn_hidden=fields["ffn_hidden"],
                             layers=sparse, router_bias=c.flag("router_bias", False), norm_topk_prob=False)
    return fields


def _windows(c: HFConfig) -> int:
    """Longformer's attention_window (one int, or one per layer, all equal) as keys per query:
    attention_window // 2 on either side and the query's own (Beltagy et al. 2020 sec. 3.1)."""
    windows = c.data.get("attention_window", 512)
    windows = windows if isinstance(windows, list) else [windows]
    if not windows or len(set(windows)) != 1 or not isinstance(windows[0], int) or windows[0] <= 0:
        raise SpecError(f"{c.source}: attention_window: {windows} (one positive window for every layer is modelled)")
    return 2 * (windows[0] // 2) + 1


def _longformer(c: HFConfig) -> dict:
    """LongformerModel: RoBERTa's modules (read as bert, hf_roberta) whose self-attention keeps
    query_global / key_global / value_global beside query / key / value (all biased) and attends
    within attention_window; the global tokens' extra rows are not in the FLOPs."""
    fields = {**_bert(c), "layer_types": ["sliding_attention"], "sliding_window": _windows(c),
              "max_positions": c.integer("max_position_embeddings", 514)}
    return _relative(fields, global_projections=True)


def _m2m_100(c: HFConfig) -> dict:
    """M2M100ForConditionalGeneration (NLLB-200's class too): pre-LN BART-shaped stacks with a final
    layer_norm each, no layernorm_embedding, sinusoidal positions held as buffers (no parameters),
    embeddings scaled by sqrt(d_model) (scale_embedding, default true), `shared` tied to both stacks
    and the head."""
    fields = dict(
        **_stacks(c, untied=True), max_positions=c.integer("max_position_embeddings", 1024), norm_placement="pre",
        embedding_norm=False, final_norm=True, seq2seq=dict(own_token_tables=_untied_tables(c)),
    )
    return {**fields, "position": "none",
            "embedding_scale": fields["hidden"] ** 0.5 if c.flag("scale_embedding", True) else None}


def _nllb_moe(c: HFConfig) -> dict:
    """NllbMoeForConditionalGeneration: M2M100's stacks (`_m2m_100`) whose block i of each stack is
    sparse when (i + 1) % sparse_step == 0: NllbMoeSparseMLP's router Linear(h, num_experts,
    router_bias), top-2 experts of the dense MLP's biased fc1 / fc2 (Lepikhin et al. 2020's top-2
    gating, NLLB Team 2022 sec. 6.2)."""
    fields = _m2m_100(c)
    encoder, decoder = fields["layers"], fields["decoder_layers"]
    sparse = []
    for offset, stack, key in ((0, encoder, "encoder_sparse_step"), (encoder, decoder, "decoder_sparse_step")):
        step = c.integer(key, 4)
        sparse += [offset + i for i in range(stack) if step > 0 and (i + 1) % step == 0]
    if sparse:
        fields["moe"] = dict(num_experts=c.size("num_experts"), top_k=2, expert_ffn_hidden=fields["ffn_hidden"],
                             layers=sparse, router_bias=c.flag("router_bias", False))
    return fields


def _led(c: HFConfig) -> dict:
    """LEDForConditionalGeneration: BART's post-LN stacks (layernorm_embedding each, no final norm),
    learned position tables of max_encoder_position_embeddings / max_decoder_position_embeddings rows
    (no offset); encoder blocks of Longformer attention (Beltagy et al. 2020 sec. 3.1: attention_window
    / 2 keys on either side, LEDEncoderSelfAttention's query / key / value and the unused-by-default
    query_global / key_global / value_global, all biased)."""
    if (c.texts("architectures", None) or [""])[0].endswith("ForCausalLM"):
        raise SpecError(f"{c.source}: architectures: LED's decoder alone is not modelled (transformers has no "
                        f"LEDForCausalLM)")
    fields = dict(
        **_stacks(c, untied=True),
        max_positions=c.size("max_decoder_position_embeddings"),
        norm_placement="post", embedding_norm=True, final_norm=False,
        seq2seq=dict(encoder_positions=c.size("max_encoder_position_embeddings"), own_token_tables=_untied_tables(c)),
        sliding_window=_windows(c),  # LEDEncoderSelfAttention: one_sided_attn_window_size each side
    )
    return _relative(fields, encoder_sliding=True, global_projections=True)


def _t5gemma(c: HFConfig) -> dict:
    """T5GemmaForConditionalGeneration / T5GemmaModel: an encoder and a decoder of Gemma 2 blocks
    (sandwich RMSNorms, sliding / full layer_types, softcaps; `hf_llama._gemma2` on each nested
    config), each decoder block with cross_attn (q Linear(h, q), k / v Linear(cross_attention_hidden_size,
    kv), o) between pre_ / post_cross_attn_layernorm; encoder and decoder embed_tokens of their own, the
    head tied to the decoder's; T5GemmaEncoderModel: the encoder alone."""
    from modelplan.specs.hf_llama import LLAMA_MAPPERS

    encoder, decoder = c.sub("encoder"), c.sub("decoder")
    if encoder is None or decoder is None:
        raise SpecError(f"{c.source}: encoder / decoder: missing (T5GemmaConfig nests both)")
    fields = LLAMA_MAPPERS["gemma2"](encoder)
    names = c.texts("architectures", None) or ["T5GemmaForConditionalGeneration"]
    classifier = names[0].endswith(("ForSequenceClassification", "ForTokenClassification"))  # hf_encoder_heads_more
    if names[0].endswith("EncoderModel") or (classifier and not c.flag("is_encoder_decoder", True)):
        return {**fields, "arch": "encoder", "lm_head": False, "tied_embeddings": False, "final_logit_softcap": None}
    if not names[0].endswith(("ForConditionalGeneration", "Model")) and not classifier:
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: T5GemmaForConditional"
                        f"Generation, T5GemmaModel, T5GemmaEncoderModel, ...ForSequenceClassification, "
                        f"...ForTokenClassification)")
    own = LLAMA_MAPPERS["gemma2"](decoder)
    for key in ("hidden", "heads", "kv_heads", "head_dim", "ffn_hidden", "vocab", "sliding_window", "layer_types",
                "attention_scale", "attn_logit_softcap"):
        if own.get(key) != fields.get(key):
            raise SpecError(f"{c.source}: decoder.{key} ({own.get(key)}) != encoder.{key} ({fields.get(key)}): "
                            f"stacks of different shapes are not modelled")
    if decoder.integer("cross_attention_hidden_size", fields["hidden"], nullable=True) not in (None, fields["hidden"]):
        raise SpecError(f"{c.source}: decoder.cross_attention_hidden_size != encoder.hidden_size is not modelled")
    bare = names[0].endswith("Model") or classifier
    tied = c.flag("tie_word_embeddings", True)  # false: lm_head.out_proj its own (_tied_weights_keys,
    # transformers 5.24 modeling_t5gemma.py)
    return {**fields, "arch": "encoder_decoder", "decoder_layers": decoder.size("num_hidden_layers"),
            "lm_head": not bare, "tied_embeddings": not bare and tied,
            "final_logit_softcap": own.get("final_logit_softcap"),
            "extras": {"encoder_token_table": True, "cross_post_norm": True}}


SEQ2SEQ_MORE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "umt5": _umt5, "longt5": _longt5, "switch_transformers": _switch_transformers, "led": _led,
    "t5gemma": _t5gemma, "longformer": _longformer, "m2m_100": _m2m_100,
    "nllb-moe": _nllb_moe,
}


def _t5_heads(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """The T5 / mT5 / UMT5 head classes beside the LM head (modeling_t5.py): ...ForSequenceClassification,
    T5ClassificationHead (dense h x h and out_proj Linear(h, num_labels), biased) on the decoder's
    last eos state: a pooler and a classifier; ...ForQuestionAnswering, qa_outputs Linear(h, num_labels)
    on every decoder token; ...ForTokenClassification, the encoder alone (T5EncoderModel) and a
    per-token Linear(h, num_labels); others as `hf.apply_head` reads them."""
    name = architecture(c) or ""
    labels = c.num_labels()
    bare = {**fields, "lm_head": False, "lm_head_bias": False}
    if name.endswith("ForSequenceClassification"):
        return {**bare, "pooler": True, "classifier": {"num_labels": labels}}
    if name.endswith("ForQuestionAnswering"):
        return {**bare, "classifier": {"num_labels": labels, "per_token": True}}
    if name.endswith("ForTokenClassification"):
        return {**bare, "arch": "encoder", "decoder_layers": None, "norm_placement": "pre", "tied_embeddings": False,
                "classifier": {"num_labels": labels, "per_token": True}}
    return apply_head(fields, c, name or None)


def _bart_heads(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """The BART family's classifier heads (modeling_bart.py): ...ForSequenceClassification,
    BartClassificationHead (dense d x d and out_proj Linear(d, num_labels), biased) on the decoder's
    last eos state: a pooler and a classifier; ...ForQuestionAnswering, qa_outputs Linear(d, 2) on
    every decoder token (the class sets num_labels 2); others as `hf.apply_head` reads them."""
    name = architecture(c) or ""
    bare = {**fields, "lm_head": False, "lm_head_bias": False}
    if name.endswith("ForSequenceClassification"):
        return {**bare, "pooler": True, "classifier": {"num_labels": c.num_labels()}}
    if name.endswith("ForQuestionAnswering"):
        return {**bare, "classifier": {"num_labels": 2, "per_token": True}}
    return apply_head(fields, c, name or None)


SEQ2SEQ_HEADS: dict[str, Callable[..., dict]] = {
    "t5": _t5_heads, "mt5": _t5_heads, "umt5": _t5_heads,
    **{name: _bart_heads for name in ("bart", "mbart", "plbart", "mvp", "led", "bigbird_pegasus")},
}
"""Types whose head classes `hf.apply_head` would misread, to their head readers."""
