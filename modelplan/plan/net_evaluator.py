"""The network family's evaluator (`plan/protocol.py`'s `PlanEvaluator`): a network's own rules
as Problems, and the price of one plan (tp x pp x dp, vpp, micro-batch, ZeRO, schedule).

Per pipeline rank:
- pipeline: m * t_max + bubble * t_mean (`parallel/pp.py`, the bubble of the schedule's action
  list; (pp - 1)/vpp for Megatron's schedules, Narayanan et al. 2021), t = one micro-batch's
  forward + backward of the rank's stages (`net_cost.stage_time`) plus its exposed
  stage-boundary send/recv (`pp.p2p_seconds`, the communication list's pp items);
- data parallel: the rank's calls of the communication list, one bucket per unit
  (`dp_zero.unit_calls`, priced by `dp_zero.dp_seconds` as for transformers), hidden behind the
  last micro-batch's backward by the same overlap rules (`dp_zero.dp_exposure`), plus the
  optimizer step streamed through HBM; units shared by pipeline ranks all-reduced
  (`pp.replica_calls`);
- memory: model states by ZeRO stage (`dp_zero.state_bytes`), the activations the rank's
  in-flight micro-batches keep (`net_shard.rank_activations`, the model verify checks against
  the executor), NCCL and boundary buffers, fragmentation and the runtime reserve.
The step is the slowest rank's. Full recompute and sequence/context/expert parallelism are not
offered for networks. A search's best plan says in its notes why it won against the best plan
with tensor and the best with pipeline parallelism (`net_why.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.comm.ops import Axis
from modelplan.count.network import count_network_flops, count_network_params
from modelplan.count.network_tree import network_tree
from modelplan.plan.candidates import FamilyAxes
from modelplan.plan.commcost import CommPricer
from modelplan.plan.dims import ParallelDims, pair_shape
from modelplan.plan.compute import Roofline
from modelplan.plan.parallel.dp_zero import (
    DpTimes,
    dp_exposure,
    dp_seconds,
    unit_calls,
    state_bytes as model_state_bytes,
)
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.parallel.pp import p2p_seconds, pipeline_time_s, replica_calls
from modelplan.plan.stages import unit_replicas
from modelplan.plan.state_rates import state_rates
from modelplan.plan.net_cost import StageTime, boundary_bytes, stage_time
from modelplan.plan.net_layout import StagePlan, describe_stages, network_stages
from modelplan.plan.net_shard import net_unit_shards, rank_activations
from modelplan.plan.net_tp import TpRole
from modelplan.plan.net_why import explain_choice
from modelplan.plan.results import PlanEstimate, StageMemory, StepTime
from modelplan.plan.pipeline import pipeline_schedule, schedule_layout
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.validate import grid_problems, microbatch_problems, tp_node_problem
from modelplan.plan.pipeline.profile import bubble_microbatches, chunk_shares
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan, Schedule
from modelplan.specs.training import TrainingSpec

MAX_DEFAULT_MICROBATCHES = 64
"""Micro-batch sizes tried by default give at most this many micro-batches per step: more only
shrink the GEMMs, and the pipeline bubble is already below (pp - 1)/64."""


@dataclass(frozen=True)
class RankCost:
    """One pipeline rank's terms (seconds per step) and bytes."""

    compute_s: float
    tp_s: float
    tp_hidden_s: float
    p2p_s: float
    dp_after_s: float
    dp_per_mb_s: float
    dp_total_s: float
    optimizer_s: float
    replica_s: float
    """AllReduce of the units this rank shares with other pipeline ranks (`parallel/pp.py`)."""
    t_mb_s: float
    """One micro-batch on the rank: compute + exposed TP + p2p + ZeRO-3 per-micro-batch traffic."""
    bwd_mb_s: float
    """One micro-batch's backward on the rank (what hides the gradient reduction)."""
    memory: StageMemory


