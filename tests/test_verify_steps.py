"""verify over several optimizer steps, and its measured memory.

Expected values are worked from the model by hand or counted by `count/params.py` (a module
the executor does not use): the per-step communication calls, the parameters a replica holds.
"""

from __future__ import annotations

import pytest

from modelplan.count.params import count_params
from modelplan.errors import ModelplanError
from modelplan.execute.verify import verify
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

GPT = TransformerSpec(name="gpt-tiny", layers=2, hidden=16, heads=4, ffn_hidden=32, vocab=32, max_positions=8,
                      position="learned", norm="layernorm", norm_bias=True, qkv_bias=True, attn_out_bias=True,
                      mlp_bias=True, gated_mlp=False, activation="gelu", tied_embeddings=True)
TRAIN = TrainingSpec(global_batch=4, seq_len=8, optimizer="adamw")


def rows(report):
    return {r.name: r for r in report.rows}


def test_three_steps_by_default_with_a_loss_curve():
    """The loss row shows one loss per step (3) and passes; the run differs step to step."""
    report = verify(GPT, TRAIN, Plan(dp=2), scale=False)
    assert report.passed, [r.detail for r in report.rows if not r.passed]
    loss = rows(report)["loss"]
    assert loss.detail.startswith("curve ") and loss.detail.count("->") == 2 and "over 3 steps" in loss.detail


def test_the_ledger_counts_every_step_and_the_start_up_once():
    """dp 2, ZeRO 0: 5 units (word embedding, positions, 2 blocks, head) -> 5 gradient AllReduces
    per rank per step, 3 steps x 2 ranks = 30 calls; their weight Broadcast once: 10 calls."""
    got = rows(verify(GPT, TRAIN, Plan(dp=2), scale=False))
    assert got["bytes all_reduce/dp"].detail.startswith("30 calls on 2 ranks")
    assert got["bytes broadcast/dp"].detail.startswith("10 calls on 2 ranks")


def test_measured_weight_memory_is_the_whole_replica_under_ddp():
    """Each DDP rank holds every parameter in float64: count_params x 8 B, on both ranks."""
    report = verify(GPT, TRAIN.model_copy(update={"optimizer": "sgd"}), Plan(dp=2), scale=False)
    weights = rows(report)["memory weights"]
    assert weights.passed and weights.measured == 2 * 8 * count_params(GPT).total


def test_measured_optimizer_memory_halves_under_zero1():
    """ZeRO-1 over dp 2: each rank keeps Adam's m and v for half of the (even) flat buffers."""
    full = rows(verify(GPT, TRAIN, Plan(dp=2), scale=False))["memory optimizer state"]
    sharded = rows(verify(GPT, TRAIN, Plan(dp=2, zero=1), scale=False))["memory optimizer state"]
    assert full.passed and sharded.passed and full.measured == 2 * 2 * 8 * count_params(GPT).total
    assert sharded.measured * 2 == full.measured


def test_zero_steps_is_an_error():
    with pytest.raises(ModelplanError, match=r"steps \(0\) must be an integer >= 1"):
        verify(GPT, TRAIN, Plan(dp=2), scale=False, steps=0)


def test_cli_steps_option_sets_the_curve_length():
    """--steps 2 --json: two losses in the curve."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli.app import app

    result = CliRunner().invoke(app, ["verify", "gpt2", "--dp", "2", "--steps", "2", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    loss = next(r for r in doc["rows"] if r["name"] == "loss")
    assert "over 2 steps" in loss["detail"] and doc["oracle"] == "numpy"
