"""HF config mappers of the audio-LLM composites (transformers 5.24 ...ForConditionalGeneration):
an audio encoder, a projector into the text model, and a decoder text model mapped by its own
model_type's mapper. The encoder is a `VisionSpec.tower` of layers priced per 30 s clip
(`specs/hf_audio_towers.py`; modelplan count's `vision` section is then per clip):

- qwen2_audio: Qwen2AudioEncoder (Whisper's, AvgPool1d(2) before the final norm) and
  Qwen2AudioMultiModalProjector, one biased Linear(d, text);
- audioflamingo3 / musicflamingo: AudioFlamingo3Encoder (the same) and linear_1 Linear(d, text),
  activation, linear_2 Linear(text, text), biased with projector_bias (MusicFlamingo's rotary
  time embedding holds buffers only);
- voxtral: VoxtralEncoder (no pool) whose frames are regrouped into intermediate_size-wide rows
  (4 frames of 1280) for linear_1 Linear(intermediate_size, text) and linear_2 Linear(text, text),
  bias-free;
- glmasr: GlmAsrEncoder (rotary, GQA, no position table), frames regrouped as Voxtral's for
  linear_1 Linear(intermediate_size, 2 text) and linear_2 Linear(2 text, text), biased;
- moss_transcribe_diarize: Whisper's encoder, audio_merge_size frames packed into one row for
  linear_1 Linear(merge d, text), linear_2 Linear(text, text) (projector_bias) and a biased LayerNorm;
- qwen3_asr: Qwen3ASREncoder (Qwen3-Omni's audio encoder: chunked Conv2d subsampling, windowed
  attention) and its projector linear_1 Linear(d, d), linear_2 Linear(d, output_dim);
- voxtral_realtime: `_voxtral_realtime` (its Mistral-shaped text model with ada_rms_norm);
- omniasr: hf_omniasr.py; granite_speech / granite_speech_plus: hf_granite_speech.py; vibevoice_asr:
  hf_vibevoice.py.

Qwen2-Audio, Voxtral and the Flamingos never tie the head (no _tied_weights_keys); GLM-ASR,
MOSS, Qwen3-ASR and Voxtral-Realtime tie it unless tie_word_embeddings is false. VoxtralConfig /
GlmAsrConfig merge their text init_kwargs into a text_config dict as well.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_audio_towers import audio_tower, encoder_blocks, qwen3_asr_encoder, whisper_encoder
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _rows
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_granite_speech import GRANITE_SPEECH_MAPPERS
from modelplan.specs.hf_omniasr import OMNIASR_COMPOSITES
from modelplan.specs.hf_vibevoice import VIBEVOICE_MAPPERS
from modelplan.specs.hf_vision import _linear, _norm

_WHISPER = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 20,
            "num_mel_bins": 128, "max_source_positions": 1500}
"""Qwen2AudioEncoderConfig / AudioFlamingo3EncoderConfig / VoxtralEncoderConfig defaults (transformers 5.24)."""
_AUDIO_DEFAULTS = {
    "qwen2_audio_encoder": _WHISPER, "audioflamingo3_encoder": _WHISPER, "musicflamingo_encoder": _WHISPER,
    "voxtral_encoder": _WHISPER,
    "glmasr_encoder": {**_WHISPER, "max_position_embeddings": 1500},
    "moss_transcribe_diarize_audio": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24,
                                      "num_attention_heads": 16, "num_mel_bins": 80, "max_source_positions": 1500},
}
"""Audio encoder config defaults by model_type (transformers 5.24 configuration_*.py)."""
_CANONICAL = {"d_model": "hidden_size", "encoder_ffn_dim": "intermediate_size", "encoder_layers": "num_hidden_layers",
              "encoder_attention_heads": "num_attention_heads"}
"""Whisper-named keys of the same sizes (Qwen2AudioEncoderConfig's; the others' attribute_map)."""

_VOXTRAL_TEXT = {"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 30,
                 "num_key_value_heads": 8, "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "head_dim": 128}
_GLMASR_TEXT = {"vocab_size": 59264, "hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28,
                "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 8192,
                "rms_norm_eps": 1e-05}
_QWEN3_ASR_TEXT = {"hidden_size": 2048, "intermediate_size": 6144, "num_hidden_layers": 28, "num_attention_heads": 16,
                   "num_key_value_heads": 8, "head_dim": 128, "max_position_embeddings": 65536}
_MOSS_TEXT = {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16,
              "num_key_value_heads": 8, "max_position_embeddings": 131072}
"""The composites' text SubConfigSpec init_kwargs (transformers 5.24 configuration_*.py)."""


