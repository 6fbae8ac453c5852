"""HF config mappers of the Llama-style dense decoders (RMSNorm or LayerNorm, rotary, gated or
plain MLP): llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, phi3, olmo, olmo2,
starcoder2, granite, cohere, glm4. Each states where its HF module differs from Llama."""

from __future__ import annotations

from typing import Any, Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import rotary_fraction

_LAYER_TYPES = ("full_attention", "sliding_attention", "chunked_attention")


def compact_types(types: list[str]) -> list[str] | None:
    """The shortest cyclic pattern that repeats to `types` (None when every block is full)."""
    if all(t == "full_attention" for t in types):
        return None
    for period in range(1, len(types) + 1):
        if all(types[i] == types[i % period] for i in range(len(types))):
            return types[:period]
    return types


def layer_types(c: HFConfig, layers: int, default: list[str] | None) -> list[str] | None:
    """The config's explicit `layer_types` (checked), else the family's `default` pattern."""
    explicit = c.texts("layer_types", None)
    if explicit is None:
        return compact_types(default) if default is not None else None
    unknown = sorted(set(explicit) - set(_LAYER_TYPES))
    if unknown:
        raise SpecError(f"{c.source}: {c.path}layer_types: unsupported {unknown} "
                        f"(supported: {', '.join(_LAYER_TYPES)})")
    if len(explicit) != layers:
        raise SpecError(f"{c.source}: {c.path}layer_types: {len(explicit)} entries for "
                        f"num_hidden_layers {layers}")
    return compact_types(explicit)


def all_sliding(c: HFConfig, default: int | None) -> dict:
    """Mistral / Phi-3 / Starcoder2: sliding_window (when set) applies to every block."""
    window = c.integer("sliding_window", default, nullable=True)
    layers = c.size("num_hidden_layers")
    types = layer_types(c, layers, ["sliding_attention"] * layers if window else None)
    return {"sliding_window": window, "layer_types": types}


def qwen_sliding(c: HFConfig) -> dict:
    """Qwen2/Qwen3: with use_sliding_window, blocks from max_window_layers on slide."""
    window = c.integer("sliding_window", 4096, nullable=True) if c.flag("use_sliding_window", False) else None
    layers, first = c.size("num_hidden_layers"), c.integer("max_window_layers", 28)
    default = ["sliding_attention" if window is not None and i >= first else "full_attention"
               for i in range(layers)]
    return {"sliding_window": window, "layer_types": layer_types(c, layers, default)}


def llama(c: HFConfig, **extra: Any) -> dict:
    """Llama blocks (HF LlamaForCausalLM): RMSNorm, rotary, SwiGLU, q/k/v/o bias attention_bias."""
    bias = c.flag("attention_bias", False)
    spec = dict(
        layers=c.size("num_hidden_layers"),
        hidden=c.size("hidden_size"),
        heads=c.size("num_attention_heads"),
        kv_heads=c.integer("num_key_value_heads", c.defaults.get("num_key_value_heads")),
        head_dim=c.integer("head_dim", c.defaults.get("head_dim")),
        ffn_hidden=c.size("intermediate_size"),
        vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048),
        position="rotary",
        rotary_fraction=rotary_fraction(c),
        norm="rmsnorm",
        norm_eps=c.number("rms_norm_eps", 1e-6),
        qkv_bias=bias,
        attn_out_bias=bias,
        mlp_bias=c.flag("mlp_bias", False),
        gated_mlp=True,
        activation=c.activation("silu", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", False),
        dropout=c.dropout(0.0, "attention_dropout"),
    )
    spec.update(extra)
    return spec


def _mistral(c: HFConfig) -> dict:
    """Mistral: Llama blocks, sliding window (default 4096) on every block."""
    return llama(c, **all_sliding(c, 4096))


def _qwen2(c: HFConfig) -> dict:
    """Qwen2: Llama blocks with biases on q, k, v (not on o)."""
    return llama(c, qkv_bias=True, attn_out_bias=False, **qwen_sliding(c))


def _qwen3(c: HFConfig) -> dict:
    """Qwen3: Llama blocks with q_norm / k_norm (RMSNorm(head_dim), shared by heads), head_dim 128."""
    return llama(c, head_dim=c.integer("head_dim", 128), qk_norm=True, **qwen_sliding(c))


