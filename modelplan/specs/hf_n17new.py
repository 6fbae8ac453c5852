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



N17NEW_UNMODELLED: dict[str, str] = {
    "gemma4_unified_assistant": "the drafter's projections to and from the target model (pre_projection over 2 x "
                                "backbone_hidden_size, post_projection), its centroid masked embedder and blocks "
                                "that all read the target's K/V",
    "dots3_note": "its vision and audio towers and adapters",
    "axk2": "adaptive norms (an MLP inside each block's norms) and a gated query projection",
}
"""Refused 2026 model_types with the mechanism the spec does not express (transformers 5.24)."""

N17NEW_TEXT_ONLY: dict[str, str] = {
}
"""Refused composites whose language model is supported as its own model_type."""