class NetEvaluator(FamilyAxes):
    """The network family's `PlanEvaluator`: rules and prices of plans for one network, training
    batch, cluster and cost model (with caches); its plans take tp, pp and dp only (`FamilyAxes`)."""

    max_microbatches = MAX_DEFAULT_MICROBATCHES

    def __init__(self, spec: NetworkSpec, training: TrainingSpec, cluster: Cluster, cost: CostModel | None = None):
        self.spec, self.training, self.cluster = spec, training, cluster
        self.cost = cost or CostModel()
        self.tree = network_tree(spec)
        self.units = len(self.tree)
        self.roofline = Roofline.of(cluster.accelerator, training.precision, self.cost)
        self.pricer = CommPricer(cluster)
        self.dtype_bytes, self.grad_bytes, self.state_bytes, self.opt_bytes = state_rates(training)
        self.memory_bytes = cluster.accelerator.memory_capacity_bytes
        self.params = count_network_params(spec).total
        self.model_flops = float(count_network_flops(spec, training).model)
        self._cache: dict[tuple, object] = {}
        self._leaf_memo: dict[tuple, tuple] = {}
        """Each leaf's compute terms by (path, micro-batch, tp, role, input grad) (`net_cost.stage_time`)."""

    def problems(self, plan: Plan, cluster: Cluster | None = None, world_size: int | None = None,
                 allow_tp_across_nodes: bool = False) -> list[Problem]:
        """Every rule `plan` breaks (`network_plan_problems`)."""
        return network_plan_problems(self.spec, self.training, plan, self.units, cluster, world_size,
                                     allow_tp_across_nodes)

    def tp_problems(self, tp: int) -> list[Problem]:
        """A tp that splits no Linear/Conv output would only replicate."""
        if tp > 1 and self.splits(tp) == 0:
            return [Problem(Reason.TP_SPLITS_NOTHING, f"tp ({tp}) divides no Linear/Conv output of "
                            f"{self.spec.name}: it would only replicate")]
        return []

    def stage_problem(self, pp: int, vpp: int, num_stages: int) -> Problem | None:
        """At least one unit per pipeline stage (`units_problem`)."""
        return units_problem(pp, vpp, num_stages, self.units)

    def vpp_default(self, pp: int) -> list[int]:
        """2, 3 and 4 chunks per rank while every stage keeps a unit (the bubble's gain (p-1)/(v m)
        flattens while the boundary messages grow with v)."""
        return [v for v in (2, 3, 4) if pp * v <= self.units]

    def search_notes(self, best: PlanEstimate, best_of: dict[str, PlanEstimate]) -> list[str]:
        """Why the best plan beats the best with tensor and with pipeline parallelism (`net_why.py`)."""
        return explain_choice(self, best, best_of)

    def stages(self, tp: int, num_stages: int) -> list[StagePlan]:
        key = ("stages", tp, num_stages)
        if key not in self._cache:
            self._cache[key] = network_stages(self.tree, num_stages, tp)
        return self._cache[key]  # type: ignore[return-value]

    def splits(self, tp: int) -> int:
        """Matmul leaves tp splits (0: tensor parallelism would only replicate)."""
        roles = self.stages(tp, 1)[0].roles.values()
        return sum(1 for r in roles if r.role in (TpRole.COLUMN, TpRole.ROW))

    def times(self, tp: int, num_stages: int, b: int, dp: int, pp: int) -> list[StageTime]:
        key = ("times", tp, num_stages, b)
        if key not in self._cache:
            shape = ParallelDims(dp=dp, tp=tp, pp=pp).group_shapes(self.cluster.domain_gpus)[Axis.TP]
            self._cache[key] = [stage_time(st, b, tp, self.roofline, self.pricer, shape, self.dtype_bytes, self.cost,
                                           self._leaf_memo) for st in self.stages(tp, num_stages)]
        return self._cache[key]  # type: ignore[return-value]

    def _rank_compute(self, plan: Plan, r: int) -> tuple[list[int], list, float, float]:
        """Pipeline rank r's stages, each one's share of the micro-batches, and one micro-batch's
        forward and backward (with its exposed TP) over them."""
        layout = schedule_layout(plan.schedule, plan.pp, plan.vpp)
        times = self.times(plan.tp, layout.num_stages, plan.micro_batch, plan.dp, plan.pp)
        mine = list(layout.rank_stages[r])
        shares = [_whole(w) for w in chunk_shares(Schedule(plan.schedule), plan.pp, plan.vpp)[r]]  # micro-batches per chunk / m
        fwd = sum(w * times[v].fwd_s for v, w in zip(mine, shares))
        bwd = sum(w * (times[v].bwd_s + times[v].tp_s) for v, w in zip(mine, shares))
        return mine, shares, fwd, bwd

    def step_floor_s(self, plan: Plan) -> float:
        """A lower bound of `estimate(plan)`'s step time: the pipeline over each rank's forward and
        backward alone (`pipeline_time_s`, as `estimate` prices it); the p2p, ZeRO-3, data-parallel,
        replica and optimizer terms `estimate` adds are >= 0 and float sums are monotone, so the
        floor never exceeds the step. One per (tp, pp, dp, vpp, schedule, micro_batch): ZeRO stages share it."""
        key = ("floor", plan.tp, plan.pp, plan.dp, plan.vpp, plan.schedule, plan.micro_batch)
        if key not in self._cache:
            m = plan.num_microbatches(self.training.global_batch)
            per_mb = [fwd + bwd for _, _, fwd, bwd in (self._rank_compute(plan, r) for r in range(plan.pp))]
            bubble = float(bubble_microbatches(plan.schedule, plan.pp, m, plan.vpp))
            self._cache[key] = pipeline_time_s(m, bubble, max(per_mb), sum(per_mb) / plan.pp)
        return self._cache[key]  # type: ignore[return-value]

    def rank_cost(self, plan: Plan, r: int, m: int) -> RankCost:
        """Terms of pipeline rank r."""
        tp, pp, dp, vpp, b = plan.tp, plan.pp, plan.dp, plan.vpp, plan.micro_batch
        layout = schedule_layout(plan.schedule, pp, vpp)
        stages = self.stages(tp, layout.num_stages)
        times = self.times(tp, layout.num_stages, b, dp, pp)
        shapes = ParallelDims(dp=dp, tp=tp, pp=pp).group_shapes(self.cluster.domain_gpus)
        mine, shares, fwd, bwd = self._rank_compute(plan, r)
        p2p = 0.0
        if pp > 1:
            key = ("route", plan.schedule, pp, vpp)
            if key not in self._cache:
                self._cache[key] = {(rr, cc): p for p, path in enumerate(layout.routes) for rr, cc in path}
            route = self._cache[key]
            for c, (v, w) in enumerate(zip(mine, shares)):
                path = layout.routes[route[(r, c)]]
                for edge, other in ([(v, v + 1)] if v < layout.num_stages - 1 else []) + ([(v - 1, v - 1)] if v > 0 else []):
                    if path[other][0] == r:  # the neighbouring stage runs on this rank (ZB-V's turn)
                        continue
                    nbytes = boundary_bytes(stages[edge], b, self.dtype_bytes)
                    p2p += w * p2p_seconds(self.pricer, nbytes, shapes[Axis.PP].crosses_nodes, None,
                                           shapes[Axis.TP]) * self.cost.pp_p2p_exposed_fraction
        local, largest = self._local_params(plan, r)
        dpt = self._dp_times(plan, r, shapes[Axis.DP])
        dp_exp = dp_exposure(plan.zero, dpt, m, fwd, bwd, self.cost.dp_overlap, self.cost.dp_overlap_fraction,
                             self.cost.overlap_interference) if dp > 1 else None
        owned = local / (dp if plan.zero >= 1 else 1)
        optimizer = self.roofline.memory_time_s(owned * self.opt_bytes)
        replica = self._replica_s(plan, r, shapes)
        per_mb = dp_exp.per_microbatch_s if dp_exp else 0.0
        return RankCost(
            compute_s=m * sum(w * (times[v].fwd_s + times[v].bwd_s) for v, w in zip(mine, shares)),
            tp_s=m * sum(w * times[v].tp_s for v, w in zip(mine, shares)),
            tp_hidden_s=m * sum(w * times[v].tp_hidden_s for v, w in zip(mine, shares)),
            p2p_s=m * p2p, dp_after_s=dp_exp.after_pipeline_s if dp_exp else 0.0, dp_per_mb_s=per_mb,
            dp_total_s=dp_exp.total_s if dp_exp else 0.0, optimizer_s=optimizer, replica_s=replica,
            t_mb_s=fwd + bwd + p2p + per_mb, bwd_mb_s=bwd, memory=self._memory(plan, r, m, local, largest, stages),
        )

    def _notes(self, plan: Plan) -> list[str]:
        """Throughput unit, stage boundaries and the tensor-parallel split of this plan."""
        notes = []
        stages = self.stages(plan.tp, schedule_layout(plan.schedule, plan.pp, plan.vpp).num_stages)
        if len(stages) > 1:
            notes.append(describe_stages(stages))
        if plan.tp > 1:
            split = sum(1 for st in stages for r in st.roles.values() if r.role in (TpRole.COLUMN, TpRole.ROW))
            notes.append(f"tensor parallel splits {split} Linear/Conv layers (column/row pairs or column + "
                         "AllGather); every other layer, recurrent ones included, is replicated")
        return notes

    def rank_shards(self, plan: Plan, r: int):
        """Every unit's tp shard on pipeline rank r (`net_shard.net_unit_shards` of its stages)."""
        layout = schedule_layout(plan.schedule, plan.pp, plan.vpp)
        stages = self.stages(plan.tp, layout.num_stages)
        return net_unit_shards([stages[v] for v in layout.rank_stages[r]], plan)

    def _local_params(self, plan: Plan, r: int) -> tuple[int, int]:
        """(parameters on pipeline rank r after the tp split, its largest unit)."""
        key = ("local", plan.tp, plan.pp, plan.vpp, plan.schedule, r)
        if key not in self._cache:
            shards = self.rank_shards(plan, r)
            self._cache[key] = (sum(s.numel for s in shards.values()), max((s.numel for s in shards.values()), default=0))
        return self._cache[key]  # type: ignore[return-value]

    def _replica_s(self, plan: Plan, r: int, shapes) -> float:
        """The AllReduce of every unit rank r shares with other pipeline ranks (`parallel/pp.py`)."""
        layout = schedule_layout(plan.schedule, plan.pp, plan.vpp)
        stages = self.stages(plan.tp, layout.num_stages)
        key = ("replicas", plan.tp, plan.pp, plan.vpp, plan.schedule)
        if key not in self._cache:
            self._cache[key] = unit_replicas([[u for v in chunks for u in stages[v].units] for chunks in layout.rank_stages])
        replicas = self._cache[key]
        if not replicas:
            return 0.0
        calls = RankCalls()
        shards = net_unit_shards([stages[v] for v in layout.rank_stages[r]], plan)
        for unit, u in shards.items():
            if unit in replicas:
                owned = u.padded if plan.zero == 0 else u.padded // u.group_size
                replica_calls(calls, unit, len(replicas[unit]), owned * self.grad_bytes)
        return calls.price(self.pricer, lambda axis, size: pair_shape(shapes[Axis.PP].crosses_nodes))

    def _activations(self, plan: Plan, m: int, stages: list[StagePlan]):
        """Peak activations per pipeline rank (`net_shard.rank_activations` over the schedule)."""
        key = ("act", plan.tp, plan.pp, plan.vpp, plan.micro_batch, plan.schedule, m)
        if key not in self._cache:
            schedule = pipeline_schedule(plan.schedule, plan.pp, m, plan.vpp)
            self._cache[key] = rank_activations(stages, plan, schedule)
        return self._cache[key]  # type: ignore[return-value]

    def _dp_times(self, plan: Plan, r: int, shape) -> DpTimes:
        """Rank r's data-parallel calls of one micro-batch per step, one bucket per unit as the
        communication list holds them (`net_commlist.py`, `parallel/dp_zero.py`), priced."""
        key = ("dp", plan.tp, plan.pp, plan.dp, plan.vpp, plan.schedule, plan.zero, r)
        if key not in self._cache:
            layout = schedule_layout(plan.schedule, plan.pp, plan.vpp)
            stages = self.stages(plan.tp, layout.num_stages)
            calls = RankCalls()
            for u in net_unit_shards([stages[v] for v in layout.rank_stages[r]], plan).values():
                unit_calls(calls, u, plan.tp, plan.zero, 1, self.dtype_bytes, self.grad_bytes)
            self._cache[key] = dp_seconds(calls, lambda op, axis, size, nbytes: self.pricer.time_s(op, nbytes, shape),
                                          plan.zero).times
        return self._cache[key]  # type: ignore[return-value]

    def _memory(self, plan: Plan, r: int, m: int, local: int, largest: int, stages: list[StagePlan]) -> StageMemory:
        weights, gradients, optimizer = model_state_bytes(local, largest, plan.dp, plan.zero, self.dtype_bytes,
                                                          self.grad_bytes, self.state_bytes)
        act = self._activations(plan, m, stages)[r]
        activations = float(act.elements * self.dtype_bytes + act.fixed_bytes)
        groups = (plan.tp > 1) + (plan.dp > 1) + (plan.pp > 1)
        edges = 0.0
        if plan.pp > 1:  # send/recv buffers of one boundary activation each way
            first_chunk = schedule_layout(plan.schedule, plan.pp, plan.vpp).rank_stages[r][0]
            edges = 2.0 * boundary_bytes(stages[first_chunk], plan.micro_batch, self.dtype_bytes)
        comm = groups * self.cost.nccl_buffer_bytes_per_group + edges
        allocated = weights + gradients + optimizer + activations + comm
        frag = allocated * self.cost.fragmentation_fraction
        reserved = float(self.cost.runtime_reserved_bytes)
        nccl = float(groups * self.cost.nccl_buffer_bytes_per_group)
        return StageMemory(r, weights, gradients, optimizer, activations, comm, frag, reserved, allocated + frag + reserved,
                           nccl)

    def estimate(self, plan: Plan, memory_headroom: float = 0.0) -> PlanEstimate:
        """Step time, throughput and per-rank memory of one valid plan."""
        m = plan.num_microbatches(self.training.global_batch)
        ranks = [self.rank_cost(plan, r, m) for r in range(plan.pp)]
        t_max = max(rc.t_mb_s for rc in ranks)
        t_mean = sum(rc.t_mb_s for rc in ranks) / plan.pp
        pipeline = pipeline_time_s(m, float(bubble_microbatches(plan.schedule, plan.pp, m, plan.vpp)), t_max, t_mean)
        steps = [pipeline + rc.dp_after_s + rc.replica_s + rc.optimizer_s for rc in ranks]
        crit = ranks[max(range(plan.pp), key=lambda r: steps[r])]
        step_s = max(steps)
        busy = m * crit.t_mb_s
        step = StepTime(step_time_s=step_s, compute_s=crit.compute_s, recompute_s=0.0, tp_comm_s=crit.tp_s,
                        pp_comm_s=crit.p2p_s, bubble_s=pipeline - busy, dp_comm_s=crit.dp_after_s + m * crit.dp_per_mb_s,
                        embedding_sync_s=crit.replica_s, optimizer_s=crit.optimizer_s, dp_comm_total_s=crit.dp_total_s,
                        tp_hidden_s=crit.tp_hidden_s)
        n, peak = plan.world_size, self.roofline.peak_flops_per_s
        memory = [rc.memory for rc in ranks]
        worst = max(rc.memory.total for rc in ranks)
        budget = self.memory_bytes * (1 - memory_headroom)
        return PlanEstimate(
            plan=plan, num_microbatches=m, step=step, throughput_per_s=self.training.global_batch / step_s,
            throughput_unit="samples",
            model_tflops_per_gpu=self.model_flops / step_s / n / 1e12,
            hardware_tflops_per_gpu=self.model_flops / step_s / n / 1e12,
            mfu=self.model_flops / (step_s * n * peak), hfu=self.model_flops / (step_s * n * peak),
            model_flops=self.model_flops, hardware_flops=self.model_flops,
            bubble_fraction=(pipeline - busy) / busy if busy > 0 else 0.0, memory=memory,
            peak_memory_bytes=worst, memory_budget_bytes=budget, fits=worst <= budget,
            notes=self._notes(plan),
        )


