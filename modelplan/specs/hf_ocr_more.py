"""HF config mappers of further OCR composites (transformers 5.24): GOT-OCR 2.0 and PP-Chart2Table
(modeling_got_ocr2.py: a SAM tower, hf_sam.py, and a Qwen2 text model)."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_sam import sam_tower
from modelplan.specs.hf_vision import _linear

_GOT_VISION = {"hidden_size": 768, "output_channels": 256, "num_hidden_layers": 12, "num_attention_heads": 12,
               "num_channels": 3, "image_size": 1024, "patch_size": 16, "qkv_bias": True, "use_abs_pos": True,
               "use_rel_pos": True, "window_size": 14, "global_attn_indexes": [2, 5, 8, 11], "mlp_dim": 3072}
_GOT_TEXT = {"vocab_size": 151860, "hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 24,
             "num_attention_heads": 16, "num_key_value_heads": 16, "max_position_embeddings": 32768,
             "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "rope_theta": 1000000.0, "use_sliding_window": False}
"""GotOcr2VisionConfig defaults and GotOcr2Config's text init_kwargs (transformers 5.24; the same in
configuration_pp_chart2table.py)."""


def _got_ocr2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """GotOcr2ForConditionalGeneration: Qwen2 text model, the SAM tower with its neck (hf_sam.py),
    and GotOcr2MultiModalProjector: two bias-free 3x3 stride-2 convs (output_channels -> 2 x it ->
    text hidden) and a biased Linear(text, text) on the (grid / 4)^2 tokens an image fills."""
    fields, _ = _text(c, text_mappers, "qwen2", _GOT_TEXT)
    _, v = _sub(c, "vision_config", "got_ocr2_vision")
    tower, side, out = sam_tower(HFConfig({**_GOT_VISION, **v.data}, v.source, v.path))
    t = fields["hidden"]
    half = (side - 1) // 2 + 1  # Conv2d(k 3, stride 2, padding 1) output side
    quarter = (half - 1) // 2 + 1
    tower["connector"] = [_conv("conv_upsampler1", out, 2 * out, 3, half * half, bias=False),
                          _conv("conv_upsampler2", 2 * out, t, 3, quarter * quarter, bias=False),
                          {**_linear("multimodal_projector", t, t, True), "rows": quarter * quarter}]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)  # the composite's own flag decides (not the text's)
    return fields


OCR_MORE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "got_ocr2": _got_ocr2,
    "pp_chart2table": _got_ocr2,  # PPChart2TableConfig: GotOcr2Config's fields and defaults (GotOcr2ForConditionalGeneration)
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
