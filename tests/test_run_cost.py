"""Whole-run cost (modelplan.cost.run, `plan --tokens`): steps, time, checkpoints, failures, energy
and price, each worked by hand; and the CLI's run consistent with the plan's own step time."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from modelplan.cli.app import app
from modelplan.cli.run_options import parse_count
from modelplan.comm.clusters import load_cluster
from modelplan.cost.rampup import ramp_stages
from modelplan.cost.run import run_cost, young_interval_s
from modelplan.errors import SpecError
from modelplan.specs.run import MTBF_GPU_HOURS, RampUp, RunSpec

H100 = load_cluster("dgx-h100")


def price(run: RunSpec, step_time_s: float = 2.0, gpus: int = 64, batch: int = 512, seq: int = 4096,
          ckpt_bytes: int = 10**12, step_time_at=None):
    return run_cost(run, H100, gpus, batch, seq, step_time_s, ckpt_bytes, batch_multiple=8,
                    step_time_at=step_time_at)


def test_steps_cover_the_tokens():
    """1T tokens at 512 x 4096 tokens per step: ceil(1e12 / 2,097,152) = 476,838 steps, the last one whole."""
    cost = price(RunSpec(tokens=10**12))
    assert cost.steps == math.ceil(10**12 / (512 * 4096)) == 476_838
    assert cost.tokens == 476_838 * 512 * 4096
    assert cost.train_time_s == 476_838 * 2.0


def test_wall_clock_is_train_plus_checkpoints_over_failure_factor():
    """wall = (train + checkpoints) / (1 - rate x (restart + half a checkpoint period)), rate = gpus / MTBF."""
    run = RunSpec(steps=10_000, checkpoint_every=500, checkpoint_write_gbps=100.0, mtbf_gpu_hours=50_000.0,
                  restart_minutes=10.0)
    cost = price(run, ckpt_bytes=500 * 10**9)
    write_s = 500e9 / 100e9  # 5 s per checkpoint
    useful = 10_000 * 2.0 + 20 * write_s  # 20 checkpoints
    rate = 64 / (50_000 * 3600)
    lost = 600 + (500 * 2.0 + write_s) / 2
    assert cost.checkpoints == 20 and cost.checkpoint_write_s == pytest.approx(write_s)
    assert cost.wall_clock_s == pytest.approx(useful / (1 - rate * lost), rel=1e-12)
    assert cost.expected_failures == pytest.approx(rate * cost.wall_clock_s)
    assert cost.wall_clock_days == pytest.approx(cost.wall_clock_s / 86_400)
    assert cost.gpu_hours == pytest.approx(64 * cost.wall_clock_s / 3600)


def test_default_mtbf_is_llama3_interruption_rate():
    """Llama 3 report sec. 3.3.4: 419 unexpected interruptions in 54 days on 16,384 GPUs."""
    assert MTBF_GPU_HOURS == pytest.approx(16_384 * 54 * 24 / 419)


def test_young_interval_by_hand():
    """Young 1974: tau = sqrt(2 x 8 s x 36,000 s) = 758.9 s, i.e. 379 steps of 2 s."""
    assert young_interval_s(8.0, 36_000.0) == pytest.approx(math.sqrt(2 * 8 * 36_000))
    run = RunSpec(steps=100_000, checkpoint_write_gbps=125.0, mtbf_gpu_hours=36_000 / 3600 * 64)
    cost = price(run, ckpt_bytes=10**12)  # 8 s per checkpoint, job MTBF 10 h
    assert cost.checkpoint_every_rule == "young"
    assert cost.checkpoint_every_steps == round(math.sqrt(2 * 8 * 36_000) / 2.0) == 379


def test_energy_and_price():
    """Energy = GPU-hours x 0.7 kW (H100 SXM board power) x PUE; price = GPU-hours x $/GPU-hour."""
    cost = price(RunSpec(steps=1000, pue=1.2, price_per_gpu_hour_usd=2.0))
    assert cost.energy_kwh == pytest.approx(cost.gpu_hours * 0.7 * 1.2)
    assert cost.cost_usd == pytest.approx(cost.gpu_hours * 2.0)
    assert price(RunSpec(steps=1000)).price_per_gpu_hour_usd == H100.price_per_gpu_hour_usd


def test_rampup_follows_megatron_by_hand():
    """Global 16, ramp 4 -> 16 by 4 over 24 samples: 8 samples per increment; batches 4, 4, 8, 12, then 16."""
    stages = ramp_stages(RampUp(start_batch=4, increment=4, samples=24), 16)
    assert [(s.batch, s.steps) for s in stages] == [(4, 2), (8, 1), (12, 1)]


def test_rampup_steps_priced_at_their_batch():
    """A ramp step costs the step time at its own batch; 28 ramp samples then 16-sequence steps."""
    run = RunSpec(tokens=100 * 16 * 4096, rampup=RampUp(start_batch=8, increment=8, samples=16))
    cost = run_cost(run, H100, 8, 16, 4096, 2.0, 10**9, batch_multiple=8, step_time_at=lambda b: b / 8)
    # one increment of 16 samples: batches 8 (consumed 0), 8 (consumed 8), then 16: two ramp steps of 1 s
    assert cost.rampup_steps == 2
    assert cost.steps == 2 + math.ceil((1600 - 16) / 16)
    assert cost.train_time_s == pytest.approx(2 * 1.0 + 99 * 2.0)


def test_rampup_batches_must_split_over_data_parallel_ranks():
    """A ramp batch that dp x micro_batch does not divide is an error with the numbers."""
    with pytest.raises(SpecError, match=r"increment \(4\) must be a multiple of dp x micro_batch \(8\)"):
        price(RunSpec(steps=10, rampup=RampUp(start_batch=8, increment=4, samples=100)), step_time_at=lambda b: 1.0)


def test_never_finishing_job_is_an_error():
    """A job that fails faster than a failure's cost never finishes: a one-line error."""
    with pytest.raises(SpecError, match="never finishes"):
        price(RunSpec(steps=1000, mtbf_gpu_hours=1.0, checkpoint_every=1000))


