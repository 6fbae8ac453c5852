"""HF config mapper of IDEFICS (transformers 5.24 modeling_idefics.py, perceiver.py,
IdeficsForVisionText2Text): a Llama text model (multi-head, bias-free; token table and head of
vocab_size + additional_vocab_size rows, IdeficsDecoupledEmbedding / IdeficsDecoupledLinear, tied
as tie_word_embeddings says), the CLIP-shaped IdeficsVisionTransformer (embed_dim wide), an
optional perceiver resampler (use_resampler: n_latents learned latents, per block context /
latents LayerNorms, bias-free q / k / v / output_proj over heads x head_dim with optional q / k
LayerNorms, a LayerNorm / fc / ReLU / c_proj MLP of 4 embed_dim, a final LayerNorm) and
num_hidden_layers // cross_layer_interval gated cross-attention blocks between the decoder blocks
(IdeficsGatedCrossAttentionLayer: q / o over the text width, k / v from the image states'
embed_dim, optional q / k RMSNorms over head_dim, two RMSNorms, a SwiGLU MLP, two tanh gates of 1
or hidden_size values by alpha_type).

The cross-attention blocks are `VisionSpec.connector` entries: their k / v projections run per
image over its states (priced per image); their q / o / MLP, which run on the text tokens, are
counted (memory, optimizer state) but not priced in the step (a FLOPs gap of about one block's
compute per cross_layer_interval blocks)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper
from modelplan.specs.hf_vision import _clip, _linear, _norm

_TEXT = {"vocab_size": 32000, "additional_vocab_size": 0, "hidden_size": 4096, "intermediate_size": 11008,
         "num_hidden_layers": 32, "num_attention_heads": 32, "rms_norm_eps": 1e-6, "cross_layer_interval": 1,
         "qk_layer_norms": False, "alpha_type": "float", "use_resampler": False, "max_position_embeddings": 2048}
_VISION = {"embed_dim": 768, "image_size": 224, "intermediate_size": 5120, "patch_size": 14, "num_hidden_layers": 32,
           "num_attention_heads": 16, "num_channels": 3}
_PERCEIVER = {"resampler_n_latents": 64, "resampler_depth": 6, "resampler_n_heads": 16, "resampler_head_dim": 96,
              "qk_layer_norms_perceiver": False}
"""IdeficsConfig / IdeficsVisionConfig / IdeficsPerceiverConfig defaults (transformers 5.24)."""


def _sub(c: HFConfig, key: str, defaults: dict) -> HFConfig:
    raw = c.data.get(key) or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: {key}: expected an object, got {raw!r}")
    return HFConfig({**defaults, **raw}, c.source, f"{key}.")


def _perceiver(p: HFConfig, d: int, tokens: int) -> list[dict]:
    """IdeficsPerceiverResampler over an image's `tokens` states of width d (module docstring)."""
    n, depth = p.size("resampler_n_latents"), p.integer("resampler_depth")
    heads, hd = p.size("resampler_n_heads"), p.size("resampler_head_dim")
    inner, rows, keys = heads * hd, dict(rows=n), tokens + n  # keys / values over [context; latents]
    out = [_vec("perceiver/latents", d, n), {**_norm("perceiver/layer_norm", d), **rows}]
    if not depth:
        return out
    out += [{**_norm("perceiver/context_layer_norm", d, copies=depth), "rows": tokens},
            {**_norm("perceiver/latents_layer_norm", d, copies=depth), **rows},
            {**_linear("perceiver/q_proj", d, inner, False, copies=depth), **rows},
            {**_linear("perceiver/kv_proj", d, inner, False, copies=2 * depth), "rows": keys},
            dict(name="perceiver/scores", kind="attention", in_features=inner, keys=keys, copies=depth, **rows),
            {**_linear("perceiver/output_proj", inner, d, False, copies=depth), **rows},
            {**_norm("perceiver/mlp/ln", d, copies=depth), **rows},
            {**_linear("perceiver/mlp/fc", d, 4 * d, False, copies=depth), **rows},
            {**_linear("perceiver/mlp/c_proj", 4 * d, d, False, copies=depth), **rows}]
    if p.flag("qk_layer_norms_perceiver"):
        out.append(_norm("perceiver/qk_layer_norms", hd, copies=2 * depth))
    return out


def _cross_blocks(t: HFConfig, n: int, d: int, tokens: int) -> list[dict]:
    """n IdeficsGatedCrossAttentionLayer (module docstring)."""
    h, f, heads = t.size("hidden_size"), t.size("intermediate_size"), t.divisor("num_attention_heads")
    alpha = t.text("alpha_type")
    if alpha not in ("float", "vector"):
        raise SpecError(f"{t.source}: alpha_type: '{alpha}' must be 'float' or 'vector'")
    inner = heads * (h // heads)
    out = [{**_linear("cross/kv_proj", d, inner, False, copies=2 * n), "rows": tokens},
           _vec("cross/q_o_proj", h, 2 * n * inner), _vec("cross/mlp", h, 3 * n * f),
           _vec("cross/norms", h, 2 * n), _vec("cross/gates", h if alpha == "vector" else 1, 2 * n)]
    if t.flag("qk_layer_norms"):
        out.append(_vec("cross/qk_layer_norms", h // heads, 2 * n))
    return out


def _idefics(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """IdeficsForVisionText2Text (module docstring); text_mappers unused (the composite's own keys)."""
    t = HFConfig({**_TEXT, **c.data}, c.source, c.path)
    extra = t.integer("additional_vocab_size")
    if extra < 0:
        raise SpecError(f"{c.source}: additional_vocab_size: must be >= 0, got {extra}")
    fields = llama(HFConfig({**t.data, "vocab_size": t.size("vocab_size") + extra}, c.source, c.path))
    v = _sub(c, "vision_config", _VISION)
    raw = c.data.get("vision_config") or {}
    aliased = "hidden_size" in raw and "embed_dim" not in raw  # IdeficsVisionConfig.attribute_map
    d = v.size("hidden_size") if aliased else v.size("embed_dim")
    tower = _clip(HFConfig({**v.data, "hidden_size": d}, v.source, v.path))
    tokens = (tower["image_size"] // tower["patch_size"]) ** 2 + 1  # the class token's state too
    connector = []
    if t.flag("use_resampler"):
        connector = _perceiver(_sub(c, "perceiver_config", _PERCEIVER), d, tokens)
        tokens = _sub(c, "perceiver_config", _PERCEIVER).size("resampler_n_latents")
    interval = t.size("cross_layer_interval")
    n = t.size("num_hidden_layers") // interval
    tower["connector"] = connector + (_cross_blocks(t, n, d, tokens) if n else [])
    fields["vision"] = tower
    return fields


IDEFICS_HEAD_CLASSES = ("IdeficsForVisionText2Text", "IdeficsModel")
"""The class carrying the LM head (its name ends in none of hf._HEADS) and the bare body."""

IDEFICS_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"idefics": _idefics}
