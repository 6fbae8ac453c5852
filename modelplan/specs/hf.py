"""Read a HuggingFace `config.json` (as a dict) into a TransformerSpec.

Each supported `model_type` has one small mapping function (in hf_gpt, hf_llama, hf_moe, hf_vision,
hf_other) that states the module conventions of the HF implementation: which projections carry
biases, where the norms sit, whether the embeddings are tied by default. Missing optional keys
take the HF config class defaults; the size keys (layers, hidden, heads, vocab, ...) are
required; every value is type-checked as it is read (`HFConfig`).

The head comes from `architectures[0]`: `...ForCausalLM` / `...LMHeadModel` /
`...ForConditionalGeneration` (the language-model head), `...ForMaskedLM` and `...ForPreTraining`
(BERT's MLM head), `...ForSequenceClassification`, `...ForTokenClassification`,
`...ForQuestionAnswering`, `...ForMultipleChoice`, `...ForNextSentencePrediction` (a classifier)
or a bare `...Model` (no head). Without `architectures` a decoder gets its LM head and BERT is
the bare `BertModel` with its pooler.
"""

from __future__ import annotations

from typing import Any, Callable

from modelplan.errors import SpecError, validate_model
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_dense import DENSE_MAPPERS
from modelplan.specs.hf_layernorm import LAYERNORM_MAPPERS
from modelplan.specs.hf_afmoe import AFMOE_MAPPERS
from modelplan.specs.hf_deepseek32 import DEEPSEEK32_MAPPERS
from modelplan.specs.hf_minimax import MINIMAX_MAPPERS
from modelplan.specs.hf_recurrent_gemma import RECURRENT_GEMMA_MAPPERS
from modelplan.specs.hf_rwkv import RWKV_MAPPERS
from modelplan.specs.hf_lfm2 import LFM2_MAPPERS
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_hybrid import HYBRID_MAPPERS
from modelplan.specs.hf_llama import LLAMA_MAPPERS
from modelplan.specs.hf_moe import MOE_MAPPERS
from modelplan.specs.hf_moe_extra import MOE_EXTRA_MAPPERS
from modelplan.specs.hf_n17new import N17NEW_MLA_MAPPERS, N17NEW_TEXT_ONLY, N17NEW_UNMODELLED
from modelplan.specs.hf_n17new_more import N17NEW_MORE_MAPPERS
from modelplan.specs.hf_n18attn import N18ATTN_MAPPERS
from modelplan.specs.hf_n18beam import N18BEAM_MAPPERS
from modelplan.specs.hf_n18causal import N18CAUSAL_MAPPERS, N18CAUSAL_UNMODELLED
from modelplan.specs.hf_other import OTHER_MAPPERS
from modelplan.specs.hf_vision import VISION_MAPPERS, VISION_TEXT_MAPPERS
from modelplan.specs.hf_zamba import ZAMBA_MAPPERS
from modelplan.specs.hf_gemma3n import GEMMA3N_MAPPERS
from modelplan.specs.hf_longcat import LONGCAT_MAPPERS
from modelplan.specs.hf_xlstm import XLSTM_MAPPERS
from modelplan.specs.hf_roberta import ROBERTA_MAPPERS
from modelplan.specs.hf_deepseek_like import DEEPSEEK_LIKE_MAPPERS
from modelplan.specs.hf_n17classic import CLASSIC_MAPPERS, CLASSIC_UNMODELLED, CLASSIC_VISION_MAPPERS
from modelplan.specs.hf_n18small import N18SMALL_HEADS, N18SMALL_MAPPERS
from modelplan.specs.hf_n18encdec import N18ENCDEC_MAPPERS, N18ENCDEC_UNMODELLED
from modelplan.specs.hf_encdec_more import ENCDEC_MORE_MAPPERS
from modelplan.specs.hf_n18vlm import COMPOSITE_MAPPERS as N18VLM_MAPPERS, N18VLM_UNMODELLED
from modelplan.specs.hf_n18qformer import QFORMER_MAPPERS
from modelplan.specs.hf_n18docling import DOCLING_MAPPERS
from modelplan.specs.hf_encoder_models import ENCODER_MODEL_MAPPERS, ENCODER_UNMODELLED, OWN_HEADS
from modelplan.specs.hf_image_classifiers import (IMAGE_CLASSIFIER_HEADS, IMAGE_CLASSIFIER_MAPPERS,
                                                  IMAGE_CLASSIFIER_UNMODELLED)
