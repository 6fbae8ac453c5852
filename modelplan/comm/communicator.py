"""The communicator interface the executor runs on, and the byte ledger it keeps.

One SPMD code path: every rank runs the same per-rank code against a `Communicator`; the
in-process simulator (`modelplan.execute.simcomm`, one thread per rank) and the MPI backend
implement it. Each call appends what this rank really sent and received to its ledger, so
`verify` can compare the ledger with the cost model's communication list one to one.
Arrays are numpy arrays; this module itself does not import numpy.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Sequence

from modelplan.comm.ops import Axis, Collective


@dataclass(frozen=True)
class Group:
    """A process group: its grid axis and its global ranks in group-rank order."""

    axis: Axis
    ranks: tuple[int, ...]

    @property
    def size(self) -> int:
        """Ranks in the group."""
        return len(self.ranks)

    def index(self, rank: int) -> int:
        """Group rank of a global rank."""
        return self.ranks.index(rank)


@dataclass(frozen=True)
class LedgerEntry:
    """One collective (or one point-to-point transfer) as this rank performed it."""

    op: Collective
    axis: Axis
    group_size: int
    bytes_sent: int
    bytes_received: int
    steps: int
    """Communication rounds this rank took part in (ring all-reduce: 2(p-1))."""
    label: str = ""
    """What the call was for, e.g. 'tp/attention/out' or 'dp/grad'."""


@dataclass
class Ledger:
    """Everything one rank sent and received, in call order."""

    rank: int
    entries: list[LedgerEntry] = field(default_factory=list)

    def record(self, entry: LedgerEntry) -> None:
        """Append one entry."""
        self.entries.append(entry)

    def total_sent(self, op: Collective | None = None, axis: Axis | None = None) -> int:
        """Bytes sent, optionally only for one operation and/or axis."""
        return sum(
            e.bytes_sent
            for e in self.entries
            if (op is None or e.op == op) and (axis is None or e.axis == axis)
        )


class Communicator(ABC):
    """Per-rank handle to the collectives. All reductions are sums; `x` is not modified."""

    rank: int
    world_size: int
    ledger: Ledger

    @abstractmethod
    def all_reduce(self, x: Any, group: Group, label: str = "") -> Any:
        """Sum of `x` over the group, returned on every rank."""

    @abstractmethod
    def all_gather(self, x: Any, group: Group, axis: int = 0, label: str = "") -> Any:
        """Concatenation along `axis` of every rank's `x`, in group-rank order."""

    @abstractmethod
    def reduce_scatter(self, x: Any, group: Group, axis: int = 0, label: str = "") -> Any:
        """Sum over the group, then this rank's equal slice along `axis` (group-rank order)."""

    @abstractmethod
    def broadcast(self, x: Any, group: Group, root: int, label: str = "") -> Any:
        """`root`'s (a global rank) array on every rank; non-roots pass an array of the same shape."""

    @abstractmethod
    def reduce(self, x: Any, group: Group, root: int, label: str = "") -> Any:
        """Sum on `root` (global rank); other ranks get None."""

    @abstractmethod
    def all_to_all(self, chunks: Sequence[Any], group: Group, label: str = "") -> list[Any]:
        """chunks[j] goes to group rank j; returns what each group rank sent to this one."""

    @abstractmethod
    def send(self, x: Any, dst: int, group: Group, label: str = "") -> None:
        """Point-to-point send to global rank `dst` (non-blocking for the sender)."""

    @abstractmethod
    def recv(self, src: int, group: Group, label: str = "") -> Any:
        """Receive the next array sent by global rank `src` on this group."""

    @abstractmethod
    def barrier(self, group: Group, label: str = "") -> None:
        """Wait until every rank of the group arrived."""
