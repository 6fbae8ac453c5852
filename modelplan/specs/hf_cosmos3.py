"""HF config mappers of Cosmos3 Edge (transformers 5.24 Cosmos3EdgeForConditionalGeneration,
Cosmos3EdgeConfig defaults) and its text model (Cosmos3EdgeTextModel): Llama-style GQA blocks
(RMSNorm, M-RoPE, biases when attention_bias) with a plain fc1 -> ReLU^2 -> fc2 MLP (biases when
mlp_bias), an untied head; a SigLIP2 tower (biased Linear(C p^2, h) patch embedding, num_patches
learned positions, post_layernorm, no pooling head) and Cosmos3EdgePatchMerger: a LayerNorm over each
patch, m x m patches into linear_fc1 Linear(h m^2, projector_hidden_size) and linear_fc2 to the text
width, both biased."""

from __future__ import annotations

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import llama

_TEXT = {"vocab_size": 131072, "hidden_size": 2048, "intermediate_size": 9216, "num_hidden_layers": 28,
         "num_attention_heads": 16}
"""Cosmos3EdgeTextConfig's size defaults."""
_VISION = {"model_type": "siglip2_vision_model", "hidden_size": 1152, "intermediate_size": 4304,
           "num_hidden_layers": 27, "num_attention_heads": 16, "num_channels": 3, "patch_size": 16,
           "num_patches": 256}
"""Cosmos3EdgeVisionConfig's defaults, read as SigLIP2's tower."""


def _cosmos3_edge_text(c: HFConfig) -> dict:
    """Cosmos3EdgeTextModel (module docstring)."""
    c = c.with_defaults(_TEXT)
    return llama(c, kv_heads=c.integer("num_key_value_heads", 8, nullable=True) or c.size("num_attention_heads"),
                 head_dim=c.integer("head_dim", 128), gated_mlp=False, activation=c.activation("relu2", "hidden_act"),
                 max_positions=c.integer("max_position_embeddings", 131072), norm_eps=c.number("rms_norm_eps", 1e-5))


def _cosmos3_edge(c: HFConfig, text_mappers: dict) -> dict:
    """Cosmos3EdgeForConditionalGeneration (module docstring)."""
    from modelplan.specs.hf_n18vlm_base import _siglip2, _text
    from modelplan.specs.hf_vision import _linear, _norm

    fields, _ = _text(c, text_mappers, "cosmos3_edge_text")
    raw = c.data.get("vision_config") or {}
    v = HFConfig({**_VISION, **raw, "vision_use_head": False}, c.source, "vision_config.")
    tower = _siglip2(v)
    h, m2, inner = tower["hidden"], v.integer("spatial_merge_size", 2) ** 2, c.integer("projector_hidden_size", 11520)
    tower["connector"] = [_norm("merger/norm", h), _linear("merger/fc1", h * m2, inner, True, m2),
                          _linear("merger/fc2", inner, fields["hidden"], True, m2)]
    fields["vision"] = tower
    # Cosmos3EdgeForConditionalGeneration declares no _tied_weights_keys (transformers 5.24): untied
    # whatever tie_word_embeddings says
    fields["tied_embeddings"] = False
    return fields


COSMOS3_TEXT_MAPPERS = {"cosmos3_edge_text": _cosmos3_edge_text}
COSMOS3_MAPPERS = {"cosmos3_edge": _cosmos3_edge}
