"""ZB-V (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR 2024, sec. 6): the model is cut
into 2 pp stages and rank r holds two of them in a V, stage r (chunk 0) and stage 2 pp - 1 - r
(chunk 1), so a micro-batch runs down the ranks and back up and rank 0 holds both the first and
the last stage; the turn at rank pp - 1 passes the activation on within the rank. The backward is
split into B and W as in ZB-H1. Rank r runs 2(pp - r) - 1 chunk-0 forwards, r pairs of a chunk-1
and a chunk-0 forward, pp - r chunk-1 (F, B, W) triples, then the steady
(F0 B0 W0 F1 B1 W1) rounds, and drains with r (B0, B1) pairs, pp - r (B0, W0) pairs and the
remaining W (the paper's fig. 8 order; torch.distributed.pipelining's ScheduleZBVZeroBubble).
With fewer than 2 pp - 1 micro-batches the order is that of 2 pp - 1 without the missing ones.
The paper: zero bubble when T_F = T_B = T_W, and the peak of 1F1B, p micro-batches of a whole
rank (2 p chunk activations)."""

from __future__ import annotations

from modelplan.plan.pipeline.actions import Action, ActionKind, StageLayout
from modelplan.plan.pipeline.steady import Steady
from modelplan.plan.problems import Problem

F, B, W = ActionKind.F, ActionKind.B, ActionKind.W


def layout(pp: int, vpp: int) -> StageLayout:
    """2 pp stages; rank r holds stage r as chunk 0 and stage 2 pp - 1 - r as chunk 1."""
    return StageLayout(2 * pp, tuple((r, 2 * pp - 1 - r) for r in range(pp)))


def rank_actions(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> list[Action]:
    m, r = num_microbatches, pp_rank
    n = max(2 * pp - 1, m)  # the order is built for at least 2 pp - 1 micro-batches
    steps: list[Action] = []
    nxt = {(F, 0): 0, (F, 1): 0, (B, 0): 0, (B, 1): 0, (W, 0): 0, (W, 1): 0}

    def run(kind: ActionKind, chunk: int) -> None:
        steps.append(Action(kind, nxt[(kind, chunk)], chunk))
        nxt[(kind, chunk)] += 1

    for _ in range(2 * (pp - r) - 1):  # warmup: chunk-0 forwards
        run(F, 0)
    for _ in range(r):  # chunk-1 and chunk-0 forwards in turn
        run(F, 1)
        run(F, 0)
    for _ in range(pp - r):  # the first chunk-1 backwards, weights right after
        run(F, 1)
        run(B, 1)
        run(W, 1)
    while nxt[(F, 1)] < nxt[(F, 0)] or nxt[(F, 0)] < n:  # steady rounds
        if nxt[(F, 0)] < n:
            run(F, 0)
        run(B, 0)
        run(W, 0)
        run(F, 1)
        run(B, 1)
        run(W, 1)
    for _ in range(r):  # drain: input gradients first, weights later
        run(B, 0)
        run(B, 1)
    for _ in range(pp - r):
        run(B, 0)
        run(W, 0)
    while nxt[(W, 1)] < nxt[(B, 1)]:
        run(W, 1)
    while nxt[(W, 0)] < nxt[(B, 0)]:
        run(W, 0)
    return [a for a in steps if a.microbatch < m]


def problem(pp: int, num_microbatches: int, vpp: int) -> Problem | None:
    return None


def steady(pp: int, vpp: int) -> Steady:
    """From 2 pp micro-batches on every round adds one micro-batch's work and no idle time."""
    return Steady(timing_from=2 * pp, memory_from=2 * pp, period=1)


def bubble_formula(pp: int, num_microbatches: int, vpp: int) -> str:
    """Qi et al. 2024, sec. 6: zero bubble with T_F = T_B = T_W once the pipeline is full."""
    return f"0 with T_F = T_B = T_W and m >= 2p ({num_microbatches} micro-batches, p = {pp})"
