"""Pipeline point-to-point traffic and the record of what each rank executed.

Stage v's forward output goes to stage v+1 and its input gradient back to stage v-1
(Megatron's `send_forward` / `send_backward`). The communicator delivers messages FIFO per
(sender, group) without tags, and with interleaving and pp = 2 a rank receives both activations
and gradients from the same neighbour. Each rank therefore derives, from the sender's schedule
(data every rank has), the order in which that sender posts messages to it, and files every
arriving message under its (kind, micro-batch, stage) key until the step that needs it runs.

Every executed step is recorded with the messages it consumed and sent, numbered per
(sender, receiver) pair: enough to rebuild a Lamport clock of the run afterwards.

Scatter/gather (Narayanan et al. 2021, sec. 4.1; Megatron-LM `split_tensor_into_1d_equal_chunks`
and `gather_split_1d_tensor`): when the plan's rule says so, every TP rank sends only its 1/tp
slice of the flattened boundary tensor (all TP ranks hold the same tensor) and the receiver
AllGathers the slices over its TP group before the step that consumes them.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from modelplan.comm.communicator import Communicator, Group
from modelplan.plan.schedule import Step, stage_index

MessageKey = tuple[str, int, int]
"""(F or B, micro-batch, stage that consumes it)."""

COST = {"F": 1, "B": 2}
"""Logical time of one chunk's forward and backward (t_b = 2 t_f, Narayanan et al. 2021)."""


@dataclass(frozen=True)
class StepRecord:
    """One executed compute step and the messages it depended on and produced."""

    step: Step
    stage: int
    cost: int
    received: tuple[tuple[int, int], ...]
    """(source global rank, message number from that source) consumed by this step."""
    sent: tuple[tuple[int, int], ...]
    """(destination global rank, message number to that destination) posted by this step."""


def _messages_to(schedules: list[list[Step]], src: int, dst: int, pp: int, vpp: int) -> list[MessageKey]:
    """Keys of the messages pipeline rank `src` posts to `dst`, in its posting order."""
    last = pp * vpp - 1
    keys: list[MessageKey] = []
    for step in schedules[src]:
        stage = stage_index(src, step.chunk, pp)
        if step.kind == "F" and stage < last:
            target = stage + 1
        elif step.kind == "B" and stage > 0:
            target = stage - 1
        else:
            continue
        if target % pp == dst:
            keys.append((step.kind, step.microbatch, target))
    return keys


def _describe(key: MessageKey) -> str:
    kind, microbatch, stage = key
    what = "the activation" if kind == "F" else "the gradient"
    return f"{what} of micro-batch {microbatch} for stage {stage}"


def stage_map(pp: int, vpp: int) -> str:
    """'pp rank 0: stages 0, 2 (chunks 0, 1); pp rank 1: stages 1, 3': where every stage runs."""
    parts = []
    for r in range(pp):
        stages = ", ".join(str(stage_index(r, c, pp)) for c in range(vpp))
        parts.append(f"pp rank {r}: stage{'s' if vpp > 1 else ''} {stages}"
                     + (f" (chunks {', '.join(map(str, range(vpp)))})" if vpp > 1 else ""))
    return "; ".join(parts)


class PipelineP2P:
    """This rank's pipeline sends/receives with keyed mailboxes and message numbering."""

    def __init__(self, comm: Communicator, pp_group: Group, schedules: list[list[Step]], vpp: int,
                 scatter_gather: Group | None = None, boundary_shape: tuple[int, ...] = ()) -> None:
        """`scatter_gather`: the TP group to split sends over and gather receives from (None: whole
        tensors); `boundary_shape`: the (b, s, h) shape a gathered message takes."""
        self.comm, self.group, self.vpp = comm, pp_group, vpp
        self.tp_group, self.boundary_shape = scatter_gather, boundary_shape
        self.pp = pp_group.size
        self.pp_rank = pp_group.index(comm.rank)
        self._schedules = schedules
        self._mailbox: dict[MessageKey, tuple[np.ndarray, tuple[int, int]]] = {}
        self.next_step()

    def next_step(self) -> None:
        """Expect a new training step's messages; numbering restarts (one Lamport clock per step)."""
        self._expected = {src: deque(_messages_to(self._schedules, src, self.pp_rank, self.pp, self.vpp))
                          for src in range(self.pp)}
        self._sent: dict[int, int] = {}
        self._received: dict[int, int] = {}

    def owner(self, stage: int) -> int:
        """Global rank (in this pipeline group) running `stage`."""
        return self.group.ranks[stage % self.pp]

    def send(self, key: MessageKey, x: np.ndarray) -> tuple[int, int]:
        """Post x to the owner of key's stage; returns (destination, message number)."""
        dst = self.owner(key[2])
        if self.tp_group is not None:  # this TP rank's 1/tp slice of the flattened tensor
            x = np.split(np.ravel(x), self.tp_group.size)[self.tp_group.index(self.comm.rank)].copy()
        self.comm.send(x, dst, self.group, label="pp/forward" if key[0] == "F" else "pp/backward")
        self._sent[dst] = self._sent.get(dst, 0) + 1
        return dst, self._sent[dst]

    def recv(self, key: MessageKey, src_stage: int) -> tuple[np.ndarray, tuple[int, int]]:
        """The message `key` from the owner of `src_stage`, and its (source, message number)."""
        src = self.owner(src_stage)
        src_pp = src_stage % self.pp
        while key not in self._mailbox:
            if not self._expected[src_pp]:
                raise RuntimeError(f"pipeline rank {self.pp_rank} waits for {key} that rank {src} never sends")
            arrived = self._expected[src_pp].popleft()
            self.comm.context = (f"pipeline: stage {key[2]} needs {_describe(key)} from stage {src_stage} on "
                                 f"rank {src}; the next message from there should be {_describe(arrived)}")
            x = self.comm.recv(src, self.group, label="pp/forward" if arrived[0] == "F" else "pp/backward")
            self.comm.context = ""
            self._received[src] = self._received.get(src, 0) + 1
            self._mailbox[arrived] = (x, (src, self._received[src]))
        x, number = self._mailbox.pop(key)
        if self.tp_group is not None:  # every TP rank of this stage consumes the same keys in order
            label = "pp/forward/gather" if key[0] == "F" else "pp/backward/gather"
            x = self.comm.all_gather(x, self.tp_group, axis=0, label=label).reshape(self.boundary_shape)
        return x, number
