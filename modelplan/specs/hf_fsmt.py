"""HF config mapper of FSMT (transformers 5.24 modeling_fsmt.py FSMTForConditionalGeneration, the
fairseq WMT19 transformer): post-LN encoder and decoder blocks of BART's shape (biased q / k / v /
out and fc1 / fc2, LayerNorms with bias, cross-attention in every decoder block), no embedding or
final norms, a sinusoid-initialised position table per stack of max_position_embeddings +
padding_idx + 1 rows (trainable in 5.24), and separate vocabularies: the encoder's embed_tokens
of src_vocab_size rows (`extras.encoder_vocab`), the decoder's of tgt_vocab_size rows and the
decoder's output_projection. With tie_word_embeddings FSMTForConditionalGeneration._tied_weights_keys
ties the encoder's table and the output projection to the decoder's table: one table of
tgt_vocab_size rows (also when src_vocab_size differs)."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE
from modelplan.specs.hf_n18encdec import _same


def _fsmt(c: HFConfig) -> dict:
    """FSMTForConditionalGeneration / FSMTModel (module docstring)."""
    names = c.texts("architectures", None)
    if names and names[0] not in ("FSMTForConditionalGeneration", "FSMTModel"):
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: "
                        f"FSMTForConditionalGeneration, FSMTModel)")
    hidden = c.size("d_model")
    pad, tied = c.integer("pad_token_id", 1), c.flag("tie_word_embeddings", False)
    src = c.divisor("src_vocab_size")
    if pad < 0:
        raise SpecError(f"{c.source}: pad_token_id: must be >= 0, got {pad}")
    return dict(
        arch="encoder_decoder", layers=c.size("encoder_layers"), decoder_layers=c.size("decoder_layers"),
        hidden=hidden, heads=_same(c, "encoder_attention_heads", "decoder_attention_heads"),
        ffn_hidden=_same(c, "encoder_ffn_dim", "decoder_ffn_dim"), vocab=c.size("tgt_vocab_size"),
        max_positions=c.size("max_position_embeddings"), position="learned", **GPT_STYLE, norm_eps=1e-5,
        activation=c.activation("relu", "activation_function"), norm_placement="post", embedding_norm=False,
        final_norm=False, embedding_scale=math.sqrt(hidden) if c.flag("scale_embedding", True) else None,
        tied_embeddings=tied,
        dropout=c.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
        # SinusoidalPositionalEmbedding(max_position_embeddings + padding_idx + 1, d_model, padding_idx)
        seq2seq=dict(position_offset=pad + 1, frozen_positions="none"),
        extras=None if tied else dict(encoder_token_table=True, encoder_vocab=src),
    )


FSMT_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"fsmt": _fsmt}
