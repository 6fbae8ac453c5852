"""HF config mappers of the BART-shaped encoder-decoders and Whisper (transformers 5.24
modeling_bart.py and the files that copy it: mbart, marian, pegasus, blenderbot,
blenderbot_small, plbart, mvp; modeling_whisper.py).

Every one is an encoder stack and a decoder stack of `d_model` wide blocks with biased q/k/v/out
projections (Whisper's k_proj has no bias), a plain fc1 -> activation -> fc2 MLP, LayerNorms with
bias, cross-attention in every decoder block (its own `encoder_attn_layer_norm`), one position
table per stack and one token table (`shared`) tied to both stacks and to the LM head;
`final_logits_bias` is a buffer, not a parameter. They differ in the norm placement, the
embedding and final norms, and the position tables (`FAMILY` below).
"""

from __future__ import annotations

import math
from typing import Callable, NamedTuple

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE


class Shape(NamedTuple):
    """What one family's modeling file builds around its blocks."""

    placement: str
    """post: x = norm(x + f(x)) (BartEncoderLayer); pre: x + f(norm(x)) (MBartEncoderLayer)."""
    embedding_norm: bool
    """`layernorm_embedding` after each stack's embeddings."""
    final_norm: bool
    """`layer_norm` after each stack's last block."""
    offset: int
    """Extra rows of each learned position table (BartLearnedPositionalEmbedding.offset = 2)."""
    frozen: str
    """Position tables holding fixed sinusoids (requires_grad False): none or both."""


FAMILY: dict[str, Shape] = {
    "bart": Shape("post", True, False, 2, "none"),  # BartEncoder / BartDecoder
    "mbart": Shape("pre", True, True, 2, "none"),  # MBartEncoder: layernorm_embedding and layer_norm
    "plbart": Shape("post", True, False, 2, "none"),  # copied from Bart
    "mvp": Shape("post", True, False, 2, "none"),  # copied from Bart (+ optional prompts)
    "marian": Shape("post", False, False, 0, "both"),  # MarianSinusoidalPositionalEmbedding
    "pegasus": Shape("pre", False, True, 0, "both"),  # PegasusSinusoidalPositionalEmbedding
    "blenderbot": Shape("pre", False, True, 0, "none"),  # BlenderbotLearnedPositionalEmbedding
    "blenderbot-small": Shape("post", True, False, 0, "none"),  # BlenderbotSmallLearnedPositionalEmbedding
}

_HEADS = ("ForConditionalGeneration", "MTModel", "Model", "ForCausalLM", "ForSequenceClassification",
          "ForQuestionAnswering")  # the last two: hf_seq2seq_more.SEQ2SEQ_HEADS
"""Architectures read: the LM head on the decoder (MarianMTModel is Marian's), the bare
encoder-decoder (BartModel: `shared`, encoder, decoder), or the decoder alone (BartForCausalLM)."""


def _decoder_alone(c: HFConfig) -> bool:
    """Whether the config names the decoder built alone (...ForCausalLM); other heads are refused."""
    names = c.texts("architectures", None)
    if names and not names[0].endswith(_HEADS):
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: the encoder-decoder "
                        f"...ForConditionalGeneration, MarianMTModel, the bare ...Model, the decoder alone "
                        f"...ForCausalLM, ...ForSequenceClassification, ...ForQuestionAnswering)")
    return bool(names) and names[0].endswith("ForCausalLM")


def _alone(fields: dict) -> dict:
    """The decoder stack of `fields` as a decoder model (XxxForCausalLM: XxxDecoderWrapper + tied
    lm_head): its blocks keep their encoder_attn weights unused; its one position table."""
    s2s = dict(fields["seq2seq"])
    s2s.update(idle_cross_attention=True, encoder_positions=None, audio=None,
               frozen_positions="both" if s2s.get("frozen_positions") == "both" else "none")
    return {**fields, "arch": "decoder", "layers": fields["decoder_layers"], "decoder_layers": None, "seq2seq": s2s}


def _same(c: HFConfig, encoder_key: str, decoder_key: str) -> int:
    """A size both stacks must share (the spec has one width per model)."""
    encoder, decoder = c.size(encoder_key), c.size(decoder_key)
    if encoder != decoder:
        raise SpecError(f"{c.source}: {encoder_key} ({encoder}) != {decoder_key} ({decoder}): stacks of "
                        f"different widths are not modelled")
    return encoder


