"""HF config mapper of ProphetNet (`prophetnet`, Qi et al. 2020; transformers 5.24
modeling_prophetnet.py), counted exactly, its n-gram streams priced as the main stream alone.

ProphetNetModel: one word table tied to both stacks and the LM head; per stack a learned position
table (max_position_embeddings rows, no offset) and `embeddings_layer_norm`; post-LN blocks of
biased q / k / v / out projections and a biased intermediate -> output feed-forward (BART's
shape, hf_n18encdec.py), cross-attention in every decoder block; no final norm. Beyond BART: the
decoder's `ngram_embeddings` (ngram x h, an input-side table) and, in every decoder block's
ProphetNetNgramSelfAttention, `relative_pos_embeddings` Linear(h, num_buckets x heads) with bias
(`side` groups). ProphetNetForCausalLM is the decoder alone (its cross-attention kept, unused).
Approximation: the decoder also runs `ngram` predicting streams beside the main one (each
attending to the main stream), which the FLOPs leave out: they price one stream.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import linear, table
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18encdec import _alone, _decoder_alone, _stacks

_BART_KEYS = {"d_model": "hidden_size", "encoder_layers": "num_encoder_layers", "decoder_layers": "num_decoder_layers",
              "encoder_attention_heads": "num_encoder_attention_heads",
              "decoder_attention_heads": "num_decoder_attention_heads"}
"""ProphetNetConfig's names of the sizes hf_n18encdec._stacks reads by BART's."""


def _prophetnet(c: HFConfig) -> dict:
    """ProphetNetForConditionalGeneration / ProphetNetModel / ProphetNetForCausalLM (module docstring)."""
    if not c.flag("add_cross_attention", True):
        raise SpecError(f"{c.source}: add_cross_attention: false (decoder blocks without cross-attention) is not "
                        "modelled for prophetnet")
    bart = HFConfig({**c.data, **{ours: c.size(theirs) for ours, theirs in _BART_KEYS.items()}}, c.source, c.path)
    fields = _stacks(bart, untied=True)
    h, heads = fields["hidden"], fields["heads"]
    # untied (_tied_weights_keys no longer apply): both stacks' word tables beside the shared one; a decoder
    # alone keeps ProphetNetDecoderWrapper.word_embeddings beside decoder.word_embeddings
    own = 0 if fields["tied_embeddings"] else 1 if _decoder_alone(c) else 2
    fields.update(max_positions=c.size("max_position_embeddings"), norm_placement="post", embedding_norm=True,
                  final_norm=False, seq2seq=dict(position_offset=0, frozen_positions="none", own_token_tables=own),
                  extras={"side": {"embedding": [table("ngram_embeddings", c.size("ngram"), h)],
                                   "decoder_block": [linear("relative_pos_embeddings", h,
                                                            c.size("num_buckets") * heads)]}})
    return _alone(fields) if _decoder_alone(c) else fields


PROPHETNET_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"prophetnet": _prophetnet}
