"""HF config mapper of the generic text EncoderDecoderModel (transformers 5.24
modeling_encoder_decoder.py): `encoder` built by AutoModel (BertModel: embeddings, post-LN blocks,
pooler), `decoder` by AutoModelForCausalLM (BertLMHeadModel / GPT2LMHeadModel with
add_cross_attention: hf_vlm_encdec's decoder reading, whose every block cross-attends to the
encoder's states), and enc_to_dec_proj Linear(encoder width, decoder width) when the widths
differ and the decoder has no cross_attention_hidden_size.

The encoder is written as `VisionSpec.tower` layers (hf_audio_towers.encoder_blocks: the same
projections and norms, their order aside), priced per source sequence of the encoder's
max_position_embeddings tokens (one per decoder sequence): its token, position and token-type
tables are lookups, its embedding LayerNorm runs on every source token, the pooler
(Linear(h, h) + tanh on the first token) once."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_audio_towers import audio_tower, encoder_blocks
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_vision import _linear, _norm
from modelplan.specs.hf_vlm_encdec import _BERT, _ved_decoder, _ved_decoder_config


def _bert_encoder(e: HFConfig) -> tuple[list[dict], int, int, int]:
    """(tower layers, width, heads, source tokens) of BertModel (add_pooling_layer true)."""
    e = HFConfig({**_BERT, **e.data}, e.source, e.path)
    if e.flag("is_decoder", False) or e.flag("add_cross_attention", False):
        raise SpecError(f"{e.source}: encoder.is_decoder / add_cross_attention: true is not modelled for the encoder")
    h, heads, ffn, n = (e.size(k) for k in ("hidden_size", "num_attention_heads", "intermediate_size", "num_hidden_layers"))
    tokens = e.size("max_position_embeddings")
    rows = dict(rows=tokens)
    layers = [_vec("embeddings/word", h, e.size("vocab_size")), _vec("embeddings/position", h, tokens),
              _vec("embeddings/token_type", h, e.size("type_vocab_size")), {**_norm("embeddings/norm", h), **rows},
              *encoder_blocks(h, heads, ffn, n, tokens, k_bias=True, source="encoder"),
              {**_linear("pooler", h, h, True), "rows": 1}]
    return layers, h, heads, tokens


def _encoder_decoder(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """EncoderDecoderModel (module docstring)."""
    kind, e = _sub(c, "encoder", "bert")
    if kind != "bert":
        raise SpecError(f"{c.source}: encoder.model_type: unsupported '{kind}' (supported: bert)")
    layers, width, heads, tokens = _bert_encoder(e)
    fields, d = _ved_decoder(c, text_mappers)
    h = fields["hidden"]
    cross = d.integer("cross_attention_hidden_size", None, nullable=True)
    if cross is not None and cross != width:
        raise SpecError(f"{c.source}: decoder.cross_attention_hidden_size ({cross}) must equal the encoder's "
                        f"hidden_size ({width})")
    connector = [{**_linear("enc_to_dec_proj", width, h, True), "rows": tokens}] if width != h and cross is None else []
    fields["seq2seq"] = {**fields["seq2seq"], "cross_memory": tokens, "cross_input": cross or h}
    fields["vision"] = audio_tower(layers, width, heads, e.integer("intermediate_size", _BERT["intermediate_size"]),
                                   e.integer("num_hidden_layers", _BERT["num_hidden_layers"]), tokens, connector,
                                   unit=f"source sequence of {tokens} tokens")
    return fields


def _head(fields: dict, c: HFConfig, apply_head, architecture) -> dict:
    """EncoderDecoderModel is the whole composite; its LM head is the decoder's head class."""
    name = architecture(c)
    if name not in (None, "EncoderDecoderModel"):
        raise SpecError(f"{c.source}: architectures: '{name}' not modelled (supported: EncoderDecoderModel)")
    _, head, d = _ved_decoder_config(c)
    return {**apply_head(fields, d, head), "arch": "decoder"}


TEXT_ENCDEC_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"encoder-decoder": _encoder_decoder}
TEXT_ENCDEC_HEADS = {"encoder-decoder": _head}
"""model_type -> its head reading (hf.from_hf_config)."""
