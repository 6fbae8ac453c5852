"""Encoder-decoder details beyond T5's (the BART family and Whisper), one sub-spec of
TransformerSpec (`seq2seq`) holding the sizes that change a count.

transformers 5.24 builds these models as an encoder stack and a decoder stack of the same width;
each stack has its own position table (an nn.Embedding weight, also when it holds fixed sinusoids)
and, for BART-style models, its own `layernorm_embedding`; the token table (`shared`) is one
tensor tied to both stacks and to the LM head (modeling_bart.py, modeling_marian.py,
modeling_pegasus.py, modeling_whisper.py).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec


class AudioFrontendSpec(Spec):
    """Whisper's encoder input (WhisperEncoder conv1 / conv2): log-mel frames through
    Conv1d(mel_bins, h, 3, padding=1), GELU, Conv1d(h, h, 3, stride=2, padding=1), GELU; the
    encoder then sees one position per two input frames."""

    mel_bins: int = Field(gt=0)
    """Input feature channels (HF num_mel_bins)."""
    kernel: int = Field(3, gt=0)
    """Kernel width of both convolutions (3 in WhisperEncoder)."""


class Seq2SeqSpec(Spec):
    """Per-stack position tables and the audio front-end of an encoder-decoder."""

    position_offset: int = Field(0, ge=0)
    """Rows each learned position table keeps before position 0 (BartLearnedPositionalEmbedding:
    offset 2, so max_positions + 2 rows)."""
    encoder_positions: int | None = Field(None, gt=0)
    """Rows of the encoder's position table when it differs from the decoder's max_positions
    (Whisper max_source_positions); None: max_positions."""
    frozen_positions: Literal["none", "encoder", "both"] = "none"
    """Position tables holding fixed sinusoids as parameters with requires_grad False (Marian,
    Pegasus: both; Whisper: the encoder's): counted in the total, not as trainable."""
    key_bias: bool = True
    """With qkv_bias: k_proj has a bias too (Whisper's k_proj has none, in self- and cross-attention)."""
    encoder_embedding_norm: bool = True
    """With embedding_norm: the encoder has its own layernorm_embedding (BART) beside the decoder's."""
    idle_cross_attention: bool = False
    """arch decoder: the decoder of an encoder-decoder built alone (BartForCausalLM,
    TrOCRForCausalLM): every block keeps its encoder_attn (q/k/v/out) and encoder_attn_layer_norm,
    which no forward runs without encoder states; parameters only."""
    cross_input: int | None = Field(None, gt=0)
    """Width of the encoder output the cross-attention k/v projections read (TrOCR
    cross_attention_hidden_size: Linear(kdim, h)); None: hidden."""
    cross_memory: int | None = Field(None, gt=0)
    """With idle_cross_attention: the encoder_attn does run, on this many encoder positions per
    sequence (a composite's image tokens: BLIP's text decoder, a VisionEncoderDecoder's decoder,
    Pix2Struct's), whose k / v it projects from cross_input features; None: it never runs."""
    encoder_window: int | None = Field(None, gt=0)
    """Keys each encoder query scores when fewer than the source length (BigBird-Pegasus
    block_sparse attention, priced as (5 + num_random_blocks) x block_size keys); None: all."""
    merged_cross_attention: bool = False
    """T5Gemma 2's decoder (T5Gemma2MergedAttention): cross-attention shares the block's q/k/v/o
    projections, norms and softmax with self-attention (queries score their own keys and the
    encoder's, k/v projected from both); no weights or norm of its own."""
    eoi_embedding: bool = False
    """T5Gemma 2's embed_tokens also holds an end-of-image vector (eoi_embedding, h)."""
    own_token_tables: int = Field(0, ge=0)
    """Token tables (vocab x h) a stack keeps beside the shared one when untied (T5Gemma 2 with
    tie_word_embeddings false: T5Gemma2Model._tied_weights_keys no longer ties the decoder's
    embed_tokens, nor its eoi vector, to the encoder's; transformers 5.24 modeling_t5gemma2.py)."""
    audio: AudioFrontendSpec | None = None
    """Whisper's convolutional front-end: the encoder reads audio frames, not tokens."""
