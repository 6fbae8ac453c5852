"""HF config mapper of ERNIE 4.5 VL MoE (transformers 5.24 modeling_ernie4_5_vl_moe.py,
Ernie4_5_VLMoeForConditionalGeneration):

- text: ERNIE 4.5 MoE blocks (hf_moe_extra's mapper: use_bias, a router of num_experts x h with
  its e_score_correction_bias, moe_num_shared_experts x the text expert width as one shared MLP),
  MoE where mlp_layer_types says 'sparse'; the text experts are moe_intermediate_size[0] wide.
  Each MoE block also holds a second router and set of experts, moe_intermediate_size[1] wide,
  that only image / video tokens run (modality-isolated experts): counted as `vector` entries,
  image tokens priced through the text experts (the step model has one expert set); the lm_head
  is bias-free whatever use_bias says;
- tower: a bias-free Linear(C p^2, h) patch embedding, 2-D rotary positions, LayerNorm / biased
  fused qkv and proj / fc1, fc2 blocks, a final LayerNorm; an image is priced at DEFAULT_IMAGE_SIZE;
- resampler (VariableResolutionResamplerModel): spatial_linear (the m x m merged patches: fc1,
  GELU, fc2, LayerNorm, all m^2 h wide), temporal_linear (2 frames of them -> m^2 h; an image is
  its own second frame), mlp Linear(m^2 h, text) and after_norm RMSNorm(text). Tied by default."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_moe import moe_placement
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_vision import DEFAULT_IMAGE_SIZE, _linear, _norm

_TEXT = {"vocab_size": 103424, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 28,
         "num_attention_heads": 20, "num_key_value_heads": 4, "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": True, "use_bias": False, "moe_k": 6, "moe_num_experts": 64,
         "moe_num_shared_experts": 2}
_VISION = {"depth": 32, "hidden_size": 1280, "num_heads": 16, "in_channels": 3, "patch_size": 14,
           "spatial_merge_size": 2, "intermediate_size": 4 * 1280, "temporal_merge_size": 2}
"""Ernie4_5_VLMoeTextConfig / Ernie4_5_VLMoeVisionConfig defaults (transformers 5.24)."""


def _text(c: HFConfig, text_mappers: dict[str, Mapper]) -> tuple[dict, list[int], int]:
    """(text fields, MoE block indices, vision expert width)."""
    _, t = _sub(c, "text_config", "ernie4_5_vl_moe_text")
    t = HFConfig({**_TEXT, **t.data}, t.source, t.path)
    layers = t.size("num_hidden_layers")
    kinds = t.texts("mlp_layer_types", None) or ["dense"] + ["sparse"] * (layers - 1)
    if len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
        raise SpecError(f"{c.source}: text_config.mlp_layer_types: {len(kinds)} entries of 'dense' / 'sparse' "
                        f"expected for {layers} blocks")
    widths = t.ints("moe_intermediate_size") if t.data.get("moe_intermediate_size") is not None else [1536, 512]
    if len(widths) != 2 or min(widths) <= 0:
        raise SpecError(f"{c.source}: text_config.moe_intermediate_size: [text, vision] widths expected, got {widths}")
    sparse = [i for i, kind in enumerate(kinds) if kind == "sparse"]
    data = {**t.data, "moe_intermediate_size": widths[0], "moe_layer_start_index": 0,
            "moe_layer_end_index": layers - 1, "moe_layer_interval": 1}
    fields = text_mappers["ernie4_5_moe"](HFConfig(data, t.source, t.path))
    fields["lm_head_bias"] = False  # Ernie4_5_VLMoeForConditionalGeneration.lm_head: bias=False
    if sparse:
        placement = {"first_dense_layers": 0, "layer_freq": 1, "layers": None, **moe_placement(layers, sparse)}
        fields["moe"].update(placement)
    else:
        fields["moe"] = None
    return fields, sparse, widths[1]


def _ernie4_5_vl_moe(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Ernie4_5_VLMoeForConditionalGeneration (module docstring)."""
    fields, sparse, vision_width = _text(c, text_mappers)
    _, v = _sub(c, "vision_config", "ernie4_5_vl_moe_vision")
    v = HFConfig({**_VISION, **v.data}, v.source, v.path)
    h, t, m = v.size("hidden_size"), fields["hidden"], v.size("spatial_merge_size")
    if v.size("temporal_merge_size") != 2:  # VariableResolutionResamplerModel._temporal_slicing
        raise SpecError(f"{c.source}: vision_config.temporal_merge_size: {v.size('temporal_merge_size')} (only 2 is "
                        f"modelled, as transformers 5.24 hard-codes it)")
    wide, merge = h * m * m, m * m
    connector = [_linear("spatial_linear/fc1", wide, wide, True, merge=merge),
                 _linear("spatial_linear/fc2", wide, wide, True, merge=merge),
                 _norm("spatial_linear/ln", wide, merge=merge),
                 _linear("temporal_linear/fc1", 2 * wide, wide, True, merge=merge),
                 _linear("temporal_linear/fc2", wide, wide, True, merge=merge),
                 _norm("temporal_linear/ln", wide, merge=merge), _linear("mlp", wide, t, True, merge=merge),
                 _norm("after_norm", t, "rmsnorm", merge=merge)]
    if sparse:
        experts = fields["moe"]["num_experts"]
        n = len(sparse)  # vision_moe: router (experts x h) + its correction bias, bias-free SwiGLU experts
        connector += [_vec("vision_moe/gate", t + 1, experts * n),
                      _vec("vision_moe/experts", t, 3 * vision_width * experts * n)]
    fields["vision"] = dict(
        layers=v.size("depth"), hidden=h, heads=v.divisor("num_heads"), ffn_hidden=v.size("intermediate_size"),
        patch_size=v.size("patch_size"), image_size=v.integer("image_size", DEFAULT_IMAGE_SIZE),
        channels=v.size("in_channels"), patch_bias=False, position="rotary", post_norm=True,
        projector_norm=False, connector=connector)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


ERNIE4_5_VL_MOE_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "ernie4_5_vl_moe": _ernie4_5_vl_moe}
