"""ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR 2024, sec. 2.1 and fig. 3
top): 1F1B with every backward split into B, the gradient of the stage's input, which the
previous stage waits for, and W, the gradient of its weights, which nobody waits for. Rank r
runs 1F1B's pp - r - 1 warmup forwards, then F / B pairs, and delays each W by r micro-batches
(the later stages start their backwards earlier, the delayed W fill the drain), so every rank
holds at most pp micro-batches from F to W, 1F1B's peak (paper: p M_B), and the bubble shrinks
from (p-1)(T_F + T_B + T_W) to (p-1)(T_F + T_B - T_W) (paper, Table 2). One chunk per rank."""

from __future__ import annotations

from modelplan.plan.pipeline.actions import Action, ActionKind, StageLayout, strided_layout
from modelplan.plan.pipeline.steady import Steady
from modelplan.plan.problems import Problem

F, B, W = ActionKind.F, ActionKind.B, ActionKind.W


def layout(pp: int, vpp: int) -> StageLayout:
    """Stage r on rank r."""
    return strided_layout(pp, 1)


def rank_actions(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> list[Action]:
    m = num_microbatches
    warmup = min(pp - pp_rank - 1, m)
    steps = [Action(F, i) for i in range(warmup)]  # warmup: as 1F1B
    pending: list[int] = []
    for k in range(m):  # steady state, then cooldown: F (while any is left), B, and a delayed W
        if warmup + k < m:
            steps.append(Action(F, warmup + k))
        steps.append(Action(B, k))
        pending.append(k)
        if k >= pp_rank:  # W of micro-batch k - r
            steps.append(Action(W, pending.pop(0)))
    steps += [Action(W, i) for i in pending]  # the last r weight gradients fill the drain
    return steps


def problem(pp: int, num_microbatches: int, vpp: int) -> Problem | None:
    return None


def steady(pp: int, vpp: int) -> Steady:
    """Idle (p-1)(T_F + T_B - T_W) and each rank's peak are fixed from m = pp on (below, the
    delayed W cannot fill the drain)."""
    return Steady(timing_from=pp, memory_from=pp, period=1)


def bubble_formula(pp: int, num_microbatches: int, vpp: int) -> str:
    """Qi et al. 2024, Table 2, with T_F = T_B = T_W."""
    return f"(p-1)(T_F+T_B-T_W)/(m(T_F+T_B+T_W)) = {pp - 1}/(3*{num_microbatches})"
