"""The collective algorithms, written once over point-to-point messages for every backend.

`SimCommunicator` (threads) and `MPICommunicator` (processes) inherit these algorithms and only
supply the transport (`_post` a message without blocking, `_take` the next one from a peer), so the
same call moves the same messages, records the same ledger and adds numbers in the same order on
both backends: results are bitwise equal.

Algorithms (p = group size, i = this rank's index in the group):
- all_reduce: ring reduce-scatter, then ring all-gather, over the p chunks that
  `np.array_split` makes of the flattened array (the first n % p chunks hold one extra element);
  2(p-1) rounds, each rank sends about 2(p-1)/p of the bytes (Patarasuk & Yuan 2009).
- all_gather / reduce_scatter: the ring halves of the above, on whole per-rank blocks.
- broadcast / reduce: binomial tree rooted at `root` (MPICH's algorithm), ceil(log2 p) rounds.
- all_to_all: pairwise exchange, round s sends to i+s and receives from i-s, p-1 rounds.
- barrier: dissemination (Hensgen, Finkel & Manber 1988), ceil(log2 p) rounds of empty messages.
- send / recv: one message, FIFO per (src, dst, group); the sender never blocks.

The ledger counts what the code really moved: `nbytes` of every message sent and received, and
one step for every round in which this rank sent or received.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Sequence

import numpy as np

from modelplan.comm.communicator import Communicator, Group, Ledger, LedgerEntry
from modelplan.comm.ops import Collective
from modelplan.execute.spmd import CommError

Like = tuple[tuple[int, ...], np.dtype] | None
"""What the receiver expects (shape, dtype); None when only the sender knows (p2p, all_to_all)."""


class Channel(StrEnum):
    """Message streams of a group kept apart: collective traffic and point-to-point traffic."""

    COLL = "coll"
    P2P = "p2p"


@dataclass
class _Tally:
    """Bytes and rounds of one call on this rank."""

    sent: int = 0
    received: int = 0
    steps: int = 0


class P2PCommunicator(Communicator):
    """A communicator whose collectives are ring/tree algorithms over `_post` / `_take`."""

    def __init__(self, rank: int, world_size: int) -> None:
        self.rank = rank
        self.world_size = world_size
        self.ledger = Ledger(rank)
        self._op: Collective | None = None
        self.context = ""
        """What the caller waits for in its own terms (the pipeline: which message of which
        micro-batch and stage); deadlock and timeout reports name it."""

    # -- transport, supplied by each backend -------------------------------------------------
    @abstractmethod
    def _post(self, group: Group, peer: int, arr: np.ndarray, channel: Channel,
              with_shape: bool) -> None:
        """Hand `arr` (contiguous, never modified afterwards) to group index `peer`; no blocking.

        `with_shape`: the receiver does not know the shape and dtype (it passes `like=None`).
        """

    @abstractmethod
    def _take(self, group: Group, peer: int, channel: Channel, like: Like) -> np.ndarray:
        """The next array group index `peer` posted to this rank on `channel` (blocks)."""

    def _begin(self, op: Collective, group: Group) -> None:
        """Hook before every call (the simulator numbers collectives, MPI reaps finished sends)."""

    def _complete(self) -> None:
        """Hook after every collective (MPI waits for its posted sends)."""

    # -- bookkeeping -------------------------------------------------------------------------
    def _enter(self, op: Collective, group: Group) -> int:
        """Validate the group, run the backend hook and return this rank's group index."""
        if len(set(group.ranks)) != len(group.ranks) or not group.ranks:
            raise CommError(f"{group.axis} group {group.ranks} must list distinct ranks")
        bad = [r for r in group.ranks if not 0 <= r < self.world_size]
        if bad:
            raise CommError(
                f"{group.axis} group {group.ranks} has rank {bad[0]} outside [0, {self.world_size})"
            )
        if self.rank not in group.ranks:
            raise CommError(f"rank {self.rank} called {op} on {group.axis} group {group.ranks} "
                            "it does not belong to")
        self._op = op
        self._begin(op, group)
        return group.index(self.rank)

    def _member(self, group: Group, rank: int, what: str) -> int:
        """Group index of global rank `rank`, or a one-line error."""
        if rank not in group.ranks:
            raise CommError(f"{what} ({rank}) is not in {group.axis} group {group.ranks}")
        return group.index(rank)

    def _send(self, group: Group, peer: int, arr: np.ndarray, t: _Tally,
              channel: Channel = Channel.COLL, with_shape: bool = False) -> None:
        arr = np.ascontiguousarray(arr)
        if arr.dtype.hasobject:  # bytes on the wire would be pointers (MPI), so never allowed
            raise CommError(f"{self._op} on {group.axis} group {group.ranks}: cannot send an "
                            f"array of dtype {arr.dtype}; use a numeric dtype")
        t.sent += arr.nbytes
        self._post(group, peer, arr, channel, with_shape)

    def _recv(self, group: Group, peer: int, t: _Tally, like: Like,
              channel: Channel = Channel.COLL) -> np.ndarray:
        arr = self._take(group, peer, channel, like)
        t.received += arr.nbytes
        if like is not None and (arr.shape != like[0] or arr.dtype != like[1]):
            raise CommError(
                f"{self._op} on {group.axis} group {group.ranks}: rank {group.ranks[peer]} sent "
                f"{arr.dtype}{list(arr.shape)} where rank {self.rank} expects "
                f"{np.dtype(like[1])}{list(like[0])}"
            )
        return arr

    def _record(self, op: Collective, group: Group, t: _Tally, label: str) -> None:
        self.ledger.record(LedgerEntry(op, group.axis, group.size, t.sent, t.received, t.steps,
                                       label))
        self._complete()

    # -- ring building blocks ----------------------------------------------------------------
    def _ring_reduce_scatter(self, group: Group, me: int, chunks: list[np.ndarray],
                             t: _Tally) -> None:
        """After p-1 rounds chunks[me] holds the sum over the group (others: partial sums)."""
        p = group.size
        right, left = (me + 1) % p, (me - 1) % p
        for s in range(p - 1):
            send_c, recv_c = (me - s - 1) % p, (me - s - 2) % p
            self._send(group, right, chunks[send_c], t)
            got = self._recv(group, left, t, (chunks[recv_c].shape, chunks[recv_c].dtype))
            chunks[recv_c] = got + chunks[recv_c]  # partial sum from the left, plus own block
            t.steps += 1

    def _ring_all_gather(self, group: Group, me: int, chunks: list[np.ndarray],
                         likes: list[Like], t: _Tally) -> None:
        """chunks[me] is this rank's block; after p-1 rounds every chunks[j] is rank j's."""
        p = group.size
        right, left = (me + 1) % p, (me - 1) % p
        for s in range(p - 1):
            send_c, recv_c = (me - s) % p, (me - s - 1) % p
            self._send(group, right, chunks[send_c], t)
            chunks[recv_c] = self._recv(group, left, t, likes[recv_c])
            t.steps += 1

    # -- collectives -------------------------------------------------------------------------
    def all_reduce(self, x: Any, group: Group, label: str = "") -> np.ndarray:
        """Sum of `x` over the group on every rank (ring reduce-scatter + ring all-gather)."""
        me = self._enter(Collective.ALL_REDUCE, group)
        x, t = np.asarray(x), _Tally()
        chunks = np.array_split(x.reshape(-1), group.size)  # (n,) -> p chunks, never written to
        self._ring_reduce_scatter(group, me, chunks, t)
        self._ring_all_gather(group, me, chunks, [(c.shape, c.dtype) for c in chunks], t)
        self._record(Collective.ALL_REDUCE, group, t, label)
        return np.concatenate(chunks).reshape(x.shape)

    def all_gather(self, x: Any, group: Group, axis: int = 0, label: str = "") -> np.ndarray:
        """Every rank's `x` (all the same shape) concatenated along `axis` in group order."""
        me = self._enter(Collective.ALL_GATHER, group)
        x, t = np.asarray(x), _Tally()
        chunks = [x] * group.size  # slot j is replaced by rank j's block as it arrives
        self._ring_all_gather(group, me, chunks, [(x.shape, x.dtype)] * group.size, t)
        self._record(Collective.ALL_GATHER, group, t, label)
        return np.concatenate(chunks, axis=axis)

    def reduce_scatter(self, x: Any, group: Group, axis: int = 0, label: str = "") -> np.ndarray:
        """Sum over the group, then this rank's equal block along `axis` (ring)."""
        me = self._enter(Collective.REDUCE_SCATTER, group)
        x, t = np.asarray(x), _Tally()
        length = x.shape[axis] if x.ndim else 0
        if x.ndim == 0 or length % group.size:
            raise CommError(f"reduce_scatter: group size ({group.size}) must divide axis {axis} "
                            f"of shape {list(x.shape)} ({length})")
        chunks = [np.ascontiguousarray(c) for c in np.split(x, group.size, axis=axis)]
        if group.size == 1:
            chunks[0] = chunks[0].copy()
        self._ring_reduce_scatter(group, me, chunks, t)
        self._record(Collective.REDUCE_SCATTER, group, t, label)
        return chunks[me]

    def broadcast(self, x: Any, group: Group, root: int, label: str = "") -> np.ndarray:
        """`root`'s array on every rank, down a binomial tree (MPICH MPIR_Bcast_intra_binomial)."""
        me = self._enter(Collective.BROADCAST, group)
        root_i = self._member(group, root, "broadcast root")
        x, t, p = np.asarray(x), _Tally(), group.size
        vr = (me - root_i) % p  # rank relative to the root
        buf = x.copy() if vr == 0 else None
        mask = 1
        while mask < p:  # receive from the parent: the rank that differs in the lowest set bit
            if vr & mask:
                buf = self._recv(group, (vr - mask + root_i) % p, t, (x.shape, x.dtype))
                t.steps += 1
                break
            mask <<= 1
        mask >>= 1
        while mask > 0:  # send to the children, farthest subtree first
            if vr + mask < p:
                self._send(group, (vr + mask + root_i) % p, buf, t)
                t.steps += 1
            mask >>= 1
        self._record(Collective.BROADCAST, group, t, label)
        return buf

    def reduce(self, x: Any, group: Group, root: int, label: str = "") -> np.ndarray | None:
        """Sum on `root` (others get None), up a binomial tree (MPICH's binomial reduce)."""
        me = self._enter(Collective.REDUCE, group)
        root_i = self._member(group, root, "reduce root")
        x, t, p = np.asarray(x), _Tally(), group.size
        vr = (me - root_i) % p
        acc = x.copy()
        mask = 1
        while mask < p:
            if vr & mask:  # hand the partial sum to the parent and stop
                self._send(group, (vr - mask + root_i) % p, acc, t)
                t.steps += 1
                break
            if vr + mask < p:  # add the child's subtree
                acc = acc + self._recv(group, (vr + mask + root_i) % p, t, (x.shape, x.dtype))
                t.steps += 1
            mask <<= 1
        self._record(Collective.REDUCE, group, t, label)
        return acc if vr == 0 else None

    def all_to_all(self, chunks: Sequence[Any], group: Group, label: str = "") -> list[np.ndarray]:
        """chunks[j] goes to group rank j; pairwise exchange, chunk shapes may differ."""
        me = self._enter(Collective.ALL_TO_ALL, group)
        p, t = group.size, _Tally()
        if len(chunks) != p:
            raise CommError(f"all_to_all: got {len(chunks)} chunks for {group.axis} group of "
                            f"size {p}")
        chunks = [np.asarray(c) for c in chunks]
        out: list[np.ndarray] = [np.empty(0)] * p
        out[me] = chunks[me].copy()
        for s in range(1, p):
            dst, src = (me + s) % p, (me - s) % p
            self._send(group, dst, chunks[dst], t, with_shape=True)
            out[src] = self._recv(group, src, t, None)
            t.steps += 1
        self._record(Collective.ALL_TO_ALL, group, t, label)
        return out

    def send(self, x: Any, dst: int, group: Group, label: str = "") -> None:
        """Post a copy of `x` to global rank `dst`; returns at once (never waits for recv)."""
        self._enter(Collective.SEND_RECV, group)
        peer, t = self._member(group, dst, "send dst"), _Tally()
        self._send(group, peer, np.array(x, copy=True), t, Channel.P2P, with_shape=True)
        t.steps += 1
        self.ledger.record(LedgerEntry(Collective.SEND_RECV, group.axis, group.size, t.sent, 0,
                                       t.steps, label))

    def recv(self, src: int, group: Group, label: str = "") -> np.ndarray:
        """The next array global rank `src` sent to this rank on `group` (FIFO)."""
        self._enter(Collective.SEND_RECV, group)
        peer, t = self._member(group, src, "recv src"), _Tally()
        arr = self._recv(group, peer, t, None, Channel.P2P)
        t.steps += 1
        self.ledger.record(LedgerEntry(Collective.SEND_RECV, group.axis, group.size, 0,
                                       t.received, t.steps, label))
        return arr

    def barrier(self, group: Group, label: str = "") -> None:
        """Dissemination barrier: round k signals rank i+2^k and waits for rank i-2^k."""
        me = self._enter(Collective.BARRIER, group)
        p, t, k = group.size, _Tally(), 1
        empty = np.empty(0, dtype=np.uint8)
        while k < p:
            self._send(group, (me + k) % p, empty, t)
            self._recv(group, (me - k) % p, t, (empty.shape, empty.dtype))
            t.steps += 1
            k <<= 1
        self._record(Collective.BARRIER, group, t, label)
