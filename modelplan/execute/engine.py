"""The per-rank training step: `train_step(comm, job)` runs on every rank (SPMD) and returns
what that rank computed, held and executed. Nothing here reads another rank's arrays except
through the communicator, so the same function runs on threads (simcomm) or MPI processes.

Order of a run, as a real engine does it: build the process groups from the rank grid;
initialise the parameters on the first data-parallel rank and Broadcast them; Barrier; then for
each of `Job.steps` optimizer steps: zero the gradient buffers, run the pipeline schedule's
lowered action list in order (F / B / W of one micro-batch on one model chunk, SEND / RECV
between stages), finish the gradient reductions, optimizer step (its step number drives Adam's
bias correction and the LR schedule). Each step draws a fresh global batch.

Memory is measured, not declared: after every compute action and optimizer step (and, under
ZeRO-3, while a chunk's gathered parameters exist) the rank adds up the live arrays its state
reaches (`memory_probe.py`: buckets, gathered parameters, data, saved activations, received
tensors, anything else it keeps) and keeps each term's peak.

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

from modelplan.comm.regions import Region
from modelplan.comm.communicator import Communicator, Group
from modelplan.comm.ops import Axis
from modelplan.execute.context_parallel import ContextParallel, cp_comm_type
from modelplan.execute.data_parallel import Bucket, DataParallel, Entry
from modelplan.execute.expert_parallel import ExpertParallel
from modelplan.execute.mappings import TensorParallel
from modelplan.execute.memory_probe import PeakTracker, RankMemory, bucket_roots, program_rest
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.params import Batch, ParamDef, init_params, make_batch, param_defs
from modelplan.execute.pipeline import PipelineP2P, StepRecord, run_actions
from modelplan.execute.recompute import Recompute, recompute_of
from modelplan.execute.stage import StageModel, split_cache, stage_layout
from modelplan.plan.dims import ParallelDims, RankCoords
from modelplan.plan.pipeline import Action, PipelineSchedule
from modelplan.plan.pipeline.flush import flushed_schedule
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
    steps: int = 1
    """Optimizer steps to run, each on its own global batch."""

    @property
    def dims(self) -> ParallelDims:
        return ParallelDims.from_plan(self.plan)

    def batches(self) -> list[Batch]:
        """The global batch of every step, drawn in turn from the data generator."""
        _, rng_data = self.rngs()
        return [make_batch(self.spec, self.training, rng_data) for _ in range(self.steps)]

    @property
    def num_microbatches(self) -> int:
        return self.plan.num_microbatches(self.training.global_batch)

    @property
    def cp_comm_type(self) -> str:
        """The run's cp_comm_type, else its engine's (`EngineProfile.cp_comm_type`)."""
        return cp_comm_type(self.training)

    @property
    def recompute(self) -> Recompute:
        """What the executor recomputes (`recompute.py`)."""
        return recompute_of(self.training, self.plan)

    def schedule(self) -> PipelineSchedule:
        """Every pipeline rank's ordered actions over the step's flushes (the same data the cost
        model prices; `TrainingSpec.pp_flush_microbatches`: the schedule run once per flush, the
        gradients accumulating in the buckets across them until the one optimizer step)."""
        return flushed_schedule(self.plan.schedule, self.plan.pp, self.num_microbatches, self.plan.vpp,
                                self.training.pp_flush_microbatches)

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
class StepState:
    """One optimizer step as one rank saw it."""

    losses: tuple[tuple[int, float], ...]
    trace: tuple[StepRecord, ...]
    grads: tuple[Piece, ...]
    params: tuple[Piece, ...]

    @property
    def executed(self) -> list[Action]:
        return [r.step for r in self.trace]


@dataclass(frozen=True)
class RankResult:
    """What one rank computed, held and executed (the fields without a default: the last step)."""

    rank: int
    coords: RankCoords
    losses: tuple[tuple[int, float], ...]
    """(micro-batch, its mean loss) of each micro-batch whose last stage ran here."""
    trace: tuple[StepRecord, ...]
    held: Held
    layouts: dict[str, tuple[Entry, ...]]
    grads: tuple[Piece, ...]
    params: tuple[Piece, ...]
    history: tuple[StepState, ...] = ()
    """Every optimizer step, in order (the last one is also in losses/trace/grads/params)."""
    memory: RankMemory | None = None
    """Peak live bytes per memory term over the whole run."""

    @property
    def executed(self) -> list[Action]:
        """Compute actions in the order this rank ran them."""
        return [r.step for r in self.trace]


@dataclass(frozen=True)
class Groups:
    """This rank's process groups, built from the rank grid (`ParallelDims`, Megatron order)."""

    tp: Group
    dp: Group
    """The gradient-reduction group: dp x cp ranks (Megatron's data-parallel group with context
    parallelism; the dp ranks when cp is 1)."""
    pp: Group
    ep: Group
    expert_dp: Group
    """Data-parallel ranks holding the same experts: they reduce the expert gradients."""
    world: Group
    cp: Group

    @classmethod
    def build(cls, dims: ParallelDims, rank: int) -> "Groups":
        g = {a: Group(a, dims.group(a, rank)) for a in (Axis.TP, Axis.CP, Axis.DP, Axis.PP, Axis.EP)}
        if dims.cp > 1:  # same tp and pp coordinates: ranks tp apart (order tp, cp, dp, pp)
            first = rank - (dims.coords(rank).cp_rank + dims.cp * dims.coords(rank).dp_rank) * dims.tp
            g[Axis.DP] = Group(Axis.DP, tuple(first + i * dims.tp for i in range(dims.cp * dims.dp)))
        expert_dp = Group(Axis.DP, dims.expert_dp_group(rank))
        world = Group(Axis.WORLD, dims.group(Axis.WORLD, rank))
        return cls(g[Axis.TP], g[Axis.DP], g[Axis.PP], g[Axis.EP], expert_dp, world, g[Axis.CP])

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


