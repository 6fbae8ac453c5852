"""Communication calls as data: what each parallelism module adds (`RankCalls`), the merged
communication list verify checks (`CommItem`), and their price on the cluster.

A parallelism module adds the calls of one unit of work (one block of one micro-batch, one
parameter unit, one stage boundary) to a `RankCalls`, with a count; the communication list
(`plan/commlist.py`) multiplies those counts by the blocks, units and micro-batches of each
pipeline rank, and the planner prices the same calls for one unit of work (`price`). Neither
side routes a call by its label: the module that adds a call is the one that prices it.

`nbytes` follows the nccl-tests size convention (AllReduce/Broadcast/send: the buffer;
AllGather: the gathered output; ReduceScatter: the input; AllToAll: the whole send buffer).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Literal

from pydantic import BaseModel, ConfigDict

from modelplan.comm.ops import Algo, Axis, Collective
from modelplan.comm.topology import GroupShape
from modelplan.plan.commcost import CommPricer

A2A, AG, AR, BC, BAR, RS, P2P = (Collective.ALL_TO_ALL, Collective.ALL_GATHER, Collective.ALL_REDUCE,
                                 Collective.BROADCAST, Collective.BARRIER, Collective.REDUCE_SCATTER,
                                 Collective.SEND_RECV)

EXECUTOR_ALGO: dict[Collective, Algo] = {
    AR: Algo.RING, AG: Algo.RING, RS: Algo.RING, BC: Algo.BINOMIAL, Collective.REDUCE: Algo.BINOMIAL,
    A2A: Algo.PAIRWISE, P2P: Algo.DIRECT, BAR: Algo.DISSEMINATION,
}
"""The algorithm the executor's communicator runs for each operation (modelplan.execute.collectives);
the bytes each rank moves in one call of an item are `modelplan.comm.exact.bytes_per_rank` of it."""


class CommItem(BaseModel):
    """One kind of communication call in a training step."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Collective
    axis: Axis
    group_size: int
    nbytes: int
    """Message size in the nccl-tests convention."""
    count: int
    """Calls per step by each rank of `pp_ranks` (start-up items: once per run)."""
    label: str
    overlappable: bool
    """Can hide behind compute (DP gradient reduction, ZeRO parameter prefetch/gather)."""
    pp_ranks: tuple[int, ...]
    """Pipeline ranks whose ranks make this call."""
    startup: bool = False
    """Done once before training (weight Broadcast, Barrier), not every step."""
    root: int | None = None
    """Group rank of the root (Broadcast)."""
    role: Literal["send", "recv"] | None = None
    """Side of a point-to-point transfer (price the sends; receives mirror them)."""


class RankCalls:
    """One pipeline rank's calls, counted by kind (a CommItem's fields but `count` and `pp_ranks`)."""

    def __init__(self) -> None:
        self.counts: dict[tuple, int] = defaultdict(int)

    def add(self, op: Collective, axis: Axis, size: int, nbytes: int, count: int, label: str,
            overlap: bool = False, startup: bool = False, root: int | None = None,
            role: Literal["send", "recv"] | None = None) -> None:
        """Count `count` calls of one kind; calls in a group of one rank and zero counts are dropped."""
        if size > 1 and count:
            self.counts[(op, axis, size, nbytes, label, overlap, startup, root, role)] += count

    def price(self, pricer: CommPricer, shape: Callable[[Axis, int], GroupShape]) -> float:
        """Seconds of all calls in the order they were added: count x one call on the group shape
        `shape(axis, group size)` gives (start-up calls excluded)."""
        total = 0.0
        for (op, axis, size, nbytes, _label, _overlap, startup, _root, _role), count in self.counts.items():
            if not startup:
                total += count * pricer.time_s(op, nbytes, shape(axis, size))
        return total


def merge_rank_calls(per_rank: list[RankCalls]) -> list[CommItem]:
    """One CommItem per kind of call and count, listing the pipeline ranks that make it."""
    merged: dict[tuple, list[int]] = defaultdict(list)
    for r, calls in enumerate(per_rank):
        for key, count in calls.counts.items():
            merged[(*key, count)].append(r)
    fields = ("op", "axis", "group_size", "nbytes", "label", "overlappable", "startup", "root", "role", "count")
    return [CommItem(**dict(zip(fields, key)), pp_ranks=tuple(ranks)) for key, ranks in merged.items()]
