"""HF config mapper of MobileBERT (Sun et al. 2020; transformers 5.24 modeling_mobilebert.py): an
h-wide residual stream whose blocks work at the bottleneck width t = intra_bottleneck_size.

The spec reads it as BERT's embeddings and heads at h with blocks of the mixer-free `mlp` kind:
each block's base MLP is the bottleneck pair (bottleneck.input.dense Linear(h, t) and
output.bottleneck.dense Linear(t, h), both biased: the same weights, biases and multiply-adds as an
MLP of inner width t) with output.bottleneck.LayerNorm(h) as its one norm; everything at width t is a
side group (specs/encoder_side.py). Under the masked-LM / pre-training heads the token table is
counted h wide, tied: the word table (vocab, E) and the head's extra dense (vocab, h - E), whose
concatenation is the decoder matrix; under the others the tables are E wide (extras.input_width,
its projection the embedding_transformation's first E rows) and the position / token-type tables'
and the norm's other h - E columns are side groups."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.encoder_side import layer_norm, linear, table
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_encoder_fields import defaulted, with_side
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.limits import MAX_LAYERS

_bert = GPT_MAPPERS["bert"]


def _ffn(name: str, t: int, f: int) -> list[dict]:
    """One MobileBERT feed-forward at width t: Linear(t, f), Linear(f, t), both biased, a norm over t."""
    return [linear(f"{name}/in", t, f), linear(f"{name}/out", f, t), layer_norm(f"{name}/norm", t)]


def _mobilebert(c: HFConfig) -> dict:
    """MobileBertModel: word table (vocab, E), trigram concatenation and embedding_transformation
    Linear(3E, h) (E without trigram_input; held even where unused), position and token-type tables
    and a norm at h; per block (use_bottleneck): bottleneck.input (Linear(h, t), norm t), with
    key_query_shared_bottleneck or use_bottleneck_attention bottleneck.attention (Linear(h, t), norm
    t), query / key Linear(t, t), value Linear(h, t) (t under use_bottleneck_attention), the scores
    (2 t multiply-adds a token a key), attention.output (Linear(t, t), norm t), num_feedforward_networks
    - 1 stacked feed-forwards and the intermediate / output pair (Linear(t, f), Linear(f, t), norm t),
    output.bottleneck (Linear(t, h), norm h); NoNorm holds a weight and a bias like LayerNorm."""
    if not c.flag("use_bottleneck", True):
        raise SpecError(f"{c.source}: use_bottleneck: false is not modelled (MobileBERT blocks at full width)")
    c = defaulted(c, hidden_size=512, num_hidden_layers=24, num_attention_heads=4, intermediate_size=512,
                  hidden_act="relu", vocab_size=30522)
    fields = _bert(c)
    h, f, layers = fields["hidden"], fields["ffn_hidden"], fields["layers"]
    e, t = c.integer("embedding_size", 128), c.integer("intra_bottleneck_size", 128)
    shared_attention = c.flag("key_query_shared_bottleneck", True) or c.flag("use_bottleneck_attention", False)
    value_in = t if c.flag("use_bottleneck_attention", False) else h
    if e > h:
        raise SpecError(f"{c.source}: embedding_size: {e} > hidden_size ({h}) is not modelled")
    width_in = (3 if c.flag("trigram_input", True) else 1) * e  # embedding_transformation's input
    names = c.texts("architectures", None) or [""]
    extras: dict = {}
    if names[0].endswith(("ForMaskedLM", "ForPreTraining")):
        embedding = [linear("embedding_transformation", width_in, h)]
    else:  # E-wide tables: the h - E columns of the position / token-type tables and the norm, the rest of the projection
        extras = {"input_width": e}
        embedding = [table("position_rest", fields["max_positions"], h - e), table("token_type_rest", fields["type_vocab"], h - e),
                     dict(name="norm_rest", params=2 * (h - e)),
                     dict(name="embedding_transformation_rest", params=(width_in - e) * h, macs=(width_in - e) * h)]
    block = [layer_norm("bottleneck/input_norm", t)]
    if shared_attention:
        block += [linear("bottleneck/attention", h, t), layer_norm("bottleneck/attention_norm", t)]
    block += [linear("attention/query", t, t), linear("attention/key", t, t), linear("attention/value", value_in, t),
              dict(name="attention/scores", macs_per_key=2 * t), linear("attention/out", t, t),
              layer_norm("attention/norm", t)]
    ffns = c.integer("num_feedforward_networks", 4)
    if ffns > MAX_LAYERS:  # one list entry per FFN: a huge value must not run for ever
        raise SpecError(f"{c.source}: num_feedforward_networks ({ffns}) must be <= {MAX_LAYERS:,}: larger than "
                        "anything modelplan sizes (a typo?)")
    for i in range(ffns - 1):
        block += _ffn(f"ffn/{i}", t, f)
    block += _ffn("ffn/last", t, f)
    fields = {**fields, "layer_types": ["mlp"] * layers, "mlp": False, "norms_per_layer": 1, "ffn_hidden": t,
              "extras": extras}
    return with_side(fields, embedding=embedding, block=block)


def _mobilebert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BERT's heads (MobileBertLMPredictionHead: transform dense h x h and LayerNorm(h), the decoder
    matrix as the h-wide token table, a vocab bias); MobileBertPooler's dense only under
    classifier_activation; ...ForTokenClassification / ...ForQuestionAnswering without the pooler."""
    name = architecture(c)
    fields = apply_head(fields, c, name)
    if not c.flag("classifier_activation", True):
        fields = {**fields, "pooler": False}
    if name is not None and name.endswith(("ForMaskedLM", "ForPreTraining")):
        fields = {**fields, "tied_embeddings": True}  # the (vocab, h) token table holds the decoder matrix
        if not c.flag("tie_word_embeddings", True):  # untied, decoder.weight (vocab, E) is its own: forward reads it
            decoder = table("decoder", c.integer("vocab_size", 30522), c.integer("embedding_size", 128))
            side = {**fields["extras"]["side"], "head": [decoder]}
            fields = {**fields, "extras": {**fields["extras"], "side": side}}
    return fields


MOBILEBERT_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"mobilebert": _mobilebert}
MOBILEBERT_HEADS: dict[str, Callable[..., dict]] = {"mobilebert": _mobilebert_head}