def _encoder(c: HFConfig, default_type: str, kinds: tuple[str, ...]) -> HFConfig:
    kind, a = _sub(c, "audio_config", default_type)
    if kind not in kinds:
        raise SpecError(f"{c.source}: audio_config.model_type: unsupported '{kind}' ({', '.join(kinds)})")
    named = {_CANONICAL.get(k, k): v for k, v in a.data.items() if v is not None}
    return HFConfig({**_AUDIO_DEFAULTS[kind], **named}, c.source, a.path)


def _text_of(c: HFConfig, text_mappers: dict[str, Mapper], default_type: str, init: dict,
             merge_present: bool) -> dict:
    """The text model; `merge_present`: the init_kwargs apply under a given text_config too."""
    raw = c.data.get("text_config")
    if merge_present and isinstance(raw, dict):
        c = HFConfig({**c.data, "text_config": {**init, **raw}}, c.source, c.path)
    fields, _ = _text(c, text_mappers, default_type, init)
    return fields


def _whisper(c: HFConfig, a: HFConfig, pool: int, positions: bool = True, gqa: bool = False) -> tuple[list[dict], dict]:
    """(tower layers, sizes) of a Whisper-style encoder config."""
    d, heads = a.size("hidden_size"), a.size("num_attention_heads")
    ffn, depth = a.size("intermediate_size"), a.size("num_hidden_layers")
    frames = a.size("max_position_embeddings" if gqa else "max_source_positions")
    kv = (a.integer("num_key_value_heads", heads, nullable=True) or heads) if gqa else None
    head_dim = a.integer("head_dim", None, nullable=True) if gqa else None
    layers = whisper_encoder(d, heads, ffn, depth, a.size("num_mel_bins"), frames, kv_heads=kv, head_dim=head_dim,
                             positions=positions, pool=pool, source=f"{c.source}: {a.path}")
    return layers, dict(d=d, heads=heads, ffn=ffn, depth=depth, frames=frames)


def _composite(c: HFConfig, text_mappers: dict[str, Mapper], text_type: str, text_init: dict, audio_type: str,
               merge_present: bool, tied: bool | None, projector: Callable[[HFConfig, dict, int], list[dict]],
               pool: int = 1, gqa: bool = False, kinds: tuple[str, ...] = ()) -> dict:
    fields = _text_of(c, text_mappers, text_type, text_init, merge_present)
    a = _encoder(c, audio_type, kinds or (audio_type,))
    layers, s = _whisper(c, a, pool, positions=not gqa, gqa=gqa)
    connector = projector(a, s, fields["hidden"])
    fields["vision"] = audio_tower(layers, s["d"], s["heads"], s["ffn"], s["depth"], s["frames"], connector)
    # tied None: the class declares no tied weights (_tied_weights_keys None), whatever the flag says
    fields["tied_embeddings"] = tied is not None and c.flag("tie_word_embeddings", tied)
    return fields


def _two(bias: bool, inner: int, rows: int, n_in: int, t: int, names=("linear_1", "linear_2")) -> list[dict]:
    """linear_1 Linear(n_in, inner), activation, linear_2 Linear(inner, t) on `rows` rows a clip."""
    return [_rows(_linear(names[0], n_in, inner, bias), rows), _rows(_linear(names[1], inner, t, bias), rows)]


