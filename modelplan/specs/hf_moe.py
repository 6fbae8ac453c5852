"""HF config mappers of the mixture-of-experts decoders: mixtral, qwen2_moe, qwen3_moe, phimoe,
olmoe, granitemoe, deepseek_v2, deepseek_v3 (MLA), gpt_oss, llama4_text."""

from __future__ import annotations

from typing import Any, Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import all_sliding, granite_scales, layer_types, llama, qwen_sliding


def moe_placement(layers: int, moe: list[int]) -> dict[str, Any]:
    """MoESpec placement fields for MoE blocks `moe`: a dense prefix, a period, or an explicit list."""
    if moe == list(range(moe[0] if moe else 0, layers)) and moe:
        return {"first_dense_layers": moe[0]}
    step = moe[0] + 1 if moe else 1
    if moe and moe == list(range(step - 1, layers, step)):
        return {"layer_freq": step}
    return {"layers": moe}


def _experts(c: HFConfig, experts_key: str, default_experts: int, top_k: int, ffn_key: str, **extra: Any) -> dict:
    """The routed-experts part of an MoESpec."""
    return dict(
        num_experts=c.integer(experts_key, default_experts),
        top_k=c.integer("num_experts_per_tok", top_k),
        expert_ffn_hidden=c.size(ffn_key),
        **extra,
    )


def _mixtral(c: HFConfig) -> dict:
    """Mixtral: Llama blocks whose MLP is num_local_experts SwiGLU experts behind a bias-free router."""
    moe = _experts(c, "num_local_experts", 8, 2, "intermediate_size")
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-5), moe=moe, **all_sliding(c, None))


def _qwen_moe_layers(c: HFConfig) -> dict:
    """Qwen-MoE: block i is MoE when (i + 1) % decoder_sparse_step == 0 and i is not in
    mlp_only_layers (Qwen2MoeDecoderLayer / Qwen3MoeDecoderLayer)."""
    layers = c.size("num_hidden_layers")
    step = c.integer("decoder_sparse_step", 1)
    if step < 1:
        raise SpecError(f"{c.source}: decoder_sparse_step: must be >= 1, got {step}")
    dense = set(c.ints("mlp_only_layers", None) or [])
    return moe_placement(layers, [i for i in range(layers) if i not in dense and (i + 1) % step == 0])


def _qwen2_moe(c: HFConfig) -> dict:
    """Qwen2-MoE: routed experts + one sigmoid-gated shared expert, q/k/v biases."""
    moe = None
    if c.integer("num_experts", 60) > 0:
        moe = _experts(
            c, "num_experts", 60, 4, "moe_intermediate_size",
            shared_experts=1, shared_expert_ffn_hidden=c.integer("shared_expert_intermediate_size", 5632),
            shared_expert_gate=True, norm_topk_prob=c.flag("norm_topk_prob", False), **_qwen_moe_layers(c),
        )
    return llama(c, qkv_bias=c.flag("qkv_bias", True), attn_out_bias=False, moe=moe, **qwen_sliding(c))


def _qwen3_moe(c: HFConfig) -> dict:
    """Qwen3-MoE: Qwen3 attention (q/k norms, no biases) with fine-grained routed experts."""
    moe = None
    if c.integer("num_experts", 128) > 0:
        moe = _experts(c, "num_experts", 128, 8, "moe_intermediate_size",
                       norm_topk_prob=c.flag("norm_topk_prob", False), **_qwen_moe_layers(c))
    return llama(c, head_dim=c.integer("head_dim", None), qk_norm=True, moe=moe, **qwen_sliding(c))


def _phimoe(c: HFConfig) -> dict:
    """Phi-3.5-MoE: LayerNorms with bias, attention_bias, sparsemixer router, lm_head_bias."""
    moe = _experts(c, "num_local_experts", 16, 2, "intermediate_size", router="sparsemixer")
    return llama(c, norm="layernorm", norm_bias=True, norm_eps=c.number("rms_norm_eps", 1e-5),
                 lm_head_bias=c.flag("lm_head_bias", False), moe=moe, **all_sliding(c, None))


def _olmoe(c: HFConfig) -> dict:
    """OLMoE: Llama blocks with RMSNorm q_norm / k_norm over the whole projection, 64 experts."""
    moe = _experts(c, "num_experts", 64, 8, "intermediate_size", norm_topk_prob=c.flag("norm_topk_prob", False))
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-5), qk_norm=True, qk_norm_scope="all_heads",
                 qkv_clip=c.number("clip_qkv", None), mlp_bias=False, moe=moe)


def _granitemoe(c: HFConfig) -> dict:
    """Granite-MoE: Granite attention and multipliers, every block top-k-softmax routed experts."""
    moe = _experts(c, "num_local_experts", 8, 2, "intermediate_size", router="topk_softmax")
    return llama(c, mlp_bias=False, moe=moe, **granite_scales(c))


