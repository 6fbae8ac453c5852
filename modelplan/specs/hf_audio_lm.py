"""HF config mappers of audio-token language models (transformers 5.24).

MusicGen's and MusicGen-Melody's decoder over audio codebooks (transformers
5.24 MusicgenForCausalLM / MusicgenMelodyForCausalLM, what MODEL_FOR_CAUSAL_LM maps both types to):
num_codebooks token tables of vocab_size + 1 rows (the extra row is the pad / bos code) summed into
one input, sinusoidal positions (a buffer, no parameters), pre-LN blocks of bias-free q/k/v/out and
fc1 -> ffn_dim -> fc2 (LayerNorms with bias), a final LayerNorm, and num_codebooks untied bias-free
heads Linear(h, vocab_size). The K tables and heads are counted as one table of K x vocab_size rows
plus K extra rows and one head of K x vocab_size outputs: the same parameters, FLOPs and logits.
MusicGen's blocks keep their encoder_attn (cross-attention over the text encoder, h -> h) unused when
the decoder is built alone; MusicGen-Melody's blocks have none (its conditioning is prepended).

A composite config (model_type musicgen / musicgen_melody) is read through its `decoder`
sub-config; MusicgenForConditionalGeneration (its T5 text encoder and EnCodec audio codec) is refused.

Moshi's temporal transformer as MoshiForCausalLM holds it (what MODEL_FOR_CAUSAL_LM maps moshi to): a
token table of vocab_size + 1 rows, Llama-style blocks (RMSNorm, rotary, bias-free GQA of head_dim)
whose MoshiGatingMLP fc1 Linear(h, ffn_dim) splits into gate and up halves before fc2
Linear(ffn_dim / 2, h), an untied head Linear(h, vocab_size); sliding_window is stored by
MoshiDecoderLayer but never applied. MoshiForConditionalGeneration (the depth decoder over audio
codebooks with per-codebook MoshiFlexibleLinear weights, the Mimi codec) is refused."""

from __future__ import annotations

import math

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE
from modelplan.specs.hf_llama import llama


def _decoder_of(c: HFConfig, composite: str) -> HFConfig:
    """The decoder sub-config of a composite config (the config itself for a *_decoder type);
    ...ForConditionalGeneration refused by name."""
    names = c.texts("architectures", None)
    if names and not names[0].endswith("ForCausalLM"):
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (its text encoder and EnCodec "
                        f"audio codec); supported: {composite}ForCausalLM, the decoder alone")
    if c.text("model_type") in ("musicgen", "musicgen_melody"):
        sub = c.sub("decoder")
        if sub is None:
            raise SpecError(f"{c.source}: decoder: missing (a {composite}Config holds its decoder sub-config)")
        return sub
    return c


def _musicgen_decoder(c: HFConfig, cross: bool, composite: str) -> dict:
    """One mapper for both decoders (module docstring); `cross`: blocks hold an idle encoder_attn."""
    d = _decoder_of(c, composite)
    hidden, codebooks, vocab = d.integer("hidden_size", 1024), d.integer("num_codebooks", 4), d.integer(
        "vocab_size", 2048)
    fields = dict(
        layers=d.integer("num_hidden_layers", 24), hidden=hidden, heads=d.integer("num_attention_heads", 16),
        ffn_hidden=d.integer("ffn_dim", 4096), vocab=codebooks * vocab,
        max_positions=d.integer("max_position_embeddings", 2048), position="none",
        **{**GPT_STYLE, "qkv_bias": False, "attn_out_bias": False, "mlp_bias": False}, norm_eps=1e-5,
        activation=d.activation("gelu", "activation_function"), tied_embeddings=False,
        embedding_scale=math.sqrt(hidden) if d.flag("scale_embedding", False) else None,
        dropout=d.dropout(0.1, "dropout", "attention_dropout", "activation_dropout"),
        extras={"token_extra_rows": codebooks},  # each codebook's table: vocab_size + 1 rows
    )
    if cross:  # MusicgenDecoderLayer.encoder_attn: Linear(h, h) x 4, bias-free, and its LayerNorm
        fields["seq2seq"] = dict(idle_cross_attention=True)
    return fields


def _moshi(c: HFConfig) -> dict:
    """MoshiForCausalLM (module docstring; MoshiConfig defaults)."""
    names = c.texts("architectures", None)
    if names and not names[0].endswith("ForCausalLM"):
        raise SpecError(f"{c.source}: architectures: '{names[0]}' not modelled (its depth decoder over audio "
                        f"codebooks and the Mimi codec); supported: MoshiForCausalLM, the temporal transformer")
    ffn = c.integer("ffn_dim", 22528)
    if ffn % 2:
        raise SpecError(f"{c.source}: {c.path}ffn_dim: {ffn} must be even (MoshiGatingMLP splits fc1's output "
                        f"into gate and up halves)")
    # MoshiConfig's sizes; ffn_dim / 2 read as llama()'s intermediate_size
    c = HFConfig(c.data, c.source, c.path, {**c.defaults, "num_hidden_layers": 32, "hidden_size": 4096,
                                            "num_attention_heads": 32, "vocab_size": 32000, "intermediate_size": ffn // 2})
    heads = c.size("num_attention_heads")
    return llama(c, kv_heads=c.integer("num_key_value_heads", heads, nullable=True) or heads,
                 head_dim=c.integer("head_dim", 128), max_positions=c.integer("max_position_embeddings", 3000),
                 norm_eps=c.number("rms_norm_eps", 1e-8),
                 tied_embeddings=False,  # MoshiForCausalLM declares no _tied_weights_keys (transformers 5.24)
                 extras={"token_extra_rows": 1})  # MoshiModel.embed_tokens: Embedding(vocab_size + 1, h)


AUDIO_LM_MAPPERS = {
    "moshi": _moshi,
    "musicgen": lambda c: _musicgen_decoder(c, True, "Musicgen"),
    "musicgen_decoder": lambda c: _musicgen_decoder(c, True, "Musicgen"),
    "musicgen_melody": lambda c: _musicgen_decoder(c, False, "MusicgenMelody"),
    "musicgen_melody_decoder": lambda c: _musicgen_decoder(c, False, "MusicgenMelody"),
}
