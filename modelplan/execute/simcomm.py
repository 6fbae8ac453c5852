"""The in-process simulator: one thread per rank, real numpy messages between the threads.

`run_spmd(world_size, fn, *args)` runs `fn(comm, *args)` on every rank with its own
`SimCommunicator` and returns each rank's result and ledger. The collective algorithms are the
shared ones in `collectives.py`; this module only moves messages. A message is a private copy
of the array, queued FIFO per (src, dst, group, channel); sending never blocks, receiving waits
on a condition variable (no polling).

Safety: the first rank that raises ends the run (blocked ranks are woken with `RankAborted`) and
`run_spmd` raises `SpmdError` naming that rank and its exception. When every live rank waits for a
message no live rank can send, the run stops at once with `SpmdDeadlock`; after `timeout_s` it
stops with `SpmdTimeout`. Both name which rank waits for what.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections import defaultdict, deque
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from modelplan.comm.communicator import Group
from modelplan.comm.ops import Collective
from modelplan.execute.collectives import Channel, Like, P2PCommunicator
from modelplan.execute.spmd import (
    CommError,
    RankAborted,
    SpmdDeadlock,
    SpmdError,
    SpmdResult,
    SpmdTimeout,
    check_world_size,
)

_Key = tuple[int, int, Group, Channel]
"""A FIFO channel: (src rank, dst rank, group, channel)."""


@dataclass(frozen=True)
class _Message:
    arr: np.ndarray
    op: Collective | None
    seq: int
    """The sender's number for this collective on this group (1, 2, ...); 0 for send/recv."""


def _where(op: Collective | None, seq: int, group: Group) -> str:
    call = "send/recv" if op in (None, Collective.SEND_RECV) else f"{op} #{seq}"
    return f"{call} on {group.axis} group {group.ranks}"


class _Fabric:
    """The shared message queues of one run, its failure state and its deadline."""

    def __init__(self, world_size: int, timeout_s: float) -> None:
        self._lock = threading.Lock()
        self._wake = [threading.Condition(self._lock) for _ in range(world_size)]
        self._boxes: dict[_Key, deque[_Message]] = defaultdict(deque)
        self._waiting: dict[int, tuple[_Key, str]] = {}
        self._world_size = world_size
        self._alive = set(range(world_size))
        self.failure: SpmdError | None = None
        self.timeout_s = timeout_s
        self.deadline = time.monotonic() + timeout_s

    def put(self, key: _Key, msg: _Message) -> None:
        """Queue a message for key's destination and wake it."""
        with self._lock:
            if self.failure is not None:
                raise RankAborted(str(self.failure))
            self._boxes[key].append(msg)
            self._wake[key[1]].notify()

    def take(self, key: _Key, what: str) -> _Message:
        """Block until a message is queued on `key`, the run fails, deadlocks or times out."""
        rank = key[1]
        with self._lock:
            box = self._boxes[key]
            self._waiting[rank] = (key, what)
            try:
                while True:
                    if self.failure is not None:
                        raise RankAborted(str(self.failure))
                    if box:
                        return box.popleft()
                    self._check_deadlock()
                    remaining = self.deadline - time.monotonic()
                    if remaining <= 0:
                        self._expire()
                    elif self.failure is None:
                        self._wake[rank].wait(remaining)
            finally:
                del self._waiting[rank]

    def fail(self, rank: int, exc: BaseException) -> None:
        """Record the first failure and wake every waiting rank."""
        with self._lock:
            if self.failure is None:
                self.failure = SpmdError(f"rank {rank} failed: {type(exc).__name__}: {exc}",
                                         rank, exc, traceback.format_exc())
                self._notify_all()

    def finish(self, rank: int) -> None:
        """A rank left its program: the others may now be deadlocked."""
        with self._lock:
            self._alive.discard(rank)
            self._check_deadlock()

    def expire(self) -> None:
        """The deadline passed (called by the launching thread)."""
        with self._lock:
            self._expire()

    def leftovers(self) -> list[str]:
        """Messages sent but never received, one line per channel."""
        return [f"rank {src} sent {len(box)} message(s) to rank {dst} that were never received "
                f"({_where(box[0].op, box[0].seq, group)})"
                for (src, dst, group, _), box in self._boxes.items() if box]

    # -- under the lock ----------------------------------------------------------------------
    def _notify_all(self) -> None:
        for cond in self._wake:
            cond.notify_all()

    def _describe(self) -> str:
        parts = [f"rank {r} waits for {self._waiting[r][1]}" for r in sorted(self._waiting)]
        parts += [f"rank {r} is running outside the communicator"
                  for r in sorted(self._alive - set(self._waiting))]
        done = sorted(set(range(self._world_size)) - self._alive)
        if done:
            parts.append(f"rank(s) {', '.join(map(str, done))} already returned")
        return "; ".join(parts)

    def _check_deadlock(self) -> None:
        if self.failure is not None or not self._alive:
            return
        if all(r in self._waiting and not self._boxes[self._waiting[r][0]] for r in self._alive):
            self.failure = SpmdDeadlock("deadlock: no live rank can send what the others wait "
                                        f"for: {self._describe()}")
            self._notify_all()

    def _expire(self) -> None:
        if self.failure is None:
            self.failure = SpmdTimeout(f"timed out after {self.timeout_s:g} s: {self._describe()}")
            self._notify_all()


