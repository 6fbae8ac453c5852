"""Beam (modelplan/specs/hf_n18beam.py): a per-channel head gate with a learned per-head bias
(BeamAttention.gate_proj + gate_bias). Expected totals are sum(p.numel()) of transformers 5.24's
own BeamForCausalLM built from each small config on CPU and from BeamConfig's defaults (meta);
`count` / `plan --gpus 8` run; the gate bias's parameters against the hand-worked count."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan, assert_dense_blocks_shard, assert_total_on_cpu, class_defaults
from _hf_reference import hf_model
from modelplan.count.params import count_params
from modelplan.specs.hf import UNMODELLED, from_hf_config

_SMALL = {"model_type": "beam", "architectures": ["BeamForCausalLM"], "vocab_size": 256, "hidden_size": 64,
          "intermediate_size": 96, "num_hidden_layers": 7, "num_attention_heads": 4, "num_key_value_heads": 2,
          "head_dim": 16, "moe_intermediate_size": 32, "num_experts": 8, "num_experts_per_tok": 2, "n_group": 2,
          "topk_group": 1, "sliding_window": 8, "max_position_embeddings": 128}

CASES = {
    "beam": _SMALL,
    "beam-dense": {**_SMALL, "mlp_layer_types": ["dense"] * 7, "tie_word_embeddings": True},
    "beam-all-sparse": {**_SMALL, "num_hidden_layers": 2, "mlp_layer_types": ["sparse", "sparse"],
                        "layer_types": ["sliding_attention", "full_attention"]},
    "beam-full": {**_SMALL, "layer_types": ["full_attention"] * 7, "attention_bias": True},
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_total_equals_transformers_on_cpu(name):
    """modelplan's total = sum(p.numel()) of transformers 5.24's BeamForCausalLM built on CPU."""
    assert_total_on_cpu(CASES[name])


@pytest.mark.torch
@pytest.mark.slow
def test_class_defaults_equal_transformers():
    """BeamConfig's defaults (52 blocks, 256 experts): total = the meta-built model's sum(p.numel())."""
    data = class_defaults("beam")
    model = hf_model(data)
    assert count_params(from_hf_config(data, "config.json")).total == sum(p.numel() for p in model.parameters())


def test_gate_bias_adds_one_parameter_per_head():
    """Hand-worked: gate_proj Linear(64, 4 x 16, bias=False) = 4096, gate_bias (4,) = 4, per block."""
    spec = from_hf_config(_SMALL, "config.json")
    assert spec.head_gate == "element" and spec.head_gate_bias
    without = count_params(spec.model_copy(update={"head_gate_bias": False})).total
    assert count_params(spec).total - without == 7 * 4


def test_count_and_plan_run(tmp_path):
    """`count` and `plan --gpus 8` exit 0 on the small config."""
    assert_count_plan(tmp_path, _SMALL)


def test_no_longer_refused():
    """beam is mapped, not in UNMODELLED."""
    assert "beam" not in UNMODELLED


def test_dense_blocks_shard():
    """plan/shard.py's per-rank elements of the dense blocks sum to count's block_params at tp 1
    and tp 2 (gate_proj and gate_bias are colwise in BeamConfig.base_model_tp_plan)."""
    assert_dense_blocks_shard(from_hf_config(CASES["beam-dense"], "config.json"))
