"""Shared reading of the n18vlm composites' sub-configs (transformers 5.24 `SubConfigSpec`): an
absent text_config / vision_config is the composite's `init_kwargs` over the sub-config class
defaults, a present one is read over the class defaults alone (the init_kwargs do not apply to
it); the text model is mapped by its own model_type's mapper; SigLIP / SigLIP 2 / CLIP / Pixtral
towers. Used by hf_n18vlm.py, hf_n18ocr.py, hf_n18vlm_more.py, hf_n18qformer.py, hf_n18docling.py."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_other import _vision as siglip_pixtral_vision
from modelplan.specs.hf_vision import VISION_MAPPERS, _clip, _linear

Mapper = Callable[[HFConfig], dict]

CLASS_DEFAULTS: dict[str, dict] = {
    "siglip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                            "num_attention_heads": 12, "image_size": 224, "patch_size": 16, "num_channels": 3,
                            "vision_use_head": True},
    "siglip2_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                             "num_attention_heads": 12, "patch_size": 16, "num_patches": 256, "num_channels": 3,
                             "vision_use_head": True},
    "clip_vision_model": {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                          "num_attention_heads": 12, "image_size": 224, "patch_size": 32, "num_channels": 3},
    "pixtral": {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
                "image_size": 1024, "patch_size": 16, "num_channels": 3},
    "gemma": {"vocab_size": 256000, "hidden_size": 3072, "intermediate_size": 24576, "num_hidden_layers": 28,
              "num_attention_heads": 16, "num_key_value_heads": 16},
    "gemma2": {"vocab_size": 256000, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
               "num_attention_heads": 8, "num_key_value_heads": 4},
    "gemma3_text": {"vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216, "num_hidden_layers": 26,
                    "num_attention_heads": 8, "num_key_value_heads": 4},
    "cohere2": {"vocab_size": 256000, "hidden_size": 8192, "intermediate_size": 22528, "num_hidden_layers": 40,
                "num_attention_heads": 64},
    "qwen3": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32},
    "lfm2": {"vocab_size": 65536, "hidden_size": 2560, "intermediate_size": 12288, "num_hidden_layers": 32,
             "num_attention_heads": 32, "num_key_value_heads": 8},
    "llama": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32},
    "mistral": {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8},
    "deepseek_v3": {"vocab_size": 129280, "hidden_size": 7168, "intermediate_size": 18432, "num_hidden_layers": 61,
                    "num_attention_heads": 128, "num_key_value_heads": 128, "moe_intermediate_size": 2048,
                    "n_routed_experts": 256, "n_shared_experts": 1, "first_k_dense_replace": 3,
                    "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4},
    "glm4v_text": {"vocab_size": 151552, "hidden_size": 4096, "intermediate_size": 13696, "num_hidden_layers": 40,
                   "num_attention_heads": 32, "num_key_value_heads": 2},
    "minimax_m3_vl_text": {"vocab_size": 200064, "hidden_size": 6144, "intermediate_size": 3072,
                           "num_hidden_layers": 60, "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128},
    "opt": {"vocab_size": 50272, "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "ffn_dim": 3072},
    "qwen2": {"vocab_size": 151936, "hidden_size": 4096, "intermediate_size": 22016, "num_hidden_layers": 32,
              "num_attention_heads": 32},
}
"""Size defaults of the sub-config classes these composites nest (transformers 5.24
`AutoConfig.for_model(model_type)`; keys the class leaves None, such as Llama's head_dim, are
left out: the text mappers derive them)."""


def _sub(c: HFConfig, key: str, default_type: str, init_kwargs: dict | None = None) -> tuple[str, HFConfig]:
    """(model_type, config) of sub-config `key` as transformers builds it: absent -> init_kwargs
    over the class defaults of `default_type`; present -> its own keys over its class's defaults."""
    raw = c.data.get(key)
    if raw is None:
        data = {"model_type": default_type, **(init_kwargs or {})}
    elif isinstance(raw, dict):
        data = raw
    else:
        raise SpecError(f"{c.source}: {c.path}{key}: expected an object, got {raw!r} ({type(raw).__name__})")
    kind = HFConfig(data, c.source, f"{c.path}{key}.").text("model_type", default_type)
    return kind, HFConfig({**CLASS_DEFAULTS.get(kind, {}), **data}, c.source, f"{c.path}{key}.")