def units_problem(pp: int, vpp: int, num_stages: int, units: int) -> Problem | None:
    """The schedule's stages (pp * vpp, or its own layout's count) must not exceed the network's units."""
    if num_stages <= units:
        return None
    what = f"pp * vpp ({pp} * {vpp})" if num_stages == pp * vpp else f"the schedule's {num_stages} stages"
    return Problem(Reason.PP_UNITS, f"{what} must not exceed the network's units ({units})")


def network_plan_problems(spec: NetworkSpec, training: TrainingSpec, plan: Plan, units: int,
                          cluster: Cluster | None = None, world_size: int | None = None,
                          allow_tp_across_nodes: bool = False) -> list[Problem]:
    """Every rule a network plan breaks: the grid's, batch's and schedule's rules every family
    shares (`validate.py`) and the network's own (transformer-only axes, stages vs its `units`)."""
    out = grid_problems(plan, cluster, world_size)
    if cluster is not None and not allow_tp_across_nodes:
        out += [p for p in [tp_node_problem(plan.tp, cluster.domain_gpus)] if p]
    for name in ("cp", "ep"):
        if getattr(plan, name) > 1:
            out.append(Problem(Reason.NOT_FOR_FAMILY, f"{name} ({getattr(plan, name)}) > 1 applies to "
                               f"transformers, not network '{spec.name}'"))
    if plan.sequence_parallel:
        out.append(Problem(Reason.NOT_FOR_FAMILY, f"sequence_parallel applies to transformers, not network "
                           f"'{spec.name}'"))
    problem = units_problem(plan.pp, plan.vpp, schedule_layout(plan.schedule, plan.pp, plan.vpp).num_stages, units)
    if problem:
        out.append(problem)
    return out + microbatch_problems(plan, training.global_batch)


def _whole(share):
    """A chunk's share of the micro-batches: an int when whole (every chunk of Megatron's schedules)."""
    return int(share) if share == 1 else float(share)