@pytest.mark.parametrize(("text", "value"), [("15T", 15 * 10**12), ("300B", 300 * 10**9), ("2.5e12", 2_500_000_000_000),
                                             ("1,000", 1000)])
def test_parse_count(text, value):
    """Token counts take SI multipliers (15T = 15 x 10^12)."""
    assert parse_count(text, "tokens") == value


UNITS = ("_s", "_days", "_hours", "_gpu_hours", "_kwh", "_usd", "_bytes", "_gbps", "_w", "_steps")
COUNTS = {"gpus", "steps", "tokens", "rampup_steps", "checkpoints", "expected_failures", "pue"}
"""Plain counts (their unit is their name) and PUE, a ratio."""


def test_cli_tokens_consistent_with_step_time_to_the_second():
    """`plan --tokens --json`: run.train_time_s = steps x the best plan's predicted step time (within 1 s),
    steps = ceil(tokens / (batch x seq)), and every number in `run` carries its unit in its key."""
    result = CliRunner().invoke(app, ["plan", "llama-3-8b", "--gpus", "64", "--batch", "256", "--seq", "4096",
                                      "--tokens", "1T", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    run, step = doc["run"], doc["plans"][0]["predictions"]["step_time"]["step_time_s"]
    assert run["steps"] == math.ceil(10**12 / (256 * 4096))
    assert abs(run["train_time_s"] - run["steps"] * step) < 1.0
    assert abs(run["wall_clock_days"] * 86_400 - run["wall_clock_s"]) < 1.0
    for key, value in run.items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            assert key in COUNTS or key.endswith(UNITS), key


def test_cli_run_options_need_tokens_or_steps():
    """--price-per-gpu-hour alone is a one-line error (exit 2)."""
    result = CliRunner().invoke(app, ["plan", "gpt2", "--gpus", "8", "--price-per-gpu-hour", "2"])
    assert result.exit_code == 2
    assert "--tokens or --steps" in result.output
