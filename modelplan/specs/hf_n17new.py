"""HF config mapper of Mistral 4 (mistral4, transformers 5.24: DeepSeek-V3 blocks with a softmax
router), read with its config class's defaults through the DeepSeek mapper whose modules
transformers reuses, and the refused 2026 model_types with the mechanism each lacks."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_moe import MOE_MAPPERS


_MISTRAL4 = {
    "n_routed_experts": 128, "num_experts_per_tok": 4, "n_shared_experts": 1, "moe_intermediate_size": 2048,
    "routed_scaling_factor": 1.0, "kv_lora_rank": 256, "q_lora_rank": 1024, "qk_rope_head_dim": 64,
    "qk_nope_head_dim": 64, "v_head_dim": 128, "n_group": 1, "topk_group": 1, "norm_topk_prob": True,
    "first_k_dense_replace": 0, "rms_norm_eps": 1e-6, "max_position_embeddings": 1048576,
    "num_nextn_predict_layers": 0, "hidden_size": 4096, "intermediate_size": 12288, "num_attention_heads": 32,
    "num_hidden_layers": 36, "num_key_value_heads": 32, "vocab_size": 131072, "tie_word_embeddings": False,
}
"""Mistral4Config defaults (configuration_mistral4.py); the class has no MTP layers."""


def _mistral4(c: HFConfig) -> dict:
    """Mistral 4 (Mistral4ForCausalLM, a DeepseekV3ForCausalLM): MLA blocks, dense first
    first_k_dense_replace blocks, then routed + shared experts behind Mistral4TopkRouter: softmax
    scores over all experts, top-k, renormalised (norm_topk_prob), x routed_scaling_factor, no
    correction bias. With n_group > 1 it scores a group by the sum of its best two softmax scores,
    which the spec's groups (best expert without a correction bias) do not: refused."""
    c = c.renamed({"num_local_experts": "n_routed_experts"}).with_defaults(_MISTRAL4)
    groups = c.integer("n_group", 1)
    if groups != 1:
        raise SpecError(f"{c.source}: n_group: {groups} groups are not modelled for mistral4 (its "
                        f"groups are scored by their best two softmax scores)")
    fields = MOE_MAPPERS["deepseek_v3"](HFConfig({**c.data, "topk_method": "greedy", "scoring_func": "softmax"},
                                                 c.source, c.path, c.defaults))
    if fields.get("moe") is not None:
        fields["moe"] = {**fields["moe"], "router": "softmax", "router_score_correction": False}
    return fields


N17NEW_MLA_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {
    "mistral4": _mistral4,  # a null q_lora_rank kept: a plain q_proj (tests/test_hf_n17new.py)
}


_HC = "manifold-constrained hyper-connections (attn_hc / ffn_hc: several residual streams mixed per block)"

N17NEW_UNMODELLED: dict[str, str] = {
    "gemma4": "its vision and audio towers",
    "gemma4_unified": "its vision and audio towers",
    "gemma4_unified_assistant": "Gemma 4's text model (per-layer input embeddings, wider global heads) and its towers",
    "deepseek_v4": f"{_HC}, compressed sparse attention (a KV compressor with its own indexer) and a low-rank "
                   "grouped output projection (o_a_proj / o_b_proj)",
    "mistral_large4": "MLA blocks without a rope key on some blocks, an indexer over the hidden state with "
                      "learned softmax scales and a learned rotary alpha",
    "mistral_large4_text": "MLA blocks without a rope key on some blocks, an indexer over the hidden state with "
                           "learned softmax scales and a learned rotary alpha",
    "qwen4_exp_text": f"{_HC}, per-layer and n-gram embeddings and a compressed sparse-attention indexer",
    "qwen4_exp": f"Qwen4-Exp's text model ({_HC}, per-layer and n-gram embeddings) and its vision tower",
    "glm5_next": f"{_HC}, Kimi-style linear attention with a full-rank forget gate and a compressed indexer",
    "glm5_next_text": f"{_HC}, Kimi-style linear attention with a full-rank forget gate and a compressed indexer",
    "hy_v4": f"{_HC} and an indexer on some MLA blocks only",
    "hy_v4_vl": f"Hunyuan 4's text model ({_HC}) and its vision tower",
    "lfm3_vl": "its vision tower and projector",
    "step3p7": "its vision tower and projector",
    "zaya": "compressed convolutional attention (v_proj_current / v_proj_delayed, depthwise and grouped q/k "
            "convs), an MLP router and learned residual scales",
    "dots3_note_text": "MLA dimensions that differ from block to block, an indexer on some blocks only and a "
                       "per-head attention gate",
    "dots3_note": "dots.3's text model (per-block MLA dimensions, partial indexers) and its tower",
    "inkling_mm_model": "its hierarchical-MLP vision encoder and dMel audio embeddings",
    "axk2": "adaptive norms (an MLP inside each block's norms) and a gated query projection",
    "bailing_hybrid": "linear attention with a full-rank per-channel forget gate beside MLA blocks with a "
                      "per-head output gate",
    "exaone4_5": "its vision tower and merger",
}
"""Refused 2026 model_types with the mechanism the spec does not express (transformers 5.24)."""

N17NEW_TEXT_ONLY: dict[str, str] = {
    "exaone4_5": "exaone4",
    "gemma4": "gemma4_text", "gemma4_unified": "gemma4_unified_text", "lfm3_vl": "lfm3", "step3p7": "step3p5",
    "inkling_mm_model": "inkling_text",
}
"""Refused composites whose language model is supported as its own model_type."""
