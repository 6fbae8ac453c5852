"""xLSTM (modelplan/specs/hf_xlstm.py, specs/mlstm.py, count/mlstm.py, plan/mlstm.py): the mLSTM
mixer. Totals equal transformers 5.24's xLSTMForCausalLM built on CPU from small configs (and on
the meta device at the class defaults, NX-AI/xLSTM-7b: 6,865,424,896); FLOPs, kept bytes and the
state by hand; `count` / `plan` run and `verify` refuses the mixer in one line."""

from __future__ import annotations

import pytest

from _hf_n17_checks import assert_count_plan_verify, assert_one_line_error, class_defaults
from _hf_reference import hf_model, hf_numel
from modelplan.count.flops import layer_forward_flops
from modelplan.count.memory import kv_cache_bytes
from modelplan.count.params import count_params
from modelplan.plan.kernels import layer_kernels
from modelplan.count.blocks import block_of
from modelplan.specs.hf import from_hf_config

TINY = dict(model_type="xlstm", hidden_size=64, num_hidden_layers=2, num_heads=4, vocab_size=101, chunk_size=4)
CASES = [
    TINY,
    {**TINY, "use_bias": True, "tie_word_embeddings": True},  # never tied (weight_mode fused: transformers 5.24 fails to initialise it)
    {**TINY, "qk_dim_factor": 0.25, "v_dim_factor": 0.5, "ffn_proj_factor": 1.3, "ffn_round_up_to_multiple_of": 16},
]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", CASES, ids=[f"xlstm-{i}" for i in range(len(CASES))])
def test_total_equals_transformers_on_cpu(data):
    model = hf_model(data, device="cpu")
    assert count_params(from_hf_config(data)).total == sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.slow
def test_class_defaults_equal_transformers():
    data = class_defaults("xlstm")
    assert count_params(from_hf_config(data)).total == hf_numel(data) == 6_865_424_896


def test_block_parameters_by_hand():
    """h 64, 4 heads, q/k 32, v 64, FFN round_up(64 x 2.667, 64) = 192: q, k, v, o 64 x 192 =
    12,288; i / f gates 2 x (64 x 4 + 4) = 520; norm 64; out_proj 4,096; FFN 3 x 64 x 192 = 36,864;
    two RMSNorms 128."""
    b = count_params(from_hf_config(TINY)).breakdown
    assert (b["layers/mlstm/in_proj"], b["layers/mlstm/gates"], b["layers/mlstm/norm"], b["layers/mlstm/out_proj"]) == (
        2 * 12_288, 2 * 520, 2 * 64, 2 * 4_096)
    assert b["layers/mlp"] == 2 * 36_864 and b["layers/norm"] == 2 * 128


def test_block_flops_by_hand():
    """8 tokens of one sequence, chunk 4, d_qk 8, d_v 16: in_proj 2 x 8 x 64 x 192 = 196,608,
    gates 2 x 8 x 64 x 8 = 8,192, scan 8 x 4 x (2 x 4 x 24 + 4 x 8 x 16) = 22,528, out_proj
    2 x 8 x 64 x 64 = 65,536; the planner's GEMMs carry the same mixer FLOPs."""
    spec = from_hf_config(TINY)
    flops = layer_forward_flops(spec, 0, 8, 8)
    assert {k: v for k, v in flops.items() if k.startswith("mlstm/")} == {
        "mlstm/in_proj": 196_608, "mlstm/gates": 8_192, "mlstm/scan": 22_528, "mlstm/out_proj": 65_536}
    gemms = layer_kernels(spec, 1, 1, 8, 2, block=block_of(spec, 0)).gemms
    assert sum(g.flops for g in gemms if g.name.startswith("mlstm/")) == 196_608 + 8_192 + 22_528 + 65_536


def test_state_cache_by_hand():
    """Per block and sequence C (4 x 8 x 16) + n (4 x 8) + m (4) = 548 values, whatever the length."""
    spec = from_hf_config(TINY)
    assert kv_cache_bytes(spec, 1, 10, 2) == kv_cache_bytes(spec, 1, 1000, 2) == 2 * 2 * 548


@pytest.mark.parametrize(("data", "message"), [
    ({**TINY, "num_heads": 3}, r"num_heads: 3 must divide the q/k width 32"),
    ({**TINY, "embedding_dim": 32}, r"embedding_dim: 32 differs from hidden_size 64"),
    ({**TINY, "ffn_round_up_to_multiple_of": 0}, r"ffn_round_up_to_multiple_of: must be >= 1"),
])
def test_bad_configs_are_one_line_errors(data, message):
    assert_one_line_error(data, message)


def test_cli_count_plan_and_verify(tmp_path):
    assert_count_plan_verify(tmp_path, TINY, "layer_types=mlstm")