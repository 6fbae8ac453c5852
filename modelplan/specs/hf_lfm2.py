"""HF config mappers of Liquid AI's LFM2 decoders (lfm2, lfm2_moe; transformers 5.24
modeling_lfm2.py / modeling_lfm2_moe.py): gated short-convolution blocks (`Lfm2ShortConv`) and
GQA attention blocks with q/k RMSNorms over head_dim, each block with an operator norm, a SwiGLU
(w1, w3, w2) or, for lfm2_moe past num_dense_layers, sigmoid-routed experts, and a ffn norm;
a final `embedding_norm`; no biases outside the conv mixer."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import compact_types, llama

_TYPES = {"conv": "short_conv", "full_attention": "full_attention"}


def _types(c: HFConfig, default: list[str] | None) -> list[str] | None:
    """Lfm2Config: layer_types (conv / full_attention), else full_attn_idxs (the rest conv),
    else every block attention; lfm2_moe has no fallback (its module indexes layer_types)."""
    layers = c.size("num_hidden_layers")
    names = c.texts("layer_types", None)
    if names is None and c.has("full_attn_idxs"):
        full = set(c.ints("full_attn_idxs"))
        names = ["full_attention" if i in full else "conv" for i in range(layers)]
    if names is None:
        if default is None:
            raise SpecError(f"{c.source}: layer_types: missing (Lfm2MoeConfig has no default pattern: "
                            f"transformers 5.24 cannot build Lfm2MoeForCausalLM without it either)")
        names = default
    c.check_names("layer_types", names, _TYPES, layers, "conv, full_attention")
    return compact_types([_TYPES[t] for t in names])


def _lfm2_ffn(c: HFConfig) -> int:
    """Lfm2MLP's width: block_ff_dim (it overrides intermediate_size, Lfm2Config.__post_init__),
    2/3 of it when block_auto_adjust_ff_dim, then x block_ffn_dim_multiplier rounded up to
    block_multiple_of when the multiplier is set."""
    ffn = c.integer("block_ff_dim", None) or c.size("intermediate_size")
    if c.flag("block_auto_adjust_ff_dim", True):
        ffn = int(2 * ffn / 3)
        multiplier = c.number("block_ffn_dim_multiplier", 1.0, nullable=True)
        if multiplier is not None:
            step = c.integer("block_multiple_of", 256)
            if step < 1:
                raise SpecError(f"{c.source}: block_multiple_of: must be >= 1, got {step}")
            ffn = step * -(-int(multiplier * ffn) // step)
    return ffn


def _rope_theta(c: HFConfig) -> float:
    nested = c.sub("rope_parameters")
    if nested is not None and nested.has("rope_theta"):
        return nested.number("rope_theta")
    return c.number("rope_theta", 1000000.0)  # Lfm2Config / Lfm2MoeConfig default_theta


def _common(c: HFConfig, types: list[str] | None, **extra) -> dict:
    hidden, heads = c.size("hidden_size"), c.size("num_attention_heads")
    fields = llama(c, head_dim=c.integer("head_dim", hidden // heads), qk_norm=True, norm_eps=c.number("norm_eps", 1e-5),
                   kv_heads=c.integer("num_key_value_heads", 8), max_positions=c.integer("max_position_embeddings", 128000),
                   tied_embeddings=c.flag("tie_embedding", True, "tie_word_embeddings"), layer_types=types,
                   rope_theta=_rope_theta(c), **extra)
    if types is not None and "short_conv" in types:
        fields["short_conv"] = dict(conv_kernel=c.integer("conv_L_cache", 3), bias=c.flag("conv_bias", False))
    return fields


def _lfm2(c: HFConfig) -> dict:
    """LFM2 (Lfm2ForCausalLM)."""
    return _common(c, _types(c, ["full_attention"] * c.size("num_hidden_layers")), ffn_hidden=_lfm2_ffn(c))


def _lfm2_moe(c: HFConfig) -> dict:
    """LFM2-MoE (Lfm2MoeForCausalLM): a dense Lfm2MoeMLP(intermediate_size) in the first
    num_dense_layers blocks, then Lfm2MoeSparseMoeBlock: a bias-free router, sigmoid scores, top-k
    chosen with the expert_bias buffer added (no parameter) when use_expert_bias, renormalised
    when norm_topk_prob, x routed_scaling_factor; fused bias-free SwiGLU experts."""
    layers, dense = c.size("num_hidden_layers"), c.integer("num_dense_layers", 2)
    moe = None
    if dense < layers:
        moe = dict(num_experts=c.integer("num_experts", 32), top_k=c.integer("num_experts_per_tok", 4),
                   expert_ffn_hidden=c.size("moe_intermediate_size"), router="sigmoid",
                   router_score_correction=c.flag("use_expert_bias", True), norm_topk_prob=c.flag("norm_topk_prob", True),
                   routed_scaling=c.number("routed_scaling_factor", 1.0, positive=True), expert_bias=False,
                   first_dense_layers=dense)
    return _common(c, _types(c, None), ffn_hidden=c.size("intermediate_size"), moe=moe)


LFM2_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"lfm2": _lfm2, "lfm2_moe": _lfm2_moe}
