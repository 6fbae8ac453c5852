"""HF config mapper of Evolla (transformers 5.24 modeling_evolla.py, EvollaForProteinText2Text): a
Llama decoder (the composite's own keys, untied head) and, counted as `vector` entries of the
vision group (memory and optimizer state hold them; their compute over a protein and the text
tokens is not priced):

- the SaProt protein encoder (EvollaSaProtProteinEncoder, ESM-shaped): a token table, an optional
  LayerNorm before and a learned position table when position_embedding_type is 'absolute'
  (rotary: none), per layer biased query / key / value / dense, a LayerNorm before the attention
  and one before the biased intermediate / output MLP, emb_layer_norm_after;
- the sequence-compressor resampler: resampler_num_latents learned latents, resampler_depth
  blocks of (two LayerNorms, bias-free to_q / to_kv / to_out over heads x dim_head) and (LayerNorm,
  bias-free fc1 / fc2 of ff_mult x the width), protein_projector Linear(protein width, hidden),
  LayerNorm(hidden);
- a cross-attention aligner in every (num_hidden_layers // aligner_num_add_layers)-th decoder
  block (EvollaSequenceAlignerCrossAttention: biased query, key_protein, value_protein, an RMSNorm,
  out_proj biased by aligner_enable_bias, a LayerNorm / bias-free fc1, fc2 feed-forward of
  aligner_ffn_mult x hidden, two scalar gates)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import llama
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper

_TEXT = {"vocab_size": 128256, "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 8192, "rms_norm_eps": 1e-5,
         "aligner_ffn_mult": 4, "aligner_enable_bias": True, "aligner_num_add_layers": 8, "resampler_depth": 6,
         "resampler_dim_head": 64, "resampler_heads": 8, "resampler_num_latents": 64, "resampler_ff_mult": 4,
         "tie_word_embeddings": False}
_SAPROT = {"vocab_size": 446, "hidden_size": 1280, "num_hidden_layers": 33, "num_attention_heads": 20,
           "intermediate_size": 5120, "max_position_embeddings": 1026, "position_embedding_type": "rotary",
           "emb_layer_norm_before": False}
"""EvollaConfig / SaProtConfig defaults (transformers 5.24)."""


def _saprot(p: HFConfig) -> list[dict]:
    """EvollaSaProtProteinEncoder's parameters (module docstring)."""
    d, f, n = p.size("hidden_size"), p.size("intermediate_size"), p.integer("num_hidden_layers")
    kind = p.text("position_embedding_type")
    if kind not in ("rotary", "absolute"):
        raise SpecError(f"{p.source}: protein_encoder_config.position_embedding_type: '{kind}' must be 'rotary' or "
                        f"'absolute'")
    out = [_vec("protein_encoder/embeddings/word_embeddings", d, p.size("vocab_size")),
           _vec("protein_encoder/encoder/emb_layer_norm_after", 2 * d)]
    if p.flag("emb_layer_norm_before"):
        out.append(_vec("protein_encoder/embeddings/layer_norm", 2 * d))
    if kind == "absolute":
        out.append(_vec("protein_encoder/embeddings/position_embeddings", d, p.size("max_position_embeddings")))
    if n:  # query, key, value, dense (d -> d); intermediate (d -> f), output (f -> d); two LayerNorms; all biased
        out += [_vec("protein_encoder/encoder/layer/attention", d + 1, 4 * d * n),
                _vec("protein_encoder/encoder/layer/mlp", d + 1, f * n),
                _vec("protein_encoder/encoder/layer/output", f + 1, d * n),
                _vec("protein_encoder/encoder/layer/layer_norms", 4 * d, n)]
    return out


def _resampler(t: HFConfig, d: int, h: int) -> list[dict]:
    """EvollaSequenceCompressorResampler (module docstring)."""
    depth, inner, mult = t.integer("resampler_depth"), t.size("resampler_heads") * t.size("resampler_dim_head"), \
        t.size("resampler_ff_mult")
    out = [_vec("resampler/latents", d, t.size("resampler_num_latents")), _vec("resampler/protein_projector", d + 1, h),
           _vec("resampler/norm", 2 * h)]
    if depth:  # norm_media, norm_latents, to_q (d -> inner), to_kv (d -> 2 inner), to_out; ff: LayerNorm, fc1, fc2
        out += [_vec("resampler/layers/attention", d, 4 * depth + 4 * inner * depth),
                _vec("resampler/layers/ff", d, 2 * depth + 2 * mult * d * depth)]
    return out


def _evolla(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """EvollaForProteinText2Text (module docstring); text_mappers unused (the composite's own keys)."""
    t = HFConfig({**_TEXT, **c.data}, c.source, c.path)
    fields = llama(t)
    raw = c.data.get("protein_encoder_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: protein_encoder_config: expected an object, got {raw!r}")
    p = HFConfig({**_SAPROT, **raw}, c.source, "protein_encoder_config.")
    h, layers, add = fields["hidden"], fields["layers"], t.size("aligner_num_add_layers")
    every = max(layers // add, 1)  # EvollaDecoderLayer: (layer_idx + 1) % every == 0
    n = layers // every
    heads = fields["heads"]
    inner, mult = heads * (h // heads), t.size("aligner_ffn_mult")
    bias = 1 if t.flag("aligner_enable_bias") else 0  # out_proj Linear(hidden, hidden, bias=aligner_enable_bias)
    connector = _saprot(p) + _resampler(t, p.size("hidden_size"), h)
    if n:  # query, key_protein, value_protein (h -> inner, biased), out_proj, RMSNorm; ff LayerNorm, fc1, fc2; gates
        connector += [_vec("aligner/attention", h + 1, 3 * inner * n), _vec("aligner/out_proj", h + bias, h * n),
                      _vec("aligner/norms_gates", h + 2 * h + 2, n), _vec("aligner/ff", h, 2 * mult * h * n)]
    fields["vision"] = dict(layers=0, hidden=h, heads=1, ffn_hidden=1, patch_size=1, image_size=1,
                            tower=[], connector=connector)
    fields["tied_embeddings"] = False  # EvollaForProteinText2Text declares no _tied_weights_keys (transformers 5.24)
    return fields


EVOLLA_HEAD_CLASSES = ("EvollaForProteinText2Text", "EvollaModel")
"""The class carrying the LM head (its name ends in none of hf._HEADS) and the bare body."""

EVOLLA_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"evolla": _evolla}
