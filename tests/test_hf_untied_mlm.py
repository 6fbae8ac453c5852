"""Masked-LM heads built with tie_word_embeddings false (transformers 5.24): total parameters equal
sum(p.numel()) of transformers' own model, at the config class defaults (meta device) and for a tiny
BERT on CPU. Untied, BertLMPredictionHead keeps its `bias` beside decoder.bias (modeling_bert.py:
_tied_weights_keys ties "cls.predictions.decoder.bias" to "cls.predictions.bias" only under
tie_word_embeddings; forward adds decoder.bias), XLMPredLayer's proj, MobileBertLMPredictionHead's
decoder.weight and LUKE's entity decoder become their own tensors; the tied counts do not move."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_total_and_trainable_on_cpu, class_defaults
from _hf_reference import hf_numel
from modelplan.count.params import count_params
from modelplan.plan.shard import unit_shards
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan

MLM = {"bert": "BertForMaskedLM", "roberta": "RobertaForMaskedLM", "albert": "AlbertForMaskedLM",
       "big_bird": "BigBirdForMaskedLM", "deberta": "DebertaForMaskedLM", "deberta-v2": "DebertaV2ForMaskedLM",
       "mpnet": "MPNetForMaskedLM", "xlm-roberta": "XLMRobertaForMaskedLM", "longformer": "LongformerForMaskedLM",
       "megatron-bert": "MegatronBertForMaskedLM", "fnet": "FNetForMaskedLM", "roformer": "RoFormerForMaskedLM",
       "flaubert": "FlaubertWithLMHeadModel", "xlm": "XLMWithLMHeadModel", "mobilebert": "MobileBertForMaskedLM",
       "luke": "LukeForMaskedLM", "distilbert": "DistilBertForMaskedLM", "electra": "ElectraForMaskedLM",
       "rembert": "RemBertForMaskedLM", "bert-pretraining": "BertForPreTraining",
       "mobilebert-pretraining": "MobileBertForPreTraining"}
"""Masked-LM classes of transformers' MODEL_FOR_MASKED_LM_MAPPING_NAMES (and two pre-training heads);
distilbert / electra / rembert hold one decoder bias: their counts must not gain a copy."""

TINY_BERT = dict(model_type="bert", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                 intermediate_size=96, vocab_size=100, max_position_embeddings=40)


def _untied(key: str) -> dict:
    model_type = key.removesuffix("-pretraining")
    return {**class_defaults(model_type), "architectures": [MLM[key]], "tie_word_embeddings": False}


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("key", sorted(MLM))
def test_untied_class_defaults_equal_transformers(key):
    """Untied class defaults: count's total = sum(p.numel()) of the transformers model on meta."""
    data = _untied(key)
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


@pytest.mark.torch
@pytest.mark.parametrize("tied", [True, False])
def test_tiny_bert_total_and_trainable_equal_transformers_on_cpu(tied):
    """A tiny BertForMaskedLM, tied and untied: total and trainable = transformers' on CPU."""
    assert_total_and_trainable_on_cpu({**TINY_BERT, "architectures": ["BertForMaskedLM"],
                                       "tie_word_embeddings": tied})


def test_untied_bert_adds_decoder_weight_and_a_second_bias():
    """Hand-worked: untying BERT's MLM head adds decoder.weight (vocab x h) and decoder.bias (vocab)."""
    data = {**TINY_BERT, "architectures": ["BertForMaskedLM"]}
    tied = count_params(from_hf_config({**data, "tie_word_embeddings": True})).total
    untied = count_params(from_hf_config({**data, "tie_word_embeddings": False})).total
    assert untied - tied == 100 * 64 + 100


def test_untied_distilbert_adds_only_the_decoder_weight():
    """Hand-worked: DistilBERT's vocab_projector is one nn.Linear(dim, vocab): untied adds vocab x dim."""
    data = dict(model_type="distilbert", n_layers=2, dim=64, n_heads=4, hidden_dim=96, vocab_size=100,
                max_position_embeddings=40, architectures=["DistilBertForMaskedLM"])
    tied = count_params(from_hf_config({**data, "tie_word_embeddings": True})).total
    untied = count_params(from_hf_config({**data, "tie_word_embeddings": False})).total
    assert untied - tied == 100 * 64


def test_untied_bert_shards_hold_the_counted_total():
    """plan/shard.py's units at tp 1 hold every counted parameter, the bias copy included."""
    spec = from_hf_config({**TINY_BERT, "architectures": ["BertForMaskedLM"], "tie_word_embeddings": False})
    assert spec.head_bias_copy
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total
