"""Mistral 4 (modelplan/specs/hf_n17new.py) and GLM-MoE-DSA (modelplan/specs/hf_deepseek_like.py):
DeepSeek modules with their own
config class defaults. Totals equal transformers 5.24's Mistral4ForCausalLM / GlmMoeDsaForCausalLM
built on CPU from small configs and on the meta device at the class defaults."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_one_line_error, assert_total_on_cpu, class_defaults
from _hf_reference import hf_numel
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

MISTRAL4 = dict(model_type="mistral4", architectures=["Mistral4ForCausalLM"], hidden_size=32, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=4, intermediate_size=64, moe_intermediate_size=16,
                n_routed_experts=8, num_experts_per_tok=2, vocab_size=101, kv_lora_rank=8, q_lora_rank=12,
                qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
GLM = dict(model_type="glm_moe_dsa", architectures=["GlmMoeDsaForCausalLM"], hidden_size=32, num_hidden_layers=3,
           num_attention_heads=4, num_key_value_heads=4, intermediate_size=64, moe_intermediate_size=16,
           n_routed_experts=8, num_experts_per_tok=2, vocab_size=101, kv_lora_rank=8, q_lora_rank=12,
           qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8, index_n_heads=2, index_head_dim=8, index_topk=4,
           first_k_dense_replace=1)
CASES = [MISTRAL4, {**MISTRAL4, "first_k_dense_replace": 1, "n_shared_experts": 2, "attention_bias": True},
         {**MISTRAL4, "tie_word_embeddings": True}, GLM, {**GLM, "first_k_dense_replace": 0, "n_shared_experts": 0}]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", CASES, ids=[f"{d['model_type']}-{i}" for i, d in enumerate(CASES)])
def test_total_equals_transformers_on_cpu(data):
    assert_total_on_cpu(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "cls"), [("mistral4", "Mistral4ForCausalLM"), ("glm_moe_dsa", "GlmMoeDsaForCausalLM")])
def test_class_defaults_equal_transformers(model_type, cls):
    data = class_defaults(model_type)
    data["architectures"] = [cls]
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_sparse_keys_take_the_class_defaults():
    """A config naming only model_type reads Mistral4Config's defaults (36 blocks of 4096, 128
    experts) and no MTP module; GLM-MoE-DSA likewise none."""
    spec = from_hf_config({"model_type": "mistral4"})
    assert (spec.layers, spec.hidden, spec.moe.num_experts, spec.mtp_layers) == (36, 4096, 128, 0)
    assert from_hf_config({"model_type": "glm_moe_dsa"}).mtp_layers == 0


@pytest.mark.parametrize(("data", "message"), [
    ({**MISTRAL4, "n_group": 2, "topk_group": 1}, r"n_group: 2 groups .* not modelled"),
    ({**GLM, "indexer_types": ["full", "shared", "full"]}, r"indexer_types: 'shared' layers"),
    ({**GLM, "index_topk_freq": 2}, r"index_topk_freq / index_topk_pattern"),
])
def test_bad_configs_are_one_line_errors(data, message):
    assert_one_line_error(data, message)
