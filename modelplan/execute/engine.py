"""The per-rank training step: `train_step(comm, job)` runs on every rank (SPMD) and returns
what that rank computed, held and executed. Nothing here reads another rank's arrays except
through the communicator, so the same function runs on threads (simcomm) or MPI processes.

Order of one step, as a real engine does it: build the process groups from the rank grid;
initialise the parameters on the first data-parallel rank and Broadcast them; Barrier; run the
pipeline schedule's lowered action list in order (F / B / W of one micro-batch on one model
chunk, SEND / RECV between stages); finish the gradient reductions; optimizer step.

B and W (Qi et al. 2024): when the schedule lists a W for a micro-batch and chunk, its B computes
the input gradient (and, in this numpy executor, the weight gradients too, kept aside) and its W
adds the weight gradients to the gradient buffers, where ZeRO-2/3 reduce-scatter them; a B
without a W adds them at once (the fused backward of 1F1B).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from modelplan.comm.communicator import Communicator, Group
from modelplan.comm.ops import Axis
from modelplan.execute.data_parallel import Bucket, DataParallel, Entry
from modelplan.execute.expert_parallel import ExpertParallel
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.params import Batch, ParamDef, init_params, make_batch, param_defs
from modelplan.execute.pipeline import PipelineP2P, StepRecord, run_actions
from modelplan.execute.stage import StageModel, stage_layout
from modelplan.plan.dims import ParallelDims, RankCoords
from modelplan.plan.pipeline import Action, PipelineSchedule, pipeline_schedule
from modelplan.plan.stages import rank_units, replica_label, stage_units, unit_replicas
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


@dataclass(frozen=True)
class Job:
    """Everything every rank needs: the (scaled-down) model, training settings, plan and seed."""

    spec: TransformerSpec
    training: TrainingSpec
    plan: Plan
    seed: int = 0
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)

    @property
    def dims(self) -> ParallelDims:
        return ParallelDims.from_plan(self.plan)

    @property
    def num_microbatches(self) -> int:
        return self.plan.num_microbatches(self.training.global_batch)

    @property
    def recompute_full(self) -> bool:
        mode = self.plan.recompute if self.plan.recompute is not None else self.training.recompute
        return mode == "full"

    def schedule(self) -> PipelineSchedule:
        """Every pipeline rank's ordered actions (the same data the cost model prices)."""
        return pipeline_schedule(self.plan.schedule, self.plan.pp, self.num_microbatches, self.plan.vpp)

    def rngs(self) -> tuple[np.random.Generator, np.random.Generator]:
        """Independent generators for the initial weights and for the data, from the seed."""
        a, b = np.random.SeedSequence(self.seed).spawn(2)
        return np.random.default_rng(a), np.random.default_rng(b)


@dataclass(frozen=True)
class Held:
    """Elements of persistent model state on one rank at the end of the step."""

    weights: int
    gradients: int
    optimizer: int


@dataclass(frozen=True)
class Piece:
    """Flat elements [start, start + len(values)) of one unit's bucket, as held by a rank."""

    unit: str
    start: int
    values: np.ndarray


@dataclass(frozen=True)
class RankResult:
    """What one rank computed, held and executed."""

    rank: int
    coords: RankCoords
    losses: tuple[tuple[int, float], ...]
    """(micro-batch, its mean loss) of each micro-batch whose last stage ran here."""
    trace: tuple[StepRecord, ...]
    held: Held
    layouts: dict[str, tuple[Entry, ...]]
    grads: tuple[Piece, ...]
    params: tuple[Piece, ...]

    @property
    def executed(self) -> list[Action]:
        """Compute actions in the order this rank ran them."""
        return [r.step for r in self.trace]


