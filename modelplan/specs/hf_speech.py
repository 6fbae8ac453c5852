"""The speech model_types in one table for `hf.MAPPERS`, each mapper reading `architectures` itself
(SPEECH_HEADS: hf.apply_head is skipped, or, for Whisper, used for every class but
WhisperForAudioClassification): the Conformer encoders (hf_conformer.py, hf_conformer_ctc.py),
Whisper's audio classifier (hf_whisper_encoder.py), OmniASR's CTC encoder (hf_omniasr.py), SEW /
SEW-D (hf_sew.py) and SeamlessM4T's text-to-text model (hf_seamless.py)."""

from __future__ import annotations

from modelplan.specs.hf_conformer import CONFORMER_MAPPERS
from modelplan.specs.hf_conformer_ctc import CONFORMER_CTC_MAPPERS
from modelplan.specs.hf_encoder_models import _own_head
from modelplan.specs.hf_omniasr import OMNIASR_MAPPERS
from modelplan.specs.hf_seamless import SEAMLESS_MAPPERS
from modelplan.specs.hf_sew import SEW_MAPPERS
from modelplan.specs.hf_whisper_encoder import WHISPER_ENCODER_HEADS, WHISPER_ENCODER_MAPPERS

SPEECH_MAPPERS = {**CONFORMER_MAPPERS, **CONFORMER_CTC_MAPPERS, **OMNIASR_MAPPERS, **SEW_MAPPERS, **SEAMLESS_MAPPERS,
                  **WHISPER_ENCODER_MAPPERS}
"""model_type -> mapper."""
SPEECH_HEADS = {**{name: _own_head for name in SPEECH_MAPPERS}, **WHISPER_ENCODER_HEADS}
"""hf.from_hf_config's head hooks for these types."""

SPEECH_UNMODELLED: dict[str, str] = {
    "granite_speech5_ctc": "Granite Speech 5's subsampling Conformer blocks (a stride-2 depthwise conv halving the "
                           "frames inside the stack) and its self-conditioning CTC pair (out / out_mid)",
    "granite_speech5_encoder": "Granite Speech 5's subsampling Conformer blocks (a stride-2 depthwise conv halving "
                               "the frames inside the stack) and its self-conditioning CTC pair (out / out_mid)",
    "nemo_speechlm": "Nemotron 3.5 Transcribe's audio model (ASR encoder, a diarization model, speaker "
                     "embeddings) and its word-timestamp encoder and head",
}
"""Speech types transformers 5.24 ships whose audio side the spec cannot yet express exactly."""
