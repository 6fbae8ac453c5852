"""HF config mappers of further OCR composites (transformers 5.24) on a SAM tower (hf_sam.py):
GOT-OCR 2.0 and PP-Chart2Table (modeling_got_ocr2.py: a Qwen2 text model), PP-FormulaNet
(modeling_pp_formulanet.py: an mBART decoder cross-attending to the image)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
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
    half = _stride2(side)
    quarter = _stride2(half)
    tower["connector"] = [_conv("conv_upsampler1", out, 2 * out, 3, half * half, bias=False),
                          _conv("conv_upsampler2", 2 * out, t, 3, quarter * quarter, bias=False),
                          {**_linear("multimodal_projector", t, t, True), "rows": quarter * quarter}]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)  # the composite's own flag decides (not the text's)
    return fields


_FORMULA_VISION = {**_GOT_VISION, "image_size": 512, "post_conv_in_channels": 256, "post_conv_mid_channels": 512,
                   "post_conv_out_channels": 1024, "decoder_hidden_size": 512}
_FORMULA_TEXT = {"vocab_size": 50000, "max_position_embeddings": 2560, "encoder_layers": 12, "encoder_attention_heads": 16,
                 "decoder_layers": 8, "decoder_ffn_dim": 2048, "decoder_attention_heads": 16, "d_model": 512,
                 "activation_function": "gelu", "scale_embedding": True}
"""PPFormulaNetVisionConfig / PPFormulaNetTextConfig defaults (transformers 5.24)."""


def _stride2(side: int) -> int:
    return (side - 1) // 2 + 1  # Conv2d(k 3, stride 2, padding 1) output side


def _pp_formulanet(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """PPFormulaNetForConditionalGeneration: the SAM tower with its neck (hf_sam.py), its
    multi_modal_projector (two bias-free 3x3 stride-2 convs post_conv_in -> mid -> out channels,
    biased linear_1 (out -> out) and linear_2 (out -> decoder_hidden_size)) and MBartDecoder alone
    (mBART's pre-LN blocks, layernorm_embedding, final layer_norm, + 2 position rows) whose
    encoder_attn reads the projected tokens; lm_head untied (_tied_weights_keys empty)."""
    _, v = _sub(c, "vision_config", "pp_formulanet_vision")
    v = HFConfig({**_FORMULA_VISION, **v.data}, v.source, v.path)
    _, t = _sub(c, "text_config", "pp_formulanet_text")
    t = HFConfig({**_FORMULA_TEXT, **t.data, "tie_word_embeddings": True, "architectures": ["MBartForCausalLM"]},
                 t.source, t.path)
    fields = text_mappers["mbart"](t)
    tower, side, out = sam_tower(v)
    if v.size("post_conv_in_channels") != out:
        raise SpecError(f"{c.source}: vision_config.post_conv_in_channels ({v.size('post_conv_in_channels')}) must "
                        f"equal output_channels ({out})")
    if v.size("decoder_hidden_size") != fields["hidden"]:
        raise SpecError(f"{c.source}: vision_config.decoder_hidden_size ({v.size('decoder_hidden_size')}) must equal "
                        f"text_config.d_model ({fields['hidden']})")
    mid, wide, half = v.size("post_conv_mid_channels"), v.size("post_conv_out_channels"), _stride2(side)
    tokens = _stride2(half) ** 2
    tower["connector"] = [_conv("conv1", out, mid, 3, half * half, bias=False),
                          _conv("conv2", mid, wide, 3, tokens, bias=False),
                          {**_linear("linear_1", wide, wide, True), "rows": tokens},
                          {**_linear("linear_2", wide, fields["hidden"], True), "rows": tokens}]
    fields["vision"] = tower
    fields["seq2seq"] = {**fields["seq2seq"], "cross_memory": tokens}
    fields["tied_embeddings"] = False
    return fields


OCR_MORE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "got_ocr2": _got_ocr2, "pp_formulanet": _pp_formulanet,
    "pp_chart2table": _got_ocr2,  # PPChart2TableConfig: GotOcr2Config's fields and defaults (GotOcr2ForConditionalGeneration)
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