def _stacks(c: HFConfig, untied: bool = False) -> dict:
    """Sizes and block conventions shared by every family here (the decoder's alone for ...ForCausalLM);
    `untied`: the caller models tie_word_embeddings false (its own token tables, `_untied_tables`)."""
    alone = _decoder_alone(c)
    tied = c.flag("tie_word_embeddings", True)
    if not tied and not untied:  # transformers 5.24 then unties shared, both embed_tokens and lm_head
        raise SpecError(f"{c.source}: tie_word_embeddings: false is not modelled (transformers then keeps "
                        f"separate shared, encoder and decoder token tables and an untied lm_head)")
    hidden = c.size("d_model")
    return dict(
        arch="encoder_decoder",
        layers=c.size("decoder_layers") if alone else c.size("encoder_layers"),
        decoder_layers=c.size("decoder_layers"),
        hidden=hidden,
        heads=c.size("decoder_attention_heads") if alone else _same(c, "encoder_attention_heads", "decoder_attention_heads"),
        ffn_hidden=c.size("decoder_ffn_dim") if alone else _same(c, "encoder_ffn_dim", "decoder_ffn_dim"),
        vocab=c.size("vocab_size"),
        position="learned",
        **GPT_STYLE,  # biased projections and fc1/fc2, LayerNorm(d_model) with bias, no gate
        norm_eps=1e-5,  # nn.LayerNorm default eps
        activation=c.activation("gelu", "activation_function"),
        # scale_embedding: embed_scale = sqrt(d_model) (BartScaledWordEmbedding)
        embedding_scale=math.sqrt(hidden) if c.flag("scale_embedding", False) else None,
        tied_embeddings=tied,
        dropout=c.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
    )


def _untied_tables(c: HFConfig) -> int:
    """Token tables beside `shared` under tie_word_embeddings false: BartModel._tied_weights_keys tie
    encoder / decoder embed_tokens to shared only when tied (transformers 5.24 modeling_bart.py), so
    both stacks keep their own; a decoder alone (BartForCausalLM) has no `shared`."""
    return 0 if c.flag("tie_word_embeddings", True) or _decoder_alone(c) else 2


def _bart_like(model_type: str) -> Callable[[HFConfig], dict]:
    shape = FAMILY[model_type]

    def mapper(c: HFConfig) -> dict:
        if model_type == "mvp" and c.flag("use_prompt", False):
            raise SpecError(f"{c.source}: use_prompt: true is not modelled (MVP's MvpPrompt tables and MLPs)")
        if model_type == "marian" and not c.flag("share_encoder_decoder_embeddings", True):
            raise SpecError(f"{c.source}: share_encoder_decoder_embeddings: false is not modelled (a separate "
                            f"decoder token table of decoder_vocab_size rows)")
        fields = dict(
            **_stacks(c, untied=True),
            max_positions=c.size("max_position_embeddings"),
            norm_placement=shape.placement,
            embedding_norm=shape.embedding_norm,
            final_norm=shape.final_norm,
            seq2seq=dict(position_offset=shape.offset, frozen_positions=shape.frozen,
                         own_token_tables=_untied_tables(c)),
        )
        return _alone(fields) if _decoder_alone(c) else fields

    mapper.__doc__ = f"{model_type}: {shape}"
    return mapper


def _whisper(c: HFConfig) -> dict:
    """WhisperForConditionalGeneration: conv1 / conv2 front-end over num_mel_bins frames, a fixed
    sinusoid encoder table (max_source_positions rows, requires_grad False), a learned decoder
    table (max_target_positions), pre-LN blocks with final layer_norm per stack, k_proj without
    bias, decoder embed_tokens tied to proj_out."""
    fields = dict(
        **_stacks(c),
        max_positions=c.size("max_target_positions"),
        norm_placement="pre",
        final_norm=True,
        seq2seq=dict(encoder_positions=c.size("max_source_positions"), frozen_positions="encoder",
                     key_bias=False, audio=dict(mel_bins=c.size("num_mel_bins"))),
    )
    return _alone(fields) if _decoder_alone(c) else fields


