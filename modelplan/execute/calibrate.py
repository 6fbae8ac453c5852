"""Measure the communicator's collectives over a sweep of message sizes (nccl-tests style).

`measure(comm, sweep)` is an SPMD rank program: run it with `run_spmd_mpi` (real processes) or
`run_spmd` (threads; only useful to test the tool). Sizes follow nccl-tests (doc/PERFORMANCE.md):
- all_reduce, broadcast, send_recv: `size` is the buffer on each rank;
- all_gather: `size` is the gathered output (each rank contributes size/p);
- reduce_scatter: `size` is each rank's input (each rank keeps size/p);
- send_recv: every rank sends `size` to rank+1 and receives from rank-1 at once (nccl-tests'
  sendrecv ring);
- barrier: no payload (size 0).
A sample is the slowest rank's time from a common start (a dissemination barrier) to the end of
the call; `summarize` keeps the median over the repeats.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from modelplan.comm.communicator import Communicator, Group
from modelplan.comm.ops import Axis, Collective
from modelplan.errors import ModelplanError

CALIBRATED = (Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER,
              Collective.BROADCAST, Collective.SEND_RECV, Collective.BARRIER)
"""The collectives `modelplan calibrate` measures, in table order."""

_ITEM = 8  # float64 bytes


class Sweep(BaseModel):
    """What to measure: sizes in bytes, repeats and warm-up calls per size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    sizes: tuple[int, ...] = Field(min_length=1)
    """Message sizes in bytes (nccl-tests meaning per collective, see the module docstring)."""
    collectives: tuple[Collective, ...] = CALIBRATED
    """Collectives to measure."""
    iters: int = Field(20, ge=1)
    """Timed calls per size; the median is kept."""
    warmup: int = Field(3, ge=0)
    """Untimed rounds before the timed ones."""


class Measurement(BaseModel):
    """The median time of one collective at one size."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    op: Collective
    size_bytes: int = Field(ge=0)
    """nccl-tests size actually used (rounded down to whole float64 elements per rank)."""
    count: int = Field(ge=0)
    """float64 elements in the nccl-tests size."""
    time_s: float = Field(ge=0, allow_inf_nan=False)
    """Median over the repeats of the slowest rank's time (several jobs: the median of theirs)."""
    repeats: int = Field(ge=1)


def size_sweep(min_bytes: int, max_bytes: int, factor: int) -> tuple[int, ...]:
    """min, min*factor, ... up to max (nccl-tests -b/-e/-f)."""
    if min_bytes < _ITEM or max_bytes < min_bytes:
        raise ModelplanError(f"sizes: need {_ITEM} <= min ({min_bytes}) <= max ({max_bytes})")
    if factor < 2:
        raise ModelplanError(f"step factor ({factor}) must be >= 2")
    sizes, size = [], min_bytes
    while size <= max_bytes:
        sizes.append(size)
        size *= factor
    return tuple(sizes)


def _elements(op: Collective, size_bytes: int, p: int) -> int:
    """Elements per rank contribution so the nccl-tests size is whole (all_gather/RS: size/p)."""
    if op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER):
        return max(1, size_bytes // (_ITEM * p))
    return max(1, size_bytes // _ITEM)


def _call(comm: Communicator, op: Collective, world: Group, x: np.ndarray) -> None:
    p, r = world.size, comm.rank
    if op is Collective.ALL_REDUCE:
        comm.all_reduce(x, world, label="calibrate")
    elif op is Collective.ALL_GATHER:
        comm.all_gather(x, world, label="calibrate")
    elif op is Collective.REDUCE_SCATTER:
        comm.reduce_scatter(x, world, label="calibrate")
    elif op is Collective.BROADCAST:
        comm.broadcast(x, world, root=0, label="calibrate")
    elif op is Collective.SEND_RECV:
        comm.send(x, world.ranks[(r + 1) % p], world, label="calibrate")
        comm.recv(world.ranks[(r - 1) % p], world, label="calibrate")
    elif op is Collective.BARRIER:
        comm.barrier(world, label="calibrate")
    else:
        raise ModelplanError(f"calibrate does not measure {op}")


def measure(comm: Communicator, sweep: Sweep) -> list[tuple[Collective, int, int, list[float]]]:
    """Rank program: (op, size_bytes, count, [seconds per timed call]) on this rank.

    Repeats are interleaved (round i times every collective at every size once, in an order
    shuffled per round, the same on every rank), so a burst of load from elsewhere on the
    machine spreads over all points instead of spoiling one, and no point always follows the
    same neighbour. The first `warmup` rounds are not kept.
    """
    world = Group(Axis.WORLD, tuple(range(comm.world_size)))
    p = world.size
    points = []  # (op, nccl-tests count, this rank's input)
    for op in sweep.collectives:
        for size in ((0,) if op is Collective.BARRIER else sweep.sizes):
            n = 0 if op is Collective.BARRIER else _elements(op, size, p)
            grouped = op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER)
            local = n * p if op is Collective.REDUCE_SCATTER else n
            points.append((op, n * p if grouped else n, np.ones(local)))
    times: list[list[float]] = [[] for _ in points]
    order = np.random.default_rng(0)  # same seed on every rank: the same order everywhere
    for i in range(sweep.warmup + sweep.iters):
        for k in order.permutation(len(points)):
            op, _, x = points[k]
            comm.barrier(world, label="calibrate/sync")
            start = time.perf_counter()
            _call(comm, op, world, x)
            if i >= sweep.warmup:
                times[k].append(time.perf_counter() - start)
    return [(op, count * _ITEM, count, t) for (op, count, _), t in zip(points, times)]


def summarize(per_rank: Any) -> tuple[Measurement, ...]:
    """Median over repeats of the slowest rank (per_rank: `measure`'s result on every rank)."""
    out = []
    for k, (op, size, count, _) in enumerate(per_rank[0]):
        slowest = [max(rank[k][3][i] for rank in per_rank) for i in range(len(per_rank[0][k][3]))]
        out.append(Measurement(op=op, size_bytes=size, count=count,
                               time_s=statistics.median(slowest), repeats=len(slowest)))
    return tuple(out)


def combine_jobs(jobs: list[tuple[Measurement, ...]]) -> tuple[Measurement, ...]:
    """Points measured by several jobs of the same sweep: the median over jobs of each point's
    median (a job's memory layout can shift all its points alike), repeats added up."""
    if not jobs or any(len(j) != len(jobs[0]) for j in jobs):
        raise ModelplanError(f"combine_jobs: {len(jobs)} jobs with different sweeps")
    out = []
    for same in zip(*jobs):
        if len({(m.op, m.size_bytes) for m in same}) != 1:
            raise ModelplanError("combine_jobs: the jobs measured different points")
        out.append(same[0].model_copy(update={"time_s": statistics.median(m.time_s for m in same),
                                              "repeats": sum(m.repeats for m in same)}))
    return tuple(out)
