"""HF config mapper of Hy4 VL (transformers 5.24 modeling_hy_v4_vl.py, HYV4VLForConditionalGeneration):
the hy_v4_vl_text model (hf_hyperconn.py) and HYV4VLVisionModel: a biased patch conv, a learned
position grid of (max_image_size / patch_size)^2 + 1 rows interpolated to each image, LayerNorm /
biased q, k, v, o / fc1, fc2 blocks (no norm after them), then HYV4VLVisionPatchMerger: RMSNorm,
proj_conv Conv2d(h, h m^2, m, stride m), activation, proj_out Conv2d(h m^2, out_hidden_size, 1),
both biased, and one image_newline row per merged row. An image is priced at DEFAULT_IMAGE_SIZE.
Untied by default."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_vision import DEFAULT_IMAGE_SIZE, _norm

_VISION = {"hidden_size": 1536, "intermediate_size": 6144, "num_attention_heads": 16, "num_channels": 3,
           "num_hidden_layers": 40, "out_hidden_size": 6144, "patch_size": 16, "spatial_merge_size": 2,
           "max_image_size": 2048}
"""HYV4VLVisionConfig defaults (transformers 5.24)."""


def _hy_v4_vl(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """HYV4VLForConditionalGeneration (module docstring)."""
    fields, _ = _text(c, text_mappers, "hy_v4_vl_text")
    _, v = _sub(c, "vision_config", "hy_v4_vl_vision")
    v = HFConfig({**_VISION, **v.data}, v.source, v.path)
    h, p, m, out = v.size("hidden_size"), v.size("patch_size"), v.size("spatial_merge_size"), v.size("out_hidden_size")
    image = v.integer("image_size", DEFAULT_IMAGE_SIZE)
    side = image // p // m  # merged rows (and columns) of one image
    merged = side * side
    fields["vision"] = dict(
        layers=v.size("num_hidden_layers"), hidden=h, heads=v.divisor("num_attention_heads"),
        ffn_hidden=v.size("intermediate_size"), patch_size=p, image_size=image, channels=v.size("num_channels"),
        position_rows=(v.size("max_image_size") // p) ** 2 + 1, post_norm=False, projector_norm=False,
        connector=[_norm("patch_merger/before_rms", h, "rmsnorm"),
                   _conv("patch_merger/proj_conv", h, h * m * m, m, merged),
                   _conv("patch_merger/proj_out", h * m * m, out, 1, merged),
                   {**_vec("patch_merger/image_newline", out), "rows": side}])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


HY_V4_VL_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"hy_v4_vl": _hy_v4_vl}
