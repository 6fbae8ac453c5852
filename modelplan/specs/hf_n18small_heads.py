"""Head readers of the hf_n18small types whose head classes `hf.apply_head` would misread
(transformers 5.24): ELECTRA's discriminator, RoCBert's pre-training head, RoFormer's multiple-choice
and QA heads, BigBird's pooler in every head, the class names of XLM, XLNet, bert-generation, and the
decoders read as their causal LM or bare model only. Each gets the mapped body, the config,
`hf.apply_head` and `hf._architecture` (passed in: this module does not import hf.py, which imports
it) and returns the fields with the head `architectures[0]` names."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig


def _arch(c: HFConfig) -> str | None:
    names = c.texts("architectures", None)
    return names[0] if names else None


def _electra_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """ElectraForPreTraining: the discriminator head (dense h x h with bias on every token,
    dense_prediction Linear(h, 1)): a per-token pooler-sized dense and a one-label classifier."""
    name = _arch(c)
    if name is not None and name.endswith("ForPreTraining"):
        extras = {**fields.get("extras", {}), "dense_head_per_token": True}
        return {**fields, "lm_head": False, "tied_embeddings": False, "pooler": True, "extras": extras,
                "classifier": {"num_labels": 1, "per_token": True}}
    return apply_head(fields, c, architecture(c))


def _roc_bert_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """RoCBertForPreTraining: pooler and the MLM head (no next-sentence classifier)."""
    name = _arch(c)
    if name is not None and name.endswith("ForPreTraining"):
        return {**apply_head(fields, c, "RoCBertForMaskedLM"), "pooler": True}
    return apply_head(fields, c, architecture(c))


def _roformer_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """RoFormerForMultipleChoice: RoFormerSequenceSummary without a projection (RoFormerConfig has no
    summary_use_proj), then classifier Linear(h, 1): no pooler-sized dense. RoFormerForQuestionAnswering
    sets config.num_labels = 2 before building qa_outputs."""
    fields = apply_head(fields, c, architecture(c))
    name = _arch(c) or ""
    if name.endswith("ForMultipleChoice"):
        return {**fields, "pooler": False}
    if name.endswith("ForQuestionAnswering"):
        return {**fields, "classifier": {"num_labels": 2, "per_token": True}}
    return fields


def _generation_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BertGenerationDecoder (LM head; also without `architectures`) or BertGenerationEncoder (bare)."""
    name = _arch(c)
    if name is None or name.endswith("Decoder"):
        return fields
    if name.endswith("Encoder"):
        return {**fields, "arch": "encoder", "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for bert-generation "
                    "(BertGenerationDecoder, BertGenerationEncoder)")


def _causal_only(model_type: str, lm_suffix: str, bare: str) -> Callable[..., dict]:
    """A decoder type read as its causal LM (also without `architectures`) or its bare model."""
    def head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
        name = _arch(c)
        if name is None or name.endswith(lm_suffix):
            return fields
        if name.endswith(bare):
            return {**fields, "lm_head": False, "lm_head_bias": False, "mlm_transform": False, "tied_embeddings": False}
        raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for {model_type} "
                        f"(...{lm_suffix}, ...{bare})")
    return head


def _big_bird_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BigBird's heads keep BigBirdModel's pooler (add_pooling_layer defaults to true in every
    head class but question answering); the sequence-classification and question-answering heads:
    `hf_encoder_heads_more`."""
    return {**apply_head(fields, c, architecture(c)), "pooler": True}


def _lm_bare_or_token_head(fields: dict, c: HFConfig, lm_suffix: str, bare_name: str) -> tuple[str, dict, dict | None]:
    """The heads XLM and XLNet share: the LM head (architectures ending `lm_suffix`, also none)
    keeps `fields`, the bare `bare_name` drops the head, token classification / simple QA are one
    per-token Linear(h, num_labels); returns (the architecture, the head-less fields, the mapped
    fields, or None for the caller's other heads)."""
    name = _arch(c)
    if name is None or name.endswith(lm_suffix):
        return name, fields, fields
    bare = {**fields, "lm_head": False, "lm_head_bias": False, "tied_embeddings": False}
    if name == bare_name:
        return name, bare, bare
    labels = c.num_labels()
    if name.endswith(("ForTokenClassification", "ForQuestionAnsweringSimple")):
        return name, bare, {**bare, "classifier": {"num_labels": labels, "per_token": True}}
    return name, bare, None


def _xlm_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """XLMWithLMHeadModel (also without `architectures`), the bare XLMModel, and the heads that are
    one Linear(h, num_labels): XLMForSequenceClassification's sequence_summary (first token,
    summary_use_proj and summary_proj_to_labels), XLMForTokenClassification, XLMForQuestionAnsweringSimple."""
    name, bare, done = _lm_bare_or_token_head(fields, c, "WithLMHeadModel", "XLMModel")
    if done is not None:
        return done
    labels = c.num_labels()
    if (name.endswith("ForSequenceClassification") and c.flag("summary_use_proj", True)
            and c.flag("summary_proj_to_labels", True) and c.text("summary_type", "first") == "first"):
        return {**bare, "classifier": {"num_labels": labels}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for xlm (XLMWithLMHeadModel, XLMModel, "
                    "XLMForSequenceClassification with its default summary, XLMForTokenClassification, "
                    "XLMForQuestionAnsweringSimple)")


def _xlnet_head(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """XLNetLMHeadModel (also without `architectures`), the bare XLNetModel, and the heads built from
    XLNetSequenceSummary (summary_use_proj: Linear(h, h), a pooler on the last token) + logits_proj
    (sequence classification, multiple choice) or one per-token Linear (token classification, simple QA)."""
    name, bare, done = _lm_bare_or_token_head(fields, c, "LMHeadModel", "XLNetModel")
    if done is not None:
        return done
    labels = c.num_labels()
    pooled = {"ForSequenceClassification": labels, "ForMultipleChoice": 1}
    for suffix, n in pooled.items():
        if name.endswith(suffix) and c.flag("summary_use_proj", True) and not c.flag("summary_proj_to_labels", False):
            return {**bare, "pooler": True, "classifier": {"num_labels": n}}
    raise SpecError(f"{c.source}: architectures: unsupported head '{name}' for xlnet (XLNetLMHeadModel, XLNetModel, "
                    "XLNetForSequenceClassification, XLNetForMultipleChoice, XLNetForTokenClassification, "
                    "XLNetForQuestionAnsweringSimple)")


N18SMALL_HEADS: dict[str, Callable[..., dict]] = {
    "xlnet": _xlnet_head,
    "big_bird": _big_bird_head, "xlm": _xlm_head, "cpmant": _causal_only("cpmant", "ForCausalLM", "CpmAntModel"),
    "electra": _electra_head, "roc_bert": _roc_bert_head, "roformer": _roformer_head, "bert-generation": _generation_head,
    "modernbert-decoder": _causal_only("modernbert-decoder", "ForCausalLM", "DecoderModel"),
}
"""Types whose head classes `hf.apply_head` would misread, to their head readers (module docstring)."""
