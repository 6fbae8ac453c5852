"""GPipe (Huang et al. 2019): every rank runs all forwards, then all backwards (in reverse
micro-batch order). One chunk per rank; every micro-batch's activations stay until its backward."""

from __future__ import annotations

from modelplan.plan.pipeline.actions import Action, ActionKind, StageLayout, strided_layout
from modelplan.plan.pipeline.steady import Steady
from modelplan.plan.problems import Problem

F, B = ActionKind.F, ActionKind.B


def layout(pp: int, vpp: int) -> StageLayout:
    """Stage r on rank r."""
    return strided_layout(pp, 1)


def rank_actions(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> list[Action]:
    """F0 .. F(m-1), then B(m-1) .. B0."""
    m = num_microbatches
    return [Action(F, i) for i in range(m)] + [Action(B, i) for i in reversed(range(m))]


def problem(pp: int, num_microbatches: int, vpp: int) -> Problem | None:
    return None


def steady(pp: int, vpp: int) -> Steady:
    """Idle time is (p-1)(t_f + t_b) from one micro-batch on; the held activations grow with m."""
    return Steady(timing_from=1, memory_from=1, period=1)


def bubble_formula(pp: int, num_microbatches: int, vpp: int) -> str:
    """Narayanan et al. 2021, sec. 2.2.1."""
    return f"(p-1)/m = {pp - 1}/{num_microbatches}"
