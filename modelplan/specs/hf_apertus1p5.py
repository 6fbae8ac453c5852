"""HF config mapper of Apertus 1.5 (transformers 5.24 modeling_apertus1p5.py,
Apertus1p5ForConditionalGeneration): the apertus1p5_text model (hf_n18causal.py), its encode-only
EMU3.5 vision tokenizer (Apertus1p5VisionTokenizerModel: Chameleon's VQGAN encoder, hf_chameleon.py,
with a bias-free Linear(embed_dim, codebook_size) as the quantizer's codebook and no
post_quant_conv; an image's codes enter as text tokens) and the WavTokenizer audio encoder
(modeling_wavtokenizer.py WavTokenizerEncoder), counted as `vector` entries, not priced: SEANet
convs (each weight-normed: weight_v, weight_g of out_channels, bias; or a GroupNorm(1, out) with
time_group_norm), per upsampling ratio (reversed) num_residual_layers residual blocks (a
residual_kernel_size conv to dim / compress, a 1x1 conv back, a 1x1 shortcut when use_conv_shortcut)
and a stride-ratio conv doubling the width, an LSTM of num_lstm_layers, a last_kernel_size conv to
hidden_size; its codebook is a buffer. Untied by default."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_chameleon import _VQ, vq_encoder
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _text

_VISION = {"codebook_size": 131072, "embed_dim": 256, "latent_channels": 256, "in_channels": 3, "base_channels": 256,
           "channel_multiplier": [1, 1, 2, 2, 4], "num_res_blocks": 4, "attn_resolutions": [16], "resolution": 256}
_AUDIO = {"audio_channels": 1, "num_filters": 32, "upsampling_ratios": [6, 5, 5, 4], "num_residual_layers": 1,
          "dilation_growth_rate": 2, "compress": 2, "use_conv_shortcut": True, "norm_type": "weight_norm",
          "kernel_size": 7, "last_kernel_size": 7, "residual_kernel_size": 3, "num_lstm_layers": 2, "hidden_size": 512}
"""Apertus1p5VisionTokenizerConfig / WavTokenizerConfig defaults (transformers 5.24)."""


def wavtokenizer_encoder(a: HFConfig) -> list[dict]:
    """WavTokenizerEncoder's parameters as vectors (module docstring)."""
    norm = a.text("norm_type")
    if norm not in ("weight_norm", "time_group_norm"):
        raise SpecError(f"{a.source}: audio_config.norm_type: '{norm}' must be 'weight_norm' or 'time_group_norm'")
    total = 0

    def conv(n_in: int, n_out: int, kernel: int) -> int:  # WavTokenizerConv1d
        return n_out * n_in * kernel + n_out + (n_out if norm == "weight_norm" else 2 * n_out)

    width, compress = a.size("num_filters"), a.size("compress")
    total += conv(a.size("audio_channels"), width, a.size("kernel_size"))
    for ratio in reversed(a.ints("upsampling_ratios")):
        if ratio <= 0:
            raise SpecError(f"{a.source}: audio_config.upsampling_ratios: positive ratios expected")
        for _ in range(a.integer("num_residual_layers")):
            hidden = width // compress
            total += conv(width, hidden, a.size("residual_kernel_size")) + conv(hidden, width, 1)
            total += conv(width, width, 1) if a.flag("use_conv_shortcut") else 0
        total += conv(width, 2 * width, 2 * ratio)
        width *= 2
    lstm = a.integer("num_lstm_layers") * (8 * width * width + 8 * width)  # nn.LSTM: 4 gates of W_ih, W_hh, b_ih, b_hh
    total += conv(width, a.size("hidden_size"), a.size("last_kernel_size"))
    out = [_vec("audio_tokenizer/encoder/convs", total)]
    if lstm:
        out.append(_vec("audio_tokenizer/encoder/lstm", 8 * width + 8, width * a.integer("num_lstm_layers")))
    return out


def _apertus1p5(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Apertus1p5ForConditionalGeneration (module docstring)."""
    fields, _ = _text(c, text_mappers, "apertus1p5_text")
    raw = c.data.get("vision_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: vision_config: expected an object, got {raw!r}")
    q = {**_VQ, **_VISION, **raw}
    tower, side, stride = vq_encoder(HFConfig({**q, "num_embeddings": q["codebook_size"]}, c.source, "vision_config."),
                                     post_quant_conv=False)
    _, a = _sub(c, "audio_config", "wavtokenizer_encoder")
    tower += wavtokenizer_encoder(HFConfig({**_AUDIO, **a.data}, a.source, a.path))
    fields["vision"] = dict(layers=0, hidden=q["embed_dim"], heads=1, ffn_hidden=1, patch_size=stride,
                            image_size=side * stride, channels=q["in_channels"], tower=tower, connector=[])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


APERTUS1P5_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"apertus1p5": _apertus1p5}
