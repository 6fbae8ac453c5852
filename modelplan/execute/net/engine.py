"""The per-rank training step of a network: `net_train_step(comm, job)` runs on every rank (SPMD).

The same order as the transformer engine (`modelplan.execute.engine`), whose pieces it reuses:
process groups from the rank grid; each unit's parameters initialised on the first data-parallel
rank and broadcast (`DataParallel.place`, one bucket per unit, ZeRO 0-3); Barrier; the pipeline
schedule's steps in order with point-to-point sends between stages (`PipelineP2P`); gradient
reductions; optimizer step, `NetJob.steps` times (`engine.run_steps`). Stages and
tensor-parallel roles come from `plan/net_layout.py`. Each rank also records the peak of the
activations its in-flight micro-batches declare they keep for backward (what `Saved` holds) and,
like the transformer engine, measures the live arrays it holds (`memory_probe.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from modelplan.comm.regions import Region
from modelplan.comm.communicator import Communicator
from modelplan.count.network import network_layers
from modelplan.count.network_tree import leaves_of, network_tree
from modelplan.execute.data_parallel import Bucket, DataParallel
from modelplan.execute.engine import (
    Groups,
    Job,
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
from modelplan.execute.params import ParamDef
from modelplan.execute.pipeline import PipelineP2P
from modelplan.plan.net_layout import StagePlan, network_stages
from modelplan.plan.net_tp import TpRole, param_tp_dim
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.stages import replica_label, unit_replicas
from modelplan.specs.network import NetworkSpec


@dataclass(frozen=True)
class NetJob(Job):
    """A `Job` (model, training settings, plan, seed, optimizer, steps; its grid, micro-batch count
    and schedule) of a network, with the network's loss, stages and batches."""

    spec: NetworkSpec
    loss: LossKind | None = None
    """None: cross-entropy for several outputs, MSE for one (`default_loss`)."""

    def stages(self) -> list[StagePlan]:
        num_stages = schedule_layout(self.plan.schedule, self.plan.pp, self.plan.vpp).num_stages
        return network_stages(network_tree(self.spec), num_stages, self.plan.tp)

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
    """One rank's state during the run."""

    STATIC = ("comm", "job", "plan", "coords", "groups", "dp", "m", "schedule", "defs", "stages", "hooks",
              "memory", "live", "_sizes", "_held", "_peak", "unit_order", "replicas")
    """Attributes that hold configuration and no arrays, or are walked under their own term
    (memory_probe.program_rest skips them)."""

    def __init__(self, comm: Communicator, job: NetJob) -> None:
        self.comm, self.job, self.plan = comm, job, job.plan
        dims = job.dims
        self.coords = dims.coords(comm.rank)
        self.groups = Groups.build(dims, comm.rank)
        self.dp = DataParallel(comm, self.plan.dp, self.groups.tp, job.optimizer)
        self.m = job.num_microbatches
        self.schedule = job.schedule()
        self.p2p = PipelineP2P(comm, self.groups.pp, self.schedule)
        all_stages = job.stages()
        self.defs = net_param_defs(all_stages)
        self.stages = [all_stages[v] for v in self.schedule.layout.rank_stages[self.coords.pp_rank]]
        self.unit_order = [u for st in all_stages for u in st.units]
        held = [[u for v in chunks for u in all_stages[v].units] for chunks in self.schedule.layout.rank_stages]
        self.replicas = unit_replicas(held)
        self._held, self._peak = [0, 0], [0, 0]
        self._sizes: dict[tuple[int, int], tuple[int, int]] = {}
        self.hooks = [NetTensorParallel(comm, self.groups.tp, st.roles) for st in self.stages]
        self.buckets: dict[str, Bucket] = {}
        self.buffers = self._local_buffers()
        self.step = 1
        self.memory = PeakTracker()
        self.live: dict = {}

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

    def memory_roots(self, live: dict, gathered) -> dict:
        """What memory_probe walks, by term: the layers' tapes are activations, the loss's cache an
        edge activation."""
        kept = list(live.get("caches", {}).values())
        roots = bucket_roots(self.buckets.values())
        roots.update(gathered=gathered, inputs=self.batches, buffers=self.buffers,
                     activations=[t[0] for t in kept], edge_activations=[t[1] for t in kept],
                     comm_buffers=(self.p2p, live.get("inbox")), deferred=live.get("deferred"),
                     other=program_rest(self, ("buckets", "p2p", "batches", "buffers")))
        return roots

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
                bucket = Bucket(unit, entries, group, group.index(rank), self.plan.zero,
                                self.groups.replicas(self.replicas.get(unit)), replica_label(unit))
                values = None
                if group.ranks[0] == rank:
                    if full is None:
                        full = init_params(network_layers(self.job.spec), self.job.seed)
                    values = local_values(full, entries)
                self.dp.place(bucket, values)
                self.buckets[unit] = bucket
        if self.comm.world_size > 1:
            self.comm.barrier(self.groups.world, label=Region.WORLD_START)

    def params(self, chunk: int) -> dict[str, np.ndarray]:
        p = materialize_units(self.dp, self.buckets, self.stages[chunk].units)
        if self.plan.zero == 3:
            self.observe(gathered=p)
        return p

    def forward(self, chunk: int, microbatch: int, x):
        """`ChunkModel.forward`: the chunk's nodes, and the loss on the last stage; counts what the
        micro-batch keeps for backward (held until its weight gradient is added)."""
        st, b = self.stages[chunk], self.plan.micro_batch
        part = self.batch.rows(microbatch * b, (microbatch + 1) * b)
        tape: list = []
        y = forward_nodes(st.nodes, self.params(chunk), part.inputs if st.is_first_stage else x, self.context(microbatch),
                          self.buffers, self.hooks[chunk], tape)
        size = [0, 0]
        for _, saved in tape_leaves(st.nodes, tape):
            size[0] += saved.float_elements
            size[1] += saved.fixed_bytes
        self._sizes[(microbatch, chunk)] = (size[0], size[1])
        self._held = [self._held[0] + size[0], self._held[1] + size[1]]
        self._peak = [max(self._peak[0], self._held[0]), max(self._peak[1], self._held[1])]
        if st.is_last_stage:
            loss, cache = loss_forward(part.loss, y, part.targets)
            return loss, (tape, cache)
        return y, (tape, None)

    def backward(self, chunk: int, microbatch: int, cache, dout):
        """`ChunkModel.backward` (dL/dloss of the mean over micro-batches on the last stage)."""
        st, b = self.stages[chunk], self.plan.micro_batch
        part = self.batch.rows(microbatch * b, (microbatch + 1) * b)
        tape, loss_cache = cache
        if st.is_last_stage:
            dout = loss_backward(part.loss, loss_cache, part.targets, 1.0 / self.m)
        grads: dict[str, np.ndarray] = {}
        dx = backward_nodes(st.nodes, self.params(chunk), tape, dout, grads, self.hooks[chunk],
                            need_dx=not st.is_first_stage)
        return dx, grads

    def add_grads(self, chunk: int, microbatch: int, grads: dict) -> None:
        """`ChunkModel.add_grads`; the micro-batch's saved activations are released."""
        e, f = self._sizes.pop((microbatch, chunk))
        self._held = [self._held[0] - e, self._held[1] - f]
        for unit in self.stages[chunk].units:
            if unit in self.buckets:
                self.dp.add_grads(self.buckets[unit], grads)

    def result(self, history: list[StepState]) -> NetRankResult:
        held, layouts, _, _ = bucket_state(self.buckets)
        last = history[-1]
        return NetRankResult(self.comm.rank, self.coords, last.losses, last.trace, held, layouts, last.grads,
                             last.params, tuple(history), self.memory.result(), *self._peak)


def net_train_step(comm: Communicator, job: NetJob) -> NetRankResult:
    """`job.steps` training steps of `job` on this rank (the SPMD entry point)."""
    return run_steps(NetRankProgram(comm, job), job.steps)
