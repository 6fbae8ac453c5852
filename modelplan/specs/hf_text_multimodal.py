"""The registry of further text and multimodal types, one module per architecture (each module's
docstring names its transformers 5.24 source): the Gemma 3n composite, the text EncoderDecoderModel,
FSMT, PEGASUS-X, FastVLM."""

from __future__ import annotations

from modelplan.specs.hf_fast_vlm import FAST_VLM_MAPPERS
from modelplan.specs.hf_fsmt import FSMT_MAPPERS
from modelplan.specs.hf_gemma3n_mm import GEMMA3N_MM_MAPPERS
from modelplan.specs.hf_pegasus_x import PEGASUS_X_MAPPERS
from modelplan.specs.hf_text_encdec import TEXT_ENCDEC_HEADS, TEXT_ENCDEC_MAPPERS

TEXT_MM_COMPOSITES = {**GEMMA3N_MM_MAPPERS, **TEXT_ENCDEC_MAPPERS, **FAST_VLM_MAPPERS}
"""Composite model_types -> mapper(config, text model_type -> mapper table)."""
TEXT_MM_MAPPERS = {**FSMT_MAPPERS, **PEGASUS_X_MAPPERS}
"""Plain model_types -> mapper(config)."""
TEXT_MM_HEADS = {**TEXT_ENCDEC_HEADS}
"""model_type -> its head reading (hf.from_hf_config), where apply_head would misread the class."""
