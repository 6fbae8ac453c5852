"""HF config mapper of VibeVoice-ASR (transformers 5.24 modeling_vibevoice_asr.py
VibeVoiceAsrForConditionalGeneration): two VibeVoice tokenizer encoders (acoustic and semantic,
modeling_vibevoice_acoustic_tokenizer.py VibeVoiceAcousticTokenizerEncoderModel) over the raw 24 kHz
samples, as `VisionSpec.tower` layers priced per 30 s clip, a projector per stream (Linear(hidden,
text), RMSNorm, Linear(text, text), biased) whose outputs are summed, and the Qwen2 text model.

An encoder: a stem causal Conv1d(channels, num_filters, kernel_size) and depths[0] ConvNeXt-1D
layers; per downsampling ratio r_i a strided Conv1d(F 2^i, F 2^(i+1), 2 r_i, stride r_i) and
depths[i + 1] layers; a head Conv1d(F 2^n, hidden_size, kernel_size); every conv biased (written as
linears over im2col rows, the depthwise mixers as groups-c convs). A ConvNeXt-1D layer of c
channels: RMSNorm, a depthwise Conv1d(c, c, kernel_size), the layer scale gamma (c), RMSNorm,
linear1 Linear(c, ffn_expansion c), linear2 back, ffn_gamma (c). The class ties nothing.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_audio_towers import audio_tower
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _rows
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_vision import _linear, _norm

_TOKENIZER = {"channels": 1, "hidden_size": 64, "kernel_size": 7, "num_filters": 32,
              "downsampling_ratios": [2, 2, 4, 5, 5, 8], "depths": [3, 3, 3, 3, 3, 3, 8], "ffn_expansion": 4}
"""VibeVoiceAcousticTokenizerEncoderConfig defaults (transformers 5.24; the semantic encoder's
init_kwargs set hidden_size 128)."""
_SAMPLES = 30 * 24000
"""One priced clip: 30 s at the processor's 24 kHz sampling_rate."""


def _convnext(prefix: str, c: int, k: int, ffn: int, depth: int, rows: int) -> list[dict]:
    """`depth` ConvNeXt-1D layers of c channels on `rows` samples (module docstring)."""
    if not depth:
        return []
    return [_rows(_norm(f"{prefix}/norms", c, "rmsnorm", copies=2 * depth), rows),
            dict(name=f"{prefix}/mixer", kind="conv", in_features=c * k, out_features=c, groups=c, bias=True,
                 rows=rows, copies=depth),
            dict(name=f"{prefix}/gammas", kind="vector", in_features=2 * c, copies=depth),
            _rows(_linear(f"{prefix}/ffn/linear1", c, ffn * c, True, copies=depth), rows),
            _rows(_linear(f"{prefix}/ffn/linear2", ffn * c, c, True, copies=depth), rows)]


def tokenizer_encoder(e: HFConfig, name: str, samples: int) -> tuple[list[dict], int]:
    """(tower layers, frames) of one VibeVoice tokenizer encoder on `samples` samples; a causal conv
    pads (k - 1) d - (s - 1) on the left, so each conv gives ceil(L / stride) outputs."""
    ratios, depths = e.ints("downsampling_ratios"), e.ints("depths")
    if len(depths) != len(ratios) + 1:
        raise SpecError(f"{e.source}: {e.path}depths: {len(depths)} entries, expected len(downsampling_ratios) + 1 "
                        f"({len(ratios) + 1}: the stem's and one per downsampling stage)")
    k, f, ffn = e.size("kernel_size"), e.size("num_filters"), e.size("ffn_expansion")
    rows = samples
    layers = [_rows(_linear(f"{name}/stem/conv", e.size("channels") * k, f, True), rows),
              *_convnext(f"{name}/stem", f, k, ffn, depths[0], rows)]
    for i, r in enumerate(ratios):
        rows = -(-rows // r)
        c_in, c_out = f * 2 ** i, f * 2 ** (i + 1)
        layers += [_rows(_linear(f"{name}/stage{i}/conv", c_in * 2 * r, c_out, True), rows),
                   *_convnext(f"{name}/stage{i}", c_out, k, ffn, depths[i + 1], rows)]
    layers.append(_rows(_linear(f"{name}/head", f * 2 ** len(ratios) * k, e.size("hidden_size"), True), rows))
    return layers, rows


def _vibevoice_asr(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """VibeVoiceAsrForConditionalGeneration (module docstring)."""
    fields, _ = _text(c, text_mappers, "qwen2")
    t, layers, frames, connector = fields["hidden"], [], 1, []
    for stream, width in (("acoustic", 64), ("semantic", 128)):
        kind, e = _sub(c, f"{stream}_tokenizer_encoder_config", "vibevoice_acoustic_tokenizer_encoder")
        if kind != "vibevoice_acoustic_tokenizer_encoder":
            raise SpecError(f"{c.source}: {stream}_tokenizer_encoder_config.model_type: unsupported '{kind}' "
                            f"(vibevoice_acoustic_tokenizer_encoder)")
        e = HFConfig({**_TOKENIZER, "hidden_size": width, **{k: v for k, v in e.data.items() if v is not None}},
                     c.source, e.path)
        tower, frames = tokenizer_encoder(e, stream, _SAMPLES)
        layers += tower
        connector += [_rows(_linear(f"{stream}_linear_1", e.size("hidden_size"), t, True), frames),
                      _rows(_norm(f"{stream}_norm", t, "rmsnorm"), frames),
                      _rows(_linear(f"{stream}_linear_2", t, t, True), frames)]
    fields["vision"] = audio_tower(layers, 64, 1, 256, 1, frames, connector, "30 s audio clip at 24 kHz")
    fields["tied_embeddings"] = False
    return fields


VIBEVOICE_MAPPERS = {"vibevoice_asr": _vibevoice_asr}
"""Composite types (config, text mappers)."""
