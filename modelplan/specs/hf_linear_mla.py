"""HF config mapper of a hybrid of Kimi Delta Attention and MLA blocks (transformers 5.24):

- bailing_hybrid (BailingHybridForCausalLM, BailingHybridConfig defaults): 'linear_attention'
  blocks run KDA with full-rank gates (BailingHybridDeltaAttention: q/k/v and b_proj, a depthwise
  conv, BailingHybridForgetGate's f_proj Linear(h, heads d) with A_log and a per-channel dt_bias,
  a sigmoid output gate g_proj Linear(h, heads d), o_norm, o_proj; `DeltaNetSpec.kda_full_rank_gates`);
  every layer_group_size-th block runs MLA without a query latent plus a per-head sigmoid gate
  g_proj Linear(h, heads) (BailingHybridAttention); dense first_k_dense_replace blocks, then
  DeepSeek-V3 group-routed experts (num_experts, num_experts_per_token, num_expert_group) beside
  one shared MLP of num_shared_experts x moe_intermediate_size. No MTP module is counted: the
  class builds none, transformers' MtpModel refuses its config (no mtp_layer_types) and the
  default mtp_loss_scaling_factor is 0.
"""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_moe import MOE_MAPPERS

_BAILING = dict(vocab_size=157184, hidden_size=2560, intermediate_size=6144, moe_intermediate_size=768,
                num_hidden_layers=42, num_attention_heads=32, num_experts=512, num_experts_per_token=8,
                num_shared_experts=1, num_expert_group=8, topk_group=4, routed_scaling_factor=2.5, moe_renormalize=True,
                first_k_dense_replace=2, max_position_embeddings=262144, rms_norm_eps=1e-6, tie_word_embeddings=False,
                kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
                layer_group_size=6, num_nextn_predict_layers=1)
"""BailingHybridConfig's defaults (transformers 5.24 configuration_bailing_hybrid.py)."""


def _bailing_hybrid(c: HFConfig) -> dict:
    """BailingHybridForCausalLM as DeepSeek-V3 MLA / MoE blocks beside full-rank-gated KDA blocks."""
    data = {**_BAILING, **{k: v for k, v in c.data.items() if v is not None or k == "q_lora_rank"}}
    c = HFConfig(data, c.source, c.path, c.defaults)
    layers = c.size("num_hidden_layers")
    group = c.size("layer_group_size")
    types = c.texts("layer_types", None) or ["full_attention" if (i + 1) % group == 0 else "linear_attention"
                                             for i in range(layers)]
    c.check_names("layer_types", types, ("linear_attention", "full_attention"), layers)
    first = c.integer("first_k_dense_replace", 2)
    kinds = c.texts("mlp_layer_types", None) or ["dense" if i < first else "sparse" for i in range(layers)]
    c.check_names("mlp_layer_types", kinds, ("dense", "sparse"), layers)
    # BailingHybridConfig.__post_init__: the KDA sizes follow head_dim / num_attention_heads /
    # short_conv_kernel_size unless stated (a saved config states linear_*)
    heads = c.integer("linear_num_heads", c.size("num_attention_heads"))
    dim = c.integer("linear_head_dim", c.integer("head_dim", 128))
    kernel = c.integer("linear_conv_kernel_dim", c.integer("short_conv_kernel_size", 4))
    shared = c.integer("num_shared_experts", 1) or 0
    v3 = HFConfig({**c.data, "n_routed_experts": c.size("num_experts"), "num_experts_per_tok": c.size("num_experts_per_token"),
                   "n_group": c.size("num_expert_group"), "n_shared_experts": shared, "topk_method": "noaux_tc",
                   "norm_topk_prob": c.flag("moe_renormalize", True), "first_k_dense_replace": 0},
                  c.source, c.path, c.defaults)  # DeepSeek-V3's names for the same router and experts
    fields = MOE_MAPPERS["deepseek_v3"](v3)
    sparse = [i for i, kind in enumerate(kinds) if kind == "sparse"]
    moe = {k: v for k, v in fields["moe"].items() if k not in ("first_dense_layers", "layer_freq")}
    fields["moe"] = {**moe, "layers": sparse} if sparse else None
    # BailingHybridForCausalLM declares no _tied_weights_keys (transformers 5.24): untied whatever
    # tie_word_embeddings says
    out = {**fields, "head_gate": "head", "mtp_not_built": 0, "tied_embeddings": False,
           "layer_types": ["gated_deltanet" if t == "linear_attention" else "full_attention" for t in types]}
    if "linear_attention" in types:
        out["deltanet"] = dict(key_heads=heads, value_heads=heads, key_head_dim=dim, value_head_dim=dim,
                               conv_kernel=kernel, kda=True, kda_full_rank_gates=True)
    return out


LINEAR_MLA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"bailing_hybrid": _bailing_hybrid}
