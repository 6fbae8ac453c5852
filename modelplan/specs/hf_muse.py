"""HF config mappers of Muse Glimmer (transformers 5.24 MuseGlimmerForConditionalGeneration,
MuseGlimmerConfig defaults) and its text model (MuseGlimmerTextModel):

- text: GQA blocks (biases when attention_bias) with a weight-free RMSNorm on q and k, a per-channel
  sigmoid gate on the attention output (gate_proj Linear(h, heads head_dim): `head_gate` 'element'),
  scores scaled by qk_scale_factor; four (1 + w) RMSNorms a block (input, post-attention,
  pre- and post-feedforward: sandwich); a bias-free SwiGLU; sliding blocks with rotary, full blocks
  (every fourth from the last) without (layer_rope_theta 0: NoPE); a weight-free norm on the token
  embeddings, a final RMSNorm, an untied head whose logits are x output_multiplier then soft-capped;
- tower (MuseGlimmerVisionModel): a bias-free Linear(patch_temporal 3 p^2, h) patch embedding, a
  pos_emb_height x pos_emb_width position table (resampled per image: priced at that grid), biased
  ln_pre / ln_post and LayerNorm / fc1-fc2 blocks with biased q/k/v/proj, 2-D rotary; window blocks
  are priced as full ones (their windows are not modelled: FLOPs only);
- projector: merge_size^2 patches into MuseGlimmerVisionAdapter fc1 Linear(out_hidden_size,
  projector_hidden_size) and fc2 (square), then vision_projection to the text width, all bias-free,
  a weight-free norm after.
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import compact_types, llama

_TEXT = {"vocab_size": 202048, "hidden_size": 6656, "intermediate_size": 19968, "num_hidden_layers": 52,
         "num_attention_heads": 32}
"""MuseGlimmerTextConfig's size defaults."""


def _muse_glimmer_text(c: HFConfig) -> dict:
    """MuseGlimmerTextModel with its untied head (module docstring)."""
    c = c.with_defaults(_TEXT)
    layers = c.size("num_hidden_layers")
    default = ["full_attention" if (layers - 1 - i) % 4 == 0 else "sliding_attention" for i in range(layers)]
    names = c.texts("layer_types", None) or default
    c.check_names("layer_types", names, ("full_attention", "sliding_attention"), layers)
    thetas = c.data.get("layer_rope_theta")
    if thetas is not None and (not isinstance(thetas, list) or len(thetas) != layers
                               or any((t == 0) != (n == "full_attention") for t, n in zip(thetas, names))):
        raise SpecError(f"{c.source}: {c.path}layer_rope_theta: rotary bases other than 0 (NoPE) exactly on the "
                        f"full_attention blocks are not modelled")
    types = compact_types(names)
    sliding = types is not None and "sliding_attention" in types
    softcap = c.number("final_logit_softcapping", 20.0, positive=True, nullable=True)
    return llama(c, kv_heads=c.integer("num_key_value_heads", 2), head_dim=c.integer("head_dim", 128),
                 activation=c.activation("silu", "hidden_activation", "hidden_act"),
                 max_positions=c.integer("max_position_embeddings", 131072), norm_eps=c.number("rms_norm_eps", 1e-5),
                 layer_types=types, sliding_window=c.integer("sliding_window", 2048) if sliding else None,
                 nope_full_attention=sliding and "full_attention" in types, norm_placement="sandwich",
                 qk_norm=True, qk_norm_weight="none", head_gate="element",
                 # MuseGlimmerTextAttention: q = qk_norm(q) * qk_scale_factor, scores x head_dim^-0.5
                 attention_scale=c.number("qk_scale_factor", 3.87, positive=True) * c.divisor("head_dim", 128) ** -0.5,
                 final_logit_softcap=softcap, logit_scale=c.number("output_multiplier", 0.19611613513818404, positive=True))


def _muse_glimmer(c: HFConfig, text_mappers: dict) -> dict:
    """MuseGlimmerForConditionalGeneration (module docstring)."""
    from modelplan.specs.hf_n18vlm_base import _text
    from modelplan.specs.hf_vision import _linear

    fields, _ = _text(c, text_mappers, "muse_glimmer_text")
    v = c.sub("vision_config") or HFConfig({}, c.source, "vision_config.")
    hidden, patch = v.integer("hidden_size", 1536), v.integer("patch_size", 14)
    rows, cols = v.integer("pos_emb_height", 32), v.integer("pos_emb_width", 32)
    if rows != cols:
        raise SpecError(f"{c.source}: vision_config.pos_emb_height / pos_emb_width: {rows} x {cols}: only a square "
                        f"position grid is modelled (as MuseGlimmerVisionPatchEmbedder assumes)")
    m2, inner, out = v.integer("merge_size", 2) ** 2, c.integer("projector_hidden_size", 4096), c.integer(
        "out_hidden_size", 6144)
    fields["vision"] = dict(
        layers=v.integer("num_hidden_layers", 50), hidden=hidden, heads=v.integer("num_attention_heads", 16),
        ffn_hidden=v.integer("intermediate_size", 8960), patch_size=patch, image_size=rows * patch,
        temporal_patch=v.integer("patch_temporal", 2), patch_bias=False, position="learned", position_rows=rows * cols,
        norm="layernorm", norm_bias=True, pre_norm=True, post_norm=True,
        connector=[_linear("adapter/fc1", out, inner, False, m2), _linear("adapter/fc2", inner, inner, False, m2),
                   _linear("projection", inner, fields["hidden"], False, m2)])
    return fields


MUSE_TEXT_MAPPERS = {"muse_glimmer_text": _muse_glimmer_text}
MUSE_MAPPERS = {"muse_glimmer": _muse_glimmer}