def finish_buckets(dp: DataParallel, buckets: dict[str, Bucket], step: int = 1, order: list[str] | None = None) -> None:
    """Complete the gradient reductions, then take optimizer step `step`, unit by unit in the
    model's unit order `order` (the ranks that share a replicated unit reduce it in the same order)."""
    mine = list(buckets.values()) if order is None else sorted(buckets.values(), key=lambda b: order.index(b.unit))
    for bucket in mine:
        dp.finish_grads(bucket)
    for bucket in mine:
        dp.step(bucket, step)


def zero_buckets(dp: DataParallel, buckets: dict[str, Bucket]) -> None:
    """Clear every gradient buffer before a step's first backward."""
    for bucket in buckets.values():
        dp.zero_grad(bucket)


def bucket_state(buckets: dict[str, Bucket]
                 ) -> tuple[Held, dict[str, tuple[Entry, ...]], tuple[Piece, ...], tuple[Piece, ...]]:
    """(elements held, layout per unit, valid gradient pieces, valid parameter pieces) of a rank."""
    held = [DataParallel.held(b) for b in buckets.values()]
    grads = tuple(Piece(b.unit, *DataParallel.valid_grad(b)) for b in buckets.values())
    params = tuple(Piece(b.unit, *DataParallel.valid_params(b)) for b in buckets.values())
    return (Held(*(sum(h[k] for h in held) for k in range(3))), {b.unit: b.entries for b in buckets.values()},
            grads, params)


class SteppedProgram:
    """What a rank program does around each optimizer step (shared by transformers and networks):
    needs `job`, `plan`, `m`, `dp`, `buckets`, `p2p`, `schedule`, `coords`, `step`, `unit_order`,
    `memory_roots` and `memory`."""

    @cached_property
    def batches(self) -> list:
        """This data-parallel rank's rows (sequences, samples) of every step's global batch."""
        b = self.plan.micro_batch
        start = self.coords.dp_rank * self.m * b
        return [full.rows(start, start + self.m * b) for full in self.job.batches()]

    @property
    def batch(self):
        """This rank's rows of the current step's global batch."""
        return self.batches[self.step - 1]

    def begin(self, step: int) -> None:
        """Start optimizer step `step` (from 1): its batch, zeroed gradient buffers, fresh messages."""
        self.step = step
        zero_buckets(self.dp, self.buckets)
        self.p2p.next_step()
        self.live: dict = {}


    def run(self) -> tuple[list[tuple[int, float]], list[StepRecord]]:
        """Run this pipeline rank's lowered actions; returns the micro-batch losses and the trace."""
        return run_actions(self.schedule, self.coords.pp_rank, self.p2p, self, self.observe, self.step)

    def observe(self, live: dict | None = None, gathered=None) -> None:
        """Add up the live arrays of this rank's state (memory_probe.py) and keep the peaks;
        `live` is what `run_actions` holds between actions."""
        if live is not None:
            self.live = live
        self.memory.observe(self.memory_roots(self.live, gathered))

    def finish(self) -> None:
        """Complete the gradient reductions and take the optimizer step, unit by unit."""
        finish_buckets(self.dp, self.buckets, self.step, self.unit_order)
        self.observe({})

    def state(self, losses: list[tuple[int, float]], trace: list[StepRecord]) -> StepState:
        """This step's losses, trace and valid gradient / parameter pieces (copies)."""
        _, _, grads, params = bucket_state(self.buckets)
        copy = lambda pieces: tuple(Piece(q.unit, q.start, q.values.copy()) for q in pieces)  # noqa: E731
        return StepState(tuple(losses), tuple(trace), copy(grads), copy(params))


