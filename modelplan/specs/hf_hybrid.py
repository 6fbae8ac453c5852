"""HF config mappers of the hybrid linear-mixer decoders: Mamba-2 / attention (bamba,
granitemoehybrid) and gated DeltaNet / gated attention (qwen3_next, qwen3_5_text,
qwen3_5_moe_text). Each states where its HF module differs from Llama (transformers 5.24)."""

from __future__ import annotations

from typing import Any, Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gpt import rotary_fraction
from modelplan.specs.hf_llama import compact_types, granite_scales, llama
from modelplan.specs.hf_moe import moe_placement

_LEGACY = {"mamba": "linear_attention", "attention": "full_attention"}
"""transformers' remap of legacy layer-type names (configuration_utils._LEGACY_LAYER_TYPE_REMAP)."""


def hybrid_types(c: HFConfig, linear: str, default: list[str]) -> list[str] | None:
    """Per-block mixers: the config's `layer_types` (linear_attention / full_attention, legacy
    mamba / attention accepted) or `default`, with linear_attention read as mixer `linear`."""
    layers = c.size("num_hidden_layers")
    names = c.texts("layer_types", None)
    names = default if names is None else [_LEGACY.get(t, t) for t in names]
    unknown = sorted(set(names) - {"linear_attention", "full_attention"})
    if unknown:
        raise SpecError(f"{c.source}: {c.path}layer_types: unsupported {unknown} "
                        f"(supported: linear_attention, full_attention)")
    if len(names) != layers:
        raise SpecError(f"{c.source}: {c.path}layer_types: {len(names)} entries for num_hidden_layers {layers}")
    return compact_types([linear if t == "linear_attention" else t for t in names])


def _interval_types(c: HFConfig) -> list[str]:
    """Qwen3-Next / Qwen3.5 default: every full_attention_interval-th block is full attention."""
    interval = c.integer("full_attention_interval", 4)
    if interval < 1:
        raise SpecError(f"{c.source}: {c.path}full_attention_interval: must be >= 1, got {interval}")
    return ["full_attention" if (i + 1) % interval == 0 else "linear_attention"
            for i in range(c.size("num_hidden_layers"))]


def _deltanet(c: HFConfig) -> dict:
    """Qwen3NextGatedDeltaNet sizes (config defaults of Qwen3NextConfig / Qwen3_5TextConfig)."""
    return dict(key_heads=c.integer("linear_num_key_heads", 16), value_heads=c.integer("linear_num_value_heads", 32),
                key_head_dim=c.integer("linear_key_head_dim", 128),
                value_head_dim=c.integer("linear_value_head_dim", 128),
                conv_kernel=c.integer("linear_conv_kernel_dim", 4))


def _qwen_next_common(c: HFConfig, **extra: Any) -> dict:
    """Qwen3-Next / Qwen3.5 blocks: gated DeltaNet or gated full attention (q_proj doubled, q/k
    RMSNorm over head_dim), zero-centred RMSNorms (same parameter count), head_dim 256, partial
    rotary (0.25 by default)."""
    types = hybrid_types(c, "gated_deltanet", _interval_types(c))
    fields = llama(c, head_dim=c.integer("head_dim", 256), qk_norm=True, attention_output_gate=True,
                   layer_types=types, rotary_fraction=rotary_fraction(c, 0.25), **extra)
    if types is not None and "gated_deltanet" in types:
        fields["deltanet"] = _deltanet(c)
    return fields


def _qwen_next_moe(c: HFConfig, layers: list[int]) -> dict:
    """Qwen3-Next / Qwen3.5-MoE experts: softmax top-k router, one sigmoid-gated shared expert."""
    return dict(num_experts=c.integer("num_experts", 512), top_k=c.integer("num_experts_per_tok", 10),
                expert_ffn_hidden=c.size("moe_intermediate_size"), shared_experts=1,
                shared_expert_ffn_hidden=c.integer("shared_expert_intermediate_size", 512),
                shared_expert_gate=True, **moe_placement(c.size("num_hidden_layers"), layers))


