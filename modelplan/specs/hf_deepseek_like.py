"""HF config mapper of a decoder transformers 5.24 builds from DeepSeek modules with its own
config class defaults (a key the config leaves out takes that class's default, then the DeepSeek
mapper reads it); mistral4 is mapped in hf_n17new.py:

- glm_moe_dsa (GlmMoeDsaForCausalLM): DeepSeek-V3.2 blocks (MLA with the lightning indexer); no MTP
  modules built (GlmMoeDsaConfig has no num_nextn_predict_layers); layers whose indexer_types entry
  is 'shared' reuse an earlier layer's index mask and hold no indexer, which is refused.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_deepseek32 import DEEPSEEK32_MAPPERS

_GLM_MOE_DSA = dict(first_k_dense_replace=3, hidden_size=6144, index_head_dim=128, index_n_heads=32, index_topk=2048,
                    intermediate_size=12288, kv_lora_rank=512, max_position_embeddings=202752, moe_intermediate_size=2048,
                    n_group=1, n_routed_experts=256, n_shared_experts=1, norm_topk_prob=True, num_attention_heads=64,
                    num_experts_per_tok=8, num_hidden_layers=78, num_key_value_heads=64, q_lora_rank=2048,
                    qk_nope_head_dim=192, qk_rope_head_dim=64, rms_norm_eps=1e-5, routed_scaling_factor=2.5,
                    tie_word_embeddings=False, topk_group=1, v_head_dim=256, vocab_size=154880,
                    num_nextn_predict_layers=0)
"""GlmMoeDsaConfig's defaults (transformers 5.24); the class declares no MTP modules."""


def _with(c: HFConfig, defaults: dict) -> HFConfig:
    return HFConfig({**defaults, **{k: v for k, v in c.data.items() if v is not None}}, c.source, c.path, c.defaults)


def _glm_moe_dsa(c: HFConfig) -> dict:
    """GlmMoeDsaForCausalLM as DeepSeek-V3.2 modules."""
    kinds = c.texts("indexer_types", None)
    if kinds is not None and set(kinds) - {"full"}:
        raise SpecError(f"{c.source}: indexer_types: 'shared' layers (reusing an earlier index mask, no indexer of "
                        f"their own) are not modelled; every layer 'full' is")
    if any(c.integer(key, None) not in (None, default) for key, default in
           (("index_topk_freq", 1),)) or c.data.get("index_topk_pattern") is not None:
        raise SpecError(f"{c.source}: index_topk_freq / index_topk_pattern: shared-indexer schedules are not modelled")
    return DEEPSEEK32_MAPPERS["deepseek_v32"](_with(c, _GLM_MOE_DSA))


DEEPSEEK_LIKE_MAPPERS: dict[str, Callable[[HFConfig], dict]] = {"glm_moe_dsa": _glm_moe_dsa}
