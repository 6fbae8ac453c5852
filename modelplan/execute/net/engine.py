"""The per-rank training step of a network: `net_train_step(comm, job)` runs on every rank (SPMD).

The same order as the transformer engine (`modelplan.execute.engine`), whose pieces it reuses:
process groups from the rank grid; each unit's parameters initialised on the first data-parallel
rank and broadcast (`DataParallel.place`, one bucket per unit, ZeRO 0-3); Barrier; the pipeline
schedule's steps in order with point-to-point sends between stages (`PipelineP2P`); gradient
reductions; optimizer step. Stages and tensor-parallel roles come from `plan/net_layout.py`.
Each rank also records the peak of the activations its in-flight micro-batches keep for
backward (what `Saved` holds), for the memory check.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from modelplan.comm.communicator import Communicator
from modelplan.count.network import network_layers
from modelplan.count.network_tree import leaves_of, network_tree
from modelplan.execute.data_parallel import Bucket, DataParallel
from modelplan.execute.engine import (
    Groups,
    RankResult,
    SteppedProgram,
    StepState,
    bucket_state,
    defs_by_unit,
    local_entries,
    local_values,
    materialize_units,
    run_steps,
)
from modelplan.execute.memory_probe import PeakTracker, bucket_roots, program_rest
from modelplan.execute.net.loss import LossKind, loss_backward, loss_forward
from modelplan.execute.net.model import backward_nodes, forward_nodes, tape_leaves
from modelplan.execute.net.params import NetBatch, executor_shape, init_buffers, init_params, make_batch
from modelplan.execute.net.saved import RunContext
from modelplan.execute.net.tensor_parallel import NetTensorParallel, shard_slice
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.params import ParamDef
from modelplan.execute.pipeline import COST, PipelineP2P, StepRecord
from modelplan.execute.spmd import named_step
from modelplan.plan.dims import ParallelDims
from modelplan.plan.net_layout import StagePlan, network_stages
from modelplan.plan.net_tp import TpRole, param_tp_dim
from modelplan.plan.schedule import Step, pipeline_schedule, stage_index
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec


@dataclass(frozen=True)
class NetJob:
    """Everything every rank needs: network, training settings, plan, seed, optimizer, loss."""

    spec: NetworkSpec
    training: TrainingSpec
    plan: Plan
    seed: int = 0
    optimizer: OptimizerConfig = field(default_factory=OptimizerConfig)
    loss: LossKind | None = None
    """None: cross-entropy for several outputs, MSE for one (`default_loss`)."""
    steps: int = 1
    """Optimizer steps to run, each on its own global batch."""

    @property
    def dims(self) -> ParallelDims:
        return ParallelDims(dp=self.plan.dp, tp=self.plan.tp, pp=self.plan.pp)

    @property
    def num_microbatches(self) -> int:
        return self.plan.num_microbatches(self.training.global_batch)

    def schedules(self) -> list[list[Step]]:
        return pipeline_schedule(self.plan.schedule, self.plan.pp, self.num_microbatches, self.plan.vpp)

    def stages(self) -> list[StagePlan]:
        return network_stages(network_tree(self.spec), self.plan.pp * self.plan.vpp, self.plan.tp)

    def batch(self, step: int = 0) -> NetBatch:
        """The global batch of step `step` (0-based; every rank draws the same and keeps its rows)."""
        return make_batch(network_layers(self.spec), self.training.global_batch, self.seed, self.loss, step=step)

    def batches(self) -> list[NetBatch]:
        """The global batch of every step."""
        return [self.batch(t) for t in range(self.steps)]


def net_param_defs(stages: list[StagePlan]) -> list[ParamDef]:
    """Every parameter in executor layout with its unit (bucket) and tensor-parallel split dim."""
    defs = []
    for st in stages:
        for unit, nodes in zip(st.units, st.unit_nodes):
            for leaf in leaves_of(nodes):
                for attr, torch_shape in leaf.info.param_shapes.items():
                    shape = executor_shape(leaf.info.type, attr, torch_shape)
                    tp_dim = param_tp_dim(leaf, st.roles[leaf.path].role, attr, len(shape))
                    defs.append(ParamDef(f"{leaf.path}/{attr}", shape, unit, tp_dim=tp_dim))
    return defs


@dataclass(frozen=True)
class NetRankResult(RankResult):
    """A RankResult plus the activation memory peak of this rank."""

    activation_elements: int = 0
    """Peak float elements kept for backward by the in-flight micro-batches."""
    activation_fixed_bytes: int = 0
    """Peak bytes of masks and indices kept for backward."""


class NetRankProgram(SteppedProgram):
    """One rank's state during the step."""

    STATIC = ("comm", "job", "spec", "plan", "coords", "groups", "model", "dp", "m", "schedules", "stages",
              "layouts", "chunk_units", "defs", "hooks", "memory")
    """Attributes that hold configuration and no arrays (memory_probe.program_rest skips them)."""

    def __init__(self, comm: Communicator, job: NetJob) -> None:
        self.comm, self.job, self.plan = comm, job, job.plan
        dims = job.dims
        self.coords = dims.coords(comm.rank)
        self.groups = Groups.build(dims, comm.rank, False)
        self.dp = DataParallel(comm, self.plan.dp, self.groups.tp, None, job.optimizer)
        self.m = job.num_microbatches
        self.schedules = job.schedules()
        self.p2p = PipelineP2P(comm, self.groups.pp, self.schedules, self.plan.vpp)
        all_stages = job.stages()
        self.defs = net_param_defs(all_stages)
        self.stages = [all_stages[stage_index(self.coords.pp_rank, c, self.plan.pp)] for c in range(self.plan.vpp)]
        self.hooks = [NetTensorParallel(comm, self.groups.tp, st.roles) for st in self.stages]
        self.buckets: dict[str, Bucket] = {}
        self.buffers = self._local_buffers()
        self.step = 1
        self.memory = PeakTracker()
        self.activation_peak = (0, 0)

    def _local_buffers(self) -> dict[str, np.ndarray]:
        """BatchNorm running statistics of this rank's stages (its channel slice when sharded)."""
        out = {}
        full = init_buffers(network_layers(self.job.spec))
        for st in self.stages:
            for leaf in leaves_of(st.nodes):
                for name in ("running_mean", "running_var"):
                    key = f"{leaf.path}/{name}"
                    if key in full:
                        value = full[key]
                        if st.roles[leaf.path].role is TpRole.SHARDED:
                            value = value[shard_slice(value.size, self.plan.tp, self.coords.tp_rank)]
                        out[key] = value.copy()
        return out

    @cached_property
    def batches(self) -> list[NetBatch]:
        """This data-parallel rank's samples of every step's global batch."""
        b = self.plan.micro_batch
        start = self.coords.dp_rank * self.m * b
        return [full.rows(start, start + self.m * b) for full in self.job.batches()]

    @property
    def batch(self) -> NetBatch:
        return self.batches[self.step - 1]

    def observe(self, tapes=None, gathered=None) -> None:
        """Add up the live arrays of this rank's state (memory_probe.py) and keep the peaks: the
        layers' tapes are activations, the loss's cache an edge activation."""
        kept = list((tapes or {}).values())
        roots = bucket_roots(self.buckets.values())
        roots.update(gathered=gathered, activations=[t[0] for t in kept], edge_activations=[t[1] for t in kept],
                     comm_buffers=self.p2p, inputs=self.batches, buffers=self.buffers,
                     other=program_rest(self, ("buckets", "p2p", "batches", "buffers")))
        self.memory.observe(roots)

    def context(self, i: int) -> RunContext:
        b = self.plan.micro_batch
        offset = (self.coords.dp_rank * self.m + i) * b
        return RunContext(self.job.seed, offset, self.job.training.global_batch)

    def start(self) -> None:
        """Buckets, initial weights on each group's first rank, Broadcast, Barrier."""
        by_unit = defs_by_unit(self.defs)
        full = None
        rank = self.comm.rank
        for st in self.stages:
            for unit in st.units:
                if unit not in by_unit:
                    continue
                group = self.groups.dp
                entries = local_entries(by_unit[unit], self.groups.tp, self.groups.ep, rank, False)
                bucket = Bucket(unit, entries, group, group.index(rank), self.plan.zero, False)
                values = None
                if group.ranks[0] == rank:
                    if full is None:
                        full = init_params(network_layers(self.job.spec), self.job.seed)
                    values = local_values(full, entries)
                self.dp.place(bucket, values)
                self.buckets[unit] = bucket
        if self.comm.world_size > 1:
            self.comm.barrier(self.groups.world, label="world/start")

    def params(self, chunk: int) -> dict[str, np.ndarray]:
        return materialize_units(self.dp, self.buckets, self.stages[chunk].units)

    def run(self) -> tuple[list[float], list[StepRecord], tuple[int, int]]:
        """Run this pipeline rank's schedule: losses, trace, peak (activation elements, fixed bytes)."""
        losses: dict[int, float] = {}
        tapes: dict[tuple[int, int], tuple] = {}
        trace: list[StepRecord] = []
        b = self.plan.micro_batch
        held, peak = [0, 0], [0, 0]
        for step in self.schedules[self.coords.pp_rank]:
            c, i = step.chunk, step.microbatch
            st, hooks = self.stages[c], self.hooks[c]
            p = self.params(c)
            if self.plan.zero == 3:  # gathered copies exist only now; otherwise nothing changed since the last look
                self.observe(tapes, p)
            where = f"pp rank {self.coords.pp_rank}, stage {st.index}: {step} of optimizer step {self.step}"
            with named_step(where):
                received, sent = [], []
                part = self.batch.rows(i * b, (i + 1) * b)
                if step.kind == "F":
                    if st.is_first_stage:
                        x = part.inputs
                    else:
                        x, rec = self.p2p.recv(("F", i, st.index), st.index - 1)
                        received.append(rec)
                    tape: list = []
                    y = forward_nodes(st.nodes, p, x, self.context(i), self.buffers, hooks, tape)
                    size = [0, 0]
                    for _, saved in tape_leaves(st.nodes, tape):
                        size[0] += saved.float_elements
                        size[1] += saved.fixed_bytes
                    held = [held[0] + size[0], held[1] + size[1]]
                    peak = [max(peak[0], held[0]), max(peak[1], held[1])]
                    cache = None
                    if st.is_last_stage:
                        losses[i], cache = loss_forward(part.loss, y, part.targets)
                    else:
                        sent.append(self.p2p.send(("F", i, st.index + 1), y))
                    tapes[(i, c)] = (tape, cache, size)
                else:
                    tape, cache, size = tapes.pop((i, c))
                    if st.is_last_stage:
                        dy = loss_backward(part.loss, cache, part.targets, 1.0 / self.m)  # mean over micro-batches
                    else:
                        dy, rec = self.p2p.recv(("B", i, st.index), st.index + 1)
                        received.append(rec)
                    grads: dict[str, np.ndarray] = {}
                    dx = backward_nodes(st.nodes, p, tape, dy, grads, hooks, need_dx=not st.is_first_stage)
                    held = [held[0] - size[0], held[1] - size[1]]
                    if not st.is_first_stage:
                        sent.append(self.p2p.send(("B", i, st.index - 1), dx))
                    for unit in st.units:
                        if unit in self.buckets:
                            self.dp.add_grads(self.buckets[unit], grads)
                trace.append(StepRecord(step, st.index, COST[step.kind], tuple(received), tuple(sent)))
            del p
            self.observe(tapes)
        self.activation_peak = tuple(max(a, b) for a, b in zip(self.activation_peak, peak))
        return [losses[i] for i in sorted(losses)], trace

    def result(self, history: list[StepState]) -> NetRankResult:
        held, layouts, _, _ = bucket_state(self.buckets)
        last = history[-1]
        return NetRankResult(self.comm.rank, self.coords, last.losses, last.trace, held, layouts, last.grads,
                             last.params, tuple(history), self.memory.result(), *self.activation_peak)


def net_train_step(comm: Communicator, job: NetJob) -> NetRankResult:
    """`job.steps` training steps of `job` on this rank (the SPMD entry point)."""
    return run_steps(NetRankProgram(comm, job), job.steps)
