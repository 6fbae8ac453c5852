"""DualPipe (DeepSeek-AI 2024, "DeepSeek-V3 Technical Report", sec. 3.2.1, fig. 5 and table 2;
deepseek-ai/DualPipe): micro-batches are fed from both ends of the pipeline. The model is cut
into pp stages and every rank holds two of them, stage r for the micro-batches that run from
rank 0 to rank pp - 1 (chunk 0, the first half of the micro-batches) and stage pp - 1 - r for
those that run back (chunk 1, the second half): two copies of every stage's parameters, whose
gradients are all-reduced between the two ranks that hold them (`plan.stages.unit_replicas`).
Each rank's order is the reference implementation's eight steps, with half_rank = min(r, pp - 1 - r)
and "direction 0" the one whose micro-batches enter on this rank's half: forwards of direction 0,
then of both, then backwards of direction 1 whose weight gradients run at once, the steady
forward-and-backward chunks of the two directions (overlapped pairs, `Action.overlap`: both start
once both inputs have arrived, as the reference's batched send/recv makes them; on the clock
their compute adds up, F&B = F + B), and the drain, where the later backwards leave their weight
gradients (W) to fill the bubble. Needs an even pp and an even number of at least 2 pp micro-batches. The paper:
bubble (PP/2 - 1)(F&B + B - 3W) for B the full backward, 2x parameters, PP + 1 activations."""

from __future__ import annotations

from collections import deque

from modelplan.plan.pipeline.actions import Action, ActionKind, StageLayout
from modelplan.plan.pipeline.steady import Steady
from modelplan.plan.problems import Problem, Reason

F, B, W = ActionKind.F, ActionKind.B, ActionKind.W


def layout(pp: int, vpp: int) -> StageLayout:
    """pp stages; rank r runs stage r as chunk 0 (route 0) and stage pp - 1 - r as chunk 1 (route 1)."""
    return StageLayout(pp, tuple((r, pp - 1 - r) for r in range(pp)),
                       (tuple((s, 0) for s in range(pp)), tuple((pp - 1 - s, 1) for s in range(pp))))


def route_of(pp: int, num_microbatches: int) -> list[int]:
    """The first half of the micro-batches enters at rank 0, the second half at rank pp - 1."""
    half = num_microbatches // 2
    return [0] * half + [1] * half


def rank_actions(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> list[Action]:
    half, half_rank, second = pp // 2, min(pp_rank, pp - 1 - pp_rank), int(pp_rank >= pp // 2)
    base = (0, num_microbatches // 2)  # first micro-batch of each chunk's route
    steps: list[Action] = []
    nxt_f, nxt_b = [0, 0], [0, 0]
    deferred: deque[Action] = deque()  # backwards whose W is still to run, oldest first

    def forward(phase: int, overlap: bool = False) -> None:  # overlap: an F&B chunk with the next B
        chunk = phase ^ second
        steps.append(Action(F, base[chunk] + nxt_f[chunk], chunk, overlap=overlap))
        nxt_f[chunk] += 1

    def backward(phase: int, split: bool = False) -> None:
        chunk = phase ^ second
        steps.append(Action(B, base[chunk] + nxt_b[chunk], chunk))
        nxt_b[chunk] += 1
        if split:
            deferred.append(steps[-1]._replace(kind=W))

    def weight() -> None:
        steps.append(deferred.popleft())

    for _ in range((half - half_rank - 1) * 2):  # 1: forwards of this half's direction
        forward(0)
    for _ in range(half_rank + 1):  # 2: forwards of both directions
        forward(0)
        forward(1)
    for _ in range(half - half_rank - 1):  # 3: backwards of the other direction, W at once
        backward(1, split=True)
        weight()
        forward(1)
    middle = half_rank == half - 1
    for i in range(num_microbatches // 2 - pp + half_rank + 1):  # 4: the steady F&B chunks
        forward(0, overlap=not (i == 0 and middle))  # the middle ranks' first pair runs apart
        backward(1)
        forward(1, overlap=True)
        backward(0)
    for _ in range(half - half_rank - 1):  # 5
        backward(1)
        forward(1, overlap=True)
        backward(0)
    split = False
    for i in range(half_rank + 1):  # 6: the second half of these backwards leaves its W
        if i == (half_rank + 1) // 2 and half_rank % 2 == 1:
            split = True
        backward(1, split)
        if i == (half_rank + 1) // 2 and half_rank % 2 == 0:
            split = True
        backward(0, split)
    for _ in range(half - half_rank - 1):  # 7
        weight()
        backward(0, split=True)
    while deferred:  # 8: the remaining weight gradients
        weight()
    return steps


def problem(pp: int, num_microbatches: int, vpp: int) -> Problem | None:
    """DualPipe's rule (deepseek-ai/DualPipe): pp even, an even m of at least 2 pp."""
    m = num_microbatches
    if pp % 2 or m % 2 or m < 2 * pp:
        return Problem(Reason.SCHEDULE, f"schedule 'dualpipe' needs an even pp ({pp}) and an even "
                       f"num_microbatches ({m}) of at least 2 pp ({2 * pp})")
    return None


def steady(pp: int, vpp: int) -> Steady:
    """Each two more micro-batches (one per direction) add one steady F&B round."""
    return Steady(timing_from=2 * pp, memory_from=2 * pp, period=2)


def bubble_formula(pp: int, num_microbatches: int, vpp: int) -> str:
    """DeepSeek-V3 report, table 2, with F&B = F + B (no overlap on the clock) and F = W = B/2."""
    return f"(PP/2-1)(F&B+B-3W)/(m(F+B)) = {pp // 2 - 1}*2/({num_microbatches}*3)"
