"""Parameters and forward FLOPs of an image / audio encoder's input and task head
(`specs.encoder_inputs`, `TransformerSpec.inputs`), keyed relative to `embedding/` and `head/`.

Parameters follow transformers 5.24's modules (ViTEmbeddings, DeiTEmbeddings, Dinov2Embeddings,
CLIPVisionEmbeddings, SiglipVisionEmbeddings, Wav2Vec2FeatureEncoder / FeatureProjection /
PositionalConvEmbedding); FLOPs count convolutions and matmuls, 2 per multiply-add, as
torch.utils.flop_counter does (`count.flops` convention). A sequence is one image or one clip.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.count.vision import connector_params, pooling_head_flops, pooling_head_params
from modelplan.errors import SpecError

if TYPE_CHECKING:
    from modelplan.specs.encoder_inputs import AudioConvInput
    from modelplan.specs.transformer import TransformerSpec


def _conv_params(audio: "AudioConvInput") -> int:
    """Conv1d(c_in, c_out, k) weights (+ bias) of every feature conv, one input channel first."""
    total, c_in = 0, 1
    for c_out, k in zip(audio.conv_dim, audio.conv_kernel):
        total += c_in * k * c_out + (c_out if audio.conv_bias else 0)
        c_in = c_out
    return total


def _position_conv_params(audio: "AudioConvInput", h: int) -> int:
    """Wav2Vec2PositionalConvEmbedding: weight_norm(Conv1d(h, h, k, groups=g), dim=2) holds
    weight_v (h, h / g, k) and weight_g (1, 1, k), plus the bias (h); data2vec-audio's
    position_layers plain Conv1d(h, h, k, groups=g) with biases."""
    k = audio.position_kernel
    one = h * (h // audio.position_groups) * k + h
    return one + k if audio.position_weight_norm else audio.position_layers * one


def input_params(spec: "TransformerSpec") -> dict[str, int]:
    """Parameters of what replaces the token table, keyed relative to `embedding/`."""
    x, h = spec.inputs, spec.hidden
    if x is None:
        return {}
    if x.modality == "image":
        return {
            # Conv2d(channels, h, kernel=stride=patch): channels p^2 h weights (+ h bias)
            "patch": x.channels * x.patch_size ** 2 * h + (h if x.patch_bias else 0),
            "prefix": x.prefix_tokens * h,  # cls_token (1, 1, h), DeiT's distillation_token
            "registers": x.register_tokens * h,  # register_tokens (1, R, h)
            "mask": h if x.mask_token else 0,  # mask_token (1, 1, h)
            # BEiT's shared_position_bias table: Parameter(num_relative_distance, heads)
            "relative_table": x.relative_rows * spec.heads if x.relative_bias == "shared" else 0,
        }
    if x.modality == "features":  # the front layers (FeatureInput), masked_spec_embed (h,)
        return {**{f"front/{layer.name}": connector_params(layer) for layer in x.front},
                "mask": h if x.masked_embedding else 0}
    norms = 2 * x.conv_dim[0] if x.conv_norm == "group" else sum(2 * c for c in x.conv_dim)  # affine GroupNorm / LayerNorm
    c = x.conv_dim[-1]
    return {
        "features/conv": _conv_params(x),
        "features/norm": norms,
        "projection/norm": 2 * c if x.projection_norm else 0,  # LayerNorm(conv_dim[-1])
        "projection/linear": c * h + h if x.projection else 0,  # Linear(conv_dim[-1], h)
        "position_conv": _position_conv_params(x, h),
        "mask": h if x.masked_embedding else 0,  # masked_spec_embed (h,)
        "upsample": h * h * x.squeeze + h * x.squeeze if x.upsample else 0,  # SEWUpsampling.projection
    }


def input_head_params(spec: "TransformerSpec") -> dict[str, int]:
    """Parameters of the task head's layers, keyed relative to `head/`."""
    x = spec.inputs
    if x is None:
        return {}
    out = {layer.name: connector_params(layer) for layer in x.head}
    if x.modality == "image" and x.pooling_head:  # SigLIP's attention-pooling head (count.vision)
        out["pooling_head"] = pooling_head_params(spec.hidden, spec.ffn_hidden)
    return out


def layer_flops_per_row(layer) -> int:
    """2 x multiply-adds of one row through a linear / conv layer (Conv2d: one output position);
    0 for norms and vectors."""
    if layer.kind in ("linear", "conv"):
        return 2 * layer.in_features // layer.groups * layer.kernel ** 2 * layer.out_features
    return 0


def conv_flops(audio: "AudioConvInput", lengths: list[int]) -> int:
    """Feature convs over input length lengths[0] with output lengths lengths[1:]: 2 c_in k c_out
    per output position each."""
    total, c_in = 0, 1
    for c_out, k, n in zip(audio.conv_dim, audio.conv_kernel, lengths[1:]):
        total += 2 * n * c_in * k * c_out
        c_in = c_out
    return total


