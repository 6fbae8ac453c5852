"""The image classifiers on the network stack (hf_convnets, hf_efficientnet, hf_swin_networks,
hf_bit, hf_poolformer, hf_textnet, hf_reduced_attention, hf_pvt, hf_hgnet, hf_mobilevit, hf_levit,
hf_pp_lcnet, hf_mobilevitv2, hf_swiftformer, hf_cvt, hf_focalnet,
hf_hiera), ImageGPT's pixel decoder (hf_imagegpt) ALIGN (hf_align)
and AltCLIP (hf_altclip): their mappers, the head hook saying each builds its own head, and the types still refused with the mechanism
they lack."""

from __future__ import annotations

from modelplan.specs.hf_align import ALIGN_MAPPERS
from modelplan.specs.hf_altclip import ALTCLIP_MAPPERS
from modelplan.specs.hf_bit import BIT_MAPPERS
from modelplan.specs.hf_convnets import CONVNET_MAPPERS
from modelplan.specs.hf_efficientnet import EFFICIENTNET_MAPPERS
from modelplan.specs.hf_cvt import CVT_MAPPERS
from modelplan.specs.hf_encoder_models import _own_head
from modelplan.specs.hf_focalnet import FOCALNET_MAPPERS
from modelplan.specs.hf_hgnet import HGNET_MAPPERS
from modelplan.specs.hf_hiera import HIERA_MAPPERS
from modelplan.specs.hf_imagegpt import IMAGEGPT_MAPPERS
from modelplan.specs.hf_levit import LEVIT_MAPPERS
from modelplan.specs.hf_mobilevit import MOBILEVIT_MAPPERS
from modelplan.specs.hf_mobilevitv2 import MOBILEVITV2_MAPPERS
from modelplan.specs.hf_poolformer import POOLFORMER_MAPPERS
from modelplan.specs.hf_pp_lcnet import PP_LCNET_MAPPERS
from modelplan.specs.hf_pvt import PVT_MAPPERS
from modelplan.specs.hf_reduced_attention import REDUCED_ATTENTION_MAPPERS
from modelplan.specs.hf_swiftformer import SWIFTFORMER_MAPPERS
from modelplan.specs.hf_swin_networks import SWIN_NETWORK_MAPPERS
from modelplan.specs.hf_textnet import TEXTNET_MAPPERS

IMAGE_CLASSIFIER_MAPPERS = {**CONVNET_MAPPERS, **EFFICIENTNET_MAPPERS, **SWIN_NETWORK_MAPPERS, **BIT_MAPPERS,
                            **IMAGEGPT_MAPPERS, **POOLFORMER_MAPPERS, **TEXTNET_MAPPERS,
                            **ALIGN_MAPPERS, **ALTCLIP_MAPPERS, **REDUCED_ATTENTION_MAPPERS, **HGNET_MAPPERS,
                            **MOBILEVIT_MAPPERS, **LEVIT_MAPPERS, **PVT_MAPPERS,
                            **PP_LCNET_MAPPERS, **MOBILEVITV2_MAPPERS, **SWIFTFORMER_MAPPERS, **CVT_MAPPERS,
                            **FOCALNET_MAPPERS, **HIERA_MAPPERS}
IMAGE_CLASSIFIER_HEADS = {name: _own_head for name in IMAGE_CLASSIFIER_MAPPERS}
"""hf.from_hf_config's head hook: the mapper's fields already hold the head architectures[0] names."""

IMAGE_CLASSIFIER_UNMODELLED: dict[str, str] = {
    "dinat": "DiNAT's dilated neighbourhood attention (each token attends its k x k neighbours)",
    "timm_wrapper": "a timm model named by `architecture` (its layer tree lives in the timm library, not in config.json)",
    "tipsv2": "TIPSv2's image-text pair (a layer-scale ViT with an optional SwiGLU FFN beside a text encoder with "
              "sinusoidal positions) as a zero-shot pair",
    "videoprism": "VideoPrism's factorised space-time video encoder (tubelet embeddings, spatial then temporal layers) "
                  "and its attention-pooling head",
}
"""Image classification / zero-shot types transformers 5.24 ships whose mechanism the network
stack and the vision towers cannot yet express exactly: refused with it."""
