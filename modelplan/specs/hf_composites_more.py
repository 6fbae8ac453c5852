"""The registry of further image-text composites, one module per architecture (each module's
docstring names its transformers 5.24 source): DeepSeek-VL hybrid, MiniCPM-V 4.6 / 4.7 and
MiniCPM-OCR, Molmo2, Chameleon, IDEFICS, Phi-4-multimodal, ERNIE 4.5 VL MoE, pi0, Hy4 VL,
Apertus 1.5, Inkling multimodal, Evolla,
Granite 4 Vision."""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_apertus1p5 import APERTUS1P5_MAPPERS
from modelplan.specs.hf_chameleon import CHAMELEON_MAPPERS
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_deepseek_vl_hybrid import DEEPSEEK_VL_HYBRID_MAPPERS
from modelplan.specs.hf_ernie4_5_vl_moe import ERNIE4_5_VL_MOE_MAPPERS
from modelplan.specs.hf_evolla import EVOLLA_HEAD_CLASSES, EVOLLA_MAPPERS
from modelplan.specs.hf_granite4_vision import GRANITE4_VISION_MAPPERS
from modelplan.specs.hf_hy_v4_vl import HY_V4_VL_MAPPERS
from modelplan.specs.hf_idefics import IDEFICS_HEAD_CLASSES, IDEFICS_MAPPERS
from modelplan.specs.hf_inkling_mm import INKLING_MM_MAPPERS
from modelplan.specs.hf_minicpm_v import MINICPM_V_MAPPERS
from modelplan.specs.hf_molmo2 import MOLMO2_MAPPERS
from modelplan.specs.hf_phi4_multimodal import PHI4_MULTIMODAL_MAPPERS
from modelplan.specs.hf_pi0 import PI0_MAPPERS

COMPOSITES_MORE = {**DEEPSEEK_VL_HYBRID_MAPPERS, **MINICPM_V_MAPPERS, **MOLMO2_MAPPERS, **CHAMELEON_MAPPERS,
                   **IDEFICS_MAPPERS, **PHI4_MULTIMODAL_MAPPERS, **ERNIE4_5_VL_MOE_MAPPERS, **PI0_MAPPERS,
                   **HY_V4_VL_MAPPERS, **APERTUS1P5_MAPPERS, **INKLING_MM_MAPPERS, **EVOLLA_MAPPERS,
                   **GRANITE4_VISION_MAPPERS}
"""Composite model_types -> mapper(config, text model_type -> mapper table)."""


def _own_head(with_head: str, bare: str):
    """The head reading of a composite whose LM-head class `with_head` ends in none of hf._HEADS
    (its fields as mapped) and whose bare body is `bare` (hf.apply_head's ...Model)."""
    def head(fields: dict, c: HFConfig, apply_head, architecture) -> dict:
        names = c.texts("architectures", None) or [with_head]
        if names[0] == with_head:
            return fields
        if names[0] != bare:
            raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: {with_head}, {bare})")
        return apply_head(fields, c, architecture(c))

    return head


COMPOSITES_MORE_HEADS = {"idefics": _own_head(*IDEFICS_HEAD_CLASSES), "evolla": _own_head(*EVOLLA_HEAD_CLASSES)}
"""model_type -> its head reading (hf.from_hf_config), where the class name is none of hf._HEADS."""
