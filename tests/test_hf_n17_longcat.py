"""LongCat-Flash (modelplan/specs/hf_longcat.py): two MLA + dense-MLP sublayers a layer read as two
spec blocks, the shortcut MoE with zero-computation experts (`moe.zero_experts`, `moe.shortcut`).
Totals equal transformers 5.24's LongcatFlashForCausalLM built on CPU from small configs (and on
the meta device at the class defaults, LongCat-Flash-Chat: 741,053,585,408 of which 180,388,626,432
are gate_up rows allocated for the zero experts and never read, so 560,664,958,976 without them:
the report's 560B, arXiv 2509.01322); FLOPs of one layer by hand; `count` / `plan` run and
`verify` refuses the new MoE features in one line."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan_verify, assert_one_line_error, class_defaults
from _hf_reference import hf_model, hf_numel
from modelplan.count.flops import layer_forward_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

TINY = dict(model_type="longcat_flash", hidden_size=32, num_layers=2, num_attention_heads=4, vocab_size=101,
            ffn_hidden_size=48, expert_ffn_hidden_size=16, n_routed_experts=6, zero_expert_num=3, moe_topk=3,
            q_lora_rank=12, kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4, v_head_dim=8)
CASES = [
    TINY,
    {**TINY, "attention_bias": True, "tie_word_embeddings": True, "num_layers": 3},
    {**TINY, "zero_expert_num": 0},  # no zero experts: a plain routed MoE
    {**TINY, "num_key_value_heads": 2, "moe_topk": 2, "zero_expert_num": 5},
]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", CASES, ids=[f"longcat_flash-{i}" for i in range(len(CASES))])
def test_total_equals_transformers_on_cpu(data):
    """sum(p.numel()) of transformers' module built on CPU equals modelplan's total; the padding
    leaf equals the zero experts' slice of the module's own gate_up_proj."""
    model = hf_model(data, device="cpu")
    c = count_params(from_hf_config(data))
    assert c.total == sum(p.numel() for p in model.parameters())
    padding = sum(layer.mlp.experts.gate_up_proj[data["n_routed_experts"]:].numel() for layer in model.model.layers)
    assert c.breakdown.get("layers/mlp/zero_expert_padding", 0) == padding


@pytest.mark.torch
@pytest.mark.slow
def test_class_defaults_equal_transformers():
    data = class_defaults("longcat_flash")
    c = count_params(from_hf_config(data))
    assert c.total == hf_numel(data) == 741_053_585_408
    assert c.total - c.breakdown["layers/mlp/zero_expert_padding"] == 560_664_958_976


def test_layer_flops_by_hand():
    """8 tokens, h 32, 4 heads (q 12 dims, v 8), MLA ranks 12 / 8, f 48, experts 6 x 16 + 3 zero,
    top 3: the even block's router 2 x 8 x 32 x 9 = 4,608, experts 2 x 8 x (3 x 6 / 9) x 3 x 32 x 16
    = 49,152 (2 real experts a token on average), the shared (first dense) MLP 2 x 8 x 3 x 32 x 48
    = 73,728; the odd block has the second dense MLP as its mlp/in + mlp/out (73,728) and the same
    attention as the even one."""
    spec = from_hf_config(TINY)
    even, odd = layer_forward_flops(spec, 0, 8, 8), layer_forward_flops(spec, 1, 8, 8)
    assert (even["mlp/router"], even["mlp/experts"], even["mlp/shared_experts"]) == (4_608, 49_152, 73_728)
    assert odd["mlp/in"] + odd["mlp/out"] == 73_728
    attention = {k: v for k, v in even.items() if k.startswith("attention/")}
    assert attention == {k: v for k, v in odd.items() if k.startswith("attention/")}
    assert attention["attention/q/down"] == 2 * 8 * 32 * 12 and attention["attention/score"] == 2 * 8 * 8 * 4 * (12 + 8)


def test_active_parameters_count_the_expected_real_experts():
    """Active = total - (6 - 3 x 6 / 9) experts of 3 x 32 x 16 = 4 x 1,536 per MoE block - padding."""
    c = count_params(from_hf_config(TINY))
    assert c.total - c.active == 2 * (4 * 1_536 + 3 * 2 * 32 * 16)


@pytest.mark.parametrize(("data", "message"), [
    ({**TINY, "qk_head_dim": 20}, r"qk_head_dim: 20 must equal qk_nope_head_dim \+ qk_rope_head_dim \(12\)"),
    ({**TINY, "n_routed_experts": 0}, r"n_routed_experts: must be >= 1"),
    ({**TINY, "moe_topk": 7}, r"moe.top_k \(7\) must not exceed moe.num_experts \(6\)"),
])
def test_bad_configs_are_one_line_errors(data, message):
    assert_one_line_error(data, message)


def test_cli_count_plan_and_verify(tmp_path):
    assert_count_plan_verify(tmp_path, TINY, "moe.zero_experts", "moe.shortcut")