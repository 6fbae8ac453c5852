"""HF config mappers of further 2026 decoders whose blocks the spec already expresses
(transformers 5.24): hy_v3 (Hunyuan 3), cohere2_moe (Command A MoE), minimax_m3_vl_text (MiniMax-M3's
language model), nanochat (karpathy/nanochat) and olmo_hybrid (OLMo-Hybrid: gated DeltaNet with
OLMo-3 attention). Each states where its HF module differs from Llama."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_dense import pattern_types
from modelplan.specs.hf_hybrid import hybrid_types
from modelplan.specs.hf_llama import compact_types, llama
from modelplan.specs.hf_moe import moe_placement


def _hy_v3(c: HFConfig) -> dict:
    """Hunyuan 3 (HYV3ForCausalLM): Apertus attention (per-head q/k RMSNorms, head_dim 128), a dense
    SwiGLU on mlp_layer_types' dense blocks (default: block 0), elsewhere sigmoid-routed experts
    (HYV3TopKRouter: correction-bias buffer for selection, always renormalised, x
    router_scaling_factor) beside one shared SwiGLU of moe_intermediate_size x num_shared_experts."""
    layers = c.size("num_hidden_layers")
    sparse = c.mlp_sparse_layers(["dense"] * min(layers, 1) + ["sparse"] * (layers - 1))
    moe = None
    if sparse:
        width, shared = c.size("moe_intermediate_size"), c.integer("num_shared_experts", 1) or 0
        moe = dict(num_experts=c.integer("num_experts", 192, "num_local_experts"),
                   top_k=c.integer("num_experts_per_tok", 8), expert_ffn_hidden=width, router="sigmoid",
                   router_score_correction=True, norm_topk_prob=True, expert_bias=False,
                   routed_scaling=c.number("router_scaling_factor", 2.826, positive=True),
                   shared_experts=1 if shared else 0, shared_expert_ffn_hidden=shared * width if shared else None,
                   **moe_placement(layers, sparse))
    return llama(c, head_dim=c.integer("head_dim", 128), qk_norm=True, norm_eps=c.number("rms_norm_eps", 1e-5),
                 max_positions=c.integer("max_position_embeddings", 131072), moe=moe)


def _cohere2_moe(c: HFConfig) -> dict:
    """Cohere2-MoE (Cohere2MoeForCausalLM): Cohere2's parallel block (one norm, attention and MLP
    summed; an RMSNorm when rms_norm_eps is set, else a bias-free LayerNorm), three sliding (4096)
    blocks per global one after a first_k_dense_replace prefix, NoPE global blocks, a dense SwiGLU
    of prefix_dense_intermediate_size on dense blocks, else experts of intermediate_size behind a
    top-k router (softmax over the top-k logits, or their sigmoid renormalised) and
    num_shared_experts x intermediate_size shared. The 'average' combination halves routed +
    shared (a scale the spec does not hold): refused with shared experts; the prefix's full blocks
    keep RoPE (force_rope) and are priced as the other NoPE global blocks (no count changes)."""
    layers = c.size("num_hidden_layers")
    first = c.integer("first_k_dense_replace", 0)
    if c.texts("layer_types", None) is None and c.integer("sliding_window", 4096, nullable=True) is not None:
        prefix, period = c.integer("prefix_dense_sliding_window_pattern", 1), c.integer("sliding_window_pattern", 4)
        if prefix < 1 or period < 1:
            raise SpecError(f"{c.source}: sliding_window_pattern / prefix_dense_sliding_window_pattern: must be >= 1")
        types = (["sliding_attention" if (i + 1) % prefix else "full_attention" for i in range(min(first, layers))]
                 + ["sliding_attention" if (i + 1) % period else "full_attention" for i in range(layers - first)])
        attention = {"sliding_window": c.integer("sliding_window", 4096, nullable=True),
                     "layer_types": compact_types(types)}
    else:
        attention = pattern_types(c, c.integer("sliding_window_pattern", 4), 4096)
    sparse = c.mlp_sparse_layers(["dense" if i < first else "sparse" for i in range(layers)])
    shared = c.integer("num_shared_experts", 0) or 0
    if shared and c.text("shared_expert_combination_strategy", "average") != "sum":
        raise SpecError(f"{c.source}: shared_expert_combination_strategy: 'average' ((routed + shared) / 2) is not "
                        f"modelled for cohere2_moe (only 'sum')")
    selection = c.text("expert_selection_fn", "softmax")
    if selection not in ("softmax", "sigmoid"):
        raise SpecError(f"{c.source}: expert_selection_fn: unsupported '{selection}' (softmax, sigmoid)")
    width = c.size("intermediate_size")
    moe = None
    if sparse:
        moe = dict(num_experts=c.integer("num_experts", 8), top_k=c.integer("num_experts_per_tok", 2),
                   expert_ffn_hidden=width, router="topk_softmax" if selection == "softmax" else "sigmoid",
                   norm_topk_prob=c.flag("norm_topk_prob", True) if selection == "sigmoid" else True,
                   shared_experts=1 if shared else 0, shared_expert_ffn_hidden=shared * width if shared else None,
                   **moe_placement(layers, sparse))
    rms = c.number("rms_norm_eps", None, positive=True)
    types = attention["layer_types"] or []
    return llama(c, norm="rmsnorm" if rms is not None else "layernorm", norm_bias=False,
                 norm_eps=rms if rms is not None else c.number("layer_norm_eps", 1e-5), parallel_block=True,
                 tied_embeddings=c.flag("tie_word_embeddings", True), logit_scale=c.number("logit_scale", 0.0625),
                 head_dim=c.integer("head_dim", 128), max_positions=c.integer("max_position_embeddings", 8192),
                 ffn_hidden=c.integer("prefix_dense_intermediate_size", None) or width, moe=moe,
                 nope_full_attention="sliding_attention" in types and "full_attention" in types, **attention)


def _minimax_m3_text(c: HFConfig) -> dict:
    """MiniMax-M3 text model (MiniMaxM3VLForCausalLM): per-head q/k RMSNorms (Gemma's, same count),
    rotary on rotary_dim of each head, gpt-oss's clamped SwiGLU (alpha 1.702, limit 7) in every MLP,
    a dense MLP of dense_intermediate_size on mlp_layer_types' dense blocks, else sigmoid experts
    (correction-bias buffer, renormalised, x routed_scaling_factor) beside one shared MLP of
    shared_intermediate_size. Its block-sparse attention (layer_types minimax_m3_sparse, a
    lightning indexer over key blocks) is not modelled: refused."""
    layers, head_dim = c.size("num_hidden_layers"), c.divisor("head_dim", 128)
    types = c.texts("layer_types", None) or ["full_attention"] * layers
    sparse_cfg = c.sub("sparse_attention_config")
    if c.texts("layer_types", None) is None and sparse_cfg is not None and sparse_cfg.has("sparse_attention_freq"):
        types = ["minimax_m3_sparse" if f else "full_attention" for f in sparse_cfg.ints("sparse_attention_freq")]
    if set(types) - {"full_attention"}:
        raise SpecError(f"{c.source}: layer_types: {sorted(set(types) - {'full_attention'})} blocks (block-sparse "
                        f"attention with a lightning indexer) are not modelled for minimax_m3_vl_text")
    if (c.number("swiglu_alpha", 1.702), c.number("swiglu_limit", 7.0)) != (1.702, 7.0):
        raise SpecError(f"{c.source}: swiglu_alpha / swiglu_limit: only gpt-oss's 1.702 / 7.0 are modelled")
    freq = c.ints("moe_layer_freq", None) if isinstance(c.data.get("moe_layer_freq"), list) else None
    default = ["sparse" if f else "dense" for f in freq] if freq is not None else ["sparse"] * layers
    sparse = c.mlp_sparse_layers(default)
    moe = None
    if sparse:
        moe = dict(num_experts=c.integer("num_local_experts", 128), top_k=c.integer("num_experts_per_tok", 4),
                   expert_ffn_hidden=c.size("intermediate_size"), router="sigmoid", router_score_correction=True,
                   norm_topk_prob=True, expert_bias=False,
                   routed_scaling=c.number("routed_scaling_factor", 2.0, positive=True),
                   shared_experts=1, shared_expert_ffn_hidden=c.integer("shared_intermediate_size", 3072),
                   **moe_placement(layers, sparse))
    return llama(c, head_dim=head_dim, qk_norm=True, activation="swiglu_clamp",
                 rotary_fraction=c.integer("rotary_dim", 64) / head_dim, kv_heads=c.integer("num_key_value_heads", 4),
                 ffn_hidden=c.integer("dense_intermediate_size", 12288), moe=moe,
                 max_positions=c.integer("max_position_embeddings", 524288))


def _nanochat(c: HFConfig) -> dict:
    """nanochat (NanoChatForCausalLM): weight-free RMSNorms everywhere (Llama4TextL2Norm), also on
    the embeddings before the blocks and on q and k per head, a plain bias-free fc1 / fc2 MLP with
    squared ReLU (mapped to relu), untied head with Gemma 2's final logit soft-cap (15)."""
    return llama(c, norm_affine=False, embedding_norm=True, qk_norm=True, qk_norm_weight="none", gated_mlp=False,
                 activation=c.activation("relu2", "hidden_act"), mlp_bias=False,
                 final_logit_softcap=c.number("final_logit_softcapping", 15.0, nullable=True, positive=True))


def _olmo_hybrid(c: HFConfig) -> dict:
    """OLMo-Hybrid (OlmoHybridForCausalLM): gated DeltaNet blocks (q/k/v/g/a/b projections,
    bias-free conv over q, k, v, A_log and dt_bias per value head, gated RMSNorm over a value
    head: Qwen3-Next's mixer in separate projections, the same count) with pre-norms, and OLMo-3
    attention blocks (whole-projection q/k RMSNorms, norms after attention and MLP) every 4th
    block (block 3, 7, ...; the last if none). Both block kinds hold two hidden-size norms; the
    spec places them once for all blocks, as OLMo-3's output norms (no count changes)."""
    layers, heads, hidden = c.divisor("num_hidden_layers"), c.size("num_attention_heads"), c.size("hidden_size")
    default = ["full_attention" if i % 4 == 3 else "linear_attention" for i in range(layers)]
    if "full_attention" not in default:
        default[-1] = "full_attention"
    types = hybrid_types(c, "gated_deltanet", default)
    key_heads = c.integer("linear_num_key_heads", None) or heads
    key_dim = c.integer("linear_key_head_dim", None) or int(0.75 * hidden / key_heads)
    fields = llama(c, norm_placement="output", qk_norm=True, qk_norm_scope="all_heads", layer_types=types,
                   max_positions=c.integer("max_position_embeddings", 65536))
    if types is not None and "gated_deltanet" in types:
        fields["deltanet"] = dict(key_heads=key_heads, value_heads=c.integer("linear_num_value_heads", None) or heads,
                                  key_head_dim=key_dim, value_head_dim=c.integer("linear_value_head_dim", None) or 2 * key_dim,
                                  conv_kernel=c.integer("linear_conv_kernel_dim", 4))
    return fields


N17NEW_MORE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "hy_v3": _hy_v3, "cohere2_moe": _cohere2_moe, "minimax_m3_vl_text": _minimax_m3_text, "nanochat": _nanochat,
    "olmo_hybrid": _olmo_hybrid,
}