from modelplan.specs.family import spec_class
from modelplan.specs.hf_vlm_towers import TOWER_MAPPERS, TOWER_UNMODELLED
from modelplan.specs.hf_hyperconn import HYPERCONN_COMPOSITES, HYPERCONN_MAPPERS, HYPERCONN_TEXT_ONLY
from modelplan.specs.hf_mla_layers import MLA_LAYERS_COMPOSITES, MLA_LAYERS_MAPPERS, MLA_LAYERS_TEXT_ONLY
from modelplan.specs.hf_linear_mla import LINEAR_MLA_MAPPERS
from modelplan.specs.hf_cca import CCA_MAPPERS
from modelplan.specs.hf_kosmos import KOSMOS_MAPPERS
from modelplan.specs.hf_ocr_more import OCR_MORE_MAPPERS
from modelplan.specs.hf_pix2struct import PIX2STRUCT_MAPPERS
from modelplan.specs.hf_vlm_bert import VLM_BERT_MAPPERS
from modelplan.specs.hf_vlm_encdec import VLM_ENCDEC_HEADS, VLM_ENCDEC_MAPPERS, VLM_ENCDEC_UNMODELLED
from modelplan.specs.hf_inkling import INKLING_COMPOSITES, INKLING_MAPPERS
from modelplan.specs.hf_audio_lm import AUDIO_LM_MAPPERS
from modelplan.specs.hf_audio_composites import AUDIO_COMPOSITE_MAPPERS
from modelplan.specs.hf_speech import SPEECH_HEADS, SPEECH_MAPPERS, SPEECH_UNMODELLED
from modelplan.specs.hf_reused import REUSED_MAPPERS
from modelplan.specs.hf_cosmos3 import COSMOS3_MAPPERS, COSMOS3_TEXT_MAPPERS
from modelplan.specs.hf_muse import MUSE_MAPPERS, MUSE_TEXT_MAPPERS
from modelplan.specs.hf_nemotron_omni import NEMOTRON_OMNI_MAPPERS
from modelplan.specs.hf_composites_more import COMPOSITES_MORE, COMPOSITES_MORE_HEADS
from modelplan.specs.hf_unmodelled_multimodal import MULTIMODAL_UNMODELLED
from modelplan.specs.hf_encoders import ENCODER_HEADS, ENCODER_MAPPERS, ENCODER_UNMODELLED as TEXT_ENCODER_UNMODELLED
from modelplan.specs.hf_seq2seq_more import SEQ2SEQ_HEADS, SEQ2SEQ_MORE_MAPPERS
from modelplan.specs.hf_encoders_more import ENCODERS_MORE_HEADS, ENCODERS_MORE_MAPPERS, ENCODERS_MORE_UNMODELLED
from modelplan.specs.hf_text_multimodal import TEXT_MM_COMPOSITES, TEXT_MM_HEADS, TEXT_MM_MAPPERS
from modelplan.specs.transformer import TransformerSpec

MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    **GPT_MAPPERS, **LLAMA_MAPPERS, **MOE_MAPPERS, **OTHER_MAPPERS, **DENSE_MAPPERS, **LAYERNORM_MAPPERS,
    **MOE_EXTRA_MAPPERS, **HYBRID_MAPPERS, **VISION_TEXT_MAPPERS, **LFM2_MAPPERS, **AFMOE_MAPPERS,
    **DEEPSEEK32_MAPPERS, **RECURRENT_GEMMA_MAPPERS, **MINIMAX_MAPPERS, **RWKV_MAPPERS,
    **ZAMBA_MAPPERS, **GEMMA3N_MAPPERS, **LONGCAT_MAPPERS, **XLSTM_MAPPERS,
    **ROBERTA_MAPPERS, **DEEPSEEK_LIKE_MAPPERS, **CLASSIC_MAPPERS, **N17NEW_MLA_MAPPERS, **N17NEW_MORE_MAPPERS,
    **N18SMALL_MAPPERS,
    **N18ENCDEC_MAPPERS, **ENCDEC_MORE_MAPPERS,
    **N18ATTN_MAPPERS,
    **N18CAUSAL_MAPPERS,
    **N18BEAM_MAPPERS, **ENCODER_MODEL_MAPPERS,
    **HYPERCONN_MAPPERS, **MLA_LAYERS_MAPPERS, **LINEAR_MLA_MAPPERS, **CCA_MAPPERS,
    **INKLING_MAPPERS, **AUDIO_LM_MAPPERS, **COSMOS3_TEXT_MAPPERS, **MUSE_TEXT_MAPPERS,
    **ENCODER_MAPPERS, **SEQ2SEQ_MORE_MAPPERS, **ENCODERS_MORE_MAPPERS, **SPEECH_MAPPERS, **IMAGE_CLASSIFIER_MAPPERS,
    **TEXT_MM_MAPPERS,
}
MAPPERS.update({name: (lambda c, m=m: m(c, MAPPERS))
                for name, m in {**VISION_MAPPERS, **CLASSIC_VISION_MAPPERS, **N18VLM_MAPPERS,
                                      **QFORMER_MAPPERS, **DOCLING_MAPPERS, **TOWER_MAPPERS, **HYPERCONN_COMPOSITES,
                                      **MLA_LAYERS_COMPOSITES, **VLM_ENCDEC_MAPPERS, **VLM_BERT_MAPPERS,
                                      **PIX2STRUCT_MAPPERS, **KOSMOS_MAPPERS, **OCR_MORE_MAPPERS, **INKLING_COMPOSITES,
                                      **REUSED_MAPPERS, **COSMOS3_MAPPERS, **MUSE_MAPPERS,
                                      **NEMOTRON_OMNI_MAPPERS, **COMPOSITES_MORE, **AUDIO_COMPOSITE_MAPPERS,
                                      **TEXT_MM_COMPOSITES}.items()})

