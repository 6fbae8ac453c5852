"""HF config mappers of further mixture-of-experts decoders: glm4_moe (GLM-4.5 / 4.6), dbrx,
ernie4_5_moe, hunyuan_v1_moe, dots1, minimax_m2, solar_open, flex_olmo, exaone_moe, glm4_moe_lite
(GLM-4.7-Flash), granitemoeshared, granitemoe_swa, mellum, sarvam_moe (built as GLM-4.5 by transformers). Each states
where its HF module (transformers 5.24) differs from Llama / DeepSeek-V3."""

from __future__ import annotations

from typing import Any, Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_dense import exaone_sliding
from modelplan.specs.hf_gpt import rotary_fraction
from modelplan.specs.hf_llama import granite_scales, layer_types, llama, qwen_sliding
from modelplan.specs.hf_moe import MOE_MAPPERS, moe_placement


def _head_dim(c: HFConfig) -> int:
    """head_dim, else hidden // heads (HF getattr(config, "head_dim", hidden // heads): GLM-4.5's
    96 heads of a 4096 width)."""
    return c.integer("head_dim", c.size("hidden_size") // c.divisor("num_attention_heads"))


def _sigmoid_experts(c: HFConfig, experts: int, top_k: int, first_dense: int, shared: int,
                     norm_topk: bool = True, **extra: Any) -> dict:
    """DeepSeek-V3 style routed experts (sigmoid scores, e_score_correction_bias buffer, groups),
    shared experts as one MLP of n_shared_experts x moe_intermediate_size (HF *MoE.shared_experts)."""
    groups = c.integer("n_group", 1)
    width = c.size("moe_intermediate_size")
    return dict(
        num_experts=c.integer("n_routed_experts", experts), top_k=c.integer("num_experts_per_tok", top_k),
        expert_ffn_hidden=width, router="sigmoid", router_score_correction=True, expert_bias=False,
        router_groups=groups, router_group_top_k=c.integer("topk_group", 1) if groups > 1 else 1,
        shared_experts=1 if shared else 0, shared_expert_ffn_hidden=shared * width if shared else None,
        first_dense_layers=c.integer("first_k_dense_replace", first_dense),
        norm_topk_prob=c.flag("norm_topk_prob", norm_topk), routed_scaling=c.number("routed_scaling_factor", 1.0),
        **extra,
    )


def _glm4_moe(c: HFConfig) -> dict:
    """GLM-4.5 / 4.6 (Glm4MoeForCausalLM): q/k/v bias attention_bias, optional per-head q/k
    RMSNorms, half of each head rotated, first_k_dense_replace dense blocks then sigmoid-routed
    experts + shared experts. num_nextn_predict_layers MTP blocks are not built by transformers
    (their weights are dropped on load), so none are counted."""
    moe = _sigmoid_experts(c, 128, 8, 1, c.integer("n_shared_experts", 1) or 0)
    return llama(c, head_dim=_head_dim(c), qkv_bias=c.flag("attention_bias", False), attn_out_bias=False,
                 norm_eps=c.number("rms_norm_eps", 1e-5), qk_norm=c.flag("use_qk_norm", False),
                 rotary_fraction=rotary_fraction(c, 0.5), moe=moe)


def _dbrx(c: HFConfig) -> dict:
    """DBRX: fused bias-free Wqkv with clip_qkv, bias-free LayerNorms, every block
    ffn_config.moe_num_experts GLU experts (w1, v1, w2) behind a bias-free softmax router."""
    attn = c.sub("attn_config") or HFConfig({}, c.source, "attn_config.")
    ffn = c.sub("ffn_config") or HFConfig({}, c.source, "ffn_config.")
    act = ffn.sub("ffn_act_fn")
    if act is not None and act.text("name", "silu") != "silu":
        raise SpecError(f"{c.source}: ffn_config.ffn_act_fn.name: only silu is supported")
    moe = dict(num_experts=ffn.integer("moe_num_experts", 4), top_k=ffn.integer("moe_top_k", 1),
               expert_ffn_hidden=ffn.integer("ffn_hidden_size", 3584),
               norm_topk_prob=True)  # moe_normalize_expert_weights: a p-norm of the top-k weights
    return dict(
        layers=c.size("n_layers", "num_hidden_layers"), hidden=c.size("d_model", "hidden_size"),
        heads=c.size("n_heads", "num_attention_heads"), kv_heads=attn.integer("kv_n_heads", 1),
        vocab=c.size("vocab_size"), max_positions=c.integer("max_seq_len", 2048), position="rotary",
        rope_theta=attn.number("rope_theta", 10000.0), norm="layernorm", norm_bias=False,
        qkv_bias=False, attn_out_bias=False, mlp_bias=False, gated_mlp=True, activation="silu",
        qkv_clip=attn.number("clip_qkv", None), tied_embeddings=c.flag("tie_word_embeddings", False),
        moe=moe, dropout=c.dropout(0.0, "resid_pdrop", "emb_pdrop"),
    )


def _ernie4_5_moe(c: HFConfig) -> dict:
    """ERNIE 4.5 MoE: use_bias on q/k/v/o, MoE blocks from moe_layer_start_index to
    moe_layer_end_index every moe_layer_interval (HF Ernie4_5_MoeDecoderLayer), softmax router
    whose selection bias moe_statics.e_score_correction_bias is a parameter (num_experts per
    block: counted as a router bias), lm_head bias use_bias, shared experts of moe_num_shared_experts x
    moe_intermediate_size, tied."""
    layers = c.size("num_hidden_layers")
    start, end = c.integer("moe_layer_start_index", 1), c.integer("moe_layer_end_index", layers - 1)
    interval = c.integer("moe_layer_interval", 1)
    if interval < 1:
        raise SpecError(f"{c.source}: moe_layer_interval: must be >= 1, got {interval}")
    shared = c.integer("moe_num_shared_experts", 0) or 0
    width = c.size("moe_intermediate_size")
    moe_layers = [i for i in range(layers) if (i + 1) % interval == 0 and start <= i <= end]
    moe = None
    if moe_layers:
        moe = dict(num_experts=c.integer("moe_num_experts", 64), top_k=c.integer("moe_k", 6),
                   expert_ffn_hidden=width, router_bias=True, router_score_correction=True, expert_bias=False,
                   shared_experts=1 if shared else 0, shared_expert_ffn_hidden=shared * width if shared else None,
                   **moe_placement(layers, moe_layers))
    bias = c.flag("use_bias", False)
    # Ernie4_5_MoeForCausalLM.lm_head: Linear(h, vocab, bias=use_bias)
    return llama(c, head_dim=c.integer("head_dim", 128), qkv_bias=bias, attn_out_bias=bias, mlp_bias=bias,
                 norm_eps=c.number("rms_norm_eps", 1e-5), tied_embeddings=c.flag("tie_word_embeddings", True),
                 lm_head_bias=bias, moe=moe)


def _per_layer(c: HFConfig, key: str, default: int) -> int:
    """A Hunyuan per-layer setting (an integer or a list of one value per block) as one value."""
    value = c.data.get(key, default)
    if isinstance(value, list):
        values = c.ints(key)
        if len(set(values)) != 1:
            raise SpecError(f"{c.source}: {key}: per-block values {sorted(set(values))} differ (one value is supported)")
        return values[0]
    return c.integer(key, default)


def _hunyuan_moe(c: HFConfig) -> dict:
    """Hunyuan v1 MoE (Hunyuan-A13B): per-head q/k RMSNorms, every block num_experts experts of
    intermediate_size behind a bias-free softmax gate plus one shared MLP of intermediate_size
    (HF HunYuanMoEV1Moe)."""
    ffn = c.size("intermediate_size")
    experts = _per_layer(c, "num_experts", 1)
    moe = dict(num_experts=experts, top_k=_per_layer(c, "moe_topk", 1), expert_ffn_hidden=ffn,
               shared_experts=1, shared_expert_ffn_hidden=ffn)
    return llama(c, qk_norm=c.flag("use_qk_norm", True), norm_eps=c.number("rms_norm_eps", 1e-5), moe=moe)


def _dots1(c: HFConfig) -> dict:
    """dots.llm1: Qwen3-style attention (per-head q/k RMSNorms, no biases), DeepSeek-V3 style
    experts (sigmoid, correction-bias buffer, shared experts) after first_k_dense_replace blocks."""
    moe = _sigmoid_experts(c, 128, 6, 0, c.integer("n_shared_experts", 2) or 0, norm_topk=False)
    return llama(c, head_dim=_head_dim(c), qk_norm=True, norm_eps=c.number("rms_norm_eps", 1e-6), moe=moe,
                 **qwen_sliding(c))


def _minimax_m2(c: HFConfig) -> dict:
    """MiniMax-M2: RMSNorm q/k norms over the whole projection, every block sigmoid-routed experts
    with a correction-bias buffer, no shared expert."""
    moe = dict(num_experts=c.integer("num_local_experts", 256), top_k=c.integer("num_experts_per_tok", 8),
               expert_ffn_hidden=c.size("intermediate_size"), router="sigmoid", router_score_correction=True,
               norm_topk_prob=True)
    return llama(c, head_dim=_head_dim(c), qk_norm=c.flag("use_qk_norm", True), qk_norm_scope="all_heads",
                 norm_eps=c.number("rms_norm_eps", 1e-6), rotary_fraction=rotary_fraction(c, 1.0), moe=moe)


def _solar_open(c: HFConfig) -> dict:
    """Solar Open: GLM-4.5 style blocks (sigmoid experts + shared experts) on every block, no
    biases, no q/k norms."""
    moe = _sigmoid_experts(c, 128, 8, 0, c.integer("n_shared_experts", 1) or 0)
    c = c.renamed({"moe_intermediate_size": "intermediate_size"})  # no dense block: unused width
    return llama(c, head_dim=_head_dim(c), norm_eps=c.number("rms_norm_eps", 1e-5), moe=moe,
                 rotary_fraction=rotary_fraction(c, 1.0))


def _flex_olmo(c: HFConfig) -> dict:
    """FlexOlmo: OLMoE experts under OLMo-2 blocks (output norms, whole-projection q/k norms)."""
    moe = dict(num_experts=c.integer("num_experts", 7), top_k=c.integer("num_experts_per_tok", 5),
               expert_ffn_hidden=c.size("intermediate_size"), norm_topk_prob=c.flag("norm_topk_prob", False))
    return llama(c, norm_eps=c.number("rms_norm_eps", 1e-6), norm_placement="output", qk_norm=True,
                 qk_norm_scope="all_heads", mlp_bias=False, moe=moe)


def _exaone_moe(c: HFConfig) -> dict:
    """EXAONE MoE (K-EXAONE): EXAONE 4 attention (per-head q/k norms, 3 sliding : 1 global, NoPE
    global blocks, priced with rotary as in hf_dense._exaone4) with pre-norms, first_k_dense_replace dense blocks, then sigmoid experts and
    num_shared_experts shared experts."""
    shared = c.integer("num_shared_experts", 1) or 0
    moe = _sigmoid_experts(c.renamed({"num_experts": "n_routed_experts"}), 64, 8, 1, shared)
    return llama(c, head_dim=_head_dim(c), qk_norm=True, moe=moe, **exaone_sliding(c))


def _glm4_moe_lite(c: HFConfig) -> dict:
    """GLM-4.7-Flash (Glm4MoeLiteForCausalLM): DeepSeek-V3 blocks (MLA, sigmoid experts with a
    correction-bias buffer, shared experts) placed by mlp_layer_types (default: block 0 dense);
    transformers builds no MTP block, so num_nextn_predict_layers is not counted."""
    layers = c.size("num_hidden_layers")
    kinds = c.texts("mlp_layer_types", None) or ["dense"] + ["sparse"] * (layers - 1)
    if len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
        raise SpecError(f"{c.source}: mlp_layer_types: expected {layers} entries of dense / sparse, got {kinds!r}")
    data = {"n_group": 1, "topk_group": 1, "n_routed_experts": 64, "num_experts_per_tok": 4,
            "routed_scaling_factor": 1.8, "q_lora_rank": 768, "qk_nope_head_dim": 192, "v_head_dim": 256,
            "topk_method": "noaux_tc", **c.data, "num_nextn_predict_layers": 0, "first_k_dense_replace": 0}
    fields = MOE_MAPPERS["deepseek_v3"](HFConfig(data, c.source, c.path, c.defaults))
    placement = moe_placement(layers, [i for i, kind in enumerate(kinds) if kind == "sparse"])
    moe = {**fields["moe"], "first_dense_layers": 0, "layer_freq": 1, "layers": None, **placement}
    return {**fields, "moe": moe}


def _sarvam_moe(c: HFConfig) -> dict:
    """Sarvam-MoE: GLM-4.5 blocks (transformers builds Glm4MoeForCausalLM) whose config class
    defaults to q/k norms on and the whole head rotated."""
    return _glm4_moe(HFConfig({"use_qk_norm": True, "partial_rotary_factor": 1.0, **c.data}, c.source, c.path,
                              c.defaults))


def _granitemoeshared(c: HFConfig) -> dict:
    """Granite-MoE-Shared: Granite-MoE plus a gated shared MLP of shared_intermediate_size (no
    gate on its output) in every block."""
    shared = c.integer("shared_intermediate_size", 0)
    moe = dict(num_experts=c.integer("num_local_experts", 8), top_k=c.integer("num_experts_per_tok", 2),
               expert_ffn_hidden=c.size("intermediate_size"), router="topk_softmax",
               shared_experts=1 if shared else 0, shared_expert_ffn_hidden=shared or None)
    return llama(c, mlp_bias=False, moe=moe, **granite_scales(c))


def _granitemoe_swa(c: HFConfig) -> dict:
    """Granite-MoE SWA: Granite-MoE-Shared blocks with a learned sink per head and sliding (128)
    blocks between global ones (its layer_types; default global every fourth from block 0)."""
    layers = c.size("num_hidden_layers")
    window = c.integer("sliding_window", 128, nullable=True)
    default = ["full_attention" if i % 4 == 0 else "sliding_attention" for i in range(layers)]
    types = layer_types(c, layers, default if window is not None else None)
    return {**_granitemoeshared(c), "attention_sinks": True, "layer_types": types,
            "sliding_window": window if types and "sliding_attention" in types else None}


def _mellum(c: HFConfig) -> dict:
    """Mellum: Qwen3-MoE attention (per-head q/k norms, head_dim 128) with routed experts on every
    block and its explicit layer_types (sliding_window when some slide)."""
    layers = c.size("num_hidden_layers")
    moe = dict(num_experts=c.integer("num_local_experts", 64), top_k=c.integer("num_experts_per_tok", 8),
               expert_ffn_hidden=c.size("moe_intermediate_size"), norm_topk_prob=c.flag("norm_topk_prob", True))
    types = layer_types(c, layers, None)
    window = c.integer("sliding_window", 1024, nullable=True) if types and "sliding_attention" in types else None
    c = c.renamed({"moe_intermediate_size": "intermediate_size"})  # no dense block: unused width
    return llama(c, head_dim=c.integer("head_dim", 128), qk_norm=True, norm_eps=c.number("rms_norm_eps", 1e-6),
                 moe=moe, layer_types=types, sliding_window=window)


MOE_EXTRA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "glm4_moe": _glm4_moe, "dbrx": _dbrx, "ernie4_5_moe": _ernie4_5_moe, "hunyuan_v1_moe": _hunyuan_moe,
    "dots1": _dots1, "minimax_m2": _minimax_m2, "solar_open": _solar_open, "flex_olmo": _flex_olmo,
    "exaone_moe": _exaone_moe, "glm4_moe_lite": _glm4_moe_lite, "granitemoeshared": _granitemoeshared,
    "mellum": _mellum, "sarvam_moe": _sarvam_moe, "granitemoe_swa": _granitemoe_swa,
}
