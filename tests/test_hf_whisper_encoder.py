"""WhisperForAudioClassification (modelplan/specs/hf_whisper_encoder.py): the Whisper encoder over
log-mel frames with the audio-classification head. Expected totals are sum(p.numel()) of
transformers 5.24's class built on CPU; the per-block biases and the front FLOPs by hand; the
encoder-decoder classes still read as before; count / plan --gpus 8 run."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_class_defaults, assert_count_plan, assert_total_on_cpu
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config
from modelplan.specs.training import TrainingSpec

_SMALL = {"model_type": "whisper", "architectures": ["WhisperForAudioClassification"], "d_model": 32,
          "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 48, "decoder_layers": 2,
          "decoder_attention_heads": 4, "decoder_ffn_dim": 48, "num_mel_bins": 16, "max_source_positions": 30,
          "max_target_positions": 20, "vocab_size": 50, "pad_token_id": 1, "bos_token_id": 1, "eos_token_id": 2,
          "decoder_start_token_id": 1, "classifier_proj_size": 8}


@pytest.mark.torch
@pytest.mark.parametrize("extra", [{}, {"use_weighted_layer_sum": True},
                                   {"architectures": ["WhisperForConditionalGeneration"]}], ids=["plain", "weighted", "s2s"])
def test_total_equals_transformers_on_cpu(extra):
    """modelplan's total = sum(p.numel()) of the class built on CPU (the encoder-decoder unchanged)."""
    assert_total_on_cpu({**_SMALL, **extra})


@pytest.mark.torch
def test_class_defaults_equal_transformers():
    """WhisperConfig's defaults (4 + 4 blocks of 384) as WhisperForAudioClassification, meta device."""
    assert_class_defaults("whisper", "WhisperForAudioClassification")


def test_blocks_and_front_by_hand():
    """d 32: q / v / out biases 3 x 32 and no k bias a block; conv1 16 x 3 x 32 + 32, conv2
    32 x 3 x 32 + 32; the frozen table 30 x 32; projector 32 x 8 + 8, classifier 8 x 2 + 2. FLOPs
    per clip of s = 30 frames: conv1 on 60 mel frames 2 x 60 x 48 x 32, conv2 2 x 30 x 96 x 32."""
    spec = from_hf_config(_SMALL)
    b = count_params(spec).breakdown
    assert b["layers/attention/qv_bias"] == 2 * 2 * 32
    assert b["embedding/front/conv1"] == 16 * 3 * 32 + 32 and b["embedding/front/conv2"] == 32 * 3 * 32 + 32
    assert b["head/projector"] == 32 * 8 + 8 and b["head/classifier"] == 8 * 2 + 2
    f = count_flops(spec, TrainingSpec(global_batch=1, seq_len=30)).breakdown
    assert f["embedding/front/conv1"] == 2 * 60 * 48 * 32 and f["embedding/front/conv2"] == 2 * 30 * 96 * 32


def test_count_and_plan_run(tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, _SMALL)
