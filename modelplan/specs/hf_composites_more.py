"""The registry of further image-text composites, one module per architecture (each module's
docstring names its transformers 5.24 source): DeepSeek-VL hybrid, MiniCPM-V 4.6 / 4.7 and MiniCPM-OCR, Molmo2, Chameleon, IDEFICS,
Phi-4-multimodal, ERNIE 4.5 VL MoE, pi0, Hy4 VL, Apertus 1.5, Inkling multimodal, Evolla."""

from __future__ import annotations

from modelplan.specs.hf_apertus1p5 import APERTUS1P5_MAPPERS
from modelplan.specs.hf_chameleon import CHAMELEON_MAPPERS
from modelplan.specs.hf_deepseek_vl_hybrid import DEEPSEEK_VL_HYBRID_MAPPERS
from modelplan.specs.hf_ernie4_5_vl_moe import ERNIE4_5_VL_MOE_MAPPERS
from modelplan.specs.hf_evolla import EVOLLA_HEADS, EVOLLA_MAPPERS
from modelplan.specs.hf_hy_v4_vl import HY_V4_VL_MAPPERS
from modelplan.specs.hf_idefics import IDEFICS_HEADS, IDEFICS_MAPPERS
from modelplan.specs.hf_inkling_mm import INKLING_MM_MAPPERS
from modelplan.specs.hf_minicpm_v import MINICPM_V_MAPPERS
from modelplan.specs.hf_molmo2 import MOLMO2_MAPPERS
from modelplan.specs.hf_phi4_multimodal import PHI4_MULTIMODAL_MAPPERS
from modelplan.specs.hf_pi0 import PI0_MAPPERS

COMPOSITES_MORE = {**DEEPSEEK_VL_HYBRID_MAPPERS, **MINICPM_V_MAPPERS, **MOLMO2_MAPPERS, **CHAMELEON_MAPPERS, **IDEFICS_MAPPERS,
                   **PHI4_MULTIMODAL_MAPPERS, **ERNIE4_5_VL_MOE_MAPPERS,
                   **PI0_MAPPERS, **HY_V4_VL_MAPPERS, **APERTUS1P5_MAPPERS,
                   **INKLING_MM_MAPPERS, **EVOLLA_MAPPERS}
"""Composite model_types -> mapper(config, text model_type -> mapper table)."""

COMPOSITES_MORE_HEADS = {**IDEFICS_HEADS, **EVOLLA_HEADS}
"""model_type -> its head reading (hf.from_hf_config), where the class name is none of hf._HEADS."""
