"""HF config mapper of Phi-4-multimodal (transformers 5.24 modeling_phi4_multimodal.py,
Phi4MultimodalForCausalLM): Phi-3 text blocks (the composite's own keys: fused qkv_proj and
gate_up_proj, no biases), and inside the text model's embed_tokens_extend

- the image embedding: a SigLIP tower with its pooling head (always built), its
  feature_layer state 2 x 2 average-pooled (AvgPool2d, the grid reflection-padded to even), one
  sub_img_feature_extensor row after each pooled row and a global_img_feature_extensor, then
  img_projection_up (vision -> text, biased), GELU, img_projection_down (text -> text, biased);
  an image is priced as one crop_size crop: g (g + 1) tokens, g the pooled grid side;
- the Conformer audio encoder (Phi4MultimodalAudioModel) and its two projector pairs (speech,
  vision-speech): counted as `vector` entries (memory and optimizer state hold them), their
  compute per audio frame not priced. Per block: two macaron MLPs (LayerNorm, biased gate_up to
  2 x intermediate, biased down), biased q / k / v / o, the conv module (LayerNorm, GLU pointwise
  Conv1d to 2 ext_pw_out_channel with b1 / b2, depthwise Conv1d(h, h x depthwise_multiplier,
  kernel_size), pointwise Conv1d to depthwise_separable_out_channel, ext_pw_conv_1d Conv1d(h,
  ext_pw_out_channel), all biased), two LayerNorms; NeMo conv subsampling (Conv2d(1, C, 3), then
  log2(time_reduction) - 1 depthwise 3x3 + pointwise 1x1 pairs, all biased; out Linear(C x
  input_size after the halvings, h)) and the relative-position bias table (bias_max_distance x
  (1 or 2) buckets x heads)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _siglip
from modelplan.specs.hf_vision import _linear

_TEXT = {"vocab_size": 200064, "hidden_size": 3072, "intermediate_size": 8192, "num_hidden_layers": 32,
         "num_attention_heads": 32, "num_key_value_heads": 8, "max_position_embeddings": 131072,
         "rms_norm_eps": 1e-5, "tie_word_embeddings": False}
_VISION = {"hidden_size": 1152, "intermediate_size": 4304, "num_hidden_layers": 27, "num_attention_heads": 16,
           "num_channels": 3, "image_size": 448, "patch_size": 14, "vision_use_head": True}
_AUDIO = {"hidden_size": 1024, "intermediate_size": 1536, "num_blocks": 24, "num_attention_heads": 16,
          "ext_pw_out_channel": 1024, "depthwise_separable_out_channel": 1024, "depthwise_multiplier": 1,
          "kernel_size": 3, "input_size": 80, "time_reduction": 8, "bias_max_distance": 1000,
          "bias_symmetric": False, "nemo_conv_channels": 1024, "downsample_rate": 1}
"""Phi4MultimodalConfig / Phi4MultimodalVisionConfig / Phi4MultimodalAudioConfig defaults (transformers 5.24)."""


def _sub(c: HFConfig, key: str, defaults: dict) -> HFConfig:
    raw = c.data.get(key) or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: {key}: expected an object, got {raw!r}")
    return HFConfig({**defaults, **raw}, c.source, f"{key}.")


def conformer_audio(a: HFConfig, text_hidden: int) -> list[dict]:
    """Phi4MultimodalAudioEmbedding's parameters as vectors (module docstring)."""
    h, f, n = a.size("hidden_size"), a.size("intermediate_size"), a.integer("num_blocks")
    heads, ext, sep = a.divisor("num_attention_heads"), a.size("ext_pw_out_channel"), \
        a.size("depthwise_separable_out_channel")
    mult, k, ch = a.size("depthwise_multiplier"), a.size("kernel_size"), a.size("nemo_conv_channels")
    reduction = a.size("time_reduction")
    if reduction & (reduction - 1) or reduction < 2:
        raise SpecError(f"{a.source}: audio_config.time_reduction: {reduction} must be a power of 2 (>= 2)")
    bins = a.size("input_size")
    for _ in range(reduction.bit_length() - 1):  # Phi4MultimodalAudioConfig.nemo_final_size
        bins = (bins - 1) // 2 + 1
    buckets = a.size("bias_max_distance") * (1 if a.flag("bias_symmetric") else 2)
    # per block: two macaron MLPs (LayerNorm, gate_up_proj, down_proj), q / k / v / o, the conv module
    # (LayerNorm, GLU conv + b1 / b2, depthwise, pointwise, ext_pw_conv_1d), two LayerNorms
    encoders = [_vec("audio/encoders/mlp/gate_up_proj", h + 1, 2 * f * 2 * n),
                _vec("audio/encoders/mlp/down_proj", f + 1, h * 2 * n),
                _vec("audio/encoders/attention", h + 1, 4 * h * n),
                _vec("audio/encoders/conv/glu", h + 1, 2 * ext * n), _vec("audio/encoders/conv/glu_b1_b2", ext, 2 * n),
                _vec("audio/encoders/conv/dw_conv", k + 1, h * mult * n),
                _vec("audio/encoders/conv/pw_conv", h * mult + 1, sep * n),
                _vec("audio/encoders/conv/ext_pw_conv_1d", h + 1, ext * n),
                _vec("audio/encoders/layer_norms", 2 * h, (2 + 1 + 2) * n)]  # 2 MLP, the conv module's, 2 block
    up = h * a.size("downsample_rate")
    out = [_vec("audio/embed/conv", 10 * ch + (reduction.bit_length() - 2) * (10 * ch + ch * ch + ch)),
           _vec("audio/embed/out", ch * bins + 1, h), _vec("audio/relative_attention_bias", heads, buckets),
           _vec("audio/projections", text_hidden, 2 * (up + text_hidden + 2))]  # biased up / down, twice
    return out + (encoders if n else [])


def _phi4_multimodal(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Phi4MultimodalForCausalLM (module docstring)."""
    fields = text_mappers["phi3"](HFConfig({**_TEXT, **c.data}, c.source, c.path))
    v = _sub(c, "vision_config", _VISION)
    tower = _siglip(HFConfig({**v.data, "vision_use_head": True}, v.source, v.path))  # the head is always built
    d, t = tower["hidden"], fields["hidden"]
    g = -(-(tower["image_size"] // tower["patch_size"]) // 2)  # ReflectionPad2d to even, AvgPool2d(2)
    rows = dict(rows=g * (g + 1))
    tower["connector"] = [_vec("image_embed/feature_extensors", d, 2),
                          {**_linear("image_embed/img_projection_up", d, t, True), **rows},
                          {**_linear("image_embed/img_projection_down", t, t, True), **rows},
                          *conformer_audio(_sub(c, "audio_config", _AUDIO), t)]
    fields["vision"] = tower
    return fields


PHI4_MULTIMODAL_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "phi4_multimodal": _phi4_multimodal}
