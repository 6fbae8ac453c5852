"""The audio-LLM composites (modelplan/specs/hf_audio_composites.py, hf_audio_towers.py):
qwen2_audio, audioflamingo3, musicflamingo, voxtral, glmasr, moss_transcribe_diarize, qwen3_asr, vibevoice_asr, voxtral_realtime.
Expected totals are sum(p.numel()) of transformers 5.24's ...ForConditionalGeneration built on
CPU from a small config and on the meta device from the config class defaults; the per-clip tower
FLOPs are worked by hand; count / plan --gpus 8 run; a foreign audio_config is one line."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_class_defaults, assert_count_plan, assert_one_line_error, assert_total_on_cpu
from modelplan.count.vision import vision_forward_flops
from modelplan.specs.hf import from_hf_config

_QWEN2 = {"model_type": "qwen2", "vocab_size": 100, "hidden_size": 64, "intermediate_size": 96,
          "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2}
_LLAMA = {**_QWEN2, "model_type": "llama", "head_dim": 16}
_QWEN3 = {**_QWEN2, "model_type": "qwen3", "head_dim": 16}
_WHISPER = {"hidden_size": 32, "num_attention_heads": 4, "intermediate_size": 64, "num_hidden_layers": 2,
            "num_mel_bins": 16, "max_source_positions": 20}

CASES = {
    "qwen2_audio": ("Qwen2AudioForConditionalGeneration", _QWEN2,
                    {"model_type": "qwen2_audio_encoder", "d_model": 32, "encoder_attention_heads": 4,
                     "encoder_ffn_dim": 64, "encoder_layers": 2, "num_mel_bins": 16, "max_source_positions": 20}),
    "audioflamingo3": ("AudioFlamingo3ForConditionalGeneration", _QWEN2,
                       {"model_type": "audioflamingo3_encoder", **_WHISPER}),
    "musicflamingo": ("MusicFlamingoForConditionalGeneration", _QWEN2,
                      {"model_type": "audioflamingo3_encoder", **_WHISPER}),
    "voxtral": ("VoxtralForConditionalGeneration", _LLAMA, {"model_type": "voxtral_encoder", **_WHISPER}),
    "glmasr": ("GlmAsrForConditionalGeneration", _LLAMA,
               {"model_type": "glmasr_encoder", **_WHISPER, "max_position_embeddings": 20, "num_key_value_heads": 2}),
    "moss_transcribe_diarize": ("MossTranscribeDiarizeForConditionalGeneration", _QWEN3,
                                {"model_type": "moss_transcribe_diarize_audio", **_WHISPER}),
    "qwen3_asr": ("Qwen3ASRForConditionalGeneration", _QWEN3,
                  {"model_type": "qwen3_asr_encoder", "d_model": 32, "encoder_attention_heads": 4,
                   "encoder_ffn_dim": 64, "encoder_layers": 2, "num_mel_bins": 16, "downsample_hidden_size": 8,
                   "output_dim": 64}),
}


def _data(name: str, **top) -> dict:
    cls, text, audio = CASES[name]
    return {"model_type": name, "architectures": [cls], "text_config": text, "audio_config": audio, **top}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_small_total_equals_transformers_on_cpu(name):
    """modelplan's total = sum(p.numel()) of the composite built on CPU (the text model's head
    untied / tied as the composite's class default says)."""
    assert_total_on_cpu(_data(name))


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", list(CASES))
def test_class_defaults_equal_transformers(name):
    """The composite config class's defaults (7B-scale text models, 32-block encoders), meta device."""
    assert_class_defaults(name, CASES[name][0])


@pytest.mark.torch
@pytest.mark.parametrize(("name", "tied"), [("qwen2_audio", True), ("voxtral", True), ("glmasr", False),
                                            ("qwen3_asr", False)])
def test_tied_flag_read(name, tied):
    """tie_word_embeddings: Qwen2-Audio / Voxtral keep their head whatever it says (no
    _tied_weights_keys), GLM-ASR / Qwen3-ASR untie theirs on false (transformers built on CPU)."""
    assert_total_on_cpu(_data(name, tie_word_embeddings=tied))