class SimCommunicator(P2PCommunicator):
    """One rank's communicator in the simulator; messages go through the shared fabric."""

    def __init__(self, rank: int, world_size: int, fabric: _Fabric) -> None:
        super().__init__(rank, world_size)
        self._fabric = fabric
        self._seq: dict[Group, int] = {}

    def _begin(self, op: Collective, group: Group) -> None:
        if op is not Collective.SEND_RECV:
            self._seq[group] = self._seq.get(group, 0) + 1

    def _post(self, group: Group, peer: int, arr: np.ndarray, channel: Channel,
              with_shape: bool) -> None:
        seq = self._seq.get(group, 0) if channel is Channel.COLL else 0
        op = self._op if channel is Channel.COLL else None
        self._fabric.put((self.rank, group.ranks[peer], group, channel),
                         _Message(arr.copy(), op, seq))

    def _take(self, group: Group, peer: int, channel: Channel, like: Like) -> np.ndarray:
        src = group.ranks[peer]
        if channel is Channel.COLL:
            seq, op = self._seq[group], self._op
            what = f"a message from rank {src} in {_where(op, seq, group)}"
        else:
            seq, op = 0, None
            what = f"recv from rank {src} on {group.axis} group {group.ranks}"
        if self.context:
            what += f" ({self.context})"
        msg = self._fabric.take((src, self.rank, group, channel), what)
        if channel is Channel.COLL and (msg.op, msg.seq) != (op, seq):
            raise CommError(f"collective mismatch: rank {self.rank} is in {_where(op, seq, group)}"
                            f" but rank {src} sent from {_where(msg.op, msg.seq, group)}")
        return msg.arr


def run_spmd(world_size: int, fn: Callable[..., Any], *args: Any,
             timeout_s: float = 60.0) -> SpmdResult:
    """Run `fn(comm, *args)` on `world_size` ranks (one thread each); results and ledgers by rank.

    Raises `SpmdError` (first failing rank and its exception), `SpmdDeadlock` or `SpmdTimeout`.
    """
    check_world_size(world_size)
    if not timeout_s > 0:
        raise SpmdError(f"timeout_s ({timeout_s}) must be > 0")
    fabric = _Fabric(world_size, timeout_s)
    comms = [SimCommunicator(r, world_size, fabric) for r in range(world_size)]
    results: list[Any] = [None] * world_size

    def body(rank: int) -> None:
        try:
            results[rank] = fn(comms[rank], *args)
        except RankAborted:
            pass  # another rank failed first; that failure is reported
        except BaseException as exc:  # noqa: BLE001 - reported to the launching thread
            fabric.fail(rank, exc)
        finally:
            fabric.finish(rank)

    threads = [threading.Thread(target=body, args=(r,), name=f"modelplan-rank{r}", daemon=True)
               for r in range(world_size)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.0, fabric.deadline - time.monotonic()))
    if any(t.is_alive() for t in threads):
        fabric.expire()
        for t in threads:
            t.join(0.5)  # waiting ranks wake at once; a rank stuck in compute stays a daemon
    if fabric.failure is not None:
        failure = fabric.failure
        raise failure from failure.cause
    leftovers = fabric.leftovers()
    if leftovers:
        raise SpmdError("; ".join(leftovers))
    return SpmdResult(tuple(results), tuple(c.ledger for c in comms))
