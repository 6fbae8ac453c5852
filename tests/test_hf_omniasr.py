"""Omnilingual ASR (modelplan/specs/hf_omniasr.py): omniasr_ctc on the block stack and the omniasr
composite with its encoder as tower layers. Expected totals are sum(p.numel()) of transformers
5.24's classes built on CPU (small configs) and on the meta device (class defaults); the plain
positional conv and the tower's frames by hand; count / plan --gpus 8 run."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_class_defaults, assert_count_plan, assert_total_on_cpu
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

_AUDIO = {"model_type": "omniasr_audio", "hidden_size": 32, "conv_dim": [16, 16], "conv_kernel": [10, 3],
          "conv_stride": [5, 2], "num_attention_heads": 4, "num_hidden_layers": 2, "num_conv_pos_embeddings": 8,
          "num_conv_pos_embedding_groups": 4, "intermediate_size": 48}
_CTC = {"model_type": "omniasr_ctc", "architectures": ["OmniASRForCTC"], "vocab_size": 30, "audio_config": _AUDIO}
_LM = {"model_type": "omniasr", "architectures": ["OmniASRForConditionalGeneration"], "audio_config": _AUDIO,
       "text_config": {"model_type": "llama", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
                       "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}}


@pytest.mark.torch
@pytest.mark.parametrize("data", [_CTC, {**_CTC, "architectures": ["OmniASRCTCModel"]}, _LM],
                         ids=["ctc", "ctc-model", "lm"])
def test_total_equals_transformers_on_cpu(data):
    """modelplan's total = sum(p.numel()) of the class built on CPU."""
    assert_total_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "cls"), [("omniasr_ctc", "OmniASRForCTC"),
                                                 ("omniasr", "OmniASRForConditionalGeneration")])
def test_class_defaults_equal_transformers(model_type, cls):
    """The config class defaults, meta device."""
    assert_class_defaults(model_type, cls)


def test_plain_position_conv_and_tower_frames_by_hand():
    """OmniASRPositionalConvEmbedding: Conv1d(32, 32, 8, groups 4) without weight norm, 32 x 8 x 8 + 32;
    the composite's 30 s clip: 480000 samples through k 10 / s 5 then k 3 / s 2 convs, 95999 then
    47999 frames, each block's q/k/v/out on those."""
    b = count_params(from_hf_config(_CTC)).breakdown
    assert b["embedding/position_conv"] == 32 * 8 * 8 + 32
    tower = from_hf_config(_LM).vision.tower
    rows = {layer.name: layer.rows for layer in tower}
    assert rows["features/conv0"] == (480000 - 10) // 5 + 1 == 95999
    assert rows["layers/attention/q"] == rows["layer_norm"] == (95999 - 3) // 2 + 1


@pytest.mark.parametrize("data", [_CTC, _LM], ids=["ctc", "lm"])
def test_count_and_plan_run(data, tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, data)
