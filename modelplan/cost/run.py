"""A whole training run from one plan's step time: steps, wall clock, GPU-hours, energy, price.

    train time        sum over steps of the plan's step time (at each ramp-up batch, then the global batch)
    checkpoints       ceil(steps / every) synchronous saves of the model states the run resumes
                      from (weights, fp32 master weights, optimizer states: Megatron's distributed
                      checkpoint), each stalling the job for bytes / write bandwidth
    failures          a job on g GPUs fails at rate g / MTBF_gpu; each failure costs the restart and,
                      on average, half a checkpoint period of lost work c, and failures also strike
                      during that overhead, so wall = (train + checkpoints) / (1 - rate x c)
                      (the first-order model of Young 1974 / Daly 2006)
    checkpoint every  if not given: Young's optimum sqrt(2 x write time x job MTBF), in steps
    energy            GPU-hours x board power x PUE (accelerator boards at full power; host CPUs,
                      NICs and switches are not counted)
    price             GPU-hours x price per GPU-hour
"""

from __future__ import annotations

import math
from typing import Callable

from modelplan.cost.rampup import check_rampup, ramp_stages, ramp_time_s
from modelplan.count.result import Result
from modelplan.errors import SpecError
from modelplan.specs.hardware import Cluster
from modelplan.specs.run import RunSpec

SECONDS_PER_DAY = 86_400


class RunCost(Result):
    """The whole run; every figure's unit is in its name (counts are plain: steps, tokens)."""


    gpus: int
    steps: int
    tokens: int
    """Tokens the steps process (>= the requested tokens: the last step is whole)."""
    rampup_steps: int
    """Steps taken below the global batch while it ramps up."""
    step_time_s: float
    """The plan's step time at the global batch."""
    train_time_s: float
    """All steps back to back."""
    checkpoint_every_steps: int
    checkpoint_every_rule: str
    """'given', or 'young' (Young 1974 optimal interval for this job's MTBF)."""
    checkpoints: int
    checkpoint_bytes: int
    """Bytes one checkpoint writes (weights + master weights + optimizer states)."""
    checkpoint_write_gbps: float
    checkpoint_write_s: float
    """Seconds one checkpoint stalls the job."""
    checkpoint_time_s: float
    mtbf_gpu_hours: float
    job_mtbf_hours: float
    """Mean hours between failures of the whole job: MTBF per GPU / GPUs."""
    expected_failures: float
    restart_s: float
    lost_work_per_failure_s: float
    """Restart plus half a checkpoint period (the work since the last checkpoint, on average)."""
    failure_overhead_s: float
    wall_clock_s: float
    wall_clock_days: float
    gpu_hours: float
    board_power_w: float | None
    pue: float
    energy_kwh: float | None
    """None when the accelerator preset states no board power."""
    price_per_gpu_hour_usd: float | None
    price_source: str
    cost_usd: float | None
    """None when no price was given and the cluster preset lists none."""


def young_interval_s(write_s: float, job_mtbf_s: float) -> float:
    """Young 1974: the checkpoint interval minimising expected lost time, sqrt(2 delta M)."""
    return math.sqrt(2.0 * write_s * job_mtbf_s)