def _deepseek(c: HFConfig, v3: bool) -> dict:
    """DeepSeek-V2/V3: MLA attention, dense first_k_dense_replace blocks, then routed + shared
    experts (HF: block i is MoE iff i >= first_k_dense_replace); V3 scores with a sigmoid and an
    aux-free correction bias (a buffer) and declares num_nextn_predict_layers MTP modules, which
    DeepseekV3ForCausalLM does not build (`mtp_not_built`: reported apart, not counted)."""
    freq = c.integer("moe_layer_freq", 1)
    if freq != 1:
        raise SpecError(f"{c.source}: moe_layer_freq: {freq} is not supported (transformers' "
                        "DeepSeek modules ignore it; every block from first_k_dense_replace on is MoE)")
    mla = dict(
        kv_lora_rank=c.integer("kv_lora_rank", 512),
        q_lora_rank=c.integer("q_lora_rank", 1536, nullable=True),
        qk_nope_head_dim=c.integer("qk_nope_head_dim", 128),
        qk_rope_head_dim=c.integer("qk_rope_head_dim", 64),
        v_head_dim=c.integer("v_head_dim", 128),
    )
    first = c.integer("first_k_dense_replace", 3 if v3 else 0)
    scoring = c.text("scoring_func", "sigmoid" if v3 else "softmax")
    if scoring not in ("softmax", "sigmoid"):
        raise SpecError(f"{c.source}: scoring_func: unsupported '{scoring}' (softmax, sigmoid)")
    # DeepseekV2/V3MLP(intermediate_size = moe_intermediate_size * n_shared_experts): the shared
    # experts are one MLP of the summed width (one down_proj bias with mlp_bias)
    shared = c.integer("n_shared_experts", 1 if v3 else 2) or 0
    method = c.text("topk_method", "noaux_tc" if v3 else "greedy")
    groups = c.integer("n_group", 8 if v3 else 1) if method in ("group_limited_greedy", "noaux_tc") else 1
    moe = _experts(
        c, "n_routed_experts", 256 if v3 else 64, 8, "moe_intermediate_size",
        router_groups=groups, router_group_top_k=c.integer("topk_group", 4 if v3 else 1) if groups > 1 else 1,
        shared_experts=1 if shared else 0, first_dense_layers=first,
        shared_expert_ffn_hidden=shared * c.size("moe_intermediate_size") if shared else None, router=scoring, expert_bias=False,
        norm_topk_prob=c.flag("norm_topk_prob", v3),
        router_score_correction=method == "noaux_tc",
        routed_scaling=c.number("routed_scaling_factor", 2.5 if v3 else 1.0),
    )
    return llama(c, kv_heads=None, head_dim=None, mla=mla, moe=moe,
                 mtp_not_built=c.integer("num_nextn_predict_layers", 1 if v3 else 0, "num_mtp_layers"))


def _gpt_oss(c: HFConfig) -> dict:
    """gpt-oss: biases on q/k/v/o, sinks, alternating sliding (128) / global blocks, experts with
    biases behind a biased router (top-k then softmax), clamped SwiGLU."""
    layers = c.size("num_hidden_layers")
    default = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(layers)]
    moe = _experts(c, "num_local_experts", 128, 4, "intermediate_size", router_bias=True, expert_bias=True,
                   router="topk_softmax")
    return llama(
        c, head_dim=c.integer("head_dim", 64), qkv_bias=c.flag("attention_bias", True),
        attn_out_bias=c.flag("attention_bias", True), norm_eps=c.number("rms_norm_eps", 1e-5),
        activation="swiglu_clamp", attention_sinks=True, moe=moe,
        sliding_window=c.integer("sliding_window", 128, nullable=True), layer_types=layer_types(c, layers, default),
    )


def _llama4_text(c: HFConfig) -> dict:
    """Llama 4 text: chunked attention on the rotary blocks (global NoPE every no_rope_layer_interval-th),
    weight-free L2 q/k norm, top-1 sigmoid-routed experts plus a shared expert on moe_layers, dense
    blocks of intermediate_size_mlp."""
    layers = c.size("num_hidden_layers")
    chunk = c.integer("attention_chunk_size", 8192, nullable=True)
    interval = c.integer("no_rope_layer_interval", 4)
    if interval < 1:
        raise SpecError(f"{c.source}: no_rope_layer_interval: must be >= 1, got {interval}")
    rope = c.ints("no_rope_layers", None) or [int((i + 1) % interval != 0) for i in range(layers)]
    default = ["chunked_attention" if uses and chunk is not None else "full_attention" for uses in rope]
    step = c.integer("interleave_moe_layer_step", 1)
    moe_layers = c.ints("moe_layers", None)
    if moe_layers is None:
        moe_layers = list(range(step - 1, layers, step)) if step >= 1 else []
    ffn = c.size("intermediate_size")
    moe = _experts(c, "num_local_experts", 16, 1, "intermediate_size", shared_experts=1,
                   shared_expert_ffn_hidden=ffn, router="sigmoid", norm_topk_prob=False, weights_on_input=True,
                   **moe_placement(layers, moe_layers))
    return llama(
        c, head_dim=c.integer("head_dim", 128), ffn_hidden=c.integer("intermediate_size_mlp", 16384),
        norm_eps=c.number("rms_norm_eps", 1e-5), qk_norm=c.flag("use_qk_norm", True), qk_norm_weight="none",
        attention_chunk=chunk, layer_types=layer_types(c, layers, default), moe=moe,
        nope_full_attention=chunk is not None and any(not uses for uses in rope),
    )


MOE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "mixtral": _mixtral, "qwen2_moe": _qwen2_moe, "qwen3_moe": _qwen3_moe, "phimoe": _phimoe,
    "olmoe": _olmoe, "granitemoe": _granitemoe, "deepseek_v2": lambda c: _deepseek(c, False),
    "deepseek_v3": lambda c: _deepseek(c, True), "gpt_oss": _gpt_oss, "llama4_text": _llama4_text,
}