def test_tower_flops_per_clip_by_hand():
    """Qwen2-Audio, d 32, ffn 64, 2 blocks on T = 20 frames (40 mel frames), 4 x 64 text: conv1
    2 x 40 x (3 x 16) x 32, conv2 2 x 20 x (3 x 32) x 32; per block q/k/v/out 4 x 2 T d^2, fc1 + fc2
    2 x 2 T d f, scores + AV 2 x 2 T^2 d; the projector 2 x (T / 2) x 32 x 64 after the pool."""
    spec = from_hf_config(_data("qwen2_audio"))
    f = vision_forward_flops(spec.vision, spec.hidden)
    t, d, ffn = 20, 32, 64
    block = 4 * 2 * t * d * d + 2 * 2 * t * d * ffn + 2 * 2 * t * t * d
    assert f["tower/conv1"] == 2 * 40 * 48 * 32 and f["tower/conv2"] == 2 * 20 * 96 * 32
    assert sum(v for k, v in f.items() if k.startswith("tower/layers/")) == 2 * block
    assert f["projector/linear"] == 2 * 10 * 32 * 64


@pytest.mark.parametrize("name", list(CASES))
def test_count_and_plan_run(name, tmp_path):
    """count and plan --gpus 8 exit 0."""
    assert_count_plan(tmp_path, _data(name))


def test_foreign_audio_encoder_refused_in_one_line():
    """An audio_config of another encoder type is one line naming the field."""
    data = _data("qwen2_audio")
    assert_one_line_error({**data, "audio_config": {"model_type": "whisper"}}, "audio_config.model_type")
    bad = {**data, "model_type": "voxtral", "audio_config": {**_WHISPER, "model_type": "voxtral_encoder",
                                                              "intermediate_size": 48}}
    assert_one_line_error(bad, "intermediate_size: 48 must divide")


def test_qwen3_asr_chunks_and_windows_by_hand():
    """Qwen3ASREncoder on 3000 mel frames, n_window 50: 30 chunks of 100 frames, each 100 -> 50 -> 25
    -> 13 frames and 16 -> 8 -> 4 -> 2 bins through the three stride-2 convs, so 390 frames for the
    blocks; a window of n_window_infer 800 mel frames holds 8 chunks, 104 frames (the keys); conv2d1
    on 30 x 8 x 50 output positions."""
    tower = {layer.name: layer for layer in from_hf_config(_data("qwen3_asr")).vision.tower}
    assert tower["conv2d1"].rows == 30 * 8 * 50 and tower["conv_out"].rows == 390
    assert tower["conv_out"].in_features == 8 * 2
    assert tower["layers/attention/scores"].keys == 104 and tower["layers/attention/scores"].rows == 390


_TOKENIZER = {"model_type": "vibevoice_acoustic_tokenizer_encoder", "hidden_size": 8, "kernel_size": 3,
              "num_filters": 4, "downsampling_ratios": [2, 4], "depths": [1, 1, 2], "ffn_expansion": 2}
_VIBEVOICE = {"model_type": "vibevoice_asr", "architectures": ["VibeVoiceAsrForConditionalGeneration"],
              "text_config": _QWEN2, "acoustic_tokenizer_encoder_config": _TOKENIZER,
              "semantic_tokenizer_encoder_config": {**_TOKENIZER, "hidden_size": 16}}


@pytest.mark.torch
def test_vibevoice_total_equals_transformers_on_cpu():
    """VibeVoiceAsrForConditionalGeneration's sum(p.numel()) on CPU (two tokenizer encoders)."""
    assert_total_on_cpu(_VIBEVOICE)


@pytest.mark.torch
@pytest.mark.slow
def test_vibevoice_class_defaults():
    """VibeVoiceAsrConfig's defaults (meta device)."""
    assert_class_defaults("vibevoice_asr", "VibeVoiceAsrForConditionalGeneration")


