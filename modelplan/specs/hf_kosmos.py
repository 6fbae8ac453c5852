"""HF config mappers of KOSMOS-2 (transformers 5.24 modeling_kosmos2.py) and KOSMOS-2.5
(modeling_kosmos2_5.py: Pix2Struct's encoder, the same projection and decoder shape).

KOSMOS-2: a CLIP-shaped tower, an image-to-text projection that resamples the image into
latent_query_num latent queries, and a MAGNETO-style decoder (Wang et al. 2022, "Foundation
Transformers": a LayerNorm inside each sub-layer: inner_attn_ln before out_proj, ffn_layernorm
before fc2) with fixed sinusoidal positions (a buffer)."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_pix2struct import flattened_patch_encoder
from modelplan.specs.hf_vision import _clip, _linear

_TEXT = {"vocab_size": 65037, "max_position_embeddings": 2048, "embed_dim": 2048, "layers": 24, "ffn_dim": 8192,
         "attention_heads": 32, "activation_function": "gelu", "layer_norm_eps": 1e-5, "scale_embedding": True,
         "tie_word_embeddings": True, "add_cross_attention": False}
_VISION = {"hidden_size": 1024, "intermediate_size": 4096, "num_hidden_layers": 24, "num_attention_heads": 16,
           "num_channels": 3, "image_size": 224, "patch_size": 14}
"""Kosmos2TextConfig / Kosmos2VisionConfig defaults (transformers 5.24 configuration_kosmos2.py)."""


def _text_model(t: HFConfig, inner_attention_norm: bool = True) -> dict:
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
        tied_embeddings=t.flag("tie_word_embeddings"), extras=dict(sub_norms=True, attention_sub_norm=inner_attention_norm),
        dropout=t.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
    )


def _latent_projection(tower: dict, h: int, queries: int, tokens: int) -> list[dict]:
    """Kosmos2ImageToTextProjection / Kosmos2_5ImageToTextProjection: dense Linear(vision, text) on
    the `tokens` tower rows, latent_query (queries x text), and x_attn: the latents' queries over
    the projected tokens and the latents themselves, biased q / k / v / out."""
    latent = dict(rows=queries)
    return [
        {**_linear("dense", tower["hidden"], h, True), "rows": tokens},
        dict(name="latent_query", kind="vector", in_features=h, copies=queries),
        {**_linear("x_attn/q_proj", h, h, True), **latent},
        {**_linear("x_attn/kv_proj", h, h, True, copies=2), "rows": tokens + queries},
        dict(name="x_attn/scores", kind="attention", in_features=h, keys=tokens + queries, **latent),
        {**_linear("x_attn/out_proj", h, h, True), **latent},
    ]


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
    tokens = (tower["image_size"] // tower["patch_size"]) ** 2 + 1
    tower["connector"] = _latent_projection(tower, fields["hidden"], c.integer("latent_query_num", 64), tokens)
    fields["vision"] = tower
    fields["tied_embeddings"] = fields["tied_embeddings"] or c.flag("tie_word_embeddings", True)
    return fields


_TEXT_2_5 = {"vocab_size": 108481, "max_position_embeddings": 4096, "embed_dim": 1536, "layers": 24, "ffn_dim": 6144,
             "attention_heads": 16, "activation_function": "gelu", "layer_norm_eps": 1e-5, "scale_embedding": True,
             "tie_word_embeddings": True, "add_cross_attention": False}
_VISION_2_5 = {"hidden_size": 1536, "patch_embed_hidden_size": 768, "intermediate_size": 3968, "head_dim": 64,
               "num_hidden_layers": 18, "num_attention_heads": 24, "max_num_patches": 4096}
"""Kosmos2_5TextConfig / Kosmos2_5VisionConfig defaults (transformers 5.24 configuration_kosmos2_5.py)."""

KOSMOS_2_5_PATCHES = 4096
"""Flattened patches per image (Kosmos2_5ImageProcessor.max_patches default, transformers 5.24;
it pads every image to that many); the config key max_patches overrides it."""


def _kosmos2_5(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Kosmos2_5ForConditionalGeneration: Kosmos2_5VisionModel (Pix2Struct's flattened-patch
    encoder, hf_pix2struct.py, on max_patches tokens), the latent-query projection (`_latent_projection`)
    and Kosmos2_5TextForCausalLM: Kosmos-2's decoder without the inner attention norm (only
    ffn_layernorm) and with a (2, embed_dim) segment_emb added to the positions (counted as a
    two-row token-type table); an image fills latent_query_num text positions."""
    names = c.texts("architectures", None)
    if names and names[0] != "Kosmos2_5ForConditionalGeneration":
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (supported: "
                        f"Kosmos2_5ForConditionalGeneration)")
    _, t = _sub(c, "text_config", "kosmos_2_5_text_model")
    fields = _text_model(HFConfig({**_TEXT_2_5, **t.data}, t.source, t.path), inner_attention_norm=False)
    fields["type_vocab"] = 2  # Kosmos2_5TextTransformer.segment_emb = nn.Embedding(2, embed_dim)
    _, v = _sub(c, "vision_config", "kosmos_2_5_vision_model")
    patches = c.integer("max_patches", KOSMOS_2_5_PATCHES)
    tower = flattened_patch_encoder(HFConfig({**_VISION_2_5, **v.data}, v.source, v.path), patches,
                                    ("head_dim", "intermediate_size", "max_num_patches"))
    tower["connector"] = _latent_projection(tower, fields["hidden"], c.integer("latent_query_num", 2048), patches)
    fields["vision"] = tower
    fields["tied_embeddings"] = fields["tied_embeddings"] or c.flag("tie_word_embeddings", True)
    return fields


KOSMOS_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"kosmos-2": _kosmos2, "kosmos-2.5": _kosmos2_5}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