UNMODELLED: dict[str, str] = {
    **CLASSIC_UNMODELLED,
    **N17NEW_UNMODELLED,
    **N18ENCDEC_UNMODELLED, **VLM_ENCDEC_UNMODELLED,
    **N18VLM_UNMODELLED,
    **N18CAUSAL_UNMODELLED, **ENCODER_UNMODELLED, **TOWER_UNMODELLED,
    **MULTIMODAL_UNMODELLED,
    **TEXT_ENCODER_UNMODELLED, **ENCODERS_MORE_UNMODELLED, **SPEECH_UNMODELLED, **IMAGE_CLASSIFIER_UNMODELLED,
}
"""model_types transformers ships whose architecture the spec cannot yet express exactly, with
the missing feature: refused with that reason instead of a wrong count."""

_TEXT_ONLY: dict[str, str] = {**N17NEW_TEXT_ONLY,
                              **HYPERCONN_TEXT_ONLY, **MLA_LAYERS_TEXT_ONLY}
"""Refused vision-language types whose text_config alone is supported (as its own model_type);
the Qwen-VL / Qwen3.5, Llama 4, LLaVA, InternVL, Idefics3 and GLM-4V composites read whole
(hf_vision.py), their text model_types still count the language model alone."""


def _unmodelled(source: str, model_type: str) -> SpecError:
    hint = ""
    if model_type in _TEXT_ONLY:
        hint = (f"; to count the language model alone, save its text_config as a config.json with "
                f"model_type '{_TEXT_ONLY[model_type]}'")
    return SpecError(f"{source}: model_type: '{model_type}': {UNMODELLED[model_type]} not modelled{hint}")

_HEADS = ("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ForMaskedLM", "ForPreTraining",
          "ForSequenceClassification", "ForTokenClassification", "ForQuestionAnswering",
          "ForMultipleChoice", "ForNextSentencePrediction", "EncoderModel", "Model",
          "ShieldGemma2ForImageClassification")


def _architecture(c: HFConfig) -> str | None:
    """architectures[0], or None when the config does not name one."""
    names = c.texts("architectures", None)
    if not names:
        return None
    name = names[0]
    if not any(name.endswith(suffix) for suffix in _HEADS):
        raise SpecError(f"{c.source}: architectures: unsupported head '{name}' (supported: a class "
                        f"ending in {', '.join(_HEADS)})")
    return name


_ONE_BIAS_MLM: frozenset[str] = frozenset({"distilbert", "electra", "convbert", "rembert", "gte"})
"""Types whose MLM decoder is one nn.Linear with its own bias and no second `bias` Parameter when
untied (transformers 5.24: vocab_projector, generator_lm_head, the decoder of RemBERT's and GTE's
lm_head); `_mlm_head` keeps no second bias for them (GIT's decoder head: its own mapper)."""



