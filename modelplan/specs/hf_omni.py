"""HF config mappers of the Qwen omni thinkers (transformers 5.24 Qwen2_5OmniThinkerForConditionalGeneration,
Qwen3OmniMoeThinkerForConditionalGeneration): a Qwen text model, the Qwen2.5-VL / Qwen3-VL vision
tower (hf_vision.py), priced per image, and a Whisper-style audio encoder, counted, not priced: its
parameters are `vector` connector entries (memory and optimizer state hold them), its compute per
audio frame is not part of the plan."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_vision import _qwen2_5_tower, _qwen3_tower

_QWEN25_TEXT = {"vocab_size": 152064, "hidden_size": 3584, "intermediate_size": 18944, "num_hidden_layers": 28,
                "num_attention_heads": 28, "num_key_value_heads": 4, "use_sliding_window": False}
"""Qwen2_5OmniTextConfig size defaults (transformers 5.24)."""
_QWEN3_TEXT = {"vocab_size": 3584, "hidden_size": 2048, "intermediate_size": 18944, "num_hidden_layers": 28,
               "num_attention_heads": 28, "num_key_value_heads": 4, "decoder_sparse_step": 1,
               "moe_intermediate_size": 768, "num_experts_per_tok": 8, "num_experts": 128, "norm_topk_prob": True}
"""Qwen3OmniMoeTextConfig size defaults (transformers 5.24)."""
_QWEN3_VISION = {"depth": 27, "hidden_size": 1152, "intermediate_size": 4304, "num_heads": 16, "patch_size": 16,
                 "out_hidden_size": 3584, "num_position_embeddings": 2304, "deepstack_visual_indexes": [8, 16, 24]}
"""Qwen3OmniMoeVisionEncoderConfig size defaults (transformers 5.24; depth 27, not Qwen3-VL's)."""
_AUDIO = {"num_mel_bins": 128, "encoder_layers": 32, "encoder_attention_heads": 20, "encoder_ffn_dim": 5120,
          "d_model": 1280, "output_dim": 3584, "downsample_hidden_size": 480}
"""Qwen2_5OmniAudioEncoderConfig / Qwen3OmniMoeAudioEncoderConfig size defaults (transformers 5.24)."""


def _audio(a: HFConfig, qwen3: bool) -> list[dict]:
    """The audio encoder as counted `vector` entries: per layer Whisper's biased q / v / out and
    k (bias-free in Qwen2.5-Omni, biased in Qwen3-Omni), two LayerNorms, fc1 / fc2 of
    encoder_ffn_dim; ln_post; sinusoidal positions (a buffer). Qwen2.5-Omni: conv1
    Conv1d(mel, d, 3) and conv2 Conv1d(d, d, 3), biased, audio_bos_eos_token (2 x output_dim), proj
    Linear(d, output_dim); Qwen3-Omni: three Conv2d(., downsample_hidden_size, 3, stride 2), biased,
    conv_out Linear(c x mel bins after three halvings, d, bias=False), proj1 Linear(d, d) and proj2
    Linear(d, output_dim), biased."""
    a = HFConfig({**_AUDIO, **a.data}, a.source, a.path)
    d, f, n = a.integer("d_model"), a.integer("encoder_ffn_dim"), a.integer("encoder_layers")
    mel, out = a.integer("num_mel_bins"), a.integer("output_dim")
    if qwen3:
        c = a.integer("downsample_hidden_size")
        bins = (((mel + 1) // 2 + 1) // 2 + 1) // 2  # three stride-2 convs, padding 1
        front = [_vec("audio_tower/conv2d", 9 * c + c + 2 * (9 * c * c + c)), _vec("audio_tower/conv_out", c * bins, d),
                 _vec("audio_tower/proj1", d + 1, d)]
    else:
        front = [_vec("audio_tower/conv1", 3 * mel + 1, d), _vec("audio_tower/conv2", 3 * d + 1, d),
                 _vec("audio_tower/audio_bos_eos_token", out, 2)]
    layers = []
    if n:
        # q, k, v, out weights; their biases (Qwen2.5-Omni's k_proj has none); both norms; fc1, fc2
        biases = (4 if qwen3 else 3) * d + 2 * 2 * d + f + d
        layers = [_vec("audio_tower/layers/attention", d, 4 * d * n), _vec("audio_tower/layers/mlp", d, 2 * f * n),
                  _vec("audio_tower/layers/biases_norms", biases, n)]
    return front + layers + [_vec("audio_tower/ln_post", 2 * d), _vec("audio_tower/proj", d + 1, out)]


def _thinker(c: HFConfig, text_mappers: dict[str, Mapper], qwen3: bool) -> dict:
    """Qwen2.5-Omni thinker: Qwen2 text model (qkv biases), Qwen2.5-VL's tower and merger;
    Qwen3-Omni thinker: a Qwen3-MoE text model (q / k norms, head_dim = hidden / heads unless set,
    softmax top-k experts every decoder_sparse_step blocks but mlp_only_layers), Qwen3-VL's tower
    with its deepstack mergers; both with their audio encoder (`_audio`); untied by default."""
    kind, text = _sub(c, "text_config", "qwen3_omni_moe_text" if qwen3 else "qwen2_5_omni_text")
    data = {**(_QWEN3_TEXT if qwen3 else _QWEN25_TEXT), **text.data}
    if qwen3:
        t = HFConfig(data, c.source, text.path)
        data.setdefault("head_dim", t.size("hidden_size") // t.divisor("num_attention_heads"))
    fields = text_mappers["qwen3_moe" if qwen3 else "qwen2"](HFConfig(data, c.source, text.path))
    _, v = _sub(c, "vision_config", "qwen3_omni_moe_vision_encoder")
    fields["vision"] = _qwen3_tower(HFConfig({**_QWEN3_VISION, **v.data}, v.source, v.path)) if qwen3 else _qwen2_5_tower(v)
    _, audio = _sub(c, "audio_config", "qwen_omni_audio_encoder")
    fields["vision"]["connector"] += _audio(audio, qwen3)
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


OMNI_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "qwen2_5_omni_thinker": lambda c, m: _thinker(c, m, qwen3=False),
    "qwen3_omni_moe_thinker": lambda c, m: _thinker(c, m, qwen3=True),
}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
