"""HF config mappers of the NeMo-style Conformer CTC encoders (transformers 5.24
modeling_parakeet.py ParakeetForCTC / ParakeetEncoder, modeling_lasr.py LasrForCTC / LasrEncoder):
filter-bank features through a subsampling front (`FeatureInput`), Conformer blocks
(`specs/conformer.py`: norm_feed_forward1 + feed_forward1, norm_self_att + attention,
norm_conv + the conv module, norm_feed_forward2 + feed_forward2, norm_out) and the CTC head, a
biased Conv1d(h, vocab_size, 1) on every frame (the lm_head's parameters and FLOPs).

- Parakeet: Conv2d(1, C, k, stride s) over (time, mel), then log2(subsampling_factor) - 1 pairs of a
  depthwise Conv2d(C, C, k, s, groups C) and a pointwise Conv2d(C, C, 1), then Linear(C x mel / s^n,
  h); attention and feed-forwards biased with attention_bias, the conv module with convolution_bias;
  Transformer-XL relative positions (relative_k_proj Linear(h, q, bias=False), bias_u, bias_v);
  LayerNorms with bias; no final norm.
- LASR: dense_0 Linear(mel, h), conv_0 Conv1d(h, h, k, s), conv_1 Conv1d(h, C, k, s), dense_1
  Linear(C, h) (written as linears over im2col rows); rotary positions; bias-free LayerNorms and
  a final out_norm.
Both read 100 feature frames a second; the blocks run on 100 / subsampling frames a second.
"""

from __future__ import annotations

import math

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig

_PARAKEET = {"hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 8, "intermediate_size": 4096,
             "attention_bias": True, "convolution_bias": True, "conv_kernel_size": 9, "subsampling_factor": 8,
             "subsampling_conv_channels": 256, "num_mel_bins": 80, "subsampling_conv_kernel_size": 3,
             "subsampling_conv_stride": 2, "hidden_act": "silu"}
"""ParakeetEncoderConfig defaults (transformers 5.24)."""
_LASR = {"hidden_size": 512, "num_hidden_layers": 17, "num_attention_heads": 8, "intermediate_size": 2048,
         "attention_bias": False, "convolution_bias": False, "conv_kernel_size": 32, "subsampling_conv_channels": 256,
         "num_mel_bins": 128, "subsampling_conv_kernel_size": 5, "subsampling_conv_stride": 2, "hidden_act": "silu",
         "layer_norm_eps": 1e-6}
"""LasrEncoderConfig defaults (transformers 5.24)."""
_CTC_VOCAB = {"parakeet_ctc": 1025, "lasr_ctc": 512}
"""ParakeetCTCConfig / LasrCTCConfig vocab_size defaults."""


def _layer(name: str, kind: str, n_in: int, n_out: int, rows: int, kernel: int = 1, groups: int = 1) -> dict:
    return dict(name=name, kind=kind, in_features=n_in, out_features=n_out, bias=True, rows=rows, kernel=kernel,
                groups=groups)