def _mlm_head(fields: dict, c: HFConfig) -> dict:
    """BERT's MLM head: transform (dense + norm), decoder tied to the word embeddings, vocab bias;
    untied, BertLMPredictionHead keeps `bias` beside decoder.bias, which forward adds (its
    _tied_weights_keys tie the two only under tie_word_embeddings; transformers 5.24 modeling_bert.py)."""
    tied = c.flag("tie_word_embeddings", True)
    copy = not tied and c.data.get("model_type") not in _ONE_BIAS_MLM
    return {**fields, "lm_head": True, "mlm_transform": True, "lm_head_bias": True,
            "tied_embeddings": tied, "head_bias_copy": copy, "pooler": False}


def apply_head(fields: dict, c: HFConfig, name: str | None) -> dict:
    """The head that architecture `name` puts on the mapped body (HF modeling classes)."""
    if name is None:
        return fields
    encoder = fields.get("arch") == "encoder"
    # ShieldGemma2ForImageClassification wraps the whole Gemma 3 composite and reads yes/no off its LM head
    if name.endswith(("ForCausalLM", "LMHeadModel", "ForConditionalGeneration", "ForMaskedLM",
                      "MTModel", "ShieldGemma2ForImageClassification")):
        return _mlm_head(fields, c) if encoder else fields
    bare = {**fields, "lm_head": False, "lm_head_bias": False, "mlm_transform": False,
            "tied_embeddings": False}
    labels = c.num_labels()
    if name.endswith("ForPreTraining"):  # BertForPreTraining: pooler, MLM head, NSP Linear(h, 2)
        return {**_mlm_head(fields, c), "pooler": True, "classifier": {"num_labels": 2}}
    if name.endswith("Model"):  # bare body (BertModel keeps its pooler, T5EncoderModel has none)
        return {**bare, "pooler": fields.get("pooler", False)}
    if not encoder:
        if name.endswith("ForSequenceClassification"):  # GenericForSequenceClassification.score
            head = {"num_labels": labels, "bias": False, "per_token": True}
        elif name.endswith("ForTokenClassification"):  # GenericForTokenClassification.score
            head = {"num_labels": labels, "bias": c.flag("token_classification_bias", True), "per_token": True}
        elif name.endswith("ForQuestionAnswering"):  # GenericForQuestionAnswering.qa_outputs
            head = {"num_labels": 2, "per_token": True}
        else:
            raise SpecError(f"{c.source}: architectures: '{name}' is not a decoder head")
        return {**bare, "classifier": head}
    pooled = {"ForSequenceClassification": labels, "ForMultipleChoice": 1, "ForNextSentencePrediction": 2}
    for suffix, n in pooled.items():  # BERT heads on the pooled first token
        if name.endswith(suffix):
            return {**bare, "pooler": True, "classifier": {"num_labels": n}}
    # BertForTokenClassification / BertForQuestionAnswering: no pooler, Linear(h, num_labels)
    return {**bare, "pooler": False, "classifier": {"num_labels": labels, "per_token": True}}


MAX_LAYERS = 100_000
"""Largest block count read from a config: mappers build per-block lists, so a size like 10**12
is refused up front instead of hanging."""


def _check_depth(c: HFConfig) -> None:
    for key in ("num_hidden_layers", "n_layer", "num_layers", "num_decoder_layers"):
        value = c.integer(key, None)
        if value is not None and value > MAX_LAYERS:
            raise SpecError(f"{c.source}: {key}: {value} exceeds {MAX_LAYERS:,} blocks")
    for nested in ("text_config",):
        sub = c.sub(nested)
        if sub is not None:
            _check_depth(sub)


ROPE_THETA_DEFAULTS = {
    "cohere": 500000.0, "deepseek_v2": 10000.0, "deepseek_v3": 10000.0, "falcon": 10000.0,
    "gemma": 10000.0, "gemma2": 10000.0, "gemma3": 1000000.0, "gemma3_text": 1000000.0,
    "glm4": 10000.0, "gpt_neox": 10000.0, "gpt_oss": 150000.0, "granite": 10000.0,
    "granitemoe": 10000.0, "llama": 10000.0, "llama4_text": 500000.0, "mistral": 10000.0,
    "mistral3": 1000000000.0, "mixtral": 1000000.0, "olmo": 10000.0, "olmo2": 10000.0,
    "olmoe": 10000.0, "phi": 10000.0, "phi3": 10000.0, "phimoe": 1000000.0, "qwen2": 10000.0,
    "qwen2_moe": 10000.0, "qwen3": 10000.0, "qwen3_moe": 10000.0, "starcoder2": 10000.0,
}
"""rope_theta of each config class when config.json leaves it out (transformers 5.24 defaults;
Gemma 3's is its global layers' base, its sliding layers use 10000)."""