def run_steps(program: SteppedProgram, steps: int):
    """start, then `steps` times: begin, run the schedule, finish; the rank's result."""
    program.start()
    history = []
    for step in range(1, steps + 1):
        program.begin(step)
        losses, trace = program.run()
        program.finish()
        history.append(program.state(losses, trace))
    return program.result(history)


class RankProgram(SteppedProgram):
    """One rank's state during the run."""

    STATIC = ("comm", "job", "spec", "plan", "coords", "groups", "model", "dp", "m", "schedule", "stages",
              "layouts", "chunk_units", "replicas", "memory", "live", "unit_order")
    """Attributes that hold configuration and no arrays, or are walked under their own term
    (memory_probe.program_rest skips them)."""

    def __init__(self, comm: Communicator, job: Job) -> None:
        self.comm, self.job, self.spec, self.plan = comm, job, job.spec, job.plan
        dims = job.dims
        self.coords = dims.coords(comm.rank)
        self.groups = Groups.build(dims, comm.rank)
        cp = ContextParallel(comm, self.groups.cp, job.cp_comm_type) if self.plan.cp > 1 else None
        self.model = StageModel(
            TensorParallel(comm, self.groups.tp, self.plan.sequence_parallel, cp),
            ExpertParallel(comm, self.groups.ep), self.spec, job.recompute,
        )
        self.dp = DataParallel(comm, self.groups.dp.size, self.groups.tp, job.optimizer)  # averaged over dp x cp
        self.m = job.num_microbatches
        self.schedule = job.schedule()
        seq_local = job.training.seq_len // self.plan.cp
        shape = (self.plan.micro_batch, seq_local, self.spec.hidden)  # boundary tensor without SP
        split = self.plan.pipeline_scatter_gather(shape[0] * shape[1] * shape[2])
        self.p2p = PipelineP2P(comm, self.groups.pp, self.schedule, self.groups.tp if split else None, shape)
        layout = self.schedule.layout
        split = self.plan.stage_split
        all_units = stage_units(self.spec, layout.num_stages, split)
        self.stages = list(layout.rank_stages[self.coords.pp_rank])
        self.layouts = [stage_layout(self.spec, v, layout.num_stages, split) for v in self.stages]
        self.chunk_units = [all_units[v] for v in self.stages]
        self.unit_order = list(dict.fromkeys(u for units in all_units for u in units))
        self.replicas = unit_replicas(rank_units(self.spec, layout, split))
        self.buckets: dict[str, Bucket] = {}
        self.step = 1
        self.memory = PeakTracker()
        self.live: dict = {}

    def memory_roots(self, live: dict, gathered) -> dict:
        """What memory_probe walks, by term (saved activations split into blocks and edges)."""
        split = [split_cache(c) for c in live.get("caches", {}).values()]
        roots = bucket_roots(self.buckets.values())
        roots.update(gathered=gathered, inputs=self.batches, activations=[b for b, _ in split],
                     edge_activations=[e for _, e in split], comm_buffers=(self.p2p, live.get("inbox")),
                     deferred=live.get("deferred"), other=program_rest(self, ("buckets", "p2p", "batches")))
        return roots

    def microbatch(self, i: int) -> Batch:
        b = self.plan.micro_batch
        rows = self.batch.rows(i * b, (i + 1) * b)
        if self.plan.cp == 1:
            return rows
        s_local = self.job.training.seq_len // self.plan.cp  # this cp rank's slice of every sequence
        return rows.positions(self.coords.cp_rank * s_local, (self.coords.cp_rank + 1) * s_local)

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
            self.comm.barrier(self.groups.world, label=Region.WORLD_START)

    def params(self, chunk: int) -> dict[str, np.ndarray]:
        """The chunk's parameters as its compute uses them (ZeRO-3: gathered, looked at, then freed
        when the caller drops them)."""
        p = materialize_units(self.dp, self.buckets, self.chunk_units[chunk])
        if self.plan.zero == 3:
            self.observe(gathered=p)
        return p

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

    def result(self, history: list[StepState]) -> RankResult:
        held, layouts, _, _ = bucket_state(self.buckets)
        last = history[-1]
        return RankResult(self.comm.rank, self.coords, last.losses, last.trace, held, layouts, last.grads,
                          last.params, tuple(history), self.memory.result())


def train_step(comm: Communicator, job: Job) -> RankResult:
    """`job.steps` training steps of `job` on this rank (the SPMD entry point)."""
    return run_steps(RankProgram(comm, job), job.steps)