def _regrouped(a: HFConfig, s: dict) -> tuple[int, int]:
    """(width, rows) of the frames reshaped into intermediate_size-wide rows (Voxtral, GLM-ASR)."""
    width = a.size("intermediate_size")
    if (s["frames"] * s["d"]) % width:
        raise SpecError(f"{a.source}: {a.path}intermediate_size: {width} must divide frames x hidden_size "
                        f"({s['frames']} x {s['d']}) to regroup the frames for the projector")
    return width, s["frames"] * s["d"] // width


def _qwen2_audio(c: HFConfig, m: dict[str, Mapper]) -> dict:
    return _composite(c, m, "qwen2", {}, "qwen2_audio_encoder", False, None,
                      lambda a, s, t: [_rows(_linear("linear", s["d"], t, True), s["frames"] // 2)], pool=2)


def _flamingo(c: HFConfig, m: dict[str, Mapper]) -> dict:
    bias = c.flag("projector_bias", True)
    return _composite(c, m, "qwen2", {}, "audioflamingo3_encoder", False, None,
                      lambda a, s, t: _two(bias, t, s["frames"] // 2, s["d"], t), pool=2,
                      kinds=("audioflamingo3_encoder", "musicflamingo_encoder"))


def _voxtral(c: HFConfig, m: dict[str, Mapper]) -> dict:
    def projector(a: HFConfig, s: dict, t: int) -> list[dict]:
        width, rows = _regrouped(a, s)
        return _two(False, t, rows, width, t)
    return _composite(c, m, "llama", _VOXTRAL_TEXT, "voxtral_encoder", True, None, projector)


def _glmasr(c: HFConfig, m: dict[str, Mapper]) -> dict:
    def projector(a: HFConfig, s: dict, t: int) -> list[dict]:
        width, rows = _regrouped(a, s)
        return _two(True, 2 * t, rows, width, t)
    return _composite(c, m, "llama", _GLMASR_TEXT, "glmasr_encoder", True, True, projector, gqa=True)


def _moss(c: HFConfig, m: dict[str, Mapper]) -> dict:
    merge, bias = c.integer("audio_merge_size", 4), c.flag("projector_bias", True)

    def projector(a: HFConfig, s: dict, t: int) -> list[dict]:
        rows = -(-s["frames"] // merge)  # each chunk's frames padded up to whole merge groups
        return _two(bias, t, rows, merge * s["d"], t) + [_rows(_norm("norm", t), rows)]
    return _composite(c, m, "qwen3", _MOSS_TEXT, "moss_transcribe_diarize_audio", False, True, projector)


def _qwen3_asr(c: HFConfig, m: dict[str, Mapper]) -> dict:
    """Qwen3ASRForConditionalGeneration: the Qwen3 text model, Qwen3ASREncoder as tower layers over
    one 30 s clip (3000 mel frames; `hf_audio_towers.qwen3_asr_encoder`) and its projector
    linear_1 Linear(d, d), GELU, linear_2 Linear(d, output_dim), biased, on every frame."""
    fields = _text_of(c, m, "qwen3", _QWEN3_ASR_TEXT, False)
    kind, a = _sub(c, "audio_config", "qwen3_asr_encoder")
    if kind != "qwen3_asr_encoder":
        raise SpecError(f"{c.source}: audio_config.model_type: unsupported '{kind}' (qwen3_asr_encoder)")
    a = HFConfig({"output_dim": 3584, "d_model": 1024, "encoder_layers": 24, "encoder_attention_heads": 16,
                  "encoder_ffn_dim": 4096, "downsample_hidden_size": 480, "num_mel_bins": 128,
                  **{k: v for k, v in a.data.items() if v is not None}}, a.source, a.path)  # Qwen3ASREncoderConfig defaults
    d = a.integer("d_model")
    layers, frames = qwen3_asr_encoder(a, 3000)  # 30 s at 100 mel frames a second
    connector = _two(True, d, frames, d, a.integer("output_dim"))
    fields["vision"] = audio_tower(layers, d, a.integer("encoder_attention_heads"), a.integer("encoder_ffn_dim"),
                                   a.integer("encoder_layers"), frames, connector)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


_REALTIME_AUDIO = {"hidden_size": 1280, "intermediate_size": 5120, "num_hidden_layers": 32, "num_attention_heads": 32,
                   "head_dim": 64, "num_mel_bins": 128, "max_position_embeddings": 1500, "sliding_window": 750}
"""VoxtralRealtimeEncoderConfig defaults (transformers 5.24)."""
_REALTIME_TEXT = {"vocab_size": 131072, "hidden_size": 3072, "intermediate_size": 9216, "num_hidden_layers": 26,
                  "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "rms_norm_eps": 1e-5,
                  "max_position_embeddings": 131072, "sliding_window": 8192}
"""VoxtralRealtimeTextConfig defaults (transformers 5.24)."""


def _voxtral_realtime(c: HFConfig, m: dict[str, Mapper]) -> dict:
    """VoxtralRealtimeForConditionalGeneration: VoxtralRealtimeTextModel read as Mistral's (bias-free
    GQA, SwiGLU, RMSNorm, every block sliding over sliding_window) plus each block's ada_rms_norm
    (`ExtrasSpec.ada_norm_rank` 32, on the sinusoidal time embedding); the causal-conv encoder as
    tower layers (Whisper's conv1 / conv2 shapes, RMSNorm blocks with biased q / v / o, bias-free k,
    gate / up bias-free and a biased down, attending within sliding_window frames, a final norm) on
    one 30 s clip; the projector linear_1 Linear(downsample_factor x d, text) and linear_2, bias-free,
    on frames / downsample_factor rows; the time embedding holds buffers only."""
    raw = c.data.get("text_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: text_config: expected an object, got {raw!r}")
    kind = raw.get("model_type", "voxtral_realtime_text")
    if kind != "voxtral_realtime_text":
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{kind}' (voxtral_realtime_text)")
    text = {**_REALTIME_TEXT, **{k: v for k, v in raw.items() if v is not None}, "model_type": "mistral"}
    fields = m["mistral"](HFConfig(text, c.source, "text_config."))
    fields["extras"] = {**(fields.get("extras") or {}), "ada_norm_rank": 32}  # Linear(h, 32), Linear(32, h)
    _, a = _sub(c, "audio_config", "voxtral_realtime_encoder")
    a = HFConfig({**_REALTIME_AUDIO, **{k: v for k, v in a.data.items() if v is not None}}, c.source, a.path)
    d, heads, ffn, depth = (a.size(k) for k in ("hidden_size", "num_attention_heads", "intermediate_size",
                                                "num_hidden_layers"))
    frames, factor = a.size("max_position_embeddings"), c.integer("downsample_factor", 4)
    if frames % factor:
        raise SpecError(f"{c.source}: downsample_factor: {factor} must divide audio_config.max_position_embeddings "
                        f"({frames}) to regroup the frames for the projector")
    mel = a.size("num_mel_bins")
    layers = [_rows(_linear("conv1", 3 * mel, d, True), 2 * frames), _rows(_linear("conv2", 3 * d, d, True), frames),
              *encoder_blocks(d, heads, ffn, depth, frames, head_dim=a.size("head_dim"), k_bias=False,
                              keys=a.integer("sliding_window", None, nullable=True), rms=True, gated=True,
                              source=f"{c.source}: {a.path}"),
              _rows(_norm("norm", d, "rmsnorm"), frames)]
    connector = _two(False, fields["hidden"], frames // factor, factor * d, fields["hidden"])
    fields["vision"] = audio_tower(layers, d, heads, ffn, depth, frames, connector)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


AUDIO_COMPOSITE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "qwen2_audio": _qwen2_audio, "audioflamingo3": _flamingo, "musicflamingo": _flamingo, "voxtral": _voxtral,
    "glmasr": _glmasr, "moss_transcribe_diarize": _moss, "qwen3_asr": _qwen3_asr, **OMNIASR_COMPOSITES,
    **GRANITE_SPEECH_MAPPERS, **VIBEVOICE_MAPPERS, "voxtral_realtime": _voxtral_realtime,
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
