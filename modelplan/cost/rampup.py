"""Batch-size ramp-up as Megatron-LM runs it (megatron/core/num_microbatches_calculator.py,
RampupBatchsizeNumMicroBatchesCalculator): before each step the global batch is
    start + floor(consumed / samples_per_increment) x increment   while consumed <= ramp samples,
    the global batch                                              afterwards,
with samples_per_increment = ramp samples / ((global - start) / increment)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.run import RampUp


@dataclass
class RampStage:
    """Steps run at one batch size below the global batch."""

    batch: int
    steps: int


def check_rampup(rampup: RampUp, global_batch: int, batch_multiple: int) -> None:
    """Megatron's checks, every number in the message; plus: each ramp batch splits into the plan's
    data-parallel micro-batches (dp x micro_batch divides it)."""
    diff = global_batch - rampup.start_batch
    if diff < 0:
        raise SpecError(f"rampup: start batch ({rampup.start_batch}) exceeds the global batch ({global_batch})")
    if diff % rampup.increment:
        raise SpecError(f"rampup: global batch - start ({diff}) must be a multiple of the increment ({rampup.increment})")
    for value, what in ((rampup.start_batch, "start batch"), (rampup.increment, "increment")):
        if value % batch_multiple:
            raise SpecError(f"rampup: {what} ({value}) must be a multiple of dp x micro_batch ({batch_multiple})")


def ramp_stages(rampup: RampUp, global_batch: int, target_samples: int | None = None,
                target_steps: int | None = None) -> list[RampStage]:
    """Steps per batch size below the global batch, until the ramp ends (or the run does first).

    Walks the steps one by one exactly as Megatron updates them (a ramp has at most a few
    hundred thousand steps).
    """
    increments = (global_batch - rampup.start_batch) // rampup.increment
    if increments == 0 or rampup.samples == 0:
        return []
    per_increment = rampup.samples / increments
    stages: list[RampStage] = []
    consumed = steps = 0
    while consumed <= rampup.samples:
        if target_samples is not None and consumed >= target_samples:
            break
        if target_steps is not None and steps >= target_steps:
            break
        batch = min(global_batch, rampup.start_batch + int(consumed / per_increment) * rampup.increment)
        if batch == global_batch:
            break
        if stages and stages[-1].batch == batch:
            stages[-1].steps += 1
        else:
            stages.append(RampStage(batch, 1))
        consumed += batch
        steps += 1
    return stages


def ramp_time_s(stages: list[RampStage], step_time_at: Callable[[int], float]) -> float:
    """Seconds of the ramp: each stage's steps at that batch's step time."""
    return sum(stage.steps * step_time_at(stage.batch) for stage in stages)