def _qwen3_next(c: HFConfig) -> dict:
    """Qwen3-Next (Qwen3NextForCausalLM): MoE where (i + 1) % decoder_sparse_step == 0 and i is not
    in mlp_only_layers (else a dense SwiGLU of intermediate_size)."""
    layers = c.size("num_hidden_layers")
    step = c.integer("decoder_sparse_step", 1)
    if step < 1:
        raise SpecError(f"{c.source}: decoder_sparse_step: must be >= 1, got {step}")
    dense = set(c.ints("mlp_only_layers", None) or [])
    moe_layers = [i for i in range(layers) if i not in dense and (i + 1) % step == 0]
    moe = None
    if c.integer("num_experts", 512) > 0 and moe_layers:
        moe = {**_qwen_next_moe(c, moe_layers), "norm_topk_prob": c.flag("norm_topk_prob", True)}
    return _qwen_next_common(c, moe=moe)


def _qwen3_5_text(c: HFConfig) -> dict:
    """Qwen3.5 text model (Qwen3_5ForCausalLM): dense SwiGLU in every block."""
    return _qwen_next_common(c)


def _qwen3_5_moe_text(c: HFConfig) -> dict:
    """Qwen3.5-MoE text model: every block MoE (router renormalises its top-k)."""
    moe = _qwen_next_moe(c, list(range(c.size("num_hidden_layers"))))
    no_dense = HFConfig(c.data, c.source, c.path, {**c.defaults, "intermediate_size": 0})  # the class has none
    return _qwen_next_common(no_dense, ffn_hidden=0, moe=moe)


def _mamba2(c: HFConfig, prefix: str = "mamba_") -> dict:
    """Bamba / Granite 4.0-H Mamba-2 sizes: d_inner = int(mamba_expand * hidden), mamba_n_heads."""
    hidden = c.size("hidden_size")
    return dict(heads=c.integer(f"{prefix}n_heads", 128), inner=int(c.number(f"{prefix}expand", 2) * hidden),
                state_size=c.integer(f"{prefix}d_state", 256), groups=c.integer(f"{prefix}n_groups", 1),
                conv_kernel=c.integer(f"{prefix}d_conv", 4), chunk_size=c.integer(f"{prefix}chunk_size", 256),
                proj_bias=c.flag(f"{prefix}proj_bias", False), conv_bias=c.flag(f"{prefix}conv_bias", True))


def _bamba(c: HFConfig) -> dict:
    """Bamba (BambaForCausalLM): Mamba-2 blocks with attention at attn_layer_indices, each block
    a SwiGLU MLP; rotary on half of each head (partial_rotary_factor forced to 0.5)."""
    layers = c.size("num_hidden_layers")
    attention = set(c.ints("attn_layer_indices", None) or [])
    default = ["full_attention" if i in attention else "linear_attention" for i in range(layers)]
    types = hybrid_types(c, "mamba2", default)
    fields = llama(c, kv_heads=c.integer("num_key_value_heads", 8), norm_eps=c.number("rms_norm_eps", 1e-5),
                   layer_types=types, rotary_fraction=0.5, max_positions=c.integer("max_position_embeddings", 262144))
    if types is not None and "mamba2" in types:
        fields["mamba2"] = _mamba2(c)
    return fields


def _granitemoehybrid(c: HFConfig) -> dict:
    """Granite 4.0-H (GraniteMoeHybridForCausalLM): Mamba-2 or attention blocks, each with
    top-k-softmax routed experts (num_local_experts > 0) plus an always-on shared SwiGLU MLP of
    shared_intermediate_size, Granite's multipliers, NoPE unless position_embedding_type 'rope'."""
    types = hybrid_types(c, "mamba2", ["linear_attention"] * c.size("num_hidden_layers"))
    experts = c.integer("num_local_experts", 8)
    shared = c.size("shared_intermediate_size") if c.has("shared_intermediate_size") else 1024
    moe = None
    if experts > 0:
        moe = dict(num_experts=experts, top_k=c.integer("num_experts_per_tok", 2),
                   expert_ffn_hidden=c.size("intermediate_size"), router="topk_softmax",
                   shared_experts=1, shared_expert_ffn_hidden=shared)
    rope = c.text("position_embedding_type", None) == "rope"
    fields = llama(c, layer_types=types, moe=moe, ffn_hidden=0 if moe else shared, mlp_bias=False,
                   position="rotary" if rope else "none", **granite_scales(c))
    if types is not None and "mamba2" in types:
        fields["mamba2"] = _mamba2(c)
    return fields


