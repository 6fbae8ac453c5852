"""HF config mappers of decoders whose attention adds a gate or a second softmax map (transformers
5.24): LFM3 and Laguna (a bias-free g_proj gating each head's output, `TransformerSpec.head_gate`)
and DiffLlama (differential attention, `TransformerSpec.differential_attention`), counted in
count/attention_extras.py; MiMo-V2-Flash (narrower value heads, `TransformerSpec.v_head_dim`, and
sliding blocks with their own kv heads and sinks, `specs/attention_shape.py`), JetMoE (mixture of
attention experts), Doge (dynamic mask attention), Step 3.5 (head gate, sliding-block head count);
Gemma 4's text models come from hf_gemma4.py."""

from __future__ import annotations

from math import isqrt
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_gemma4 import GEMMA4_MAPPERS
from modelplan.specs.hf_llama import compact_types, layer_types, llama

_LFM3_TYPES = {"conv": "short_conv", "sliding_attention": "sliding_attention", "full_attention": "full_attention"}


def _lfm3(c: HFConfig) -> dict:
    """LFM3 (Lfm3ForCausalLM, Lfm3Config defaults): LFM2's gated short-conv blocks beside GQA
    blocks (q/k RMSNorms over head_dim, g_proj Linear(h, heads) when use_attention_gate), each
    block operator / ffn norms plus post norms when use_sandwich_norm, a bias-free SwiGLU (w1, w3,
    w2) of intermediate_size, the final embedding_norm; the default pattern block i: full when
    i % 4 == 2, sliding when i % 4 == 0 and i > 0, else conv (Lfm3Config.__post_init__)."""
    layers = c.size("num_hidden_layers")
    names = c.texts("layer_types", None)
    if names is None:
        names = ["full_attention" if i % 4 == 2 else "sliding_attention" if i % 4 == 0 and i > 0 else "conv"
                 for i in range(layers)]
    c.check_names("layer_types", names, _LFM3_TYPES, layers, "conv, sliding_attention, full_attention")
    types = compact_types([_LFM3_TYPES[t] for t in names])
    has = set(types or ("full_attention",))
    fields = llama(c, kv_heads=c.integer("num_key_value_heads", 4), head_dim=c.integer("head_dim", 128),
                   max_positions=c.integer("max_position_embeddings", 128000), norm_eps=c.number("norm_eps", 1e-5),
                   tied_embeddings=c.flag("tie_word_embeddings", True), qk_norm=True, layer_types=types,
                   sliding_window=c.integer("sliding_window", 256, nullable=True) if "sliding_attention" in has else None,
                   norm_placement="sandwich" if c.flag("use_sandwich_norm", True) else "pre",
                   head_gate="head" if c.flag("use_attention_gate", True) else None)
    if "short_conv" in has:  # Lfm3ShortConv: in_proj Linear(h, 3h), depthwise conv, out_proj, bias conv_bias
        fields["short_conv"] = dict(conv_kernel=c.integer("conv_L_cache", 7), bias=c.flag("conv_bias", False))
    return fields


def _laguna_gate(c: HFConfig) -> str:
    """LagunaConfig.gating: true / 'per-head' -> one gate a head, 'per-element' -> one a channel
    (false builds a per-element g_proj too: LagunaAttention's gate_per_head test)."""
    value = c.data.get("gating", True)
    if value is True or value == "per-head":
        return "head"
    if value is False or value == "per-element":
        return "element"
    raise SpecError(f"{c.source}: {c.path}gating: expected true, 'per-head' or 'per-element', got {value!r}")


