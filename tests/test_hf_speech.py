"""The speech table (modelplan/specs/hf_speech.py): SeamlessM4T(v2)ForTextToText through the
m2m_100 mapper (hf_seamless.py), totals = sum(p.numel()) of transformers 5.24's classes built on
CPU (small config) and on the meta device (class defaults); the speech types still out of scope
are refused by `modelplan count` in one line naming what is missing."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_class_defaults, assert_count_plan, assert_count_refused, assert_total_on_cpu
from modelplan.specs.hf_speech import SPEECH_UNMODELLED

_SMALL = {"hidden_size": 32, "encoder_layers": 2, "decoder_layers": 2, "encoder_attention_heads": 4,
          "decoder_attention_heads": 4, "encoder_ffn_dim": 48, "decoder_ffn_dim": 48, "vocab_size": 60,
          "max_position_embeddings": 64, "pad_token_id": 0, "bos_token_id": 2, "eos_token_id": 3,
          "decoder_start_token_id": 3}
CASES = {"seamless_m4t": "SeamlessM4TForTextToText", "seamless_m4t_v2": "SeamlessM4Tv2ForTextToText"}


@pytest.mark.torch
@pytest.mark.parametrize("model_type", list(CASES))
def test_text_to_text_total_equals_transformers_on_cpu(model_type):
    """modelplan's total = sum(p.numel()) of ...ForTextToText built on CPU."""
    assert_total_on_cpu({"model_type": model_type, "architectures": [CASES[model_type]], **_SMALL})


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", list(CASES))
def test_text_to_text_class_defaults(model_type):
    """The config class defaults (24 + 24 blocks of 1024, 256102 tokens), meta device."""
    assert_class_defaults(model_type, CASES[model_type])


def test_text_to_text_count_plan_and_speech_classes_refused(tmp_path):
    """count / plan run on ...ForTextToText; SeamlessM4TForSpeechToText is one line naming the speech encoder."""
    data = {"model_type": "seamless_m4t", "architectures": ["SeamlessM4TForTextToText"], **_SMALL}
    assert_count_plan(tmp_path, data)
    assert_count_refused(tmp_path, {**data, "architectures": ["SeamlessM4TForSpeechToText"]}, "speech encoder")


@pytest.mark.parametrize("model_type", list(SPEECH_UNMODELLED))
def test_unmodelled_speech_types_refused_in_one_line(model_type, tmp_path):
    """Each still-unmodelled speech type: one line naming the missing feature."""
    assert_count_refused(tmp_path, {"model_type": model_type}, SPEECH_UNMODELLED[model_type][:30])


def test_bad_hidden_size_one_line():
    """A negative hidden_size (the m2m_100 mapper's d_model) is one line naming the field, not a math error."""
    from _hf_n17_checks import assert_one_line_error

    data = {"model_type": "seamless_m4t", "architectures": ["SeamlessM4TForTextToText"], **_SMALL, "hidden_size": -64}
    assert_one_line_error(data, "hidden_size")