def run_cost(
    run: RunSpec,
    cluster: Cluster,
    gpus: int,
    global_batch: int,
    seq_len: int,
    step_time_s: float,
    checkpoint_bytes: int,
    batch_multiple: int = 1,
    step_time_at: Callable[[int], float] | None = None,
) -> RunCost:
    """Price the whole run of a plan whose step (global batch of `seq_len`-token sequences) takes
    `step_time_s`. `step_time_at(batch)` prices ramp-up steps (the same plan at a smaller batch);
    `batch_multiple` (dp x micro_batch) must divide every ramp batch."""
    stages = []
    if run.rampup is not None:
        check_rampup(run.rampup, global_batch, batch_multiple)
        if step_time_at is None:
            raise SpecError("rampup: needs the step time at each ramp batch (step_time_at)")
        target_samples = None if run.tokens is None else math.ceil(run.tokens / seq_len)
        stages = ramp_stages(run.rampup, global_batch, target_samples, run.steps)
    ramp_steps = sum(s.steps for s in stages)
    ramp_samples = sum(s.steps * s.batch for s in stages)
    if run.steps is not None:
        rest_steps = run.steps - ramp_steps
    else:
        rest_samples = max(0, math.ceil(run.tokens / seq_len) - ramp_samples)
        rest_steps = math.ceil(rest_samples / global_batch)
    steps = ramp_steps + rest_steps
    tokens = (ramp_samples + rest_steps * global_batch) * seq_len
    train_s = rest_steps * step_time_s + (ramp_time_s(stages, step_time_at) if stages else 0.0)

    write_gbps = run.write_gbps(gpus)
    write_s = checkpoint_bytes / (write_gbps * 1e9)
    rate_per_s = gpus / (run.mtbf_gpu_hours * 3600.0)  # failures of the job per second
    if run.checkpoint_every is not None:
        every, rule = run.checkpoint_every, "given"
    else:
        every = max(1, round(young_interval_s(write_s, 1.0 / rate_per_s) / step_time_s))
        rule = "young"
    every = min(every, steps)
    checkpoints = math.ceil(steps / every)
    checkpoint_s = checkpoints * write_s
    restart_s = 60.0 * run.restart_minutes
    lost_s = restart_s + (every * step_time_s + write_s) / 2.0
    if rate_per_s * lost_s >= 1.0:
        raise SpecError(
            f"failures: the job fails every {1 / rate_per_s / 3600:.2f} h on average, less than the "
            f"{lost_s / 3600:.2f} h each failure costs (restart + half a checkpoint period): it never finishes; "
            "checkpoint more often (--checkpoint-every) or restart faster (--restart-minutes)")
    useful_s = train_s + checkpoint_s
    wall_s = useful_s / (1.0 - rate_per_s * lost_s)
    gpu_hours = gpus * wall_s / 3600.0
    power = cluster.accelerator.board_power_w
    energy = None if power is None else gpu_hours * power / 1000.0 * run.pue
    price = run.price_per_gpu_hour_usd if run.price_per_gpu_hour_usd is not None else cluster.price_per_gpu_hour_usd
    source = "--price-per-gpu-hour" if run.price_per_gpu_hour_usd is not None else cluster.price_source
    return RunCost(
        gpus=gpus, steps=steps, tokens=tokens, rampup_steps=ramp_steps, step_time_s=step_time_s,
        train_time_s=train_s, checkpoint_every_steps=every, checkpoint_every_rule=rule, checkpoints=checkpoints,
        checkpoint_bytes=checkpoint_bytes, checkpoint_write_gbps=write_gbps, checkpoint_write_s=write_s,
        checkpoint_time_s=checkpoint_s, mtbf_gpu_hours=run.mtbf_gpu_hours,
        job_mtbf_hours=run.mtbf_gpu_hours / gpus, expected_failures=rate_per_s * wall_s, restart_s=restart_s,
        lost_work_per_failure_s=lost_s, failure_overhead_s=wall_s - useful_s, wall_clock_s=wall_s,
        wall_clock_days=wall_s / SECONDS_PER_DAY, gpu_hours=gpu_hours, board_power_w=power, pue=run.pue,
        energy_kwh=energy, price_per_gpu_hour_usd=price, price_source=source if price is not None else "",
        cost_usd=None if price is None else gpu_hours * price,
    )


def checkpoint_bytes(weights: int, master_weights: int, optimizer: int) -> int:
    """What a resumable checkpoint holds: the weights, fp32 master weights and optimizer states
    (Megatron saves these; gradients are recomputed after a restart)."""
    return weights + master_weights + optimizer
