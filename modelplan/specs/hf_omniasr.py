"""HF config mappers of Omnilingual ASR (transformers 5.24 modeling_omniasr.py OmniASRAudioModel,
OmniASRForConditionalGeneration; modeling_omniasr_ctc.py OmniASRForCTC): wav2vec2's feature convs,
each followed by a LayerNorm (conv_bias true by default), the LayerNorm + Linear(conv_dim[-1], h)
projection, one plain grouped positional Conv1d (no weight norm, its last output dropped), pre-LN
blocks with biased q/k/v/out and feed-forwards, a final LayerNorm; no masked_spec_embed.

- omniasr_ctc: the encoder on the block stack (`AudioConvInput`) and ctc_head Linear(h, vocab_size),
  biased, on every frame;
- omniasr: the encoder as a `VisionSpec.tower` priced per 30 s clip at 16 kHz (hf_audio_towers.py),
  multi_modal_projector Linear(h, text), biased, and the Llama text model; the head is never tied
  (the class declares no tied weights).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_audio_towers import audio_tower, encoder_blocks, wav2vec2_front
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _rows
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text
from modelplan.specs.hf_vision import _linear, _norm

_AUDIO = {"hidden_size": 1024, "conv_dim": [512] * 7, "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
          "conv_stride": [5, 2, 2, 2, 2, 2, 2], "conv_bias": True, "num_attention_heads": 16, "num_hidden_layers": 24,
          "num_conv_pos_embeddings": 128, "num_conv_pos_embedding_groups": 16, "intermediate_size": 4096,
          "layer_norm_eps": 1e-5, "hidden_act": "gelu"}
"""OmniASRAudioConfig defaults (transformers 5.24)."""
_TEXT = {"vocab_size": 11984, "hidden_size": 4096, "intermediate_size": 2816, "max_position_embeddings": 8192,
         "num_hidden_layers": 12, "num_attention_heads": 8, "num_key_value_heads": 8, "rms_norm_eps": 1e-05}
"""OmniASRConfig's text SubConfigSpec init_kwargs."""
_CLIP_SAMPLES = 30 * 16000
"""One priced clip of the composite's tower: 30 s at 16 kHz."""


def _audio(c: HFConfig) -> HFConfig:
    kind, a = _sub(c, "audio_config", "omniasr_audio")
    if kind != "omniasr_audio":
        raise SpecError(f"{c.source}: audio_config.model_type: unsupported '{kind}' (omniasr_audio)")
    a = HFConfig({**_AUDIO, **{k: v for k, v in a.data.items() if v is not None}}, c.source, a.path)
    dims, kernels, strides = a.ints("conv_dim"), a.ints("conv_kernel"), a.ints("conv_stride")
    if not len(dims) == len(kernels) == len(strides):
        raise SpecError(f"{c.source}: {a.path}conv_dim / conv_kernel / conv_stride: one entry per conv layer "
                        f"(got {len(dims)}, {len(kernels)}, {len(strides)})")
    h, g = a.size("hidden_size"), a.divisor("num_conv_pos_embedding_groups")
    if h % g:
        raise SpecError(f"{c.source}: {a.path}num_conv_pos_embedding_groups: {g} must divide hidden_size {h}")
    return a


def _omniasr_ctc(c: HFConfig) -> dict:
    """OmniASRForCTC / the bare OmniASRAudioModel (module docstring)."""
    names = c.texts("architectures", None)
    name = names[0] if names else "OmniASRForCTC"
    if name not in ("OmniASRForCTC", "OmniASRCTCModel"):
        raise SpecError(f"{c.source}: architectures: '{name}' not modelled (supported: OmniASRForCTC, OmniASRCTCModel)")
    a = _audio(c)
    inputs = dict(modality="audio", conv_dim=a.ints("conv_dim"), conv_kernel=a.ints("conv_kernel"),
                  conv_stride=a.ints("conv_stride"), conv_bias=a.flag("conv_bias"), conv_norm="layer",
                  projection_norm=True, position_kernel=a.size("num_conv_pos_embeddings"),
                  position_groups=a.size("num_conv_pos_embedding_groups"), position_layers=1,
                  position_weight_norm=False, masked_embedding=False)
    head = dict(lm_head=True, lm_head_bias=True, tied_embeddings=False, vocab=c.integer("vocab_size", 10288)) \
        if name == "OmniASRForCTC" else dict(lm_head=False, tied_embeddings=False, vocab=1)
    return dict(
        arch="encoder", layers=a.size("num_hidden_layers"), hidden=a.size("hidden_size"),
        heads=a.divisor("num_attention_heads"), ffn_hidden=a.size("intermediate_size"), norm="layernorm",
        norm_bias=True, norm_eps=a.number("layer_norm_eps"), norm_placement="pre", embedding_norm=False,
        final_norm=True, qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False,
        activation=a.activation("gelu", "hidden_act"), position="none",
        dropout=a.dropout(0.1, "hidden_dropout", "attention_dropout", "activation_dropout"), inputs=inputs, **head)


def _omniasr(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """OmniASRForConditionalGeneration (module docstring)."""
    fields, _ = _text(c, text_mappers, "llama", _TEXT)
    a = _audio(c)
    d, heads, ffn, depth = (a.size(k) for k in ("hidden_size", "num_attention_heads", "intermediate_size",
                                                "num_hidden_layers"))
    layers, frames = wav2vec2_front(a.ints("conv_dim"), a.ints("conv_kernel"), a.ints("conv_stride"),
                                    a.flag("conv_bias"), _CLIP_SAMPLES, d, a.size("num_conv_pos_embeddings"),
                                    a.size("num_conv_pos_embedding_groups"))
    layers += encoder_blocks(d, heads, ffn, depth, frames, k_bias=True, source=f"{c.source}: {a.path}")
    layers.append(_rows(_norm("layer_norm", d), frames))
    connector = [_rows(_linear("multi_modal_projector", d, fields["hidden"], True), frames)]
    fields["vision"] = audio_tower(layers, d, heads, ffn, depth, frames, connector, "30 s audio clip at 16 kHz")
    fields["tied_embeddings"] = False
    return fields


OMNIASR_MAPPERS = {"omniasr_ctc": _omniasr_ctc}
"""Encoder types (hf.MAPPERS; the mapper reads `architectures` itself)."""
OMNIASR_COMPOSITES = {"omniasr": _omniasr}
"""Composite types (config, text mappers)."""
