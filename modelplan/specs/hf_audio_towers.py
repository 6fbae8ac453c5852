"""Whisper-style audio encoders as the layers of a `VisionSpec.tower` (transformers 5.24
modeling_qwen2_audio.py Qwen2AudioEncoder, modeling_audioflamingo3.py AudioFlamingo3Encoder,
modeling_voxtral.py VoxtralEncoder, modeling_moss_transcribe_diarize.py
MossTranscribeDiarizeAudioModel, modeling_glmasr.py GlmAsrEncoder), priced per clip of
`2 x frames` mel frames (30 s at 100 frames a second: 3000 mel frames, 1500 encoder frames).

conv1 Conv1d(num_mel_bins, d, 3) and conv2 Conv1d(d, d, 3, stride 2), both biased, are written
as linears over their im2col rows (in x kernel inputs: the same weights and multiply-adds); a
learned (frozen) position table of `frames` rows (Whisper's embed_positions) or rotary
positions (GLM-ASR: buffers only); pre-LN blocks of q / k / v / out (k bias-free) and fc1 / fc2
(biased), then a final LayerNorm over the frames after an optional average pool.
"""

from __future__ import annotations

import math

from typing import TYPE_CHECKING

from modelplan.errors import SpecError
from modelplan.specs.hf_davit import _rows
from modelplan.specs.hf_vision import _linear, _norm

if TYPE_CHECKING:
    from modelplan.specs.conformer import ConvModuleSpec


def encoder_blocks(d: int, heads: int, ffn: int, layers: int, frames: int, *, kv_heads: int | None = None,
                   head_dim: int | None = None, k_bias: bool = False, keys: int | None = None, rms: bool = False,
                   gated: bool = False, source: str = "audio_config") -> list[dict]:
    """Tower layers of `layers` pre-LN blocks on `frames` frames: a LayerNorm (RMSNorm with `rms`),
    q / k / v / out (biased; k with `k_bias`), every frame attending to `keys` frames (None: all of
    them), a norm, fc1 / fc2 (biased) or, `gated`, bias-free gate / up and a biased down
    (VoxtralRealtimeMLP)."""
    if heads < 1 or d % heads and head_dim is None:
        raise SpecError(f"{source}: num_attention_heads ({heads}) must divide hidden_size ({d})")
    hd = head_dim or d // heads
    kv = kv_heads or heads
    if heads % kv:
        raise SpecError(f"{source}: num_key_value_heads ({kv}) must divide num_attention_heads ({heads})")
    q, k, n = heads * hd, kv * hd, layers
    if not n:
        return []
    kind = "rmsnorm" if rms else "layernorm"
    mlp = [_rows(_linear("layers/mlp/gate_up", d, ffn, False, copies=2 * n), frames),
           _rows(_linear("layers/mlp/down", ffn, d, True, copies=n), frames)] if gated else \
        [_rows(_linear("layers/mlp/fc1", d, ffn, True, copies=n), frames),
         _rows(_linear("layers/mlp/fc2", ffn, d, True, copies=n), frames)]
    return [_rows(_norm("layers/attention_norm", d, kind, copies=n), frames),
            _rows(_linear("layers/attention/q", d, q, True, copies=n), frames),
            _rows(_linear("layers/attention/k", d, k, k_bias, copies=n), frames),  # Whisper's k_proj: bias=False
            _rows(_linear("layers/attention/v", d, k, True, copies=n), frames),
            dict(name="layers/attention/scores", kind="attention", in_features=q, keys=min(keys or frames, frames),
                 rows=frames, copies=n),
            _rows(_linear("layers/attention/out", q, d, True, copies=n), frames),
            _rows(_norm("layers/mlp_norm", d, kind, copies=n), frames), *mlp]


