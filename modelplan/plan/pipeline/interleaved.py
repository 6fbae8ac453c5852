"""Interleaved 1F1B (Narayanan et al. 2021, sec. 2.2.2) as Megatron-LM's
`forward_backward_pipelining_with_interleaving`: each rank holds vpp model chunks (virtual stage
v on rank v % pp as chunk v // pp); warmup (pp - r - 1) * 2 + (vpp - 1) * pp chunk forwards,
then one forward and one backward at a time, then the cooldown backwards."""

from __future__ import annotations

from fractions import Fraction
from functools import lru_cache

from modelplan.plan.pipeline.actions import Action, ActionKind, StageLayout, strided_layout
from modelplan.plan.pipeline.steady import Steady
from modelplan.plan.problems import Problem, Reason

F, B = ActionKind.F, ActionKind.B


def layout(pp: int, vpp: int) -> StageLayout:
    """Virtual stage v on rank v % pp as chunk v // pp (chunk-major, Megatron)."""
    return strided_layout(pp, vpp)


def _interleaved_step(k: int, pp: int, vpp: int, backward: bool) -> tuple[int, int]:
    """(microbatch, chunk) of the k-th forward (or backward) of one rank (Megatron get_model_chunk_id)."""
    group = pp * vpp
    chunk = (k % group) // pp
    if backward:
        chunk = vpp - 1 - chunk
    microbatch = (k // group) * pp + k % pp
    return microbatch, chunk


@lru_cache(maxsize=64)
def _orders(pp: int, num_microbatches: int, vpp: int) -> tuple[tuple[Action, ...], tuple[Action, ...]]:
    """Every rank's chunk forwards and chunk backwards, in order (the same on every rank)."""
    total = num_microbatches * vpp
    return (tuple(Action(F, *_interleaved_step(k, pp, vpp, backward=False)) for k in range(total)),
            tuple(Action(B, *_interleaved_step(k, pp, vpp, backward=True)) for k in range(total)))


def _warmup(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> int:
    """Megatron's warmup chunk forwards, (pp - rank - 1) * 2 + (vpp - 1) * pp, capped at all forwards."""
    return min((pp - pp_rank - 1) * 2 + (vpp - 1) * pp, num_microbatches * vpp)


def rank_actions(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> list[Action]:
    fwd, bwd = _orders(pp, num_microbatches, vpp)
    total = len(fwd)
    num_warmup_microbatches = _warmup(pp, num_microbatches, vpp, pp_rank)
    steps = list(fwd[:num_warmup_microbatches])
    # steady state: one forward, one backward
    num_remaining = total - num_warmup_microbatches
    for k in range(num_remaining):
        steps.append(fwd[num_warmup_microbatches + k])
        steps.append(bwd[k])
    # cooldown
    steps += bwd[num_remaining:]
    return steps


def problem(pp: int, num_microbatches: int, vpp: int) -> Problem | None:
    """Megatron's interleaved schedule needs pp > 1 and num_microbatches % pp == 0."""
    if pp == 1:
        return Problem(Reason.INTERLEAVED_PP, "schedule 'interleaved' needs pp > 1 (pp = 1)")
    if num_microbatches % pp:
        return Problem(Reason.INTERLEAVED, f"interleaved schedule needs num_microbatches ({num_microbatches}) "
                       f"divisible by pp ({pp})")
    return None


def steady(pp: int, vpp: int) -> Steady:
    """Idle (p-1)(t_f + t_b) from m = pp on; the warmup stops being capped by m * vpp at m = 2 pp."""
    return Steady(timing_from=pp, memory_from=2 * pp, period=pp)


def bubble(pp: int, num_microbatches: int, vpp: int) -> Fraction:
    """`profile.simulate`'s idle time of the busiest rank in micro-batch times, in closed form:
    (p - 1) / v for every valid m (Narayanan et al. 2021, sec. 2.2.2: a bubble of
    (p-1)(t_f + t_b) / v next to m (t_f + t_b) of work). tests/test_schedule_closed_form.py checks
    it against the simulation of these lists."""
    return Fraction(pp - 1, vpp)


def held_peak(pp: int, num_microbatches: int, vpp: int, pp_rank: int) -> int:
    """`profile.held_peak(rank_actions(...))` in closed form: the warmup chunk forwards and the
    first steady one, capped at all m * vpp (no W: every B frees one). Checked as `bubble` is."""
    return min(_warmup(pp, num_microbatches, vpp, pp_rank) + 1, num_microbatches * vpp)


def bubble_formula(pp: int, num_microbatches: int, vpp: int) -> str:
    """Narayanan et al. 2021, sec. 2.2.2."""
    return f"(p-1)/(v*m) = {pp - 1}/({vpp}*{num_microbatches})"
