"""HF config mappers of further LayerNorm-family decoders (GPT-2 / GPT-J style blocks, biased
LayerNorms): stablelm, gptj, codegen, gpt_neo, mpt, nemotron, jais2, persimmon. Each states where
its HF module (transformers 5.24) differs from GPT-2 or Llama."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import GPT_STYLE, rotary_fraction
from modelplan.specs.hf_llama import compact_types, llama


def _stablelm(c: HFConfig) -> dict:
    """StableLM (StableLmForCausalLM): LayerNorms with bias, a quarter of each head rotated,
    q/k/v bias use_qkv_bias, optional parallel residual (one norm then)."""
    if c.flag("qk_layernorm", False):
        raise SpecError(f"{c.source}: qk_layernorm: true is not supported (StableLM's per-head bias-free "
                        "q/k LayerNorms beside biased block norms are not modelled)")
    parallel = c.flag("use_parallel_residual", False)
    return llama(c, norm="layernorm", norm_bias=True, norm_eps=c.number("layer_norm_eps", 1e-5),
                 qkv_bias=c.flag("use_qkv_bias", False), attn_out_bias=False,
                 rotary_fraction=rotary_fraction(c, 0.25), parallel_block=parallel,
                 dropout=c.dropout(0.0, "hidden_dropout", "attention_dropout"))


def _gptj(c: HFConfig) -> dict:
    """GPT-J: parallel block with one LayerNorm, bias-free q/k/v/out, fc_in/fc_out with biases,
    rotary on rotary_dim of each head, untied head with a bias."""
    hidden, heads = c.size("n_embd", "hidden_size"), c.size("n_head", "num_attention_heads")
    rotary = c.integer("rotary_dim", 64, nullable=True)
    head_dim = hidden // heads
    return dict(
        layers=c.size("n_layer", "num_hidden_layers"), hidden=hidden, heads=heads,
        ffn_hidden=c.integer("n_inner", None) or 4 * hidden, vocab=c.size("vocab_size"),
        max_positions=c.integer("n_positions", 2048, "max_position_embeddings"), position="rotary",
        rotary_fraction=min(rotary, head_dim) / head_dim if rotary else 1.0,
        **{**GPT_STYLE, "qkv_bias": False, "attn_out_bias": False},
        norm_eps=c.number("layer_norm_epsilon", 1e-5),
        activation=c.activation("gelu_new", "activation_function"),
        tied_embeddings=c.flag("tie_word_embeddings", False), lm_head_bias=True, parallel_block=True,
        dropout=c.dropout(0.0, "resid_pdrop", "embd_pdrop", "attn_pdrop"),
    )


def _gpt_neo(c: HFConfig) -> dict:
    """GPT-Neo: GPT-2 blocks with bias-free q/k/v (out_proj biased), learned positions, local
    (window_size) and global attention alternating per attention_types, tied."""
    hidden = c.size("hidden_size")
    layers = c.size("num_layers", "num_hidden_layers")
    spec = c.data.get("attention_types", [[["global", "local"], layers // 2]])
    kinds: list[str] = []
    try:
        for pattern, repeat in spec:
            kinds += list(pattern) * int(repeat)
    except (TypeError, ValueError):
        raise SpecError(f"{c.source}: attention_types: expected [[[kinds...], repeat], ...], got {spec!r}") from None
    if len(kinds) != layers or set(kinds) - {"global", "local"}:
        raise SpecError(f"{c.source}: attention_types: {len(kinds)} blocks of {sorted(set(kinds))} "
                        f"for num_layers {layers} (global, local)")
    types = ["sliding_attention" if k == "local" else "full_attention" for k in kinds]
    return dict(
        layers=layers, hidden=hidden, heads=c.size("num_heads", "num_attention_heads"),
        ffn_hidden=c.integer("intermediate_size", None) or 4 * hidden, vocab=c.size("vocab_size"),
        max_positions=c.integer("max_position_embeddings", 2048), position="learned",
        **{**GPT_STYLE, "qkv_bias": False}, norm_eps=c.number("layer_norm_epsilon", 1e-5),
        activation=c.activation("gelu_new", "activation_function"),
        tied_embeddings=c.flag("tie_word_embeddings", True),
        sliding_window=c.integer("window_size", 256) if "local" in kinds else None,
        layer_types=compact_types(types),
        dropout=c.dropout(0.0, "resid_dropout", "embed_dropout", "attention_dropout"),
    )


def _mpt(c: HFConfig) -> dict:
    """MPT: ALiBi, fused bias-free Wqkv, bias-free LayerNorms (no_bias), 4h MLP (HF MptMLP
    ignores expansion_ratio), tied."""
    attn = c.sub("attn_config") or HFConfig({}, c.source, "attn_config.")
    if not c.flag("no_bias", True):
        raise SpecError(f"{c.source}: no_bias: false is not supported (HF MptModel builds bias-free layers)")
    if not attn.flag("alibi", True):
        raise SpecError(f"{c.source}: attn_config.alibi: false is not supported (HF MPT has no other position encoding)")
    if attn.flag("qk_ln", False):
        raise SpecError(f"{c.source}: attn_config.qk_ln: true is not supported (HF MptAttention has no q/k norm)")
    hidden = c.size("d_model", "hidden_size")
    return dict(
        layers=c.size("n_layers", "num_hidden_layers"), hidden=hidden,
        heads=c.size("n_heads", "num_attention_heads"), ffn_hidden=4 * hidden, vocab=c.size("vocab_size"),
        max_positions=c.integer("max_seq_len", 2048), position="alibi", norm="layernorm", norm_bias=False,
        qkv_bias=False, attn_out_bias=False, mlp_bias=False, gated_mlp=False, activation="gelu",
        norm_eps=c.number("layer_norm_epsilon", 1e-5), tied_embeddings=c.flag("tie_word_embeddings", True),
        qkv_clip=attn.number("clip_qkv", None), dropout=c.dropout(0.0, "resid_pdrop", "emb_pdrop"),
    )


def _nemotron(c: HFConfig) -> dict:
    """Nemotron(-4, Minitron): LayerNorm1P with bias, plain up/down MLP with squared ReLU
    (mapped to relu: it changes no count), half of each head rotated, untied."""
    return llama(c, norm="layernorm", norm_bias=True, norm_eps=c.number("norm_eps", 1e-5), gated_mlp=False,
                 activation=c.activation("relu2", "hidden_act"), rotary_fraction=rotary_fraction(c, 0.5))


def _jais2(c: HFConfig) -> dict:
    """Jais 2: LayerNorms with bias, biases on q/k/v/o (attention_bias) and on the plain up/down
    MLP (mlp_bias) with squared ReLU (mapped to relu), head_dim 128."""
    bias = c.flag("attention_bias", True)
    return llama(c, head_dim=c.integer("head_dim", 128), norm="layernorm", norm_bias=True,
                 norm_eps=c.number("layer_norm_eps", 1e-5), qkv_bias=bias, attn_out_bias=bias,
                 mlp_bias=c.flag("mlp_bias", True), gated_mlp=False, activation=c.activation("relu2", "hidden_act"))


def _persimmon(c: HFConfig) -> dict:
    """Persimmon / Fuyu text: LayerNorms with bias, fused q/k/v and dense with biases, bias-ful
    LayerNorm q/k norms over head_dim (qk_layernorm), plain MLP with squared ReLU (as relu), half
    of each head rotated, untied."""
    # PersimmonAttention: query_key_value = Linear(h, 3h): every head has its own k and v
    return llama(c, kv_heads=None, norm="layernorm", norm_bias=True, norm_eps=c.number("layer_norm_eps", 1e-5), qkv_bias=True,
                 attn_out_bias=True, mlp_bias=True, gated_mlp=False, qk_norm=c.flag("qk_layernorm", True),
                 activation=c.activation("relu2", "hidden_act"), rotary_fraction=rotary_fraction(c, 0.5))


LAYERNORM_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "stablelm": _stablelm, "gptj": _gptj, "codegen": _gptj, "gpt_neo": _gpt_neo, "mpt": _mpt,
    "nemotron": _nemotron, "jais2": _jais2, "persimmon": _persimmon,
}