def _gemma_common(c: HFConfig, **extra: Any) -> dict:
    """Gemma: GeGLU, head_dim 256, tied, embeddings scaled by sqrt(hidden) (Gemma normalizer)."""
    hidden = c.size("hidden_size")
    return llama(
        c, head_dim=c.integer("head_dim", 256),
        activation=c.activation("gelu_pytorch_tanh", "hidden_activation", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", True), embedding_scale=hidden ** 0.5, **extra,
    )


def _gemma(c: HFConfig) -> dict:
    """Gemma 1: Llama blocks with the Gemma conventions."""
    return _gemma_common(c)


def _gemma2_attention(c: HFConfig, pattern: int, softcap: tuple[Any, Any]) -> dict:
    """Gemma 2/3: sandwich norms, query_pre_attn_scalar, softcaps, local/global pattern."""
    if c.flag("use_bidirectional_attention", False):
        raise SpecError(f"{c.source}: {c.path}use_bidirectional_attention: true is not supported")
    layers = c.size("num_hidden_layers")
    window = c.integer("sliding_window", 4096, nullable=True)
    if pattern < 1:
        raise SpecError(f"{c.source}: {c.path}sliding_window_pattern: must be >= 1, got {pattern}")
    # Gemma2/3Config: block i is sliding unless (i + 1) % pattern == 0
    default = ["sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(layers)]
    return dict(
        norm_placement="sandwich",  # input, post_attention, pre_feedforward, post_feedforward
        attention_scale=c.number("query_pre_attn_scalar", 256, positive=True) ** -0.5,
        attn_logit_softcap=c.number("attn_logit_softcapping", softcap[0], nullable=True),
        final_logit_softcap=c.number("final_logit_softcapping", softcap[1], nullable=True),
        sliding_window=window,
        layer_types=layer_types(c, layers, default),
    )


def _gemma2(c: HFConfig) -> dict:
    """Gemma 2: alternating sliding (4096) and global blocks, soft-capping 50 / 30."""
    return _gemma_common(c, max_positions=c.integer("max_position_embeddings", 8192),
                         **_gemma2_attention(c, 2, (50.0, 30.0)))


def _gemma3_text(c: HFConfig) -> dict:
    """Gemma 3 text: Gemma 2 blocks plus q/k norms, five sliding blocks per global one."""
    pattern = c.integer("sliding_window_pattern", 6)
    return _gemma_common(c, qk_norm=True,
                         max_positions=c.integer("max_position_embeddings", 131072),
                         **_gemma2_attention(c, pattern, (None, None)))


def _phi3(c: HFConfig) -> dict:
    """Phi-3 / Phi-4: fused qkv_proj and gate_up_proj, no biases, optional sliding window."""
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-5),
                 dropout=c.dropout(0.0, "resid_pdrop", "embd_pdrop", "attention_dropout"),
                 **all_sliding(c, None))


def _olmo(c: HFConfig) -> dict:
    """OLMo: LayerNorm without weight or bias (OlmoLayerNorm), optional clip_qkv, MLP bias-free."""
    return llama(c, norm="layernorm", norm_affine=False, norm_eps=1e-5, mlp_bias=False,
                 qkv_clip=c.number("clip_qkv", None))


def _olmo2(c: HFConfig) -> dict:
    """OLMo-2: norms after attention and MLP (x + norm(f(x))), RMSNorm q_norm / k_norm over the
    whole projection (q_width, kv_width), MLP bias-free."""
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-5), norm_placement="output", mlp_bias=False,
                 qk_norm=True, qk_norm_scope="all_heads")


def _starcoder2(c: HFConfig) -> dict:
    """Starcoder2: LayerNorm with bias, use_bias on every linear, plain MLP (c_fc, c_proj)."""
    bias = c.flag("use_bias", True)
    return llama(
        c, norm="layernorm", norm_bias=True, norm_eps=c.number("norm_epsilon", 1e-5),
        qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias, gated_mlp=False,
        activation=c.activation("gelu_pytorch_tanh", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        dropout=c.dropout(0.0, "residual_dropout", "embedding_dropout", "attention_dropout"),
        **all_sliding(c, None),
    )


def granite_scales(c: HFConfig) -> dict:
    """Granite's multipliers (no parameters): embeddings, residual branches, scores, logits."""
    embedding = c.number("embedding_multiplier", 1.0)
    return dict(
        embedding_scale=embedding if embedding != 1.0 else None,
        residual_scale=c.number("residual_multiplier", 1.0),
        attention_scale=c.number("attention_multiplier", 1.0),  # GraniteAttention.scaling
        logit_scale=1.0 / c.number("logits_scaling", 1.0, positive=True),  # logits / logits_scaling
    )


def _granite(c: HFConfig) -> dict:
    """Granite: Llama blocks with Granite's multipliers."""
    return llama(c, **granite_scales(c))


def _cohere(c: HFConfig) -> dict:
    """Cohere (Command-R): parallel block with one bias-free LayerNorm, tied, logit_scale, and
    optional q/k LayerNorms with one weight per head ((heads, head_dim))."""
    return llama(
        c, norm="layernorm", norm_bias=False, norm_eps=c.number("layer_norm_eps", 1e-5),
        parallel_block=True, tied_embeddings=c.flag("tie_word_embeddings", True),
        logit_scale=c.number("logit_scale", 0.0625),
        qk_norm=c.flag("use_qk_norm", False), qk_norm_weight="per_head",
    )


def _glm4(c: HFConfig) -> dict:
    """GLM-4: sandwich norms (post_self_attn and post_mlp layernorms), bias on q/k/v only, fused
    gate_up_proj, half the head dims rotated, head_dim 128."""
    return llama(
        c, head_dim=c.integer("head_dim", 128), qkv_bias=c.flag("attention_bias", True),
        attn_out_bias=False, norm_eps=c.number("rms_norm_eps", 1.5625e-07),
        norm_placement="sandwich", rotary_fraction=rotary_fraction(c, 0.5),
    )


LLAMA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "llama": llama, "mistral": _mistral, "qwen2": _qwen2, "qwen3": _qwen3, "gemma": _gemma,
    "gemma2": _gemma2, "gemma3_text": _gemma3_text, "phi3": _phi3, "olmo": _olmo, "olmo2": _olmo2,
    "starcoder2": _starcoder2, "granite": _granite, "cohere": _cohere, "glm4": _glm4,
}
