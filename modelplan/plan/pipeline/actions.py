"""A pipeline schedule as data: for each pipeline rank, its ordered actions.

Vocabulary of torch.distributed.pipelining's schedule actions (`_ComputationType`): F runs a
micro-batch's forward through one model chunk; B its backward for the chunk's input (and, when
the schedule lists no W for that micro-batch and chunk, also for its weights: the fused backward
of 1F1B); W its backward for the weights (Qi et al. 2024, Zero Bubble Pipeline Parallelism,
sec. 2: B and W split the backward); SEND_F / RECV_F move an activation to the next stage,
SEND_B / RECV_B a gradient to the previous one. The compute actions come from one module per
schedule (`modelplan.plan.pipeline.<name>`); `PipelineSchedule.lowered` inserts the send/recv
actions, each right after the action that produces the tensor and right before the one that
consumes it. The planner simulates these lists (`profile.py`), the executor runs them, and verify
compares what ran with them.

Where the model chunks sit is the schedule's `StageLayout`: virtual stage `s` of `num_stages`
(the model is cut into that many runs of blocks, in forward order) runs on pipeline rank `r` as
its local chunk `c`. A micro-batch follows one route through the stages; DualPipe's two
directions are two routes over the same stages.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import NamedTuple

from modelplan.specs.plan import Schedule


class ActionKind(StrEnum):
    """What one action does (torch.distributed.pipelining names)."""

    F = "F"
    """Forward of one micro-batch through one chunk."""
    B = "B"
    """Backward for the chunk's input (with its weights too unless a W follows)."""
    W = "W"
    """Backward for the chunk's weights."""
    SEND_F = "SEND_F"
    RECV_F = "RECV_F"
    SEND_B = "SEND_B"
    RECV_B = "RECV_B"


COMPUTE = (ActionKind.F, ActionKind.B, ActionKind.W)


class Action(NamedTuple):
    """One action of one pipeline rank: `kind` for `microbatch` on local model chunk `chunk`
    (send/recv: `peer` is the pipeline rank at the other end). A tuple: schedules hold many."""

    kind: ActionKind
    microbatch: int
    chunk: int = 0
    peer: int | None = None
    overlap: bool = False
    """Runs overlapped with the next action, an F&B chunk (torch's OVERLAP_F_B; DualPipe): both
    start once the inputs of both have arrived, and their outputs leave when both are done."""

    def __str__(self) -> str:
        suffix = f".{self.chunk}" if self.chunk else ""
        peer = f"->{self.peer}" if self.kind in (ActionKind.SEND_F, ActionKind.SEND_B) else (
            f"<-{self.peer}" if self.peer is not None else "")
        return f"{self.kind.value}{self.microbatch}{suffix}{peer}{'&' if self.overlap else ''}"


@dataclass(frozen=True)
class StageLayout:
    """Which virtual stage each local chunk of each pipeline rank runs, and the routes."""

    num_stages: int
    """Virtual stages the model's blocks are cut into (in forward order)."""
    rank_stages: tuple[tuple[int, ...], ...]
    """Per pipeline rank, the stage of each of its chunks (chunk order)."""
    routes: tuple[tuple[tuple[int, int], ...], ...] = ()
    """Per route, stage -> (pipeline rank, chunk); default: the one route `rank_stages` implies."""

    def __post_init__(self) -> None:
        if not self.routes:
            where = {s: (r, c) for r, stages in enumerate(self.rank_stages) for c, s in enumerate(stages)}
            object.__setattr__(self, "routes", (tuple(where[s] for s in range(self.num_stages)),))

    @property
    def pp(self) -> int:
        return len(self.rank_stages)

    def chunks(self, pp_rank: int) -> int:
        """Model chunks rank `pp_rank` holds."""
        return len(self.rank_stages[pp_rank])


def strided_layout(pp: int, chunks: int) -> StageLayout:
    """Virtual stage v on rank v % pp as chunk v // pp (Megatron's interleaving; 1 chunk: plain).
    Its route is built here, not by `StageLayout`'s dict of every stage: the search asks for the
    layouts of pipelines up to the GPU count (the walk reads their stage counts)."""
    n = pp * chunks
    return StageLayout(n, tuple(tuple(range(r, n, pp)) for r in range(pp)),
                       (tuple(zip(list(range(pp)) * chunks, [c for c in range(chunks) for _ in range(pp)])),))


