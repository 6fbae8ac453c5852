"""Multimodal model_types refused with the mechanism the spec does not express (transformers 5.24
modeling files), instead of the generic "unsupported" error."""

from __future__ import annotations

MULTIMODAL_UNMODELLED: dict[str, str] = {
    "diffusion_gemma": "a block-diffusion encoder and decoder of Gemma 4 text blocks (a self-conditioning MLP, "
                       "clippable linears) and its Gemma 4 vision tower",
    "muse_spark": "its text model (MoE blocks with pre- / post-expert projections and norms, learned residual "
                  "gates) and its vision and causal-conv audio towers",
}
