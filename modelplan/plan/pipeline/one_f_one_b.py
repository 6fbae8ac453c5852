"""1F1B (PipeDream-Flush; Narayanan et al. 2021, sec. 2.2.1), as Megatron-LM's
`forward_backward_pipelining_without_interleaving`: rank r runs pp - r - 1 warmup forwards, then
one forward and one backward at a time, then the cooldown backwards. One chunk per rank."""

from __future__ import annotations

from fractions import Fraction

from modelplan.plan.pipeline.actions import Action, ActionKind, StageLayout, strided_layout
from modelplan.plan.pipeline.steady import Steady
from modelplan.plan.problems import Problem

F, B = ActionKind.F, ActionKind.B


def layout(pp: int, vpp: int) -> StageLayout:
    """Stage r on rank r."""
    return strided_layout(pp, 1)


def rank_actions(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> list[Action]:
    m = num_microbatches
    steps: list[Action] = []
    # warmup: rank r runs pp - r - 1 forwards before its first backward
    num_warmup_microbatches = min(pp - pp_rank - 1, m)
    for i in range(num_warmup_microbatches):
        steps.append(Action(F, i))
    # steady state: one forward, one backward
    num_remaining = m - num_warmup_microbatches
    for i in range(num_remaining):
        steps.append(Action(F, num_warmup_microbatches + i))
        steps.append(Action(B, i))
    # cooldown: the backwards of the warmup micro-batches
    for i in range(num_remaining, m):
        steps.append(Action(B, i))
    return steps


def problem(pp: int, num_microbatches: int, vpp: int) -> Problem | None:
    return None


def steady(pp: int, vpp: int) -> Steady:
    """Idle (p-1)(t_f + t_b) from one micro-batch on; rank r holds min(pp - r, m), fixed from m = pp."""
    return Steady(timing_from=1, memory_from=pp, period=1)


def bubble(pp: int, num_microbatches: int, vpp: int) -> Fraction:
    """`profile.simulate`'s idle time of the busiest rank in micro-batch times, in closed form: p - 1
    for every m (Narayanan et al. 2021, sec. 2.2.1: a bubble of (p-1)(t_f + t_b) next to m (t_f + t_b)
    of work). tests/test_schedule_closed_form.py checks it against the simulation of these lists."""
    return Fraction(pp - 1)


def held_peak(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> int:
    """`profile.held_peak(rank_actions(...))` in closed form: the warmup forwards and the first
    steady one, min(pp - r, m) (no W: every B frees one). Checked against the list by the test above."""
    return min(pp - pp_rank, num_microbatches)


def bubble_formula(pp: int, num_microbatches: int, vpp: int) -> str:
    """Narayanan et al. 2021, sec. 2.2.1."""
    return f"(p-1)/m = {pp - 1}/{num_microbatches}"
