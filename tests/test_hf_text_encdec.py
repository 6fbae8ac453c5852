"""The text EncoderDecoderModel (modelplan/specs/hf_text_encdec.py): total parameters equal
sum(p.numel()) of transformers 5.24's own EncoderDecoderModel built from the same config (the
independent source), for small configs switching each option and for the class defaults; the
encoder's forward FLOPs per source sequence equal FlopCounterMode's count on transformers'
BertModel (eager attention)."""

from __future__ import annotations

import json

import pytest

from _hf_n17_checks import assert_count_plan, assert_one_line_error, class_defaults
from _hf_reference import transformers_module
from modelplan.count.params import count_params
from modelplan.count.vision import vision_forward_flops
from modelplan.specs.hf import from_hf_config

ENCODER = dict(model_type="bert", hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
               max_position_embeddings=32, vocab_size=100)
BERT_DECODER = dict(model_type="bert", hidden_size=96, num_hidden_layers=2, num_attention_heads=4,
                    intermediate_size=128, vocab_size=120, is_decoder=True, add_cross_attention=True)
GPT2_DECODER = dict(model_type="gpt2", n_embd=64, n_layer=2, n_head=4, vocab_size=90, n_positions=40,
                    is_decoder=True, add_cross_attention=True)
CASES = [(ENCODER, BERT_DECODER), (ENCODER, {**BERT_DECODER, "hidden_size": 64}), (ENCODER, GPT2_DECODER),
         ({**ENCODER, "type_vocab_size": 4, "num_hidden_layers": 3}, {**BERT_DECODER, "num_hidden_layers": 1})]


def _data(encoder: dict, decoder: dict) -> dict:
    """The config.json EncoderDecoderConfig.from_encoder_decoder_configs writes."""
    tf = transformers_module()
    configs = [tf.AutoConfig.for_model(**part) for part in (encoder, decoder)]
    return json.loads(tf.EncoderDecoderConfig.from_encoder_decoder_configs(*configs).to_json_string(use_diff=False))


def _hf_total(data: dict) -> int:
    import torch

    tf = transformers_module()
    with torch.device("meta"):
        model = tf.EncoderDecoderModel(tf.EncoderDecoderConfig(**{k: v for k, v in data.items() if k != "model_type"}))
    return sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.parametrize(("encoder", "decoder"), CASES)
def test_small_composites_equal_transformers(encoder, decoder):
    """Encoder tower, decoder with cross-attention, enc_to_dec_proj where the widths differ."""
    data = _data(encoder, decoder)
    assert count_params(from_hf_config(data)).total == _hf_total(data)


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """EncoderDecoderConfig's defaults (BERT-base encoder, BERT-base decoder with cross-attention)."""
    data = class_defaults("encoder-decoder")
    assert count_params(from_hf_config(data)).total == _hf_total(data) == 247_363_386


@pytest.mark.torch
def test_encoder_flops_per_source_sequence_equal_flop_counter():
    """One source sequence of max_position_embeddings tokens through BertModel (+ enc_to_dec_proj)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    tf = transformers_module()
    data = _data(ENCODER, BERT_DECODER)
    torch.manual_seed(0)
    model = tf.BertModel(tf.BertConfig(**{**ENCODER, "attn_implementation": "eager"}))
    with FlopCounterMode(display=False) as counter:
        model(input_ids=torch.zeros(1, ENCODER["max_position_embeddings"], dtype=torch.long))
    spec = from_hf_config(data)
    flops = vision_forward_flops(spec.vision, spec.hidden)  # leaves, keyed relative to vision/
    assert sum(n for key, n in flops.items() if key.startswith("tower/")) == counter.get_total_flops()
    assert flops["projector/enc_to_dec_proj"] == 2 * 64 * 96 * ENCODER["max_position_embeddings"]


@pytest.mark.torch
def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0 on the composite."""
    assert_count_plan(tmp_path, _data(ENCODER, BERT_DECODER))


@pytest.mark.parametrize(("change", "message"), [
    ({"encoder": {**ENCODER, "model_type": "roberta"}}, r"encoder.model_type: unsupported 'roberta' \(supported: bert\)"),
    ({"encoder": {**ENCODER, "is_decoder": True}}, r"encoder.is_decoder / add_cross_attention: true is not modelled"),
    ({"decoder": {**BERT_DECODER, "add_cross_attention": False}}, r"decoder.add_cross_attention: false is not modelled"),
    ({"decoder": {**BERT_DECODER, "model_type": "llama"}}, r"decoder.model_type: unsupported 'llama'"),
    ({"architectures": ["BertModel"]}, r"architectures: 'BertModel' not modelled \(supported: EncoderDecoderModel\)"),
])
def test_bad_fields_are_one_line_errors(change, message):
    """What the mapper cannot express is refused in one line naming the field."""
    data = {"model_type": "encoder-decoder", "encoder": ENCODER, "decoder": BERT_DECODER, **change}
    assert_one_line_error(data, message)
