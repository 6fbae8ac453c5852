"""HF config mapper of Granite Speech (transformers 5.24 modeling_granite_speech.py
GraniteSpeechForConditionalGeneration; granite_speech_plus the same with cat_hidden_layers): the
Conformer CTC encoder as a `VisionSpec.tower` priced per 30 s clip (1500 frames of input_dim
stacked log-mel features at 50 a second; `hf_audio_towers.conformer_blocks`): input_linear
Linear(input_dim, h), num_layers Conformer blocks (blocked attention over context_size frames with
Shaw's relative table of 2 max_pos_emb + 1 rows, a conv module of conv_expansion_factor x h
channels with biased pointwise convs and a BatchNorm), and the self-conditioning pair out
Linear(h, output_dim) / out_mid Linear(output_dim, h) run once at the middle block; the projector
(GraniteSpeechEncoderProjector): window_size // downsample_rate learned queries a window of
window_size frames through a BLIP-2 Q-Former (hf_n18qformer.py's layers, cross-attending to
projector_config.encoder_hidden_size features) and a biased Linear to the text model (Granite).
Granite Speech's LoRA adapter is peft's, loaded apart from the model: not counted.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.conformer import ConvModuleSpec
from modelplan.specs.hf_audio_towers import audio_tower, conformer_blocks
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _rows
from modelplan.specs.hf_n18qformer import _qformer
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_vision import _linear

_ENCODER = {"input_dim": 160, "num_layers": 10, "hidden_dim": 1024, "feedforward_mult": 4, "num_heads": 8,
            "output_dim": 42, "context_size": 200, "max_pos_emb": 512, "conv_kernel_size": 15,
            "conv_expansion_factor": 2}
"""GraniteSpeechEncoderConfig defaults (transformers 5.24)."""
_QFORMER = {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072,
            "cross_attention_frequency": 2, "encoder_hidden_size": 1408}
"""Blip2QFormerConfig defaults (transformers 5.24)."""
_GRANITE = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
            "num_attention_heads": 32}
"""GraniteConfig size defaults (an absent text_config)."""
_FRAMES = 1500
"""Encoder frames of one priced 30 s clip (50 a second)."""


def _granite_speech(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """GraniteSpeech(Plus)ForConditionalGeneration (module docstring)."""
    fields, _ = _text(c, text_mappers, "granite", _GRANITE)
    raw = c.data.get("encoder_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: encoder_config: expected an object, got {raw!r}")
    e = HFConfig({**_ENCODER, **{k: v for k, v in raw.items() if v is not None}}, c.source, "encoder_config.")
    h, heads, n = e.size("hidden_dim"), e.divisor("num_heads"), e.size("num_layers")
    head_dim = e.integer("dim_head", None, nullable=True) or h // heads
    context, max_pos = e.size("context_size"), e.size("max_pos_emb")
    if context > max_pos:
        raise SpecError(f"{c.source}: encoder_config.context_size: {context} exceeds max_pos_emb ({max_pos})")
    conv = ConvModuleSpec(kernel=e.size("conv_kernel_size"), channels=h * e.size("conv_expansion_factor"),
                          pointwise_bias=True)
    out = e.size("output_dim")
    layers = [_rows(_linear("input_linear", e.size("input_dim"), h, True), _FRAMES),
              *conformer_blocks(h, heads, head_dim, h * e.size("feedforward_mult"), n, _FRAMES, context, conv,
                                2 * max_pos + 1),
              _rows(_linear("out", h, out, True), _FRAMES), _rows(_linear("out_mid", out, h, True), _FRAMES)]
    _, q = _sub(c, "projector_config", "blip_2_qformer")
    q = HFConfig({**_QFORMER, **q.data}, c.source, q.path)
    window, rate = c.integer("window_size", 15), c.integer("downsample_rate", 5)
    if window < rate or rate < 1:
        raise SpecError(f"{c.source}: window_size: {window} must be at least downsample_rate ({rate}) >= 1")
    windows = -(-_FRAMES // window)  # the frames padded to whole windows
    # the Q-Former's layers per window (rows: its queries), run on every window of the clip
    connector = [{**layer, "rows": (layer.get("rows") or window) * windows}
                 if layer["kind"] != "vector" else layer
                 for layer in _qformer(q, window // rate, q.size("encoder_hidden_size"), 0, fields["hidden"], False)]
    connector = [{**layer, "name": "linear"} if layer["name"] == "language_projection" else layer for layer in connector]
    fields["vision"] = audio_tower(layers, h, heads, h * e.size("feedforward_mult"), n, _FRAMES, connector)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


GRANITE_SPEECH_MAPPERS = {"granite_speech": _granite_speech, "granite_speech_plus": _granite_speech}
"""Composite types (config, text mappers)."""
