"""HF config mapper of KOSMOS-2 (transformers 5.24 modeling_kosmos2.py): a CLIP-shaped tower, an
image-to-text projection that resamples the image into latent_query_num latent queries, and a
MAGNETO-style decoder (Wang et al. 2022, "Foundation Transformers": a LayerNorm inside each
sub-layer: inner_attn_ln before out_proj, ffn_layernorm before fc2) with fixed sinusoidal
positions (a buffer)."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_vision import _clip, _linear

_TEXT = {"vocab_size": 65037, "max_position_embeddings": 2048, "embed_dim": 2048, "layers": 24, "ffn_dim": 8192,
         "attention_heads": 32, "activation_function": "gelu", "layer_norm_eps": 1e-5, "scale_embedding": True,
         "tie_word_embeddings": True, "add_cross_attention": False}
_VISION = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
           "num_channels": 3, "image_size": 224, "patch_size": 14}
"""Kosmos2TextConfig / Kosmos2VisionConfig defaults (transformers 5.24 configuration_kosmos2.py)."""


def _text_model(t: HFConfig) -> dict:
    """Kosmos2TextForCausalLM: embed_tokens (x sqrt(embed_dim) with scale_embedding), pre-LN blocks
    (self_attn_layer_norm, biased q / k / v / out with inner_attn_ln before out_proj,
    final_layer_norm, fc1 -> ffn_layernorm -> fc2), a final layer_norm, lm_head tied to embed_tokens."""
    if t.flag("add_cross_attention"):
        raise SpecError(f"{t.source}: {t.path}add_cross_attention: true is not modelled (Kosmos-2 reads the image "
                        f"as latent tokens, not through cross-attention)")
    h = t.size("embed_dim")
    return dict(
        layers=t.size("layers"), hidden=h, heads=t.size("attention_heads"), ffn_hidden=t.size("ffn_dim"),
        vocab=t.size("vocab_size"), max_positions=t.size("max_position_embeddings"),
        position="none",  # Kosmos2TextSinusoidalPositionalEmbedding: a non-persistent buffer
        **GPT_STYLE, norm_eps=t.number("layer_norm_eps"), norm_placement="pre", final_norm=True,
        activation=t.activation("gelu", "activation_function"),
        embedding_scale=math.sqrt(h) if t.flag("scale_embedding") else None,
        tied_embeddings=t.flag("tie_word_embeddings"), extras=dict(sub_norms=True),
        dropout=t.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
    )


def _kosmos2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Kosmos2ForConditionalGeneration: the text model above, Kosmos2VisionModel (CLIP's modules:
    class token, bias-free patch conv, pre_layrnorm, post_layernorm on every token) and
    Kosmos2ImageToTextProjection: dense Linear(vision, text) on every tower token, latent_query
    (latent_query_num x text), and x_attn: the latents' queries over the projected tokens and the
    latents themselves (keys / values on patches + 1 + latents rows), biased, no inner norm; an
    image fills latent_query_num text positions."""
    names = c.texts("architectures", None)
    if names and names[0] != "Kosmos2ForConditionalGeneration":
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: Kosmos2ForConditionalGeneration)")
    _, t = _sub(c, "text_config", "kosmos_2_text_model")
    fields = _text_model(HFConfig({**_TEXT, **t.data}, t.source, t.path))
    _, v = _sub(c, "vision_config", "kosmos_2_vision_model")
    tower = _clip(HFConfig({**_VISION, **v.data}, v.source, v.path))
    h, queries = fields["hidden"], c.integer("latent_query_num", 64)
    tokens = (tower["image_size"] // tower["patch_size"]) ** 2 + 1
    latent = dict(rows=queries)
    tower["connector"] = [
        {**_linear("dense", tower["hidden"], h, True), "row_offset": 1},
        dict(name="latent_query", kind="vector", in_features=h, copies=queries),
        {**_linear("x_attn/q_proj", h, h, True), **latent},
        {**_linear("x_attn/kv_proj", h, h, True, copies=2), "rows": tokens + queries},
        dict(name="x_attn/scores", kind="attention", in_features=h, keys=tokens + queries, **latent),
        {**_linear("x_attn/out_proj", h, h, True), **latent},
    ]
    fields["vision"] = tower
    fields["tied_embeddings"] = fields["tied_embeddings"] or c.flag("tie_word_embeddings", True)
    return fields


KOSMOS_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"kosmos-2": _kosmos2}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