def _laguna(c: HFConfig) -> dict:
    """Laguna (LagunaForCausalLM, LagunaConfig defaults, poolside/laguna-XS.2): GQA with q/k
    RMSNorms over head_dim and g_proj (softplus gate), optional sliding blocks (layer_types), a
    dense SwiGLU where mlp_layer_types says dense (default: the first block), else a sigmoid
    router whose e_score_correction_bias is a frozen nn.Parameter (counted), always renormalised,
    x moe_routed_scaling_factor, beside one shared SwiGLU of shared_expert_intermediate_size.
    num_attention_heads_per_layer: one head count per layer type (attention_by_type), else refused."""
    layers, heads = c.size("num_hidden_layers"), c.integer("num_attention_heads", 48)
    per_layer = c.ints("num_attention_heads_per_layer", None)
    names = c.texts("layer_types", None) or ["full_attention"] * layers
    by_type = None
    if per_layer is not None:
        if len(per_layer) != layers or len(names) != layers:
            raise SpecError(f"{c.source}: {c.path}num_attention_heads_per_layer: {len(per_layer)} entries for "
                            f"num_hidden_layers {layers}")
        counts = {name: {n for n, t in zip(per_layer, names) if t == name} for name in set(names)}
        if any(len(found) > 1 for found in counts.values()):
            raise SpecError(f"{c.source}: {c.path}num_attention_heads_per_layer: head counts that differ within a "
                            f"layer type ({ {k: sorted(v) for k, v in sorted(counts.items())} }) are not modelled")
        heads = next(iter(counts.get("full_attention") or counts[names[0]]))
        by_type = {name: {"heads": found.pop()} for name, found in counts.items() if heads not in found} or None
    sparse = c.mlp_sparse_layers(["dense"] + ["sparse"] * (layers - 1))
    moe = None
    if sparse:
        moe = dict(num_experts=c.integer("num_experts", 256), top_k=c.integer("num_experts_per_tok", 8),
                   expert_ffn_hidden=c.integer("moe_intermediate_size", 512), router="sigmoid",
                   router_score_correction=True, score_correction_param=True, norm_topk_prob=True,
                   routed_scaling=c.number("moe_routed_scaling_factor", 1.0, positive=True), expert_bias=False,
                   shared_experts=1, shared_expert_ffn_hidden=c.integer("shared_expert_intermediate_size", 512),
                   layers=sparse)
    types = layer_types(c, layers, None)
    return llama(c, heads=heads, kv_heads=c.integer("num_key_value_heads", 8), head_dim=c.integer("head_dim", 128),
                 max_positions=c.integer("max_position_embeddings", 131072),
                 qk_norm=True, layer_types=types, head_gate=_laguna_gate(c), moe=moe, attention_by_type=by_type,
                 sliding_window=c.integer("sliding_window", 512) if types and "sliding_attention" in types else None)


