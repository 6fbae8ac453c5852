"""Pipeline schedules as data: for each pipeline rank, the ordered forward/backward steps.

The planner prices these lists and the executor runs them, so the two cannot drift apart.
Conventions follow Megatron-LM's `schedules.py` (`num_warmup_microbatches`, model chunks of the
interleaved schedule); see Narayanan et al. SC'21, section 2.2.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

StepKind = Literal["F", "B"]


@dataclass(frozen=True, order=True)
class Step:
    """One compute step: forward or backward of `microbatch` on model chunk `chunk`."""

    kind: StepKind
    microbatch: int
    chunk: int = 0

    def __str__(self) -> str:
        suffix = f".{self.chunk}" if self.chunk else ""
        return f"{self.kind}{self.microbatch}{suffix}"


@dataclass(frozen=True)
class VirtualStage:
    """Virtual pipeline stage `index` of `num_stages` (pp * vpp model chunks, in forward order)."""

    index: int
    num_stages: int

    @property
    def is_first_stage(self) -> bool:
        return self.index == 0

    @property
    def is_last_stage(self) -> bool:
        return self.index == self.num_stages - 1


def stage_index(pp_rank: int, chunk: int, pp: int) -> int:
    """Global (virtual) stage of a model chunk: chunk-major, as in Megatron's interleaving."""
    return chunk * pp + pp_rank


def gpipe(pp: int, num_microbatches: int) -> list[list[Step]]:
    """GPipe: every rank runs all forwards, then all backwards (in reverse micro-batch order)."""
    m = num_microbatches
    order = [Step("F", i) for i in range(m)] + [Step("B", i) for i in reversed(range(m))]
    return [list(order) for _ in range(pp)]


def one_f_one_b(pp: int, num_microbatches: int) -> list[list[Step]]:
    """1F1B (PipeDream-Flush): warmup forwards, steady one-forward-one-backward, cooldown."""
    m = num_microbatches
    out: list[list[Step]] = []
    for pp_rank in range(pp):
        steps: list[Step] = []
        # warmup: rank r runs pp - r - 1 forwards before its first backward
        num_warmup_microbatches = min(pp - pp_rank - 1, m)
        for i in range(num_warmup_microbatches):
            steps.append(Step("F", i))
        # steady state: one forward, one backward
        num_remaining = m - num_warmup_microbatches
        for i in range(num_remaining):
            steps.append(Step("F", num_warmup_microbatches + i))
            steps.append(Step("B", i))
        # cooldown: the backwards of the warmup micro-batches
        for i in range(num_remaining, m):
            steps.append(Step("B", i))
        out.append(steps)
    return out


