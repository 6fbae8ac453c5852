"""HF config mapper of Molmo2 (transformers 5.24 modeling_molmo2.py, Molmo2ForConditionalGeneration):

- text (Molmo2TextModel): Llama blocks with q / k RMSNorms per head (qk_norm_type 'qwen3') or
  over the whole projection ('olmo'), q / k / v biased by attention_bias, o_proj bias-free, norms
  after each sublayer when norm_after; a token table of vocab_size + additional_vocab_size rows
  and an untied lm_head over vocab_size;
- tower (Molmo2VisionModel): a biased Linear(C p^2, h) patch embedding, num_position_embeddings
  learned rows, LayerNorm / grouped-query attention (head_dim, biases by attention_bias) /
  fc1, fc2 blocks, no norm after; every block runs;
- adapter (Molmo2Adapter): the outputs of the vision_feature_layer blocks concatenated; each
  image token's query is the mean of its pooling window of patches, attending to them
  (image_pooling_2d: q, k, v from the concatenated width, o to the adapter width), then a SwiGLU
  image_projector (gate / up biased by mlp_bias, down to text_hidden_size, bias-free)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_n18vlm_base import Mapper
from modelplan.specs.hf_vision import _linear

_TEXT = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
         "vocab_size": 151936, "additional_vocab_size": 128, "attention_bias": False, "qk_norm_type": "qwen3",
         "num_hidden_layers": 36, "intermediate_size": 12288, "max_position_embeddings": 36864, "norm_after": False}
_VISION = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 25, "num_attention_heads": 16,
           "num_key_value_heads": 16, "head_dim": 72, "patch_size": 14, "num_channels": 3, "attention_bias": True}
_ADAPTER = {"hidden_size": 1152, "num_attention_heads": 16, "num_key_value_heads": 16, "head_dim": 72,
            "attention_bias": True, "intermediate_size": 18944, "text_hidden_size": 3584, "mlp_bias": False,
            "vision_feature_layer": [24, 18]}
"""Molmo2TextConfig / Molmo2VisionConfig / Molmo2AdapterConfig defaults (transformers 5.24)."""

POOLING = 2
"""Side of the square window of patches one image token pools (Molmo2ImageProcessor pooling_size
default [2, 2])."""


def _config(c: HFConfig, key: str, defaults: dict, aliases: dict[str, str]) -> HFConfig:
    """Sub-config `key` over its class defaults, the released checkpoints' key names read too
    (Molmo2VisionConfig / Molmo2AdapterConfig.__post_init__)."""
    raw = c.data.get(key) or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: {key}: expected an object, got {raw!r}")
    data = {**defaults, **raw}
    for old, new in aliases.items():
        if old in raw:
            data[new] = raw[old]
    return HFConfig(data, c.source, f"{key}.")


def _text(t: HFConfig) -> dict:
    """Molmo2TextModel + lm_head (module docstring)."""
    kind = t.text("qk_norm_type")
    if kind not in ("qwen3", "olmo"):
        raise SpecError(f"{t.source}: text_config.qk_norm_type: '{kind}' must be 'qwen3' or 'olmo'")
    extra = t.integer("additional_vocab_size")
    if extra < 0:
        raise SpecError(f"{t.source}: text_config.additional_vocab_size: must be >= 0, got {extra}")
    return llama(t, qkv_bias=t.flag("attention_bias"), attn_out_bias=False, qk_norm=True,
                 qk_norm_scope="head" if kind == "qwen3" else "all_heads",
                 norm_placement="output" if t.flag("norm_after") else "pre",
                 tied_embeddings=t.flag("tie_word_embeddings", False), extras={"token_extra_rows": extra})


def _tower(v: HFConfig) -> dict:
    """Molmo2VisionModel as VisionSpec fields; a square image_size ([h, w], or one side)."""
    raw = v.data.get("image_size") or [378, 378]
    sides = raw if isinstance(raw, list) else [raw, raw]
    if len(sides) != 2 or sides[0] != sides[1] or not isinstance(sides[0], int) or sides[0] <= 0:
        raise SpecError(f"{v.source}: vision_config.image_size: {raw!r}: a square [side, side] is modelled")
    patch, bias = v.size("patch_size"), v.flag("attention_bias")
    heads = v.divisor("num_attention_heads")
    rows = v.integer("num_position_embeddings", (sides[0] // patch) ** 2, nullable=True) or (sides[0] // patch) ** 2
    return dict(layers=v.size("num_hidden_layers"), hidden=v.size("hidden_size"), heads=heads,
                kv_heads=v.integer("num_key_value_heads"), head_dim=v.size("head_dim"),
                ffn_hidden=v.size("intermediate_size"), patch_size=patch, image_size=sides[0],
                channels=v.size("num_channels"), position_rows=rows, qkv_bias=bias, attn_out_bias=bias,
                post_norm=False, projector_norm=False)


def _adapter(a: HFConfig, vision_hidden: int, layers: int, grid: int) -> list[dict]:
    """Molmo2Adapter on the (grid / POOLING)^2 tokens of one image (module docstring)."""
    picked = a.ints("vision_feature_layer")
    if not picked or any(not -layers <= i < layers for i in picked):
        raise SpecError(f"{a.source}: adapter_config.vision_feature_layer: {picked} must index the {layers} blocks")
    heads, kv, hd = a.divisor("num_attention_heads"), a.size("num_key_value_heads"), a.size("head_dim")
    h, f, bias = a.size("hidden_size"), a.size("intermediate_size"), a.flag("attention_bias")
    width, tokens = vision_hidden * len(picked), (-(-grid // POOLING)) ** 2  # arange_for_pooling pads the grid
    window = POOLING * POOLING
    return [{**_linear("image_pooling_2d/q_proj", width, heads * hd, bias), "rows": tokens},
            {**_linear("image_pooling_2d/kv_proj", width, kv * hd, bias, copies=2), "rows": tokens * window},
            dict(name="image_pooling_2d/scores", kind="attention", in_features=heads * hd, keys=window, rows=tokens),
            {**_linear("image_pooling_2d/o_proj", heads * hd, h, bias), "rows": tokens},
            {**_linear("image_projector/gate_up_proj", h, f, a.flag("mlp_bias"), copies=2), "rows": tokens},
            {**_linear("image_projector/down_proj", f, a.size("text_hidden_size"), False), "rows": tokens}]


def _molmo2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Molmo2ForConditionalGeneration (module docstring); text_mappers unused (its own text model)."""
    t = _config(c, "text_config", _TEXT, {})
    fields = _text(t)
    aliases = {"image_default_input_size": "image_size", "image_patch_size": "patch_size",
               "image_num_pos": "num_position_embeddings"}
    v = _config(c, "vision_config", _VISION, aliases)
    tower = _tower(v)
    a = _config(c, "adapter_config", _ADAPTER, {"vit_layers": "vision_feature_layer"})
    tower["connector"] = _adapter(a, tower["hidden"], tower["layers"], tower["image_size"] // tower["patch_size"])
    fields["vision"] = tower
    # Molmo2ForConditionalGeneration declares no _tied_weights_keys (transformers 5.24): untied whatever
    # tie_word_embeddings says
    fields["tied_embeddings"] = False
    return fields


MOLMO2_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"molmo2": _molmo2}
