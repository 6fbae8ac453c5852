"""HF config mappers of Gemma 4's language models (transformers 5.24 Gemma4ForCausalLM,
Gemma4UnifiedForCausalLM): Gemma 3n-style per-layer inputs and K/V-sharing blocks (`specs/side_paths.py`)
with global blocks of their own head width and, with attention_k_eq_v, kv-head count and no v_proj
(`specs/attention_shape.py`)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_llama import compact_types, llama

_LAYER_KEYS = {"head_dim": "head_dim", "num_key_value_heads": "kv_heads"}


def _gemma4_shapes(c: HFConfig, names: list[str]) -> dict | None:
    """attention_by_type of Gemma 4: per_layer_config's per-block overrides (head_dim,
    num_key_value_heads) when the config.json holds it, one set per layer type; else
    Gemma4TextConfig.__post_init__'s: full blocks get global_head_dim (512) and, with
    attention_k_eq_v, num_global_key_value_heads; with attention_k_eq_v they have no v_proj."""
    k_eq_v = c.flag("attention_k_eq_v", False)
    raw = c.data.get("per_layer_config")
    if raw is None:
        full = {"head_dim": c.integer("global_head_dim", 512)}
        kv = c.integer("num_global_key_value_heads", None)
        if k_eq_v and kv is not None:
            full["kv_heads"] = kv
        by_type = {"full_attention": full}
    else:
        if not isinstance(raw, dict):
            raise SpecError(f"{c.source}: {c.path}per_layer_config: expected an object, got {raw!r}")
        overrides: dict[str, set] = {t: set() for t in set(names)}
        for index, name in enumerate(names):
            entry = raw.get(str(index), raw.get(f"{index:02d}", {}))
            if not isinstance(entry, dict) or set(entry) - set(_LAYER_KEYS):
                raise SpecError(f"{c.source}: {c.path}per_layer_config: block {index}: only head_dim and "
                                f"num_key_value_heads overrides are modelled, got {entry!r}")
            overrides[name].add(tuple(sorted(entry.items())))
        by_type = {}
        for name, found in overrides.items():
            if len(found) > 1:
                raise SpecError(f"{c.source}: {c.path}per_layer_config: {name} blocks with different sizes "
                                f"{sorted(found)} are not modelled (one set per layer type is)")
            by_type[name] = {_LAYER_KEYS[k]: v for k, v in found.pop()}
    if k_eq_v:
        by_type.setdefault("full_attention", {})["value_is_key"] = True
    by_type = {name: shape for name, shape in by_type.items() if shape and name in names}
    return by_type or None


def _gemma4(c: HFConfig, unified: bool) -> dict:
    """Gemma 4 text (Gemma4ForCausalLM; gemma4_unified_text: Gemma4UnifiedForCausalLM, the same
    blocks without per-layer inputs or MoE): sandwich norms, q/k RMSNorms over each block's head_dim
    and a weight-free v norm, attention scaling 1, GeGLU, embeddings x sqrt(h), tied head; five
    sliding blocks per global one, the last block forced global (Gemma4TextConfig.__post_init__);
    global blocks sized by `_gemma4_shapes`; the last num_kv_shared_layers blocks reuse earlier
    K/V; gemma4_text adds per-layer inputs (embed_tokens_per_layer, a gate and projection in every
    block) and, with enable_moe_block, routed experts beside every block's MLP (the MLP as one shared
    expert, Gemma4TextRouter's scales, three branch norms); use_double_wide_mlp doubles the MLP of
    the K/V-sharing blocks (Gemma4TextMLP)."""
    layers, hidden = c.size("num_hidden_layers"), c.size("hidden_size")
    names = c.texts("layer_types", None) or ["sliding_attention" if (i + 1) % 6 else "full_attention"
                                             for i in range(layers)]
    c.check_names("layer_types", names, ("sliding_attention", "full_attention"), layers)
    names = [*names[:-1], "full_attention"]  # Gemma4TextConfig forces the last block global
    moe = None
    if not unified and c.flag("enable_moe_block", False):  # Gemma4TextDecoderLayer: experts beside the MLP
        experts, top_k = c.integer("num_experts", None, nullable=True), c.integer("top_k_experts", None, nullable=True)
        inner = c.integer("moe_intermediate_size", None, nullable=True)
        for key, value in (("num_experts", experts), ("top_k_experts", top_k), ("moe_intermediate_size", inner)):
            if value is None:
                raise SpecError(f"{c.source}: {c.path}{key}: missing (enable_moe_block needs it)")
        # softmax router over all experts, top-k renormalised, x per_expert_scale; the dense MLP of
        # intermediate_size summed with the experts' output: one always-active shared expert
        moe = dict(num_experts=experts, top_k=top_k, expert_ffn_hidden=inner, router="softmax", norm_topk_prob=True,
                   expert_bias=False, shared_experts=1, shared_expert_ffn_hidden=c.size("intermediate_size"),
                   router_scales=True, branch_norms=3)
    shared = c.integer("num_kv_shared_layers", 0)
    if not 0 <= shared < layers:
        raise SpecError(f"{c.source}: {c.path}num_kv_shared_layers: {shared} must be in 0..{layers - 1}")
    if shared and set(names[:layers - shared]) != set(names):  # Gemma4TextConfig.kv_sharing_modes' check
        raise SpecError(f"{c.source}: {c.path}num_kv_shared_layers: the first {layers - shared} blocks must hold "
                        f"every layer type ({sorted(set(names))}) for the {shared} sharing blocks to reuse")
    wide = 2 * c.size("intermediate_size") if shared and c.flag("use_double_wide_mlp", False) else None
    per_layer = None
    width = 0 if unified else c.integer("hidden_size_per_layer_input", 256, nullable=True) or 0
    if width:
        per_layer = dict(width=width, vocab=c.integer("vocab_size_per_layer_input", 262144))
    types = compact_types(names)
    return llama(
        c, kv_heads=c.integer("num_key_value_heads", 4), head_dim=c.integer("head_dim", 256),
        max_positions=c.integer("max_position_embeddings", 262144 if unified else 131072),
        activation=c.activation("gelu_pytorch_tanh", "hidden_activation", "hidden_act"),
        tied_embeddings=c.flag("tie_word_embeddings", True), embedding_scale=hidden ** 0.5,
        qk_norm=True, norm_placement="sandwich", attention_scale=1.0,  # Gemma4TextAttention.scaling
        final_logit_softcap=c.number("final_logit_softcapping", None, nullable=True),
        sliding_window=c.integer("sliding_window", 1024 if unified else 512) if types else None,
        layer_types=types, kv_shared_layers=shared, per_layer_input=per_layer,
        attention_by_type=_gemma4_shapes(c, names), moe=moe, kv_shared_ffn_hidden=wide,
    )


GEMMA4_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "gemma4_text": lambda c: _gemma4(c, unified=False), "gemma4_unified_text": lambda c: _gemma4(c, unified=True),
}
