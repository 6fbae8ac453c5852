"""HF config mapper of the Gemma 3n composite (transformers 5.24 modeling_gemma3n.py
Gemma3nForConditionalGeneration): the gemma3n_text language model (hf_gemma3n.py), the timm
MobileNetV5 vision tower (hf_mobilenetv5.py, priced per image), the Conformer audio encoder
(Gemma3nAudioEncoder: counted as `vector` entries, its compute per audio frame not priced, as
Gemma 4's, hf_gemma4_vision.usm_conformer) and the two Gemma3nMultimodalEmbedders.

Each embedder holds an Embedding(vocab_size, h) for the modality's hard tokens and a
hard_embedding_norm (counted, not run on the soft tokens), a soft_embedding_norm over the tower's
soft tokens and a bias-free embedding_projection Linear(h, text hidden); its
embedding_post_projection_norm has no weight. An image is priced at 768 x 768 px (Gemma 3n's
image processor size; vision_config.image_size overrides it): 256 soft tokens."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gemma4_vision import usm_conformer
from modelplan.specs.hf_mobilenetv5 import mobilenetv5_tower
from modelplan.specs.hf_n18mllama import _sub, _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _text
from modelplan.specs.hf_vision import _linear

_VISION = {"architecture": "mobilenetv5_300m_enc", "hidden_size": 2048, "vocab_size": 128, "image_size": 768}
"""Gemma3nVisionConfig defaults (transformers 5.24) and the priced image side (google/gemma-3n-E4B
preprocessor_config.json: 768 x 768)."""
_AUDIO = {"hidden_size": 1536, "conf_num_hidden_layers": 12, "conf_num_attention_heads": 8,
          "conf_conv_kernel_size": 5, "input_feat_size": 128, "sscp_conv_channel_size": [128, 32],
          "sscp_conv_kernel_size": [[3, 3], [3, 3]], "sscp_conv_stride_size": [[2, 2], [2, 2]], "vocab_size": 128}
"""Gemma3nAudioConfig defaults (transformers 5.24)."""


def _audio(a: HFConfig, text_hidden: int) -> list[dict]:
    """Gemma3nAudioEncoder + embed_audio as vectors; the subsampling convs are 3 x 3 stride 2 with
    one frequency row of padding a side (Gemma3nAudioSubSampleConvProjection)."""
    channels = a.ints("sscp_conv_channel_size")
    if len(channels) != 2:
        raise SpecError(f"{a.source}: {a.path}sscp_conv_channel_size: expected 2 entries, got {channels!r}")
    for key, want in (("sscp_conv_kernel_size", [[3, 3], [3, 3]]), ("sscp_conv_stride_size", [[2, 2], [2, 2]])):
        if a.data.get(key) != want:
            raise SpecError(f"{a.source}: {a.path}{key}: {a.data.get(key)!r} not modelled (modelled: {want})")
    bins = a.size("input_feat_size")
    for _ in range(2):
        bins = (bins + 2 - 3) // 2 + 1  # (f + pad_f_left + pad_f_right - kernel_w) // stride_w + 1
    h = a.size("hidden_size")
    layers = usm_conformer(h, a.divisor("conf_num_attention_heads"), a.integer("conf_num_hidden_layers"),
                           *channels, bins, a.size("conf_conv_kernel_size"))
    return layers + _hard_tokens("embed_audio", a, h) + [_vec("embed_audio/soft_embedding_norm", h),
                                                         _linear("embed_audio/embedding_projection", h, text_hidden, False)]


def _hard_tokens(name: str, sub: HFConfig, h: int) -> list[dict]:
    """Gemma3nMultimodalEmbedder.embedding and hard_embedding_norm: counted (hard tokens only)."""
    return [_vec(f"{name}/embedding", h, sub.size("vocab_size")), _vec(f"{name}/hard_embedding_norm", h)]


def _gemma3n(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Gemma3nForConditionalGeneration (module docstring); tied like its text model."""
    fields, _ = _text(c, text_mappers, "gemma3n_text")
    t = fields["hidden"]
    v = _sub(c, "vision_config", _VISION)
    h, side = v.size("hidden_size"), v.size("image_size")
    tower, tokens = mobilenetv5_tower(v.text("architecture"), side, c.source)
    if h != tower[-1]["in_features"]:
        raise SpecError(f"{c.source}: vision_config.hidden_size: {h} must equal the tower's output width "
                        f"({tower[-1]['in_features']})")
    fields["vision"] = dict(
        layers=1, hidden=h, heads=1, ffn_hidden=h, patch_size=side // int(tokens ** 0.5), image_size=side,
        channels=3, tower=tower,
        connector=[*_hard_tokens("embed_vision", v, h),
                   dict(name="embed_vision/soft_embedding_norm", kind="rmsnorm", in_features=h),
                   _linear("embed_vision/embedding_projection", h, t, False),
                   *_audio(_sub(c, "audio_config", _AUDIO), t)])
    return fields


GEMMA3N_MM_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"gemma3n": _gemma3n}