def _mamba2_only(c: HFConfig) -> dict:
    """Mamba-2 (Mamba2ForCausalLM): blocks of RMSNorm + Mamba2Mixer, no attention, no MLP."""
    hidden = c.size("hidden_size")
    mixer = dict(heads=c.integer("num_heads", 128), inner=int(c.number("expand", 2) * hidden),
                 state_size=c.integer("state_size", 128), groups=c.integer("n_groups", 8),
                 conv_kernel=c.integer("conv_kernel", 4), chunk_size=c.integer("chunk_size", 256),
                 proj_bias=c.flag("use_bias", False), conv_bias=c.flag("use_conv_bias", True))
    return dict(layers=c.size("num_hidden_layers"), hidden=hidden, heads=1, vocab=c.size("vocab_size"),
                layer_types=["mamba2"], mamba2=mixer, mlp=False, position="none", norm="rmsnorm",
                norm_eps=c.number("layer_norm_epsilon", 1e-5), tied_embeddings=c.flag("tie_word_embeddings", False))


def _falcon_h1(c: HFConfig) -> dict:
    """Falcon-H1 (FalconH1ForCausalLM): every block runs attention and a Mamba-2 mixer on the same
    input-norm output and sums them, then a SwiGLU MLP. Mamba-2 d_inner is mamba_d_ssm (class
    default 1024; null: mamba_expand * hidden), its gated RMSNorm only with mamba_rms_norm, its
    out_proj bias projectors_bias. embedding_multiplier and lm_head_multiplier are the spec's
    embedding and logit scales; the other muP multipliers (key, attention / SSM in and out, the
    SSM's per-segment ssm_multipliers buffer, MLP gate / down) change no count and are not
    represented (`verify` refuses the parallel_mamba2 block before any of them would run)."""
    hidden = c.size("hidden_size")
    inner = c.integer("mamba_d_ssm", 1024, nullable=True)
    mixer = {**_mamba2(c), "inner": inner if inner is not None else int(c.number("mamba_expand", 2) * hidden),
             "out_proj_bias": c.flag("projectors_bias", False), "gated_norm": c.flag("mamba_rms_norm", False)}
    embedding, head = c.number("embedding_multiplier", 1.0), c.number("lm_head_multiplier", 1.0, positive=True)
    return llama(c, kv_heads=c.integer("num_key_value_heads", 8), norm_eps=c.number("rms_norm_eps", 1e-5),
                 max_positions=c.integer("max_position_embeddings", 8192), layer_types=["parallel_mamba2"],
                 mamba2=mixer, embedding_scale=embedding if embedding != 1.0 else None, logit_scale=head)


def _kimi_types(c: HFConfig, linear: HFConfig | None) -> list[str]:
    """KimiLinearConfig: layer_types, else linear_attn_config's 1-based full_attn_layers /
    kda_layers, else full attention at every 4th block from block 4."""
    layers = c.size("num_hidden_layers")
    if not c.has("layer_types") and linear is not None and linear.has("full_attn_layers"):
        full = set(linear.ints("full_attn_layers"))
        if any(not 1 <= i <= layers for i in full):
            raise SpecError(f"{c.source}: linear_attn_config.full_attn_layers: {sorted(full)} must be in 1..{layers}")
        return ["full_attention" if i + 1 in full else "linear_attention" for i in range(layers)]
    return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(layers)]


