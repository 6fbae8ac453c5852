"""`modelplan plan --no-rope-fusion` (`TrainingSpec.rope_fusion`): Megatron-core's unfused rotary
path (rope_utils `_apply_rotary_pos_emb_bshd`, 12d forward / 10d backward per q / k value against the
fused kernel's 2d / 2d: plan/rotary_fusion.py) makes the same Megatron plan's step longer, and a
torchtitan plan (no Megatron-core rotary) does not move."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app

BASE = ["plan", "llama-2-7b", "--gpus", "8", "--cluster", "dgx-h100", "--dp", "8", "--tp", "1", "--pp", "1",
        "--micro-batch", "1", "--global-batch", "8", "--seq", "4096", "--json", "--top", "1"]


def _step_s(args: list[str]) -> float:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["plans"][0]["predictions"]["step_time"]["step_time_s"]  # warnings: stderr


def test_megatron_unfused_rotary_is_slower():
    args = [*BASE, "--framework", "megatron"]
    assert _step_s([*args, "--no-rope-fusion"]) > _step_s(args)


def test_torchtitan_ignores_the_setting():
    args = [*BASE, "--framework", "torchtitan"]
    assert _step_s([*args, "--no-rope-fusion"]) == pytest.approx(_step_s(args))