def test_vibevoice_tokenizer_by_hand(tmp_path):
    """num_filters 4, ratios 2, 4, kernel 3: the stem conv 1 x 3 x 4 + 4 on 720000 samples (30 s at
    24 kHz), stage 0's Conv1d(4, 8, 4, stride 2) on 360000, stage 1's Conv1d(8, 16, 8, stride 4) and
    the head Conv1d(16, 8, 3) on 90000 frames; a ConvNeXt layer of 8: two RMSNorms 16, the depthwise
    8 x 3 + 8, gammas 16, linear1 8 x 16 + 16, linear2 16 x 8 + 8; count / plan run."""
    tower = {layer.name: layer for layer in from_hf_config(_VIBEVOICE).vision.tower}
    assert tower["acoustic/stem/conv"].rows == 720000 and tower["acoustic/stage0/conv"].rows == 360000
    assert tower["acoustic/stage0/conv"].in_features == 4 * 4 and tower["acoustic/head"].rows == 90000
    from modelplan.count.vision import connector_params
    layer = sum(connector_params(tower[f"acoustic/stage0/{n}"]) for n in ("norms", "mixer", "gammas", "ffn/linear1",
                                                                          "ffn/linear2"))
    assert layer == 16 + (8 * 3 + 8) + 16 + (8 * 16 + 16) + (16 * 8 + 8)
    assert_count_plan(tmp_path, _VIBEVOICE)


_REALTIME = {"model_type": "voxtral_realtime", "architectures": ["VoxtralRealtimeForConditionalGeneration"],
             "text_config": {**_QWEN2, "model_type": "voxtral_realtime_text", "head_dim": 16, "sliding_window": 64},
             "audio_config": {"model_type": "voxtral_realtime_encoder", **_WHISPER, "max_position_embeddings": 20,
                              "head_dim": 8, "sliding_window": 10}, "downsample_factor": 4}


@pytest.mark.torch
@pytest.mark.parametrize("tied", [True, False])
def test_voxtral_realtime_total_equals_transformers_on_cpu(tied):
    """VoxtralRealtimeForConditionalGeneration's sum(p.numel()) on CPU, head tied or not."""
    assert_total_on_cpu({**_REALTIME, "tie_word_embeddings": tied})


@pytest.mark.torch
@pytest.mark.slow
def test_voxtral_realtime_class_defaults():
    """VoxtralRealtimeConfig's defaults (meta device)."""
    assert_class_defaults("voxtral_realtime", "VoxtralRealtimeForConditionalGeneration")


def test_voxtral_realtime_by_hand(tmp_path):
    """h 64: ada_rms_norm 64 x 32 + 32 x 64 a block (two blocks), its GEMMs once a sequence; the
    encoder's gated MLP 2 x 32 x 64 + 64 x 32 + 32 a block, attention within 10 frames; the
    projector on 20 / 4 rows of 4 x 32; count / plan run."""
    from modelplan.count.params import count_params

    spec = from_hf_config(_REALTIME)
    assert count_params(spec).breakdown["layers/mlp/ada_norm"] == 2 * 2 * 64 * 32
    tower = {layer.name: layer for layer in spec.vision.tower}
    assert tower["layers/attention/scores"].keys == 10
    assert tower["layers/mlp/gate_up"].copies == 4 and not tower["layers/mlp/gate_up"].bias
    rows = {layer.name: (layer.rows, layer.in_features) for layer in spec.vision.connector}
    assert rows["linear_1"] == (5, 128)
    assert_count_plan(tmp_path, _REALTIME)


def test_plan_header_names_the_clip_not_an_image(tmp_path):
    """An audio LLM's plan header counts its tower inputs in the tower's own unit (VisionSpec.input_unit:
    a 30 s clip for Qwen2-Audio's Whisper-style encoder), not as images."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli.app import app

    path = tmp_path / "config.json"
    path.write_text(json.dumps(_data("qwen2_audio")))
    result = CliRunner().invoke(app, ["plan", str(path), "--gpus", "8"])
    assert result.exit_code == 0, result.output
    assert "30 s audio clip(s) per sequence" in result.output and "image(s) per sequence" not in result.output