def _kimi_linear(c: HFConfig) -> dict:
    """Kimi Linear (KimiLinearForCausalLM): Kimi Delta Attention blocks with MLA blocks (no position
    encoding), a dense SwiGLU in the first first_k_dense_replace blocks (or per mlp_layer_types),
    else DeepSeek-V3-style MoE (sigmoid router with score correction and groups, one shared MLP of
    moe_intermediate_size x n_shared_experts)."""
    c = c.renamed({"num_experts": "num_local_experts", "num_experts_per_token": "num_experts_per_tok",
                   "num_shared_experts": "n_shared_experts", "moe_renormalize": "norm_topk_prob",
                   "num_expert_group": "n_group", "model_max_length": "max_position_embeddings"})
    layers = c.size("num_hidden_layers")
    linear = c.sub("linear_attn_config")
    heads = linear.integer("num_heads", None) if linear is not None else None
    dim = linear.integer("head_dim", None) if linear is not None else None
    kernel = linear.integer("short_conv_kernel_size", None) if linear is not None else None
    heads, dim = heads or c.integer("linear_num_heads", 32), dim or c.integer("linear_head_dim", 128)
    kernel = kernel or c.integer("linear_conv_kernel_dim", 4)
    types = hybrid_types(c, "gated_deltanet", _kimi_types(c, linear))
    kinds = c.texts("mlp_layer_types", None)
    if kinds is None:
        first = c.integer("first_k_dense_replace", 1)
        kinds = ["dense" if i < first else "sparse" for i in range(layers)]
    if len(kinds) != layers or set(kinds) - {"dense", "sparse"}:
        raise SpecError(f"{c.source}: mlp_layer_types: expected {layers} entries of dense / sparse")
    moe_layers = [i for i, kind in enumerate(kinds) if kind == "sparse"]
    moe = None
    if moe_layers:
        shared = c.integer("n_shared_experts", 1) or 0
        groups = c.integer("n_group", 1)
        moe = dict(num_experts=c.integer("num_local_experts", 256), top_k=c.integer("num_experts_per_tok", 8),
                   expert_ffn_hidden=c.size("moe_intermediate_size"), router="sigmoid", router_score_correction=True,
                   router_groups=groups, router_group_top_k=c.integer("topk_group", 1) if groups > 1 else 1,
                   norm_topk_prob=c.flag("norm_topk_prob", True), routed_scaling=c.number("routed_scaling_factor", 2.446),
                   shared_experts=1 if shared else 0,
                   shared_expert_ffn_hidden=shared * c.size("moe_intermediate_size") if shared else None,
                   expert_bias=False, **moe_placement(layers, moe_layers))
    mla = dict(kv_lora_rank=c.integer("kv_lora_rank", 512), q_lora_rank=c.integer("q_lora_rank", None, nullable=True),
               qk_nope_head_dim=c.integer("qk_nope_head_dim", 128), qk_rope_head_dim=c.integer("qk_rope_head_dim", 64),
               v_head_dim=c.integer("v_head_dim", 128))
    fields = llama(c, kv_heads=None, head_dim=None, mla=mla, moe=moe, position="none", layer_types=types,
                   norm_eps=c.number("rms_norm_eps", 1e-5),
                   tied_embeddings=False)  # KimiLinearForCausalLM._tied_weights_keys is empty: never tied
    if types is not None and "gated_deltanet" in types:
        fields["deltanet"] = dict(key_heads=heads, value_heads=heads, key_head_dim=dim, value_head_dim=dim,
                                  conv_kernel=kernel, kda=True)
    return fields


_NEMOTRON_PATTERN = {"M": "mamba2", "*": "full_attention", "-": "mlp", "E": "moe"}
_NEMOTRON_TYPES = {"linear_attention": "mamba2", "mamba": "mamba2", "full_attention": "full_attention",
                   "attention": "full_attention", "mlp": "mlp", "moe": "moe"}


def _nemotron_blocks(c: HFConfig) -> list[str]:
    """Nemotron-H block kinds: hybrid_override_pattern (M Mamba-2, * attention, - MLP, E MoE) or
    layers_block_type / layer_types (NemotronHConfig._pattern_to_list)."""
    pattern = c.text("hybrid_override_pattern", None)
    if pattern is not None:
        unknown = sorted(set(pattern) - set(_NEMOTRON_PATTERN))
        if unknown or not pattern:
            raise SpecError(f"{c.source}: {c.path}hybrid_override_pattern: unsupported characters {unknown} "
                            f"(supported: M, *, -, E)")
        return [_NEMOTRON_PATTERN[ch] for ch in pattern]
    names = c.texts("layers_block_type", None) or c.texts("layer_types", None)
    if names is None:
        return ["mamba2", "moe", "full_attention", "mlp"]  # NemotronHConfig's default
    unknown = sorted(set(names) - set(_NEMOTRON_TYPES))
    if unknown:
        raise SpecError(f"{c.source}: {c.path}layers_block_type: unsupported {unknown} "
                        f"(supported: {', '.join(_NEMOTRON_TYPES)})")
    return [_NEMOTRON_TYPES[t] for t in names]