def rope_theta(c: HFConfig, model_type: str) -> float | None:
    """The RoPE base: rope_theta at the top, inside rope_parameters (transformers 5; per layer
    type for Gemma 3, whose global layers' base is taken) or of the text_config (multimodal
    wrappers); GPT-NeoX's rotary_emb_base; else the config class's default."""
    for cfg in (c, c.sub("text_config")):
        if cfg is None:
            continue
        nested = cfg.sub("rope_parameters")
        if nested is not None and nested.has("full_attention"):
            nested = nested.sub("full_attention")
        if nested is not None and nested.has("rope_theta"):
            return nested.number("rope_theta")
        for key in ("rope_theta", "rotary_emb_base"):
            if cfg.has(key):
                return cfg.number(key)
    return ROPE_THETA_DEFAULTS.get(model_type)


def rope_scaling(c: HFConfig) -> str | None:
    """'yarn' when rope_scaling (transformers 4) or rope_parameters (transformers 5) of the config
    or its text_config names rope_type (or the older key type) 'yarn'; else None."""
    for cfg in (c, c.sub("text_config")):
        for key in ("rope_scaling", "rope_parameters"):
            nested = cfg.data.get(key) if cfg is not None else None
            if isinstance(nested, dict) and nested.get("rope_type", nested.get("type")) == "yarn":
                return "yarn"  # any other shape or kind: not YaRN (it changes no count, so no error)
    return None


def _listed() -> str:
    """Where the modelled types are listed (the error does not print all of them)."""
    return f"{len(MAPPERS)} model_types are modelled; `modelplan presets` lists them"


def _did_you_mean(model_type: str) -> str:
    """'; did you mean 'gpt_neox'?' where a modelled type differs from it only in case, '-', '_' or '.'."""
    def key(name: str) -> str:
        return name.lower().replace("-", "").replace("_", "").replace(".", "")

    close = [t for t in sorted(MAPPERS) if key(t) == key(model_type)]
    return f"; did you mean {' or '.join(repr(t) for t in close)}?" if close else ""


def model_types() -> list[str]:
    """Every HuggingFace model_type `from_hf_config` maps, sorted."""
    return sorted(MAPPERS)


def from_hf_config(data: Any, source: str = "config.json") -> TransformerSpec:
    """A TransformerSpec from a parsed HuggingFace config.json; unknown model_type -> SpecError."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a JSON object, got {type(data).__name__}")
    c = HFConfig(data, source)
    model_type = c.text("model_type", None)
    if model_type is None:
        raise SpecError(f"{source}: model_type: missing (a HuggingFace config.json names its "
                        f"model_type; {_listed()})")
    mapper = MAPPERS.get(model_type)
    if mapper is None and model_type in UNMODELLED:
        raise _unmodelled(source, model_type)
    if mapper is None:
        raise SpecError(f"{source}: model_type: unsupported '{model_type}'{_did_you_mean(model_type)} ({_listed()})")
    _check_depth(c)
    # types whose head classes apply_head would misread
    head = {**N18SMALL_HEADS, **OWN_HEADS, **VLM_ENCDEC_HEADS, **ENCODER_HEADS, **SEQ2SEQ_HEADS,
            **COMPOSITES_MORE_HEADS, **ENCODERS_MORE_HEADS, **SPEECH_HEADS,
            **IMAGE_CLASSIFIER_HEADS, **TEXT_MM_HEADS}.get(model_type)
    fields = head(mapper(c), c, apply_head, _architecture) if head else apply_head(mapper(c), c, _architecture(c))
    name = c.text("_name_or_path", None) or source.removesuffix(".json")
    fields = {"name": name, "source": f"HuggingFace config.json ({source})", **fields}
    if "kind" in fields:  # a mapper naming its family's spec (hf_resnet: a network spec)
        return validate_model(spec_class(fields["kind"]), fields, source)
    if fields.get("position", "rotary") == "rotary":
        fields.setdefault("rope_theta", rope_theta(c, model_type))
        fields.setdefault("rope_scaling", rope_scaling(c))
    fields = {k: v for k, v in fields.items() if v is not None}
    try:
        return validate_model(TransformerSpec, fields, source)
    except SpecError as exc:  # the spec's field names -> the config.json keys the user wrote
        from modelplan.specs.hf_fields import hf_keys_named

        raise SpecError(f"{exc}{hf_keys_named(str(exc), data)}") from None
