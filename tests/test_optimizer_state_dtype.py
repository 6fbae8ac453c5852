"""`TrainingSpec.optimizer_state_dtype` (`plan --optimizer-state-dtype`): Adam's m and v in the
compute dtype, as torch.optim.AdamW keeps them over bf16 parameters (`zeros_like(param)`). Expected
bytes from the hand-counted Llama-2-7B: 32 blocks x 202,383,360 + 2 x 32,000 x 4,096 (embedding,
head) + 4,096 (final norm) = 6,738,415,616 parameters."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.count.memory import count_memory
from modelplan.plan.engine import engine_settings
from modelplan.plan.parallel.dp_zero import state_bytes_per_param
from modelplan.plan.rank_states import RankStates
from modelplan.specs.load import load_engine, load_model
from modelplan.specs.training import TrainingSpec

LLAMA2 = load_model("llama-2-7b")
PARAMS = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008 + 2 * 4096) + 2 * 32_000 * 4096 + 4096  # 6,738,415,616
BASE = dict(global_batch=8, seq_len=4096, precision="bf16", master_weights=False)


def test_state_bytes_per_param():
    """Adam: 2 states; fp32 with a master copy is ZeRO's K = 12; bf16 states without one 4."""
    assert state_bytes_per_param(2, True) == 12
    assert state_bytes_per_param(2, False, 2) == 4
    assert TrainingSpec(**BASE, optimizer_state_dtype="same").optimizer_state_bytes == 2
    assert TrainingSpec(**BASE).optimizer_state_bytes == 4


def test_count_holds_bf16_moments():
    """`modelplan count`: m and v at 2 bytes each, 2 x 2 x 6,738,415,616."""
    assert PARAMS == 6_738_415_616
    same = count_memory(LLAMA2, TrainingSpec(**BASE, optimizer_state_dtype="same"), 1)
    fp32 = count_memory(LLAMA2, TrainingSpec(**BASE), 1)
    assert same.optimizer == 4 * PARAMS and fp32.optimizer == 8 * PARAMS


def test_plan_shards_bf16_moments_over_zero3():
    """ZeRO-3 over 8 ranks, no master copy: 4 bytes a parameter / 8 instead of 8 / 8."""
    def optimizer(dtype: str) -> float:
        training = TrainingSpec(**BASE, framework="torchtitan", optimizer_state_dtype=dtype)
        held = RankStates(LLAMA2, training, engine_settings(training, load_engine("torchtitan")))
        return held.rank_states(1, 1, 8, 3, 0)[2]

    assert optimizer("fp32") - optimizer("same") == PARAMS * 4 / 8


def test_cli_flag_reaches_the_training_spec():
    args = ["plan", "llama-2-7b", "--gpus", "8", "--tp", "1", "--pp", "1", "--dp", "8", "--zero", "3", "--batch", "8",
            "--seq", "4096", "--micro-batch", "1", "--framework", "torchtitan", "--no-master-weights", "--top", "1",
            "--json", "--optimizer-state-dtype", "same"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["training"]["optimizer_state_dtype"] == "same"
    bad = CliRunner().invoke(app, [*args[:-1], "bf16"])
    assert bad.exit_code != 0 and "Traceback" not in bad.output