def _diffllama(c: HFConfig) -> dict:
    """DiffLlama (DiffLlamaForCausalLM, DiffLlamaConfig defaults): Llama blocks whose attention
    is differential (four head_dim lambda vectors a block, a weight-free RMSNorm(2 head_dim))."""
    hidden, heads = c.size("hidden_size"), c.size("num_attention_heads")
    return llama(c, kv_heads=c.integer("num_key_value_heads", heads, nullable=True) or heads,
                 head_dim=c.integer("head_dim", hidden // heads, nullable=True) or hidden // heads,
                 differential_attention=True)


def _mimo_v2_flash(c: HFConfig) -> dict:
    """MiMo-V2-Flash (MiMoV2FlashForCausalLM, MiMoV2FlashConfig defaults): GQA whose q/k heads are
    head_dim wide and value heads v_head_dim wide (o_proj Linear(heads v_head_dim, h), no bias);
    sliding blocks hold 2 x num_key_value_heads kv heads and a sink logit per head, full blocks
    neither (MiMoV2FlashAttention); default pattern full at block 0 and every sixth block; a dense
    SwiGLU where mlp_layer_types says dense (default: block 0), else DeepSeek-V3's router
    (sigmoid, e_score_correction_bias a buffer, n_group / topk_group groups scored by their best
    two) over bias-free experts, no shared expert."""
    layers, kv = c.size("num_hidden_layers"), c.integer("num_key_value_heads", 4)
    default = ["full_attention" if i == 0 or not (i + 1) % 6 else "sliding_attention" for i in range(layers)]
    types = layer_types(c, layers, default)
    sparse = c.mlp_sparse_layers(["dense"] + ["sparse"] * (layers - 1))
    moe = None
    if sparse:
        moe = dict(num_experts=c.integer("n_routed_experts", 256), top_k=c.integer("num_experts_per_tok", 8),
                   expert_ffn_hidden=c.integer("moe_intermediate_size", 2048), router="sigmoid",
                   router_score_correction=True, norm_topk_prob=c.flag("norm_topk_prob", True),
                   routed_scaling=c.number("routed_scaling_factor", 1.0, positive=True, nullable=True) or 1.0,
                   router_groups=c.integer("n_group", 1), router_group_top_k=c.integer("topk_group", 1),
                   expert_bias=False, layers=sparse)
    window = c.integer("sliding_window", 129)
    if c.has("sliding_window_size"):  # MiMoV2FlashConfig.__post_init__: sliding_window_size + 1
        window = c.integer("sliding_window_size") + 1
    sliding = types is not None and "sliding_attention" in types
    return llama(c, kv_heads=kv, head_dim=c.integer("head_dim", 192), v_head_dim=c.integer("v_head_dim", 128),
                 attn_out_bias=False, max_positions=c.integer("max_position_embeddings", 131072),
                 norm_eps=c.number("rms_norm_eps", 1e-5), layer_types=types, moe=moe,
                 sliding_window=window if sliding else None,
                 attention_by_type={"sliding_attention": {"kv_heads": 2 * kv, "sinks": True}} if sliding else None)


def _jetmoe(c: HFConfig) -> dict:
    """JetMoE (JetMoeForCausalLM, JetMoeConfig defaults): a mixture of attention experts (MoA:
    num_local_experts query / output projection pairs of num_key_value_heads x kv_channels, top
    num_experts_per_tok a token, so num_attention_heads = num_key_value_heads x num_experts_per_tok
    (JetMoeConfig.__post_init__ overrides any stated value), a shared bias-free kv_proj, an output
    bias) and an MoE MLP of the same expert count and top-k (gated bias-free experts of
    intermediate_size, router softmax over the top-k logits, one output bias); RMSNorms, tied."""
    kv, top_k = c.integer("num_key_value_heads", 16), c.integer("num_experts_per_tok", 2)
    experts = c.integer("num_local_experts", 8)
    c = HFConfig({**c.data, "num_attention_heads": kv * top_k}, c.source, c.path, c.defaults)
    ffn = c.size("intermediate_size")
    moe = dict(num_experts=experts, top_k=top_k, expert_ffn_hidden=ffn, router="topk_softmax", expert_bias=False,
               output_bias=True)
    return llama(c, kv_heads=kv, head_dim=c.integer("kv_channels", 128), attention_experts=experts, moe=moe,
                 activation=c.activation("silu", "activation_function"), tied_embeddings=c.flag("tie_word_embeddings", True),
                 max_positions=c.integer("max_position_embeddings", 4096), qkv_bias=False, attn_out_bias=False)


def _doge(c: HFConfig) -> dict:
    """Doge (DogeForCausalLM, DogeConfig defaults; SmallDoge): Llama blocks with q/k RMSNorms over
    head_dim, dynamic mask attention (A and dt_proj) and learned residual weights on both residual
    paths (input_residual, post_attention_residual); untied by default; with is_moe the MLP is
    DogeCDMoE: the SwiGLU plus product-key expert vectors (specs/product_key.py)."""
    pk = None
    if c.flag("is_moe", False):
        pk = dict(num_experts=c.integer("num_experts", 16384), top_k=c.integer("num_experts_per_tok", 64))
        keys = isqrt(pk["num_experts"])
        if pk["top_k"] > keys * keys:  # DogeCDMoE takes its top-k of num_keys^2 key sums
            raise SpecError(f"{c.source}: {c.path}num_experts_per_tok: {pk['top_k']} exceeds the {keys * keys} "
                            f"key sums of floor(sqrt(num_experts {pk['num_experts']}))^2")
    hidden, heads = c.size("hidden_size"), c.size("num_attention_heads")
    return llama(c, kv_heads=c.integer("num_key_value_heads", heads, nullable=True) or heads,
                 head_dim=c.integer("head_dim", hidden // heads), qk_norm=True, dynamic_mask=True,
                 residual_weights=True, product_key_experts=pk, **({"sliding_window": c.integer("sliding_window"),
                                            "layer_types": ["sliding_attention"]}
                                           if c.integer("sliding_window", None, nullable=True) else {}))


def _trimmed(c: HFConfig, key: str, layers: int) -> list[str] | None:
    """A per-block list that may carry num_nextn_predict_layers trailing MTP entries (dropped, as
    Step3p7TextConfig.__post_init__ does)."""
    names = c.texts(key, None)
    if names is not None and len(names) == layers + c.integer("num_nextn_predict_layers", 0):
        names = names[:layers]
    return names


def _step3p5(c: HFConfig) -> dict:
    """Step 3.5 / 3.7 text (Step3p7TextModel, Step3p7TextConfig defaults): GQA with q/k RMSNorms
    over head_dim and g_proj (sigmoid, one gate a head), sliding blocks with
    num_sliding_attention_heads query heads (attention_other_setting in older configs), a dense
    SwiGLU where mlp_layer_types says dense (default: blocks 0-2, or the legacy moe_layers_enum),
    else a sigmoid router (correction bias a buffer, renormalised, x moe_router_scaling_factor)
    over bias-free experts beside one shared SwiGLU of share_expert_dim; untied. The trailing
    num_nextn_predict_layers MTP blocks are not part of the model (ignored on load); the
    swiglu_limits clamps change no count."""
    c = c.renamed({"num_attention_groups": "num_key_value_heads", "moe_num_experts": "n_routed_experts",
                   "num_local_experts": "n_routed_experts", "moe_top_k": "num_experts_per_tok",
                   "share_expert_dims": "share_expert_dim"})
    layers, heads = c.size("num_hidden_layers"), c.integer("num_attention_heads", 64)
    names = _trimmed(c, "layer_types", layers) or ["full_attention"] * layers
    c.check_names("layer_types", names, ("full_attention", "sliding_attention"), layers)
    mlp_types = _trimmed(c, "mlp_layer_types", layers)
    if mlp_types is None:
        enum = c.data.get("moe_layers_enum")
        items = enum.split(",") if isinstance(enum, str) else enum
        sparse = {int(i) for i in items if str(i).strip()} if items is not None else set(range(3, layers))
        mlp_types = ["sparse" if i in sparse else "dense" for i in range(layers)]
    c.check_names("mlp_layer_types", mlp_types, ("dense", "sparse"), layers)
    sparse = [i for i, t in enumerate(mlp_types) if t == "sparse"]
    moe = None
    if sparse:
        moe = dict(num_experts=c.integer("n_routed_experts", 288), top_k=c.integer("num_experts_per_tok", 8),
                   expert_ffn_hidden=c.integer("moe_intermediate_size", 1280), router="sigmoid",
                   router_score_correction=True, norm_topk_prob=True, expert_bias=False,
                   routed_scaling=c.number("moe_router_scaling_factor", 1.0, positive=True),
                   shared_experts=1, shared_expert_ffn_hidden=c.integer("share_expert_dim", 1280), layers=sparse)
    other = c.sub("attention_other_setting")
    sliding_heads = c.integer("num_sliding_attention_heads", None, nullable=True) or (
        other.integer("num_attention_heads", heads) if other is not None else heads)
    types = compact_types(names)
    has_sliding = "sliding_attention" in names
    if has_sliding and c.integer("sliding_window", None, nullable=True) is None:
        raise SpecError(f"{c.source}: {c.path}sliding_window: missing for the sliding_attention blocks")
    return llama(c, heads=heads, kv_heads=c.integer("num_key_value_heads", 8), head_dim=c.integer("head_dim", 128),
                 qk_norm=True, head_gate="head", layer_types=types, moe=moe,
                 max_positions=c.integer("max_position_embeddings", 128000), norm_eps=c.number("rms_norm_eps", 1e-5),
                 sliding_window=c.integer("sliding_window") if has_sliding else None,
                 attention_by_type={"sliding_attention": {"heads": sliding_heads}}
                 if has_sliding and sliding_heads != heads else None)


N18ATTN_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "lfm3": _lfm3, "laguna": _laguna, "diffllama": _diffllama, "mimo_v2_flash": _mimo_v2_flash,
    "jetmoe": _jetmoe, "doge": _doge, "step3p5": _step3p5, **GEMMA4_MAPPERS,
}
