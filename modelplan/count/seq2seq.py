"""Parameters and FLOPs of the parts an encoder-decoder adds outside its blocks
(`specs/seq2seq.py`): one position table per stack, one embedding norm per stack, Whisper's
convolutional front-end. The blocks themselves (self-attention, cross-attention, MLP) are the
common block stack of `count/blocks.py` and `count/block_flops.py`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.errors import SpecError

if TYPE_CHECKING:
    from modelplan.specs.transformer import TransformerSpec


def position_rows(spec: "TransformerSpec") -> tuple[int, int]:
    """(encoder, decoder) rows of the learned position tables; (max_positions, 0) for a model
    with one stack (GPT-2 wpe, BERT position_embeddings), (0, 0) without learned positions."""
    if spec.position != "learned":
        return 0, 0
    s2s = spec.seq2seq
    offset = s2s.position_offset if s2s is not None else 0  # BartLearnedPositionalEmbedding: num + 2 rows
    if spec.arch != "encoder_decoder":
        return spec.max_positions + offset, 0
    encoder = s2s.encoder_positions if s2s is not None and s2s.encoder_positions else spec.max_positions
    return encoder + offset, spec.max_positions + offset


def position_params(spec: "TransformerSpec") -> int:
    """Every position-table parameter: nn.Embedding(rows, h) per table."""
    return sum(position_rows(spec)) * spec.hidden


def frozen_params(spec: "TransformerSpec") -> int:
    """Parameters with requires_grad False: fixed sinusoid tables (MarianSinusoidalPositionalEmbedding,
    PegasusSinusoidalPositionalEmbedding; WhisperEncoder.embed_positions.requires_grad_(False))."""
    s2s = spec.seq2seq
    if s2s is None or s2s.frozen_positions == "none":
        return 0
    encoder, decoder = position_rows(spec)
    return (encoder + (decoder if s2s.frozen_positions == "both" else 0)) * spec.hidden


def key_bias_saving(spec: "TransformerSpec") -> int:
    """Bias elements an attention's q/k/v projections lack when k_proj has none (WhisperAttention:
    k_proj = nn.Linear(d, d, bias=False))."""
    s2s = spec.seq2seq
    return spec.kv_width if spec.qkv_bias and s2s is not None and not s2s.key_bias else 0


def idle_cross_params(spec: "TransformerSpec") -> dict[str, int]:
    """The encoder_attn weights of one block of a decoder built alone (BartDecoderLayer,
    TrOCRDecoderLayer: q Linear(h, h), k / v Linear(cross_input, h), out Linear(h, h), biases
    as the self-attention's) and its encoder_attn_layer_norm; {} for other models."""
    s2s = spec.seq2seq
    if s2s is None or not s2s.idle_cross_attention:
        return {}
    h, kv_in = spec.hidden, s2s.cross_input or spec.hidden
    qkv = h * spec.q_width + 2 * kv_in * spec.kv_width
    bias = spec.q_width + 2 * spec.kv_width - key_bias_saving(spec) if spec.qkv_bias else 0
    return {"cross_attention/qkv": qkv + bias, "cross_attention/out": spec.q_width * h + (h if spec.attn_out_bias else 0)}


def encoder_keys(spec: "TransformerSpec", block, keys: int) -> int:
    """Keys an encoder block's query scores: `keys`, capped by seq2seq.encoder_window (BigBird-Pegasus)."""
    s2s = spec.seq2seq
    if spec.arch != "encoder_decoder" or block.cross or s2s is None or s2s.encoder_window is None:
        return keys
    return min(keys, s2s.encoder_window)


def cross_memory_len(spec: "TransformerSpec") -> int:
    """Image tokens each sequence's cross-attention reads in a decoder built alone (seq2seq.cross_memory), else 0."""
    s2s = spec.seq2seq
    return s2s.cross_memory if s2s is not None and s2s.cross_memory is not None else 0


def memory_cross_flops(spec: "TransformerSpec", tokens: int, seq_len: int) -> dict[str, int]:
    """Forward FLOPs of one decoder block's encoder_attn over `seq2seq.cross_memory` image tokens
    per sequence ({} without): q and out on the text tokens, k / v from cross_input features on each
    sequence's memory, QK^T and AV over it (Vaswani et al. 2017 sec. 3.2.3; 2 per multiply-add)."""
    s2s = spec.seq2seq
    if s2s is None or s2s.cross_memory is None:
        return {}
    h, memory, kv_in = spec.hidden, s2s.cross_memory, s2s.cross_input or spec.hidden
    return {"cross_attention/q": 2 * tokens * h * spec.q_width,  # (t, h) @ (h, q)
            "cross_attention/kv": 2 * (tokens // seq_len) * memory * kv_in * 2 * spec.kv_width,  # (b m, kv_in) @ (kv_in, 2 kv)
            "cross_attention/score": 4 * tokens * memory * spec.q_width,
            "cross_attention/out": 2 * tokens * spec.q_width * h}


def embedding_norms(spec: "TransformerSpec") -> int:
    """Embedding norms: one per stack for an encoder-decoder (BART encoder/decoder
    layernorm_embedding), else one."""
    if not spec.embedding_norm:
        return 0
    both = spec.arch == "encoder_decoder" and (spec.seq2seq is None or spec.seq2seq.encoder_embedding_norm)
    return 2 if both else 1


def separate_cross(spec: "TransformerSpec", block) -> bool:
    """A decoder block with cross-attention weights of its own (T5, BART); T5Gemma 2's merged
    attention reuses the self-attention's."""
    return block.cross and not (spec.seq2seq is not None and spec.seq2seq.merged_cross_attention)


def own_token_tables(spec: "TransformerSpec") -> int:
    """Untied token tables beside the shared one (seq2seq.own_token_tables), else 0."""
    return spec.seq2seq.own_token_tables if spec.seq2seq is not None else 0


def eoi_params(spec: "TransformerSpec") -> int:
    """T5Gemma2TextScaledWordEmbedding.eoi_embedding: one h vector beside each token table."""
    tables = 1 + own_token_tables(spec)  # untied, the decoder's embed_tokens keeps its own eoi vector
    return tables * spec.hidden if spec.seq2seq is not None and spec.seq2seq.eoi_embedding else 0


def audio_params(spec: "TransformerSpec") -> int:
    """Whisper conv1 Conv1d(mel, h, k) and conv2 Conv1d(h, h, k), weights and biases."""
    audio = spec.seq2seq.audio if spec.seq2seq is not None else None
    if audio is None:
        return 0
    h, k = spec.hidden, audio.kernel
    return (audio.mel_bins * h * k + h) + (h * h * k + h)


def audio_flops(spec: "TransformerSpec", tokens: int) -> int:
    """Forward FLOPs of Whisper's front-end for `tokens` encoder positions: conv1 on the 2x input
    frames (stride 1), conv2 down to one output per position (stride 2); 2 per multiply-add."""
    audio = spec.seq2seq.audio if spec.seq2seq is not None else None
    if audio is None:
        return 0
    h, k = spec.hidden, audio.kernel
    return 2 * (2 * tokens) * audio.mel_bins * h * k + 2 * tokens * h * h * k


def check_lengths(spec: "TransformerSpec", seq_len: int, decoder_seq_len: int) -> None:
    """An encoder-decoder's learned position tables cap the source (encoder) and target (decoder)
    lengths."""
    if spec.position != "learned":
        return
    s2s = spec.seq2seq
    cap = s2s.encoder_positions if s2s is not None and s2s.encoder_positions else spec.max_positions
    if seq_len > cap:
        raise SpecError(f"seq_len ({seq_len}) exceeds the {cap} positions of {spec.name}'s encoder "
                        f"position table")
    if decoder_seq_len > spec.max_positions:
        raise SpecError(f"decoder_seq_len ({decoder_seq_len}) exceeds max_positions ({spec.max_positions}) "
                        f"of {spec.name}'s decoder position table")
