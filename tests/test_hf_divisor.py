"""A config size that another is divided by, given as 0, is a one-line error naming the field
(found by tests/test_fuzz_cli.py's random mode: glm4_moe with num_attention_heads 0 raised
ZeroDivisionError). GLM-4.5-Air's published config.json fields (zai-org/GLM-4.5-Air) as the base."""

from __future__ import annotations

import pytest

from modelplan.errors import SpecError
from modelplan.specs.hf import from_hf_config

GLM45_AIR = {
    "architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe", "attention_bias": True, "head_dim": 128,
    "hidden_size": 4096, "intermediate_size": 10944, "max_position_embeddings": 131072,
    "moe_intermediate_size": 1408, "n_routed_experts": 128, "n_shared_experts": 1, "num_experts_per_tok": 8,
    "first_k_dense_replace": 1, "num_attention_heads": 96, "num_key_value_heads": 8, "num_hidden_layers": 46,
    "partial_rotary_factor": 0.5, "rms_norm_eps": 1e-05, "rope_theta": 1000000, "tie_word_embeddings": False,
    "vocab_size": 151552, "n_group": 1, "topk_group": 1, "routed_scaling_factor": 1.0, "norm_topk_prob": True,
}


@pytest.mark.parametrize("heads", [0, -4])
def test_glm4_moe_zero_heads_is_a_one_line_error(heads):
    with pytest.raises(SpecError, match=rf"num_attention_heads: must be > 0 \(config.json: num_attention_heads = {heads}\)") as exc:
        from_hf_config({**GLM45_AIR, "num_attention_heads": heads, "head_dim": None}, "config.json")
    assert "\n" not in str(exc.value)


def test_glm4_moe_still_reads_its_published_heads():
    spec = from_hf_config(GLM45_AIR, "config.json")
    assert spec.heads == 96 and spec.head_dim == 128  # the published config's own values
