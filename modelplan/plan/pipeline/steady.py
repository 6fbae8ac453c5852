"""When a schedule's timeline repeats itself (what lets the planner simulate a few micro-batches)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Steady:
    """From `timing_from` micro-batches on, `period` more micro-batches add the same busy time to
    every rank and no idle time; from `memory_from` on, they change each rank's peak of held
    activations by the same amount (0 for 1F1B, `period` for GPipe). Tests check both against the
    full simulation for every schedule."""

    timing_from: int
    memory_from: int
    period: int
