"""The standalone image and audio encoders' mappers in one table for `hf.MAPPERS`
(hf_vision_models, hf_image_text, hf_audio; ResNet as a network spec, hf_resnet), with their head hooks: each mapper reads `architectures` itself,
so `hf.apply_head` is skipped for them."""

from __future__ import annotations

from modelplan.specs.hf_audio import AUDIO_MAPPERS
from modelplan.specs.hf_image_text import IMAGE_TEXT_MAPPERS
from modelplan.specs.hf_resnet import RESNET_MAPPERS
from modelplan.specs.hf_vision_models import VISION_MODEL_MAPPERS

ENCODER_MODEL_MAPPERS = {**VISION_MODEL_MAPPERS, **IMAGE_TEXT_MAPPERS, **AUDIO_MAPPERS, **RESNET_MAPPERS}


def _own_head(fields: dict, c, apply_head, architecture) -> dict:
    """The mapper's fields as they are (its head is already the class architectures[0] names)."""
    return fields


OWN_HEADS = {name: _own_head for name in ENCODER_MODEL_MAPPERS}
"""hf.from_hf_config's head hook for these types."""

ENCODER_UNMODELLED: dict[str, str] = {
}
"""Image / audio encoder types transformers 5.24 ships whose mechanism the spec cannot yet express
exactly: refused with the reason instead of a wrong count."""