def _parakeet_front(e: HFConfig, h: int) -> tuple[list[dict], int]:
    """(front layers, subsampling) of ParakeetEncoderSubsamplingConv2D; rows are output positions
    (time x frequency) per encoder frame."""
    k, s, ch, factor = (e.size(key) for key in ("subsampling_conv_kernel_size", "subsampling_conv_stride",
                                                 "subsampling_conv_channels", "subsampling_factor"))
    n = int(math.log2(factor))  # ParakeetEncoderSubsamplingConv2D.num_layers
    if n < 1 or s ** n != factor:
        raise SpecError(f"{e.source}: {e.path}subsampling_factor: {factor} must be subsampling_conv_stride ({s}) "
                        f"to the power log2({factor}) (one stride-{s} conv per halving)")
    freq, pad, layers = e.size("num_mel_bins"), (k - 1) // 2, []
    for i in range(n):
        freq = (freq + 2 * pad - k) // s + 1  # Conv2d output height
        time = s ** (n - 1 - i)  # output time steps per encoder frame
        if i == 0:
            layers.append(_layer("subsampling/conv0", "conv", 1, ch, time * freq, k))
        else:
            layers += [_layer(f"subsampling/depthwise{i}", "conv", ch, ch, time * freq, k, groups=ch),
                       _layer(f"subsampling/pointwise{i}", "conv", ch, ch, time * freq)]
    width = ch * (e.size("num_mel_bins") // s ** n)  # ParakeetEncoderSubsamplingConv2D.linear input
    return layers + [_layer("subsampling/linear", "linear", width, h, 1)], factor


def _lasr_front(e: HFConfig, h: int) -> tuple[list[dict], int]:
    """(front layers, subsampling) of LasrEncoderSubsampling: two stride-s convs."""
    k, s, ch = (e.size(key) for key in ("subsampling_conv_kernel_size", "subsampling_conv_stride",
                                        "subsampling_conv_channels"))
    return [_layer("subsampler/dense_0", "linear", e.size("num_mel_bins"), h, s * s),
            _layer("subsampler/conv_0", "linear", h * k, h, s),  # Conv1d(h, h, k, s): (s T, k h) @ (k h, h)
            _layer("subsampler/conv_1", "linear", h * k, ch, 1),
            _layer("subsampler/dense_1", "linear", ch, h, 1)], s * s


def _encoder(c: HFConfig, kind: str) -> tuple[str, HFConfig]:
    """(architecture, encoder config) of a ...ForCTC config or a bare encoder config."""
    names = c.texts("architectures", None)
    prefix = {"parakeet": "Parakeet", "lasr": "Lasr"}[kind]
    ctc = c.text("model_type") == f"{kind}_ctc"
    name = names[0] if names else (f"{prefix}ForCTC" if ctc else f"{prefix}Encoder")
    if name != (f"{prefix}ForCTC" if ctc else f"{prefix}Encoder"):
        raise SpecError(f"{c.source}: architectures: '{name}' not modelled (supported: {prefix}ForCTC for "
                        f"{kind}_ctc, {prefix}Encoder for {kind}_encoder)")
    raw = c.data.get("encoder_config") if ctc else c.data
    if raw is not None and not isinstance(raw, dict):
        raise SpecError(f"{c.source}: encoder_config: expected an object, got {raw!r}")
    data = {k: v for k, v in (raw or {}).items() if v is not None}
    return name, HFConfig({**(_PARAKEET if kind == "parakeet" else _LASR), **data}, c.source,
                          "encoder_config." if ctc else "")


def _conformer_ctc(c: HFConfig, kind: str) -> dict:
    """ParakeetForCTC / LasrForCTC or the bare encoder (module docstring)."""
    name, e = _encoder(c, kind)
    h, heads = e.size("hidden_size"), e.divisor("num_attention_heads")
    if e.has("head_dim") and e.integer("head_dim") * heads != h:
        raise SpecError(f"{e.source}: {e.path}head_dim: {e.integer('head_dim')} x num_attention_heads ({heads}) "
                        f"!= hidden_size ({h}) is not modelled")
    front, factor = (_parakeet_front if kind == "parakeet" else _lasr_front)(e, h)
    parakeet, bias = kind == "parakeet", e.flag("convolution_bias")
    fields = dict(
        arch="encoder", layers=e.size("num_hidden_layers"), hidden=h, heads=heads, ffn_hidden=e.size("intermediate_size"),
        norm="layernorm", norm_bias=parakeet, norm_eps=e.number("layer_norm_eps", 1e-5), norm_placement="pre",
        embedding_norm=False, final_norm=not parakeet, qkv_bias=e.flag("attention_bias"),
        attn_out_bias=e.flag("attention_bias"), mlp_bias=e.flag("attention_bias"), gated_mlp=False,
        activation=e.activation("silu", "hidden_act"), position="none" if parakeet else "rotary",
        dropout=e.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
        inputs=dict(modality="features", front=front, frames_per_second=max(100 // factor, 1)),
        extras={"conformer": {"conv": {"kernel": e.size("conv_kernel_size"), "pointwise_bias": bias,
                                       "depthwise_bias": bias}, "relative": "xl" if parakeet else "none"}})
    if name.endswith("ForCTC"):  # ctc_head: Conv1d(h, vocab_size, kernel_size=1), biased
        return {**fields, "lm_head": True, "lm_head_bias": True, "tied_embeddings": False,
                "vocab": c.integer("vocab_size", _CTC_VOCAB[c.text("model_type")])}
    return {**fields, "lm_head": False, "tied_embeddings": False, "vocab": 1}


CONFORMER_CTC_MAPPERS = {f"{kind}_{suffix}": (lambda c, kind=kind: _conformer_ctc(c, kind))
                         for kind in ("parakeet", "lasr") for suffix in ("ctc", "encoder")}
"""model_type -> mapper; each reads `architectures` itself (hf_speech.SPEECH_HEADS)."""
