"""The model_type of modelplan/specs/hf_linear_mla.py: bailing_hybrid (KDA blocks with full-rank
forget / output gates beside MLA blocks with a per-head gate). Expected totals are sum(p.numel()) of
transformers 5.24's BailingHybridForCausalLM on the meta device (small configs, the class
defaults); the gates' parameters, FLOPs and shards against hand-worked formulas from the modeling
file's shapes; `count` / `plan --gpus 8` run and `verify` refuses the new features by name."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan_verify, assert_one_line_error, class_defaults
from _hf_reference import hf_numel
from modelplan.count.block_flops import block_forward_flops
from modelplan.count.blocks import block_of, block_params
from modelplan.count.params import count_params
from modelplan.plan.shard import _block, unit_shards
from modelplan.specs.hf import UNMODELLED, from_hf_config
from modelplan.specs.plan import Plan

_BH = {"model_type": "bailing_hybrid", "num_hidden_layers": 6, "hidden_size": 128, "intermediate_size": 256,
       "moe_intermediate_size": 32, "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 32,
       "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 24, "num_experts": 8, "num_experts_per_token": 2,
       "num_expert_group": 2, "topk_group": 1, "vocab_size": 1000, "pad_token_id": 0, "eos_token_id": 1,
       "head_dim": 16, "layer_group_size": 3}
CASES = {
    # blocks: KDA, KDA, MLA, KDA, KDA, MLA; dense blocks 0 and 1; KDA heads of head_dim 16
    "small": _BH,
    # the saved linear_* sizes win over head_dim; two shared experts, one dense block
    "linear-keys": {**_BH, "linear_head_dim": 32, "linear_num_heads": 2, "linear_conv_kernel_dim": 3,
                    "num_shared_experts": 2, "first_k_dense_replace": 1},
}


@pytest.mark.torch
@pytest.mark.parametrize("name", [*CASES, "class-defaults"])
def test_total_equals_transformers(name):
    """Total = BailingHybridForCausalLM's sum(p.numel()) on the meta device (no MTP module built)."""
    data = class_defaults("bailing_hybrid") if name == "class-defaults" else CASES[name]
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_full_rank_gates_by_hand():
    """small, h 128, 4 KDA heads of 16 (64 channels): f_proj and g_proj Linear(128, 64) each
    (BailingHybridForgetGate, BailingHybridDeltaAttention), 2 t 2 x 128 x 64 forward FLOPs; at tp 2
    (SP) they split with the heads like q/k/v, leaving o_norm (16) and the two block norms (2 x 128)
    replicated; the MLA block's g_proj Linear(128, 4) (BailingHybridAttention)."""
    spec, t = from_hf_config(CASES["small"]), 64
    kda, mla = block_params(spec, block_of(spec, 0)), block_params(spec, block_of(spec, 2))
    assert kda["deltanet/gates"] == 2 * 128 * 64 and mla["attention/head_gate"] == 128 * 4
    assert block_forward_flops(spec, block_of(spec, 0), t, t)["deltanet/gates"] == 2 * t * 2 * 128 * 64
    local, partial = _block(spec, block_of(spec, 0), 2, True)
    assert 2 * local - partial == sum(kda.values()) and partial == 16 + 2 * 128


@pytest.mark.parametrize("name", list(CASES))
def test_one_rank_holds_the_counted_model(name):
    """Plan() (one rank): plan/shard.py's units sum to count's total."""
    spec = from_hf_config(CASES[name])
    assert sum(u.numel for u in unit_shards(spec, Plan()).values()) == count_params(spec).total


def test_cli_count_plan_and_verify_refusal(tmp_path):
    """count and plan --gpus 8 run; verify refuses the new features by name in one line."""
    assert_count_plan_verify(tmp_path, CASES["small"], "deltanet.kda_full_rank_gates", "head_gate")


@pytest.mark.parametrize(("data", "field"), [
    ({**_BH, "layer_types": ["linear_attention", "mamba"] * 3}, "layer_types"),
    ({**_BH, "mlp_layer_types": ["dense"] * 5}, "mlp_layer_types"),
])
def test_bad_options_refused_in_one_line(data, field):
    """A malformed per-block list: one line naming the field."""
    assert_one_line_error(data, field)


def test_registered_not_refused():
    """bailing_hybrid is counted, no longer listed as unmodelled."""
    assert "bailing_hybrid" not in UNMODELLED