def _trocr(c: HFConfig) -> dict:
    """TrOCRForCausalLM (the text decoder of TrOCR's VisionEncoderDecoderModel, built alone):
    BART's post-LN decoder blocks, each with an unused encoder_attn whose k/v read
    cross_attention_hidden_size features; a learned table with BART's + 2 offset, or (use_learned_
    position_embeddings false) sinusoids in a plain tensor, no parameters; optional
    layernorm_embedding; no final norm; lm_head `output_projection` tied to embed_tokens."""
    names = c.texts("architectures", None)
    if names and not names[0].endswith("ForCausalLM"):
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: TrOCRForCausalLM)")
    hidden = c.size("d_model")
    learned = c.flag("use_learned_position_embeddings", True)
    return dict(
        layers=c.size("decoder_layers"), hidden=hidden, heads=c.size("decoder_attention_heads"),
        ffn_hidden=c.size("decoder_ffn_dim"), vocab=c.size("vocab_size"),
        max_positions=c.size("max_position_embeddings"), position="learned" if learned else "none",
        **GPT_STYLE, norm_eps=1e-5, norm_placement="post", activation=c.activation("gelu", "activation_function"),
        embedding_norm=c.flag("layernorm_embedding", True), final_norm=False,
        embedding_scale=math.sqrt(hidden) if c.flag("scale_embedding", False) else None,
        tied_embeddings=c.flag("tie_word_embeddings", True),
        dropout=c.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
        seq2seq=dict(idle_cross_attention=True, position_offset=2 if learned else 0,
                     cross_input=c.integer("cross_attention_hidden_size", None, nullable=True)),
    )


def _t5gemma2(c: HFConfig) -> dict:
    """T5Gemma2ForConditionalGeneration / T5Gemma2Model: a Gemma 3 text encoder (sliding / full
    blocks, q/k norms, sandwich norms) with Gemma 3's SigLIP tower and projector, a decoder of the
    same blocks whose T5Gemma2MergedAttention scores each query against its own keys and the
    encoder's through the same q/k/v/o (no cross weights), one token table (with its eoi vector)
    tied to both stacks and to the head (untied: the decoder's table and the head are their own)."""
    from modelplan.specs.hf_llama import LLAMA_MAPPERS
    from modelplan.specs.hf_other import _vision

    names = c.texts("architectures", None)
    if names and not names[0].endswith(("ForConditionalGeneration", "Model", "ForSequenceClassification",
                                        "ForTokenClassification")):  # the classifiers: hf_encoder_heads_more
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: "
                        f"T5Gemma2ForConditionalGeneration, T5Gemma2Model, ...ForSequenceClassification, "
                        f"...ForTokenClassification)")
    encoder, decoder = c.sub("encoder"), c.sub("decoder")
    if encoder is None or decoder is None or encoder.sub("text_config") is None:
        raise SpecError(f"{c.source}: encoder.text_config / decoder: missing (T5Gemma2Config nests both)")
    text = encoder.sub("text_config")
    fields = LLAMA_MAPPERS["gemma3_text"](text)
    for key in ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
                "vocab_size", "sliding_window"):
        if text.data.get(key) != decoder.data.get(key):
            raise SpecError(f"{c.source}: decoder.{key} ({decoder.data.get(key)}) != encoder.text_config.{key} "
                            f"({text.data.get(key)}): stacks of different shapes are not modelled")
    kinds = fields.get("layer_types") or ["full_attention"]  # decoder block i is kinds[i % len], as the encoder's
    own = decoder.texts("layer_types", None) or []
    if any(kind != kinds[i % len(kinds)] for i, kind in enumerate(own)):
        raise SpecError(f"{c.source}: decoder.layer_types: {own} does not follow encoder.text_config's "
                        f"pattern {kinds}")
    vision = encoder.sub("vision_config")
    if vision is not None:  # Gemma 3's SigLIP tower and projector (hf_other._gemma3)
        fields["vision"] = _vision(vision, False, projector_norm=True)
        fields["vision"]["pooled_tokens"] = encoder.integer("mm_tokens_per_image", 256)
    rope = text.sub("rope_parameters")  # per layer type (transformers 5); the full_attention blocks' base
    rope = rope.sub("full_attention") if rope is not None and rope.has("full_attention") else rope
    theta = rope.number("rope_theta", None, nullable=True) if rope is not None else None
    tied = c.flag("tie_word_embeddings", True)
    return {**fields, "arch": "encoder_decoder", "decoder_layers": decoder.size("num_hidden_layers"),
            "rope_theta": theta,
            "final_logit_softcap": decoder.number("final_logit_softcapping", None, nullable=True),
            # T5Gemma2LMHead.out_proj and the decoder's embed_tokens tied to the encoder's embed_tokens
            # only under tie_word_embeddings (_tied_weights_keys, transformers 5.24 modeling_t5gemma2.py)
            "tied_embeddings": tied, "seq2seq": dict(merged_cross_attention=True, eoi_embedding=True,
                                                     own_token_tables=0 if tied else 1)}


N18ENCDEC_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    **{name: _bart_like(name) for name in FAMILY}, "whisper": _whisper, "trocr": _trocr,
    "t5gemma2": _t5gemma2,
}

N18ENCDEC_UNMODELLED: dict[str, str] = {}
"""Encoder-decoder types transformers 5.24 ships that the spec cannot yet express exactly."""