def _audio_flops(audio: "AudioConvInput", h: int, frames: int) -> dict[str, int]:
    """One clip giving `frames` frames: each feature conv over its output length (the shortest
    input for those frames, AudioConvInput.lengths), the projection per frame and the positional
    conv over frames + 2 (k // 2) - k + 1 outputs (Wav2Vec2SamePadLayer drops the extra one)."""
    k, sq = audio.position_kernel, audio.squeeze
    # SEW: the convs and projection run on squeeze x frames, the strided positional conv gives one
    # output per squeezed token, the upsampling Linear(h, h squeeze) runs on those tokens
    outputs = frames + 2 * (k // 2) - k + 1 if sq == 1 else frames
    return {"features/conv": conv_flops(audio, audio.lengths(sq * frames)),
            "projection/linear": 2 * sq * frames * audio.conv_dim[-1] * h if audio.projection else 0,
            "position_conv": audio.position_layers * 2 * outputs * h * (h // audio.position_groups) * k,
            "upsample": 2 * frames * h * h * sq if audio.upsample else 0}


def input_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of the input side over `tokens` tokens in sequences of `seq_len`, keyed
    relative to `embedding/`."""
    x = spec.inputs
    if x is None:
        return {}
    sequences = tokens // seq_len
    if x.modality == "image":  # (patches, C p^2) @ (C p^2, h) per image
        return {"patch": 2 * sequences * x.patches * x.channels * x.patch_size ** 2 * spec.hidden}
    if x.modality == "features":  # each front layer on `rows` rows per frame
        return {f"front/{layer.name}": tokens * (layer.rows or 1) * layer_flops_per_row(layer) for layer in x.front
                if layer.kind in ("linear", "conv")}
    return {key: sequences * n for key, n in _audio_flops(x, spec.hidden, seq_len).items()}


def input_head_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of the task head's layers: a layer with `rows` runs on that many rows per
    sequence (1: the pooled token), else on every token (every upsampled frame under SEW's
    squeeze); keyed relative to `head/`."""
    x = spec.inputs
    if x is None:
        return {}
    sequences = tokens // seq_len
    frames = tokens * (x.squeeze if x.modality == "audio" else 1)  # SEW's upsampled frames
    out = {}
    for layer in x.head:
        if layer.kind == "linear":
            rows = sequences * layer.rows if layer.rows is not None else frames
            out[layer.name] = layer.copies * 2 * rows * layer.in_features * layer.out_features
    if x.modality == "image" and x.pooling_head:
        out["pooling_head"] = sequences * pooling_head_flops(spec.hidden, spec.ffn_hidden, seq_len)
    return out


def input_block_params(spec: "TransformerSpec") -> dict[str, int]:
    """One block's parameters beside the block stack's, keyed relative to the block: WavLM's
    gru_rel_pos_const (heads) and gru_rel_pos_linear Linear(head_dim, 8) with bias; DINOv3's and
    BEiT's q and v biases (h each); BEiT's relative bias table."""
    x = spec.inputs
    if x is None:
        return {}
    if x.modality == "image":  # DINOv3 / BEiT q and v biases, BEiT's per-block relative bias table
        return {"attention/qv_bias": 2 * spec.hidden if x.qv_bias else 0,
                "attention/relative_table": x.relative_rows * spec.heads if x.relative_bias == "block" else 0}
    if x.modality == "features":  # Whisper's encoder: q and v biased, k not
        return {"attention/qv_bias": 2 * spec.hidden if x.qv_bias else 0}
    gated = x.modality == "audio" and x.gated_relative_bias
    return {"attention/relative_gate": spec.heads + 8 * spec.dim_head + 8} if gated else {}


def input_block_flops(spec: "TransformerSpec", tokens: int) -> dict[str, int]:
    """WavLM's gate's forward FLOPs: (t, head_dim) @ (head_dim, 8) per head (bias adds: none)."""
    if "attention/relative_gate" not in input_block_params(spec):
        return {}
    return {"attention/relative_gate": 2 * tokens * spec.heads * spec.dim_head * 8}


def check_input_length(spec: "TransformerSpec", seq_len: int) -> None:
    """An image is exactly its patches, prefix and register tokens (learned rows per position)."""
    x = spec.inputs
    if x is not None and x.modality == "image" and seq_len != x.tokens:
        raise SpecError(f"seq_len ({seq_len}) must be {x.tokens} for {spec.name}: one {x.image_size} x "
                        f"{x.image_size} px image is {x.patches} patches + {x.prefix_tokens + x.register_tokens} prefix / register tokens")