@dataclass(frozen=True)
class Groups:
    """This rank's process groups, built from the rank grid (`ParallelDims`, Megatron order)."""

    tp: Group
    dp: Group
    pp: Group
    ep: Group
    expert_dp: Group
    """Data-parallel ranks holding the same experts: they reduce the expert gradients."""
    world: Group

    @classmethod
    def build(cls, dims: ParallelDims, rank: int) -> "Groups":
        g = {a: Group(a, dims.group(a, rank)) for a in (Axis.TP, Axis.DP, Axis.PP, Axis.EP)}
        expert_dp = Group(Axis.DP, dims.expert_dp_group(rank))
        world = Group(Axis.WORLD, dims.group(Axis.WORLD, rank))
        return cls(g[Axis.TP], g[Axis.DP], g[Axis.PP], g[Axis.EP], expert_dp, world)

    def replicas(self, pp_ranks: tuple[int, ...] | None) -> Group | None:
        """The group of this rank's pipeline peers at `pp_ranks` (a replicated unit's copies)."""
        return None if pp_ranks is None else Group(Axis.PP, tuple(self.pp.ranks[r] for r in pp_ranks))


def local_entries(defs: list[ParamDef], tp: Group, ep: Group, rank: int, sequence_parallel: bool) -> tuple[Entry, ...]:
    """This rank's shard of each parameter: split dims, offsets in the flat bucket."""
    entries, offset = [], 0
    for d in defs:
        index = []
        for dim, n in enumerate(d.shape):
            parts, k = (tp.size, tp.index(rank)) if dim == d.tp_dim else (ep.size, ep.index(rank)) if dim == d.ep_dim else (1, 0)
            index.append((k * n // parts, (k + 1) * n // parts))
        shape = tuple(b - a for a, b in index)
        partial = tp.size > 1 and (d.tensor_partial_grad or (sequence_parallel and d.sequence_parallel_grad))
        entry = Entry(d.name, shape, offset, tuple(index), partial)
        entries.append(entry)
        offset += entry.numel
    return tuple(entries)


def defs_by_unit(defs: list[ParamDef]) -> dict[str, list[ParamDef]]:
    """Parameter definitions grouped by unit (one DP bucket each), in definition order."""
    out: dict[str, list[ParamDef]] = {}
    for d in defs:
        out.setdefault(d.unit, []).append(d)
    return out


def local_values(full: dict[str, np.ndarray], entries: tuple[Entry, ...]) -> dict[str, np.ndarray]:
    """This rank's slices of the full initial parameters."""
    return {e.name: full[e.name][tuple(slice(a, b) for a, b in e.index)] for e in entries}


def materialize_units(dp: DataParallel, buckets: dict[str, Bucket], units: Iterable[str]) -> dict[str, np.ndarray]:
    """The parameters of `units` (those with a bucket) as the step's compute uses them."""
    out: dict[str, np.ndarray] = {}
    for unit in units:
        if unit in buckets:
            out.update(dp.materialize(buckets[unit]))
    return out


def finish_buckets(dp: DataParallel, buckets: dict[str, Bucket]) -> None:
    """Complete the gradient reductions, then take the optimizer step, unit by unit."""
    for bucket in buckets.values():
        dp.finish_grads(bucket)
    for bucket in buckets.values():
        dp.step(bucket)


def bucket_state(buckets: dict[str, Bucket]
                 ) -> tuple[Held, dict[str, tuple[Entry, ...]], tuple[Piece, ...], tuple[Piece, ...]]:
    """(elements held, layout per unit, valid gradient pieces, valid parameter pieces) of a rank."""
    held = [DataParallel.held(b) for b in buckets.values()]
    grads = tuple(Piece(b.unit, *DataParallel.valid_grad(b)) for b in buckets.values())
    params = tuple(Piece(b.unit, *DataParallel.valid_params(b)) for b in buckets.values())
    return (Held(*(sum(h[k] for h in held) for k in range(3))), {b.unit: b.entries for b in buckets.values()},
            grads, params)


class RankProgram:
    """One rank's state during the step."""

    def __init__(self, comm: Communicator, job: Job) -> None:
        self.comm, self.job, self.spec, self.plan = comm, job, job.spec, job.plan
        dims = job.dims
        self.coords = dims.coords(comm.rank)
        self.groups = Groups.build(dims, comm.rank)
        self.model = StageModel(
            TensorParallel(comm, self.groups.tp, self.plan.sequence_parallel),
            ExpertParallel(comm, self.groups.ep), self.spec, job.recompute_full,
        )
        self.dp = DataParallel(comm, self.plan.dp, self.groups.tp, job.optimizer)
        self.m = job.num_microbatches
        self.schedule = job.schedule()
        shape = (self.plan.micro_batch, job.training.seq_len, self.spec.hidden)  # boundary tensor without SP
        split = self.plan.pipeline_scatter_gather(shape[0] * shape[1] * shape[2])
        self.p2p = PipelineP2P(comm, self.groups.pp, self.schedule, self.groups.tp if split else None, shape)
        layout = self.schedule.layout
        all_units = stage_units(self.spec, layout.num_stages)
        self.stages = list(layout.rank_stages[self.coords.pp_rank])
        self.layouts = [stage_layout(self.spec, v, layout.num_stages) for v in self.stages]
        self.chunk_units = [all_units[v] for v in self.stages]
        self.replicas = unit_replicas(rank_units(self.spec, layout))
        self.buckets: dict[str, Bucket] = {}

    @cached_property
    def batch(self) -> Batch:
        """This data-parallel rank's sequences of the global batch."""
        _, rng_data = self.job.rngs()
        b = self.plan.micro_batch
        start = self.coords.dp_rank * self.m * b
        return make_batch(self.spec, self.job.training, rng_data).rows(start, start + self.m * b)

    def microbatch(self, i: int) -> Batch:
        b = self.plan.micro_batch
        return self.batch.rows(i * b, (i + 1) * b)

    def start(self) -> None:
        """Buckets, initial weights from the seed on each group's first rank, Broadcast, Barrier."""
        by_unit = defs_by_unit(param_defs(self.spec))
        full = None
        rank = self.comm.rank
        for units in self.chunk_units:
            for unit in units:
                if unit not in by_unit or unit in self.buckets:
                    continue
                group = self.groups.expert_dp if unit.endswith("/experts") else self.groups.dp
                entries = local_entries(by_unit[unit], self.groups.tp, self.groups.ep, rank, self.plan.sequence_parallel)
                bucket = Bucket(unit, entries, group, group.index(rank), self.plan.zero,
                                self.groups.replicas(self.replicas.get(unit)), replica_label(unit))
                values = None
                if group.ranks[0] == rank:
                    if full is None:
                        full = init_params(self.spec, self.job.rngs()[0])
                    values = local_values(full, entries)
                self.dp.place(bucket, values)
                self.buckets[unit] = bucket
        if self.comm.world_size > 1:
            self.comm.barrier(self.groups.world, label="world/start")

    def params(self, chunk: int) -> dict[str, np.ndarray]:
        return materialize_units(self.dp, self.buckets, self.chunk_units[chunk])

    def forward(self, chunk: int, microbatch: int, x):
        """`ChunkModel.forward` of chunk `chunk` (its embedding, blocks and head with the loss)."""
        return self.model.forward(self.layouts[chunk], self.params(chunk), x, self.microbatch(microbatch))

    def backward(self, chunk: int, microbatch: int, cache, dout):
        """`ChunkModel.backward`; on the last stage dL/dloss is 1/m (the step's loss is the mean
        over micro-batches)."""
        dout = 1.0 / self.m if dout is None else dout
        return self.model.backward(self.layouts[chunk], self.params(chunk), cache, dout, self.microbatch(microbatch))

    def add_grads(self, chunk: int, microbatch: int, grads: dict[str, np.ndarray]) -> None:
        """`ChunkModel.add_grads`: into the buckets of the chunk's units."""
        for unit in self.chunk_units[chunk]:
            if unit in self.buckets:
                self.dp.add_grads(self.buckets[unit], grads)

    def run(self) -> tuple[list[tuple[int, float]], list[StepRecord]]:
        """Run this pipeline rank's lowered actions; returns the micro-batch losses and the trace."""
        return run_actions(self.schedule, self.coords.pp_rank, self.p2p, self)

    def finish(self) -> None:
        """Complete the gradient reductions and take the optimizer step, unit by unit."""
        finish_buckets(self.dp, self.buckets)

    def result(self, losses: list[tuple[int, float]], trace: list[StepRecord]) -> RankResult:
        return RankResult(self.comm.rank, self.coords, tuple(losses), tuple(trace),
                          *bucket_state(self.buckets))


def train_step(comm: Communicator, job: Job) -> RankResult:
    """One training step of `job` on this rank (the SPMD entry point)."""
    program = RankProgram(comm, job)
    program.start()
    losses, trace = program.run()
    program.finish()
    return program.result(losses, trace)