@dataclass(frozen=True)
class PipelineSchedule:
    """Every pipeline rank's compute actions for one training step, with the layout they run on."""

    kind: Schedule
    pp: int
    num_microbatches: int
    vpp: int
    layout: StageLayout
    actions: tuple[tuple[Action, ...], ...]
    """Per pipeline rank, its F / B / W actions in order."""
    route_of: tuple[int, ...] = ()
    """Route of each micro-batch (default: route 0 for all)."""

    def route(self, microbatch: int) -> int:
        return self.route_of[microbatch] if self.route_of else 0

    def stage(self, pp_rank: int, chunk: int) -> int:
        """Virtual stage of `pp_rank`'s chunk `chunk`."""
        return self.layout.rank_stages[pp_rank][chunk]

    def where(self, microbatch: int, stage: int) -> tuple[int, int]:
        """(pipeline rank, chunk) that runs `stage` for `microbatch`."""
        return self.layout.routes[self.route(microbatch)][stage]

    @property
    def num_stages(self) -> int:
        return self.layout.num_stages

    @cached_property
    def split_backward(self) -> frozenset[tuple[int, int, int]]:
        """(pp rank, chunk, micro-batch) whose weight gradient is a separate W action."""
        return frozenset((r, a.chunk, a.microbatch) for r, acts in enumerate(self.actions)
                         for a in acts if a.kind is ActionKind.W)

    def has_w(self, pp_rank: int, chunk: int, microbatch: int) -> bool:
        """Whether B of this micro-batch on this chunk leaves its weight gradient to a W action."""
        return (pp_rank, chunk, microbatch) in self.split_backward

    def microbatches(self, pp_rank: int, chunk: int) -> int:
        """Forwards chunk `chunk` of `pp_rank` runs per step (DualPipe: half of them per chunk)."""
        return self._forwards.get((pp_rank, chunk), 0)

    @cached_property
    def _forwards(self) -> dict[tuple[int, int], int]:
        out: dict[tuple[int, int], int] = {}
        for r, acts in enumerate(self.actions):
            for a in acts:
                if a.kind is ActionKind.F:
                    out[(r, a.chunk)] = out.get((r, a.chunk), 0) + 1
        return out

    def neighbours(self, pp_rank: int, action: Action) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
        """(producer, consumer) (rank, chunk) of the tensor `action` reads and writes across ranks:
        F reads the previous stage's activation and writes to the next; B the reverse."""
        s, i, last = self.stage(pp_rank, action.chunk), action.microbatch, self.num_stages - 1
        if action.kind is ActionKind.F:
            src = self.where(i, s - 1) if s > 0 else None
            dst = self.where(i, s + 1) if s < last else None
        elif action.kind is ActionKind.B:
            src = self.where(i, s + 1) if s < last else None
            dst = self.where(i, s - 1) if s > 0 else None
        else:
            return None, None
        return (src if src is not None and src[0] != pp_rank else None,
                dst if dst is not None and dst[0] != pp_rank else None)

    @cached_property
    def lowered(self) -> tuple[tuple[Action, ...], ...]:
        """Per rank, the compute actions with RECV_F/RECV_B before and SEND_F/SEND_B after each
        one whose tensor crosses to another pipeline rank (the action list the executor runs); an
        overlapped pair receives both inputs before and sends both outputs after the pair."""
        out = []
        for r, acts in enumerate(self.actions):
            steps: list[Action] = []
            group: list[Action] = []
            for a in acts:
                group.append(a)
                if a.overlap:
                    continue
                sends = []
                for g in group:
                    src, dst = self.neighbours(r, g)
                    forward = g.kind is ActionKind.F
                    if src is not None:
                        steps.append(Action(ActionKind.RECV_F if forward else ActionKind.RECV_B, g.microbatch, g.chunk,
                                            src[0]))
                    if dst is not None:
                        sends.append(Action(ActionKind.SEND_F if forward else ActionKind.SEND_B, g.microbatch, g.chunk,
                                            dst[0]))
                steps += group + sends
                group = []
            out.append(tuple(steps))
        return tuple(out)


@dataclass(frozen=True)
class VirtualStage:
    """Virtual pipeline stage `index` of `num_stages` (in forward order)."""

    index: int
    num_stages: int

    @property
    def is_first_stage(self) -> bool:
        return self.index == 0

    @property
    def is_last_stage(self) -> bool:
        return self.index == self.num_stages - 1