def _text(c: HFConfig, text_mappers: dict[str, Mapper], default_type: str, init_kwargs: dict | None = None,
          drop: tuple[str, ...] = ()) -> tuple[dict, HFConfig]:
    """The text model mapped by its own model_type's mapper; `drop`: keys the composite sets that
    change no parameter (PaliGemma's prefix-LM use_bidirectional_attention)."""
    kind, text = _sub(c, "text_config", default_type, init_kwargs)
    mapper = text_mappers.get(kind)
    if mapper is None or kind in VISION_MAPPERS:
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{kind}'")
    if drop:
        text = HFConfig({k: v for k, v in text.data.items() if k not in drop}, c.source, text.path)
    fields = mapper(text)
    if "vision" in fields:  # a composite named as the text model
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{kind}' (a vision-language composite)")
    if fields.get("arch", "decoder") != "decoder":
        raise SpecError(f"{c.source}: text_config.model_type: '{kind}' is not a decoder")
    return fields, text


def _siglip(v: HFConfig) -> dict:
    """SiglipVisionModel: biased patch conv, one learned position per patch, biased LayerNorm /
    fc1-fc2 blocks, post_layernorm, the attention-pooling head when vision_use_head (built, and
    counted, even where the composite reads last_hidden_state)."""
    return siglip_pixtral_vision(v, False, projector_norm=False)


def _siglip2(v: HFConfig) -> dict:
    """Siglip2VisionModel: SigLIP's blocks with a biased Linear(C p^2, h) patch embedding (the
    conv's parameters) and a num_patches-row position table resized to each image; an image is
    priced at sqrt(num_patches) x sqrt(num_patches) patches."""
    rows = v.size("num_patches")
    side = int(round(rows ** 0.5))
    if side * side != rows:
        raise SpecError(f"{v.source}: {v.path}num_patches: must be a square, got {rows}")
    data = {**v.data, "image_size": side * v.size("patch_size")}
    return {**_siglip(HFConfig(data, v.source, v.path)), "position_rows": rows}


def _tower(c: HFConfig, default_type: str, init_kwargs: dict | None = None,
           kinds: tuple[str, ...] = ("siglip_vision_model",)) -> tuple[dict, HFConfig]:
    """The vision tower of vision_config (one of `kinds`) and its config."""
    kind, v = _sub(c, "vision_config", default_type, init_kwargs)
    towers = {"siglip_vision_model": _siglip, "siglip2_vision_model": _siglip2, "clip_vision_model": _clip,
              "pixtral": lambda v: siglip_pixtral_vision(v, True, projector_norm=False)}
    if kind not in kinds:
        raise SpecError(f"{c.source}: vision_config.model_type: unsupported '{kind}' ({', '.join(kinds)})")
    return towers[kind](v), v


def _single_layer(c: HFConfig, key: str, default: int) -> None:
    """Composites whose projector width assumes one feature layer: a list is refused."""
    if isinstance(c.data.get(key, default), list):
        raise SpecError(f"{c.source}: {key}: only a single layer index is supported")
    c.integer(key, default)


def _mlp_connector(c: HFConfig, fields: dict, tower: dict, names: tuple[str, str], tied: bool) -> dict:
    """`fields` with `tower` as its vision part, connected by Linear(vision, text) + GELU +
    Linear(text, text), both biased, named `names` (DeepseekVLAligner, VideoLlama3Projector);
    tie_word_embeddings defaults to `tied`."""
    t = fields["hidden"]
    tower["connector"] = [_linear(names[0], tower["hidden"], t, True), _linear(names[1], t, t, True)]
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", tied)
    return fields
