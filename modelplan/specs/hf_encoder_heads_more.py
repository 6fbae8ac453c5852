"""Head classes of already modelled HF types that `hf.apply_head` cannot read (transformers 5.24):
BigBird's sequence-classification and question-answering heads, the T5Gemma / T5Gemma2 sequence and token classifiers and
ModernBertDecoderForSequenceClassification."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.encoder_side import layer_norm, linear
from modelplan.specs.hf_config import HFConfig


def _big_bird_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BigBird's heads as hf_n18small_heads reads them (the pooler kept), then
    BigBirdForSequenceClassification: the pooler (computed, unused) beside BigBirdClassificationHead,
    dense h x h on the first token then out_proj Linear(h, num_labels); BigBirdForQuestionAnswering:
    no pooler, BigBirdForQuestionAnsweringHead on every token (intermediate Linear(h, f), output
    Linear(f, h) and LayerNorm(h), qa_outputs Linear(h, 2): the class sets num_labels 2)."""
    from modelplan.specs.hf_n18small import N18SMALL_HEADS

    fields = N18SMALL_HEADS["big_bird"](fields, c, apply_head, architecture)
    name = architecture(c) or "BigBirdModel"
    h, f = fields["hidden"], fields["ffn_hidden"]
    if name.endswith("ForSequenceClassification"):
        head = [linear("classification/dense", h, h, per_sequence=True)]
        return {**fields, "extras": {**(fields.get("extras") or {}), "side": {"head": head}}}
    if name.endswith("ForQuestionAnswering"):
        head = [linear("qa/intermediate", h, f), linear("qa/output", f, h), layer_norm("qa/norm", h)]
        return {**fields, "pooler": False, "classifier": {"num_labels": 2, "per_token": True},  # config.num_labels = 2
                "extras": {**(fields.get("extras") or {}), "side": {"head": head}}}
    return fields


def _t5gemma_classifier(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """T5Gemma / T5Gemma2 ...ForSequenceClassification and ...ForTokenClassification: the bare model
    (T5GemmaModel, or T5GemmaEncoderModel when is_encoder_decoder is false) and score.out_proj
    Linear(h, num_labels) with bias on every last-stack token (the sequence classifier then picks
    each sequence's last non-pad row); the other heads as `hf.apply_head` reads them."""
    name = architecture(c)
    if name is None or not name.endswith(("ForSequenceClassification", "ForTokenClassification")):
        return apply_head(fields, c, name)
    return {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False,
            "classifier": {"num_labels": c.num_labels(), "per_token": True}}


def _modernbert_decoder_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """ModernBertDecoderForSequenceClassification: the decoder, its ModernBertDecoderPredictionHead
    (dense h x h with classifier_bias, LayerNorm: the MLM transform) and classifier Linear(h, num_labels,
    bias=classifier_bias) on every token (the last non-pad row's logits are picked); the causal LM and
    the bare model as hf_n18small_heads reads them."""
    from modelplan.specs.hf_n18small import N18SMALL_HEADS

    name = architecture(c) or ""
    if not name.endswith("ForSequenceClassification"):
        return N18SMALL_HEADS["modernbert-decoder"](fields, c, apply_head, architecture)
    return {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False,
            "classifier": {"num_labels": c.num_labels(), "bias": c.flag("classifier_bias", False), "per_token": True}}


HEADS_MORE: dict[str, Callable[..., dict]] = {
    "big_bird": _big_bird_head, "t5gemma": _t5gemma_classifier, "t5gemma2": _t5gemma_classifier,
    "modernbert-decoder": _modernbert_decoder_head,
}
"""Head hooks of those types (hf.py reads them after hf_n18small's)."""
