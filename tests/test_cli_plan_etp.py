"""`modelplan plan --etp` (Megatron-core `--expert-tensor-parallel-size`): a published MoE layout
the CLI refused without it, the expert grid's group arithmetic worked by hand from Megatron-core
0.16.1's rule, bad values, the searched list, the export and verify's refusal.

Megatron-core 0.16.1 `parallel_state.initialize_model_parallel`: expert_tensor_parallel_size
defaults to tp; `world_size % (etp * ep * pp)` must be 0 (else RuntimeError) and
expert_data_parallel_size = world_size // (etp * ep * pp): the ranks that reduce one expert's
gradients and shard its distributed-optimizer states.
"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.plan.shard import unit_groups

runner = CliRunner()

# Megatron-Bridge 25.11 Qwen3-235B-A22B pre-training on 256 H100 (recommended_model_configs_h100.csv:
# tp 2, pp 8, vp 4, ep 32, etp 1, mbs 1, gbs 2048, seq 4096, fp8 current scaling)
QWEN3_235B = ["plan", "qwen3-235b-a22b", "--gpus", "256", "--tp", "2", "--pp", "8", "--dp", "16", "--ep", "32",
              "--vpp", "4", "--schedule", "interleaved", "--micro-batch", "1", "--batch", "2048", "--seq", "4096",
              "--precision", "fp8", "--fp8-recipe", "current", "--fp8-param-gather", "--grad-dtype", "same",
              "--zero", "1", "--recompute", "none", "--sequence-parallel", "--top", "1", "--json"]
# Mixtral-8x7B (HF config.json: 32 layers, hidden 4096, 8 experts of intermediate 14336, SwiGLU:
# gate, up and down projections, 3 x 4096 x 14336 parameters per expert)
MIXTRAL = ["plan", "mixtral-8x7b", "--gpus", "32", "--tp", "2", "--pp", "1", "--dp", "16", "--ep", "8",
           "--micro-batch", "1", "--batch", "64", "--seq", "4096", "--zero", "1", "--recompute", "full",
           "--schedule", "1f1b", "--sequence-parallel", "--top", "2", "--json"]
EXPERT_PARAMS = 3 * 4096 * 14336


def _plans(args: list[str]) -> list[dict]:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.output)["plans"]


def test_megatron_rule_by_hand():
    """Qwen3 235B above: etp 1 x ep 32 x pp 8 = 256 divides the 256 GPUs, expert data parallel
    256 // 256 = 1; at Megatron's default etp = tp = 2 it is 512, which 256 does not divide. Dense
    gradients reduce over dp x cp = 16 ranks."""
    assert 256 % (1 * 32 * 8) == 0 and 256 // (1 * 32 * 8) == 1
    assert 256 % (2 * 32 * 8) != 0
    assert unit_groups(2, 16, 1, 32, 1) == (16, 1)
    assert unit_groups(2, 16, 1, 8, None) == (16, 2)  # etp = tp: 2 x 16 / (8 x 2) = dp / ep


def test_published_layout_refused_with_experts_over_tp_and_priced_with_etp_1():
    """With the experts split over tp (no --etp, or --etp tp: Megatron-core's default) ep must
    divide dp, the refusal the CLI gave before --etp existed; with --etp 1 (the recipe's), and with
    --etp 1,tp (both searched), the published layout is priced, etp 1 on the plan."""
    for default in ([], ["--etp", "tp"]):
        refused = runner.invoke(app, [*QWEN3_235B, *default])
        assert refused.exit_code != 0
        assert "ep (32) must divide dp (16)" in refused.output
        assert "Traceback" not in refused.output
    plan = _plans([*QWEN3_235B, "--etp", "1"])[0]["plan"]
    assert (plan["tp"], plan["pp"], plan["dp"], plan["ep"], plan["etp"], plan["vpp"]) == (2, 8, 16, 32, 1, 4)
    assert _plans([*QWEN3_235B, "--etp", "1,tp"])[0]["plan"]["etp"] == 1


def test_expert_bytes_follow_the_expert_grid():
    """Mixtral on tp 2 x dp 16, ep 8: each rank holds 8 / 8 = 1 expert of every layer, whole at
    etp 1, half at etp 2 (= tp): bf16 weights differ by 2 B x 32 x EXPERT_PARAMS / 2, fp32
    gradients by 4 B x the same. The distributed optimizer shards expert states over the
    expert-data-parallel group, 32 // (1 x 8) = 4 ranks at etp 1 and 32 // (2 x 8) = 2 at etp 2,
    so 12 B x params / group is the same: 12 x 32 EXPERT_PARAMS / 4 = 12 x 16 EXPERT_PARAMS / 2."""
    whole = _plans([*MIXTRAL, "--etp", "1"])[0]
    half = _plans([*MIXTRAL, "--etp", "2"])[0]
    assert (whole["plan"]["etp"], half["plan"]["etp"]) == (1, 2)
    a, b = (p["predictions"]["memory"]["stages"][0] for p in (whole, half))
    shard = 32 * EXPERT_PARAMS // 2
    assert a["weights_bytes"] - b["weights_bytes"] == 2 * shard
    assert a["gradients_bytes"] - b["gradients_bytes"] == 4 * shard
    assert a["optimizer_bytes"] == b["optimizer_bytes"]


def test_etp_list_searches_each_size():
    """--etp 1,tp: one search per size, merged: both layouts ranked, the faster first (the other
    searched axes pinned, so the two plans differ in etp alone)."""
    plans = _plans([*MIXTRAL, "--etp", "1,tp", "--tp-overlap", "none", "--dp-overlap", "--no-offload-activations",
                    "--offload-optimizer", "none", "--rank-order", "tp-cp-dp-pp", "--fsdp-shard-size", "0",
                    "--no-zeropp"])
    assert sorted(p["plan"]["etp"] or 2 for p in plans) == [1, 2]
    times = [p["predictions"]["step_time"]["step_time_s"] for p in plans]
    assert times == sorted(times)


@pytest.mark.parametrize("value, message", [
    ("0", "--etp: 0 must be between 1"),
    ("x", "--etp: expected sizes >= 1 or 'tp'"),
    ("3", "etp (3) must divide moe.expert_ffn_hidden (14336)"),
])
def test_bad_etp_is_one_line(value, message):
    """Bad input: one line naming the field, a non-zero exit, no traceback."""
    result = runner.invoke(app, [*MIXTRAL, "--etp", value])
    assert result.exit_code != 0, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def test_etp_on_a_dense_model_is_refused():
    result = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "8", "--tp", "2", "--dp", "4", "--pp", "1",
                                 "--etp", "1", "--batch", "64", "--seq", "2048", "--json"])
    assert result.exit_code != 0
    assert "--etp: Llama-3-8B has no routed experts" in result.output


def test_export_carries_etp_to_megatron_core(tmp_path):
    """The planned etp 1 reaches megatron-core 0.16.1's TransformerConfig as
    expert_tensor_parallel_size, and the grid passes parallel_state's world-size rule."""
    from _engines import engine_module
    from _megatron_rules import parse_flags, read_script, transformer_config_kwargs

    from modelplan.export.engines import export_plan
    from modelplan.plan.document import read_plan_document

    tc = engine_module("megatron.core.transformer.transformer_config")
    doc = tmp_path / "plan.json"
    result = runner.invoke(app, [*MIXTRAL, "--etp", "1", "-o", str(doc)])
    assert result.exit_code == 0, result.output
    parsed = read_plan_document(doc)
    _, argv = read_script(export_plan("megatron", parsed.model, parsed.training, parsed.plan).text)
    config = tc.TransformerConfig(**transformer_config_kwargs(parse_flags(argv)))
    assert (config.expert_tensor_parallel_size, config.expert_model_parallel_size,
            config.tensor_model_parallel_size) == (1, 8, 2)
    world = parsed.plan.world_size
    assert world == 32 and world % (1 * 8 * 1) == 0


def test_verify_refuses_an_expert_tensor_parallel_plan(tmp_path):
    """verify's executor splits experts over tp: a plan with another etp is refused in one line."""
    doc = tmp_path / "plan.json"
    assert runner.invoke(app, [*MIXTRAL, "--etp", "1", "-o", str(doc)]).exit_code == 0
    result = runner.invoke(app, ["verify", str(doc)])
    assert result.exit_code != 0
    assert "plan.etp (1)" in result.output
    assert "Traceback" not in result.output
