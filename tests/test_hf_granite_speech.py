"""Granite Speech (modelplan/specs/hf_granite_speech.py; Conformer tower blocks in
hf_audio_towers.conformer_blocks sharing specs.conformer.conv_module_layers). Expected totals are
sum(p.numel()) of transformers 5.24's GraniteSpeech(Plus)ForConditionalGeneration built on CPU
(small configs) and on the meta device (class defaults); the conv module and the windows by hand;
count / plan --gpus 8 run."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_class_defaults, assert_count_plan, assert_total_on_cpu
from modelplan.count.vision import vision_params
from modelplan.specs.hf import from_hf_config

_ENCODER = {"model_type": "granite_speech_encoder", "input_dim": 24, "num_layers": 2, "hidden_dim": 32,
            "feedforward_mult": 2, "num_heads": 4, "output_dim": 10, "context_size": 20, "max_pos_emb": 30,
            "conv_kernel_size": 5, "conv_expansion_factor": 2}
_QFORMER = {"model_type": "blip_2_qformer", "hidden_size": 16, "num_hidden_layers": 2, "num_attention_heads": 2,
            "intermediate_size": 24, "encoder_hidden_size": 32}
_TEXT = {"model_type": "granite", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
         "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
_DATA = {"model_type": "granite_speech", "architectures": ["GraniteSpeechForConditionalGeneration"],
         "encoder_config": _ENCODER, "projector_config": _QFORMER, "text_config": _TEXT}
_PLUS = {**_DATA, "model_type": "granite_speech_plus", "architectures": ["GraniteSpeechPlusForConditionalGeneration"],
         "encoder_config": {**_ENCODER, "model_type": "granite_speech_plus_encoder", "cat_hidden_layers": [1]},
         "projector_config": {**_QFORMER, "encoder_hidden_size": 64}}


@pytest.mark.torch
@pytest.mark.parametrize("data", [_DATA, {**_DATA, "tie_word_embeddings": False}, _PLUS], ids=["tied", "untied", "plus"])
def test_total_equals_transformers_on_cpu(data):
    """modelplan's total = sum(p.numel()) of the composite built on CPU."""
    assert_total_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "cls"), [("granite_speech", "GraniteSpeechForConditionalGeneration"),
                                                 ("granite_speech_plus", "GraniteSpeechPlusForConditionalGeneration")])
def test_class_defaults_equal_transformers(model_type, cls):
    """The config class defaults, meta device."""
    assert_class_defaults(model_type, cls)


def test_conv_module_and_windows_by_hand():
    """h 32, 2 x expansion (c 64), kernel 5, 2 blocks: LayerNorm 64, up_conv 32 x 128 + 128,
    depthwise 64 x 5, BatchNorm 128, down_conv 64 x 32 + 32 a block (GraniteSpeechConformerConvModule);
    the clip's 1500 frames in 100 windows of 15, each 3 queries through the Q-Former."""
    spec = from_hf_config(_DATA)
    p = vision_params(spec.vision, spec.hidden)
    conv = sum(n for key, n in p.items() if key.startswith("tower/layers/conv/"))
    assert conv == 2 * (64 + 32 * 128 + 128 + 64 * 5 + 128 + 64 * 32 + 32)
    rows = {layer.name: layer.rows for layer in spec.vision.connector}
    assert rows["linear"] == 100 * 3 and rows["qformer/crossattention/kv"] == 1500


@pytest.mark.parametrize("data", [_DATA, _PLUS], ids=["base", "plus"])
def test_count_and_plan_run(data, tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, data)