def _nemotron_h(c: HFConfig) -> dict:
    """Nemotron-H (NemotronHForCausalLM): one RMSNorm and one mixer a block, the mixer a Mamba-2,
    a bias-free GQA attention without position encoding, a plain squared-ReLU MLP or an MoE
    (sigmoid router with score correction and groups, plain experts, one shared MLP)."""
    kinds = _nemotron_blocks(c)
    if c.integer("num_nextn_predict_layers", 0):
        raise SpecError(f"{c.source}: num_nextn_predict_layers: Nemotron-H multi-token prediction is not modelled")
    if c.integer("moe_latent_size", None, nullable=True) is not None:
        raise SpecError(f"{c.source}: moe_latent_size: Nemotron-H latent MoE projections are not modelled")
    layers, hidden = len(kinds), c.size("hidden_size")
    moe_layers = [i for i, kind in enumerate(kinds) if kind == "moe"]
    moe = None
    if moe_layers:
        moe = dict(num_experts=c.integer("n_routed_experts", 8, "num_local_experts"),
                   top_k=c.integer("num_experts_per_tok", 2), expert_ffn_hidden=c.integer("moe_intermediate_size", 7688),
                   shared_experts=1,
                   shared_expert_ffn_hidden=c.integer("moe_shared_expert_intermediate_size", 7688),
                   router="sigmoid", router_score_correction=True, router_groups=c.integer("n_group", 1),
                   router_group_top_k=c.integer("topk_group", 1), norm_topk_prob=c.flag("norm_topk_prob", True),
                   routed_scaling=c.number("routed_scaling_factor", 1.0), expert_bias=False,
                   **moe_placement(layers, moe_layers))
    heads = c.integer("mamba_num_heads", 128)
    mixer = dict(heads=heads, inner=heads * c.integer("mamba_head_dim", 64), state_size=c.integer("ssm_state_size", 128),
                 groups=c.integer("n_groups", 8), conv_kernel=c.integer("conv_kernel", 4),
                 chunk_size=c.integer("chunk_size", 128, "mamba_chunk_size"),
                 proj_bias=c.flag("use_bias", False, "mamba_proj_bias"),
                 conv_bias=c.flag("use_conv_bias", True, "mamba_conv_bias"))
    types = compact_types(["mlp" if kind == "moe" else kind for kind in kinds])
    dense = "mlp" in kinds
    return dict(
        layers=layers, hidden=hidden, heads=c.integer("num_attention_heads", 32),
        kv_heads=c.integer("num_key_value_heads", 8), head_dim=c.integer("head_dim", 128),
        ffn_hidden=c.integer("intermediate_size", 21504) if dense else 0, vocab=c.integer("vocab_size", 131072),
        max_positions=c.integer("max_position_embeddings", 4096), position="none", layer_types=types,
        mamba2=mixer if "mamba2" in kinds else None, mlp=False, moe=moe, norm="rmsnorm",
        norm_eps=c.number("layer_norm_epsilon", 1e-5), mlp_bias=c.flag("mlp_bias", False), gated_mlp=False,
        activation=c.activation("relu2", "mlp_hidden_act"),
        tied_embeddings=False,  # NemotronHForCausalLM._tied_weights_keys is empty: never tied
        dropout=c.dropout(0.0, "attention_dropout"),
    )


HYBRID_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "qwen3_next": _qwen3_next, "qwen3_5_text": _qwen3_5_text, "qwen3_5_moe_text": _qwen3_5_moe_text,
    "bamba": _bamba, "granitemoehybrid": _granitemoehybrid, "mamba2": _mamba2_only,
    "nemotron_h": _nemotron_h, "falcon_h1": _falcon_h1,
    "kimi_linear": _kimi_linear,
}