def whisper_encoder(d: int, heads: int, ffn: int, layers: int, mel: int, frames: int, *, kv_heads: int | None = None,
                    head_dim: int | None = None, positions: bool = True, pool: int = 1, source: str = "audio_config",
                    ) -> list[dict]:
    """Tower layers of one clip: convs on 2 x frames, then frames, blocks on `frames`, the final
    norm on frames // pool (Qwen2-Audio / AudioFlamingo 3's AvgPool1d(2, 2) before it)."""
    out = [_rows(_linear("conv1", 3 * mel, d, True), 2 * frames),  # Conv1d(mel, d, 3): (2T, 3 mel) @ (3 mel, d)
           _rows(_linear("conv2", 3 * d, d, True), frames)]  # Conv1d(d, d, 3, stride 2): (T, 3 d) @ (3 d, d)
    if positions:  # embed_positions: Embedding(max_source_positions, d), requires_grad false
        out.append(dict(name="embed_positions", kind="vector", in_features=frames * d))
    out += encoder_blocks(d, heads, ffn, layers, frames, kv_heads=kv_heads, head_dim=head_dim, source=source)
    return out + [_rows(_norm("layer_norm", d), max(frames // pool, 1))]


def qwen3_asr_encoder(a, mel_frames: int) -> tuple[list[dict], int]:
    """(tower layers, frames) of Qwen3ASREncoder on one clip of `mel_frames` mel frames: chunks of
    2 n_window frames, each through three Conv2d(., downsample_hidden_size, 3, stride 2, padding 1)
    (biased) over (mel bins, time), conv_out Linear(c x bins, d, bias=False) per output frame,
    sinusoid positions (a buffer), pre-LN blocks with biased q / k / v / out attending within
    windows of n_window_infer mel frames (every window taken as full), ln_post."""
    d, heads, ffn, n = (a.integer(k) for k in ("d_model", "encoder_attention_heads", "encoder_ffn_dim", "encoder_layers"))
    c, mel, chunk = a.integer("downsample_hidden_size"), a.integer("num_mel_bins"), 2 * a.integer("n_window", 50)
    chunks = -(-mel_frames // chunk)
    layers, bins, time, c_in = [], mel, chunk, 1
    for i in range(3):
        bins, time = (bins - 1) // 2 + 1, (time - 1) // 2 + 1  # Conv2d(k 3, s 2, p 1) output side
        layers.append(dict(name=f"conv2d{i + 1}", kind="conv", in_features=c_in, out_features=c, kernel=3, bias=True,
                           rows=chunks * bins * time))
        c_in = c
    frames = chunks * time
    keys = max(a.integer("n_window_infer", 800) // chunk, 1) * time  # a window's post-CNN frames
    layers.append(_rows(_linear("conv_out", c * bins, d, False), frames))
    layers += encoder_blocks(d, heads, ffn, n, frames, k_bias=True, keys=keys, source=f"{a.source}: {a.path}")
    return layers + [_rows(_norm("ln_post", d), frames)], frames


def wav2vec2_front(conv_dim: list[int], kernels: list[int], strides: list[int], bias: bool, samples: int,
                   d: int, position_kernel: int, position_groups: int) -> tuple[list[dict], int]:
    """(tower layers, frames) of wav2vec2's feature encoder with a LayerNorm after every conv
    (feat_extract_norm 'layer'), the LayerNorm + Linear(conv_dim[-1], d) projection and one plain
    grouped positional Conv1d(d, d, k, groups) (OmniASR's), over `samples` raw samples; each
    Conv1d(c_in, c_out, k, stride) a linear over its im2col rows (L_out = (L_in - k) // s + 1)."""
    layers, length, c_in = [], samples, 1
    for i, (c_out, k, s) in enumerate(zip(conv_dim, kernels, strides)):
        length = (length - k) // s + 1
        if length < 1:
            raise SpecError(f"audio_config.conv_kernel: conv {i} leaves no frames of a {samples}-sample clip")
        layers += [_rows(_linear(f"features/conv{i}", c_in * k, c_out, bias), length),
                   _rows(_norm(f"features/norm{i}", c_out), length)]
        c_in = c_out
    k = position_kernel
    return layers + [_rows(_norm("projection/norm", c_in), length), _rows(_linear("projection/linear", c_in, d, True), length),
                     dict(name="position_conv", kind="conv", in_features=d * k, out_features=d, groups=position_groups,
                          bias=True, rows=length)], length


def audio_tower(layers: list[dict], d: int, heads: int, ffn: int, depth: int, frames: int, connector: list[dict],
                unit: str = "30 s audio clip") -> dict:
    """The `vision` fields of an audio encoder given as tower layers: `patch_size` 1 and an
    image_size whose square is at least the clip's frames (the report's patches); every layer
    carries its own rows; `unit` names the clip (VisionSpec.input_unit)."""
    side = math.isqrt(frames - 1) + 1 if frames > 1 else 1
    return dict(layers=depth or 1, hidden=d, heads=heads, ffn_hidden=ffn, patch_size=1, image_size=side,
                channels=1, tower=layers, connector=connector, input_unit=unit)


def conformer_blocks(d: int, heads: int, head_dim: int, ffn: int, layers: int, frames: int, context: int,
                     conv: "ConvModuleSpec", relative_rows: int) -> list[dict]:
    """Tower layers of `layers` Conformer blocks (Granite Speech's GraniteSpeechConformerBlock) on
    `frames` frames: ff1 and ff2 (pre-norm, biased up / down), pre-norm attention with bias-free q
    and kv and a biased out, attending within blocks of `context` frames (padded up to whole
    blocks) with Shaw's relative table (relative_rows x head_dim, one more q . r product per
    (query, key) pair: half an attention's two, `attention/rel_pos`), the convolution module
    (`specs.conformer.conv_module_layers`, shared with the block stack) and a post norm."""
    from modelplan.specs.conformer import conv_module_layers

    n, inner = layers, heads * head_dim
    if not n:
        return []
    padded = -(-frames // context) * context  # F.pad to whole context blocks
    ff = [_rows(_norm("layers/ff/pre_norm", d, copies=2 * n), frames),
          _rows(_linear("layers/ff/up_proj", d, ffn, True, copies=2 * n), frames),
          _rows(_linear("layers/ff/down_proj", ffn, d, True, copies=2 * n), frames)]
    attention = [_rows(_norm("layers/attn/pre_norm", d, copies=n), frames),
                 _rows(_linear("layers/attn/to_q", d, inner, False, copies=n), padded),
                 _rows(_linear("layers/attn/to_kv", d, 2 * inner, False, copies=n), padded),
                 dict(name="layers/attn/scores", kind="attention", in_features=inner, keys=context, rows=padded,
                      copies=n),
                 dict(name="layers/attn/rel_pos", kind="attention", in_features=max(inner // 2, 1), keys=context,
                      rows=padded, copies=n),
                 dict(name="layers/attn/rel_pos_emb", kind="vector", in_features=relative_rows * head_dim, copies=n),
                 _rows(_linear("layers/attn/to_out", inner, d, True, copies=n), frames)]
    convs = [_rows(layer, frames) for layer in conv_module_layers(conv, d, prefix="layers/conv", copies=n)]
    return ff + attention + convs + [_rows(_norm("layers/post_norm", d, copies=n), frames)]
