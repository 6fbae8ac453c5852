"""Pipeline point-to-point traffic and the record of what each rank executed.

Each rank runs its lowered action list (`PipelineSchedule.lowered`): SEND_F / SEND_B post a
stage's output activation or input gradient to the rank that consumes it (Megatron's
`send_forward` / `send_backward`), RECV_F / RECV_B take it before the compute action that needs
it. The communicator delivers messages FIFO per (sender, group) without tags, and a rank may
receive activations and gradients from the same neighbour in another order than they were sent
(interleaving with pp = 2), so every rank derives, from the sender's lowered list (data every
rank has), the order in which that sender posts messages to it, and files every arriving
message under its (kind, micro-batch, stage) key until the action that needs it runs.

Every executed compute action is recorded with the messages it consumed and sent, numbered per
(sender, receiver) pair: enough to rebuild a Lamport clock of the run afterwards (numbering
restarts with every optimizer step: one clock per step). A compute action that raises is
re-raised naming its stage, action and optimizer step; a rank blocked on a message says which
one it waits for (the communicator's `context`, named in deadlock and timeout reports).

Scatter/gather (Narayanan et al. 2021, sec. 4.1; Megatron-LM `split_tensor_into_1d_equal_chunks`
and `gather_split_1d_tensor`): when the plan's rule says so, every TP rank sends only its 1/tp
slice of the flattened boundary tensor (all TP ranks hold the same tensor) and the receiver
AllGathers the slices over its TP group before the action that consumes them.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from modelplan.comm.regions import Region
from modelplan.comm.communicator import Communicator, Group
from modelplan.execute.spmd import named_step
from modelplan.plan.pipeline import Action, ActionKind, PipelineSchedule, StageLayout

MessageKey = tuple[str, int, int]
"""(F or B, micro-batch, stage that consumes it)."""

SENDS = {ActionKind.SEND_F: "F", ActionKind.SEND_B: "B"}


def step_cost(schedule: PipelineSchedule, pp_rank: int, action: Action) -> int:
    """Logical time of a compute action: 1 per forward, input-grad and weight-grad backward of a
    chunk, 2 for a backward that also does the weights (t_b = 2 t_f, Narayanan et al. 2021; the
    zero-bubble papers' T_F = T_B = T_W)."""
    if action.kind is ActionKind.B and not schedule.has_w(pp_rank, action.chunk, action.microbatch):
        return 2
    return 1


@dataclass(frozen=True)
class StepRecord:
    """One executed compute action and the messages it depended on and produced."""

    step: Action
    stage: int
    cost: int
    received: tuple[tuple[int, int], ...]
    """(source global rank, message number from that source) consumed by this step."""
    sent: tuple[tuple[int, int], ...]
    """(destination global rank, message number to that destination) posted by this step."""


def message_key(schedule: PipelineSchedule, src: int, send: Action) -> MessageKey:
    """The key a SEND action's message is filed under: its kind, micro-batch and consuming stage."""
    stage = schedule.stage(src, send.chunk)
    return (SENDS[send.kind], send.microbatch, stage + 1 if send.kind is ActionKind.SEND_F else stage - 1)


def messages_to(schedule: PipelineSchedule, src: int, dst: int) -> list[MessageKey]:
    """Keys of the messages pipeline rank `src` posts to `dst`, in its posting order."""
    return [message_key(schedule, src, a) for a in schedule.lowered[src] if a.kind in SENDS and a.peer == dst]


def _describe(key: MessageKey) -> str:
    kind, microbatch, stage = key
    what = "the activation" if kind == "F" else "the gradient"
    return f"{what} of micro-batch {microbatch} for stage {stage}"


def stage_map(layout: StageLayout) -> str:
    """'pp rank 0: stages 0, 2 (chunks 0, 1); pp rank 1: stages 1, 3': where every stage runs."""
    parts = []
    for r, stages in enumerate(layout.rank_stages):
        chunks = f" (chunks {', '.join(map(str, range(len(stages))))})" if len(stages) > 1 else ""
        parts.append(f"pp rank {r}: stage{'s' if len(stages) > 1 else ''} {', '.join(map(str, stages))}{chunks}")
    return "; ".join(parts)


class PipelineP2P:
    """This rank's pipeline sends/receives with keyed mailboxes and message numbering."""

    def __init__(self, comm: Communicator, pp_group: Group, schedule: PipelineSchedule,
                 scatter_gather: Group | None = None, boundary_shape: tuple[int, ...] = ()) -> None:
        """`scatter_gather`: the TP group to split sends over and gather receives from (None: whole
        tensors); `boundary_shape`: the (b, s, h) shape a gathered message takes."""
        self.comm, self.group, self.schedule = comm, pp_group, schedule
        self.tp_group, self.boundary_shape = scatter_gather, boundary_shape
        self.pp = pp_group.size
        self.pp_rank = pp_group.index(comm.rank)
        self._mailbox: dict[MessageKey, tuple[np.ndarray, tuple[int, int]]] = {}
        self.next_step()

    def next_step(self) -> None:
        """Expect a new training step's messages; numbering restarts (one Lamport clock per step)."""
        self._expected = {src: deque(messages_to(self.schedule, src, self.pp_rank)) for src in range(self.pp)}
        self._sent: dict[int, int] = {}
        self._received: dict[int, int] = {}

    def send(self, action: Action, x: np.ndarray) -> tuple[int, int]:
        """Post x (a SEND action's tensor) to its peer; returns (destination, message number)."""
        dst = self.group.ranks[action.peer]
        if self.tp_group is not None:  # this TP rank's 1/tp slice of the flattened tensor
            x = np.split(np.ravel(x), self.tp_group.size)[self.tp_group.index(self.comm.rank)].copy()
        self.comm.send(x, dst, self.group, label=Region.PP_FORWARD if action.kind is ActionKind.SEND_F else Region.PP_BACKWARD)
        self._sent[dst] = self._sent.get(dst, 0) + 1
        return dst, self._sent[dst]

    def recv(self, action: Action) -> tuple[np.ndarray, tuple[int, int]]:
        """The tensor a RECV action takes from its peer, and its (source, message number)."""
        stage = self.schedule.stage(self.pp_rank, action.chunk)
        key = ("F", action.microbatch, stage) if action.kind is ActionKind.RECV_F else ("B", action.microbatch, stage)
        src_pp = action.peer
        src = self.group.ranks[src_pp]
        while key not in self._mailbox:
            if not self._expected[src_pp]:
                raise RuntimeError(f"pipeline rank {self.pp_rank} waits for {key} that rank {src} never sends")
            arrived = self._expected[src_pp].popleft()
            self.comm.context = (f"pipeline: stage {stage} needs {_describe(key)} from pp rank {src_pp}; the next "
                                 f"message from there should be {_describe(arrived)}")
            x = self.comm.recv(src, self.group, label=Region.PP_FORWARD if arrived[0] == "F" else Region.PP_BACKWARD)
            self.comm.context = ""
            self._received[src] = self._received.get(src, 0) + 1
            self._mailbox[arrived] = (x, (src, self._received[src]))
        x, number = self._mailbox.pop(key)
        if self.tp_group is not None:  # every TP rank of this stage consumes the same keys in order
            label = Region.PP_FORWARD_GATHER if key[0] == "F" else Region.PP_BACKWARD_GATHER
            x = self.comm.all_gather(x, self.tp_group, axis=0, label=label).reshape(self.boundary_shape)
        return x, number


class ChunkModel(Protocol):
    """What the pipeline runtime needs from a rank's model chunks (transformer or network)."""

    def forward(self, chunk: int, microbatch: int, x: Any) -> tuple[Any, Any]:
        """(output activation, or the micro-batch's loss on the last stage; cache for backward)."""

    def backward(self, chunk: int, microbatch: int, cache: Any, dout: Any) -> tuple[Any, dict]:
        """(gradient of the chunk's input, or None on the first stage; the chunk's weight gradients)."""

    def add_grads(self, chunk: int, microbatch: int, grads: dict) -> None:
        """Accumulate a micro-batch's weight gradients into the gradient buffers (its activations
        are no longer held after this)."""


Observer = Callable[[dict[str, Any]], None]
"""Called after every compute action with what the rank holds between actions: 'caches' (saved
activations by (micro-batch, chunk)), 'inbox' (received tensors not consumed yet), 'deferred'
(weight gradients a B left to its W)."""


def run_actions(schedule: PipelineSchedule, pp_rank: int, p2p: PipelineP2P, model: ChunkModel,
                observe: Observer | None = None, step: int = 1) -> tuple[list[tuple[int, Any]], list[StepRecord]]:
    """Run one pipeline rank's lowered action list (of optimizer step `step`); returns (micro-batch,
    loss) of the micro-batches whose last stage ran here, and the trace of compute actions."""
    last = schedule.num_stages - 1
    losses: dict[int, Any] = {}
    caches: dict[tuple[int, int], Any] = {}
    inbox: dict[tuple[str, int, int], Any] = {}  # (F/B, micro-batch, consuming stage) -> tensor
    deferred: dict[tuple[int, int], dict] = {}  # weight gradients a B leaves to its W
    records: list[tuple[Action, int, list, list]] = []
    received: list[tuple[int, int]] = []
    outbox: dict[tuple[str, int, int], Any] = {}  # (F/B, micro-batch, chunk) -> tensor a SEND posts
    for a in schedule.lowered[pp_rank]:
        c, i = a.chunk, a.microbatch
        v = schedule.stage(pp_rank, c)
        if a.kind in (ActionKind.RECV_F, ActionKind.RECV_B):
            x, number = p2p.recv(a)
            inbox[("F" if a.kind is ActionKind.RECV_F else "B", i, v)] = x
            received.append(number)
            continue
        if a.kind in SENDS:  # posted when the action before it (or its overlapped pair) ends
            records[-1][3].append(p2p.send(a, outbox.pop((SENDS[a.kind], i, c))))
            continue
        records.append((a, v, received, []))
        received = []
        with named_step(f"pp rank {pp_rank}, stage {v}: {a} of optimizer step {step}"):
            if a.kind is ActionKind.W:
                caches.pop((i, c))  # held until W, as a split backward holds W's inputs
                model.add_grads(c, i, deferred.pop((i, c)))
            elif a.kind is ActionKind.F:
                out, caches[(i, c)] = model.forward(c, i, inbox.pop(("F", i, v)) if v > 0 else None)
                if v == last:
                    losses[i] = out
                elif schedule.where(i, v + 1)[0] == pp_rank:  # the next stage runs on this rank
                    inbox[("F", i, v + 1)] = out
                else:  # a SEND follows (after the overlapped partner, if any)
                    outbox[("F", i, c)] = out
            else:
                dout = inbox.pop(("B", i, v)) if v < last else None
                # A B that leaves a W keeps the micro-batch's activations until that W (Qi et al.
                # 2024: W needs the layer inputs and output gradients), the planner's held_peak.
                split = schedule.has_w(pp_rank, c, i)
                dx, grads = model.backward(c, i, caches[(i, c)] if split else caches.pop((i, c)), dout)
                if v > 0:
                    if schedule.where(i, v - 1)[0] == pp_rank:
                        inbox[("B", i, v - 1)] = dx
                    else:
                        outbox[("B", i, c)] = dx
                if split:
                    deferred[(i, c)] = grads
                else:
                    model.add_grads(c, i, grads)
        if observe is not None:
            observe({"caches": caches, "inbox": inbox, "deferred": deferred})
    trace = [StepRecord(a, v, step_cost(schedule, pp_rank, a), tuple(rcv), tuple(snt)) for a, v, rcv, snt in records]
    return sorted(losses.items()), trace
