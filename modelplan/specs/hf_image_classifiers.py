"""The image classifiers and zero-shot pairs mapped onto the network stack or the vision towers
(hf_convnets, hf_swin_networks, hf_bit, hf_poolformer), and ImageGPT's pixel decoder (hf_imagegpt): their mappers, and the head hook saying each builds its own head."""

from __future__ import annotations

from modelplan.specs.hf_bit import BIT_MAPPERS
from modelplan.specs.hf_convnets import CONVNET_MAPPERS
from modelplan.specs.hf_encoder_models import _own_head
from modelplan.specs.hf_imagegpt import IMAGEGPT_MAPPERS
from modelplan.specs.hf_poolformer import POOLFORMER_MAPPERS
from modelplan.specs.hf_swin_networks import SWIN_NETWORK_MAPPERS

IMAGE_CLASSIFIER_MAPPERS = {**CONVNET_MAPPERS, **SWIN_NETWORK_MAPPERS, **BIT_MAPPERS, **IMAGEGPT_MAPPERS,
                            **POOLFORMER_MAPPERS}
IMAGE_CLASSIFIER_HEADS = {name: _own_head for name in IMAGE_CLASSIFIER_MAPPERS}
"""hf.from_hf_config's head hook: the mapper's fields already hold the head architectures[0] names."""
