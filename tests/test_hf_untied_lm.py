"""Causal-LM / seq2seq heads built with tie_word_embeddings false (transformers 5.24): total
parameters equal sum(p.numel()) of transformers' own model at the config class defaults (meta
device). Untied, OpenAIGPTLMHeadModel's lm_head, XLNetLMHeadModel's lm_loss.weight and
BertGenerationOnlyLMHead's second `bias` become their own tensors (each class's _tied_weights_keys
tie them only under tie_word_embeddings), and T5Gemma 2 keeps the decoder's embed_tokens (with its
eoi vector) and lm_head.out_proj apart from the encoder's table (T5Gemma2Model /
T5Gemma2ForConditionalGeneration._tied_weights_keys). T5Config forces tie_word_embeddings true, so
T5 stays tied. BART-shaped encoder-decoders untied keep shared, both stacks' embed_tokens and
lm_head apart (BartModel / BartForConditionalGeneration._tied_weights_keys). The tied counts do not move."""

from __future__ import annotations

import pytest

from _hf_n17_checks import class_defaults
from _hf_reference import hf_numel
from modelplan.count.params import count_params
from modelplan.plan.shard import unit_shards
from modelplan.specs.hf import from_hf_config
from modelplan.specs.plan import Plan

LM = {"openai-gpt": "OpenAIGPTLMHeadModel", "xlnet": "XLNetLMHeadModel", "bert-generation": "BertGenerationDecoder",
      "t5": "T5ForConditionalGeneration", "t5gemma2": "T5Gemma2ForConditionalGeneration",
      "t5gemma2-model": "T5Gemma2Model", "t5gemma2-seqcls": "T5Gemma2ForSequenceClassification"}
"""Types whose untied count differed from transformers' on main (t5: the config ties regardless)."""

BART = {"bart": "BartForConditionalGeneration", "mbart": "MBartForConditionalGeneration",
        "plbart": "PLBartForConditionalGeneration", "mvp": "MvpForConditionalGeneration", "marian": "MarianMTModel",
        "pegasus": "PegasusForConditionalGeneration", "blenderbot": "BlenderbotForConditionalGeneration",
        "blenderbot-small": "BlenderbotSmallForConditionalGeneration", "bart-model": "BartModel",
        "bart-causal": "BartForCausalLM", "marian-causal": "MarianForCausalLM", "led": "LEDForConditionalGeneration",
        "m2m_100": "M2M100ForConditionalGeneration", "m2m_100-model": "M2M100Model",
        "nllb-moe": "NllbMoeForConditionalGeneration", "pegasus_x": "PegasusXForConditionalGeneration",
        "bigbird_pegasus": "BigBirdPegasusForConditionalGeneration", "bigbird_pegasus-causal": "BigBirdPegasusForCausalLM",
        "switch_transformers": "SwitchTransformersForConditionalGeneration",
        "switch_transformers-model": "SwitchTransformersModel", "t5gemma": "T5GemmaForConditionalGeneration",
        "seamless_m4t": "SeamlessM4TForTextToText", "seamless_m4t_v2": "SeamlessM4Tv2ForTextToText"}
"""BART-shaped types refused untied on main (hf_n18encdec.FAMILY, led, m2m_100, nllb-moe, pegasus_x, bigbird_pegasus,
switch_transformers, seamless_m4t(_v2) text-to-text via m2m_100;
t5gemma: its lm_head.out_proj), with bare models and decoders alone."""


def _config(key: str, tied: bool) -> dict:
    model_type = key.removesuffix("-model").removesuffix("-seqcls").removesuffix("-causal")
    return {**class_defaults(model_type), "architectures": [{**LM, **BART}[key]], "tie_word_embeddings": tied}


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("key", sorted(LM) + sorted(BART))
def test_class_defaults_equal_transformers(key, tied):
    """Tied and untied class defaults: count's total = sum(p.numel()) of the transformers model on meta."""
    data = _config(key, tied)
    assert count_params(from_hf_config(data, "config.json")).total == hf_numel(data)


def test_untied_openai_gpt_adds_the_head():
    """Hand-worked: OpenAIGPTLMHeadModel.lm_head is Linear(n_embd, vocab, bias=False): untied adds vocab x n_embd."""
    data = dict(model_type="openai-gpt", n_layer=2, n_embd=64, n_head=4, vocab_size=100, n_positions=40,
                architectures=["OpenAIGPTLMHeadModel"])
    tied = count_params(from_hf_config({**data, "tie_word_embeddings": True})).total
    untied = count_params(from_hf_config({**data, "tie_word_embeddings": False})).total
    assert untied - tied == 100 * 64


def test_untied_t5gemma2_shards_hold_the_counted_total():
    """plan/shard.py's units at tp 1 hold every counted parameter, the decoder's own table and eoi included;
    hand-worked: untying adds two vocab x h tables (decoder embed_tokens, lm_head.out_proj) and one h vector."""
    tied = from_hf_config(_config("t5gemma2", True), "config.json")
    spec = from_hf_config(_config("t5gemma2", False), "config.json")
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total
    assert count_params(spec).total - count_params(tied).total == 2 * spec.vocab * spec.hidden + spec.hidden


def test_untied_bart_adds_three_tables():
    """Hand-worked: untied BartForConditionalGeneration keeps shared, encoder / decoder embed_tokens and lm_head
    (four vocab x d_model tables where tied holds one); BartForCausalLM adds only its lm_head."""
    data = {"model_type": "bart", "d_model": 16, "encoder_layers": 1, "decoder_layers": 1, "encoder_attention_heads": 2,
            "decoder_attention_heads": 2, "encoder_ffn_dim": 24, "decoder_ffn_dim": 24, "vocab_size": 100,
            "max_position_embeddings": 64}
    for arch, tables in (("BartForConditionalGeneration", 3), ("BartForCausalLM", 1)):
        tied = count_params(from_hf_config({**data, "architectures": [arch], "tie_word_embeddings": True})).total
        spec = from_hf_config({**data, "architectures": [arch], "tie_word_embeddings": False})
        assert count_params(spec).total - tied == tables * 100 * 16
        assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


def test_untied_switch_encoder_alone_is_a_one_line_error():
    """SwitchTransformersEncoderModel untied keeps encoder.embed_tokens beside shared: refused, one line."""
    from _hf_n17_checks import assert_one_line_error

    data = {**class_defaults("switch_transformers"), "architectures": ["SwitchTransformersEncoderModel"],
            "tie_word_embeddings": False}
    assert_one_line_error(data, "tie_word_embeddings: false is not modelled for the encoder alone")