def _interleaved_step(k: int, pp: int, vpp: int, backward: bool) -> tuple[int, int]:
    """(microbatch, chunk) of the k-th forward (or backward) of one rank (Megatron get_model_chunk_id)."""
    group = pp * vpp
    chunk = (k % group) // pp
    if backward:
        chunk = vpp - 1 - chunk
    microbatch = (k // group) * pp + k % pp
    return microbatch, chunk


def interleaved(pp: int, num_microbatches: int, vpp: int) -> list[list[Step]]:
    """Interleaved 1F1B with `vpp` model chunks per rank; needs num_microbatches % pp == 0."""
    m = num_microbatches
    if m % pp:
        raise ValueError(
            f"interleaved schedule needs num_microbatches ({m}) divisible by pp ({pp})"
        )
    total = m * vpp
    out: list[list[Step]] = []
    for pp_rank in range(pp):
        steps: list[Step] = []
        # warmup: Megatron's (pp - rank - 1) * 2 + (vpp - 1) * pp, capped at all forwards
        num_warmup_microbatches = min((pp - pp_rank - 1) * 2 + (vpp - 1) * pp, total)
        for k in range(num_warmup_microbatches):
            steps.append(Step("F", *_interleaved_step(k, pp, vpp, backward=False)))
        # steady state
        num_remaining = total - num_warmup_microbatches
        for k in range(num_remaining):
            steps.append(Step("F", *_interleaved_step(num_warmup_microbatches + k, pp, vpp, False)))
            steps.append(Step("B", *_interleaved_step(k, pp, vpp, backward=True)))
        # cooldown
        for k in range(num_remaining, total):
            steps.append(Step("B", *_interleaved_step(k, pp, vpp, backward=True)))
        out.append(steps)
    return out


def pipeline_schedule(
    schedule: Literal["gpipe", "1f1b", "interleaved"], pp: int, num_microbatches: int, vpp: int = 1
) -> list[list[Step]]:
    """Per pipeline rank, the ordered compute steps of one training step."""
    if pp < 1 or num_microbatches < 1 or vpp < 1:
        raise ValueError(
            f"pp ({pp}), num_microbatches ({num_microbatches}) and vpp ({vpp}) must be >= 1"
        )
    if schedule == "gpipe":
        return gpipe(pp, num_microbatches)
    if schedule == "1f1b":
        return one_f_one_b(pp, num_microbatches)
    return interleaved(pp, num_microbatches, vpp)


@dataclass(frozen=True)
class Timeline:
    """Start and end times of every step of every pipeline rank, and the step's makespan."""

    starts: list[list[float]]
    ends: list[list[float]]
    makespan: float

    def busy(self, pp_rank: int) -> float:
        """Compute time of one rank."""
        return sum(e - s for s, e in zip(self.starts[pp_rank], self.ends[pp_rank]))

    def bubble_fraction(self) -> float:
        """Idle time over busy time of the busiest rank: (p-1)/m for GPipe/1F1B (Narayanan et al.)."""
        busy = max(self.busy(r) for r in range(len(self.starts)))
        return (self.makespan - busy) / busy


def simulate(
    steps: list[list[Step]], pp: int, vpp: int, t_forward: float, t_backward: float, t_p2p: float = 0.0
) -> Timeline:
    """Run a schedule on an idealised clock: a step starts when its rank is free and its inputs
    arrived (forward needs the previous stage's forward, backward the next stage's backward and
    its own forward). `t_forward`/`t_backward` are per micro-batch for one rank's whole share of
    the model, so one chunk takes 1/vpp of them. Raises on a deadlocking order."""
    tf, tb = t_forward / vpp, t_backward / vpp
    last_stage = pp * vpp - 1
    done: dict[tuple[str, int, int], float] = {}  # (kind, microbatch, stage) -> end time
    starts = [[0.0] * len(s) for s in steps]
    ends = [[0.0] * len(s) for s in steps]
    cursor = [0] * pp
    clock = [0.0] * pp
    remaining = sum(len(s) for s in steps)
    while remaining:
        progressed = False
        for r in range(pp):
            while cursor[r] < len(steps[r]):
                step = steps[r][cursor[r]]
                stage = stage_index(r, step.chunk, pp)
                if step.kind == "F":
                    deps = [("F", step.microbatch, stage - 1)] if stage > 0 else []
                    dur = tf
                else:
                    deps = [("F", step.microbatch, stage)]
                    if stage < last_stage:
                        deps.append(("B", step.microbatch, stage + 1))
                    dur = tb
                if any(d not in done for d in deps):
                    break
                ready = max([clock[r]] + [done[d] + (t_p2p if d[2] != stage else 0.0) for d in deps])
                i = cursor[r]
                starts[r][i], ends[r][i] = ready, ready + dur
                clock[r] = ready + dur
                done[(step.kind, step.microbatch, stage)] = ready + dur
                cursor[r] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            stuck = {r: str(steps[r][cursor[r]]) for r in range(pp) if cursor[r] < len(steps[r])}
            raise ValueError(f"schedule deadlocks: ranks waiting at {stuck}")
    return Timeline(starts, ends, max(max(e) if e else 0.0 for e in ends))
