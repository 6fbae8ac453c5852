"""Price one plan point: every term of the step-time table and the memory of the largest stages.

A `PlanPoint` is one candidate of the search (the plan's degrees and settings as a tuple). Each
step-time term is the sum of what one module contributes:

- compute, recompute: the kernels of the blocks a stage runs (`compute.py`), composed per stage
  in `stage_time.py`;
- TP / EP / CP communication: `parallel/tp.py`, `ep.py`, `cp.py`, per block and micro-batch;
- pipeline send/recv and the bubble: `parallel/pp.py` on the schedule's action list (`pipeline/`);
- DP / ZeRO traffic and the optimizer step: `parallel/dp_zero.py`;
- the AllReduce of units held by several pipeline ranks (tied embedding): `parallel/pp.py`;
- memory: `memory.py` (activations, buffers) with `dp_zero.state_bytes` (model states).

Every communication term prices the same calls the communication list holds
(`plan/commlist.py`, which verify compares with the executor's ledger). Everything a plan shares
with its neighbours is cached: block terms per (tp, sp, micro_batch, recompute, cp[, ep]),
stages per that and the layout, DP per (tp, pp, dp, zero, sp, rank, ep, cp, layout), collective
times per (op, bytes, group shape); the hot loop (`evaluate`) reads plain dicts.

This module assembles the step; the `Evaluator`'s methods live by concept in
`evaluator_blocks.py` (one block's terms), `evaluator_stages.py` (stages, splits, the pipeline),
`evaluator_dp.py` (DP / ZeRO / HSDP and the optimizer), `evaluator_memory.py` (rank memory) and
`evaluator_floors.py` (the search's lower bounds), each a mixin over the caches `__init__` makes.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.offload import host_link
from modelplan.count.flops import count_flops
from modelplan.plan.commcost import CommPricer
from modelplan.plan.compute import Roofline
from modelplan.plan.dims import EXPERT_DP, ParallelDims, strided_shape
from modelplan.plan.engine import engine_settings
from modelplan.plan.experts import planned_capacity_factor
from modelplan.plan import host_issue
from modelplan.plan.evaluator_blocks import BlockPricing
from modelplan.plan.evaluator_dp import DpEntry, DpPricing  # noqa: F401  (DpEntry: re-exported)
from modelplan.plan.evaluator_floors import StepFloors
from modelplan.plan.evaluator_memory import StageMemories
from modelplan.plan.evaluator_stages import StageEntry, StagePricing  # noqa: F401  (StageEntry: re-exported)
from modelplan.plan.results import StageMemory
from modelplan.plan.parallel import ep as ep_mod, pp as pp_mod
from modelplan.plan.mechanisms import Mechanisms
from modelplan.plan.placement import DEFAULT_ORDER, placed_shapes
from modelplan.plan.stage_time import BlockTerms
from modelplan.plan.state_rates import state_rates
from modelplan.plan.rank_states import RankStates
from modelplan.plan.stages import RankBlocks
from modelplan.plan.tensor_rate import tensor_rate
from modelplan.plan.validate import padded_vocab, planning_spec
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.load import load_engine
from modelplan.specs.plan import Plan, Schedule
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class PlanPoint(NamedTuple):
    """One plan as the search enumerates it (a `Plan`'s fields, recompute resolved)."""

    tp: int
    pp: int
    dp: int
    vpp: int = 1
    micro_batch: int = 1
    schedule: str = Schedule.ONE_F_ONE_B
    sequence_parallel: bool = False
    recompute: str = "none"
    zero: int = 0
    ep: int = 1
    cp: int = 1
    scatter_gather: bool = True
    reshard_after_forward: bool | str = "default"
    """ZeRO-3 / FSDP (`Plan.reshard_after_forward`, `plan/fsdp.py`)."""
    fsdp_shard_size: int | None = None
    """HSDP shard group (`Plan.fsdp_shard_size`)."""
    tp_overlap: str | None = None
    """TP comm overlap mode (`Plan.tp_overlap`; None: the engine's)."""
    dp_overlap: bool | None = None
    """DP overlap (`Plan.dp_overlap`; None: the cost model's)."""
    offload_optimizer: str = "none"
    offload_activations: bool = False
    rank_order: str = DEFAULT_ORDER
    zeropp: bool = False
    etp: int | None = None
    """Expert tensor-parallel size when it differs from tp (`Plan.etp`; None: tp, ep inside dp)."""
    split: tuple[int | None, int | None] | None = None
    """Blocks of the first and last virtual stage when fixed (`Plan.stage_split`; None: the
    default rule of `plan.stages.split_layers`)."""

    @classmethod
    def of(cls, plan: Plan, training: TrainingSpec) -> "PlanPoint":
        return cls(plan.tp, plan.pp, plan.dp, plan.vpp, plan.micro_batch, plan.schedule, plan.sequence_parallel,
                   plan.recompute or training.recompute, plan.zero, plan.ep, plan.cp, plan.scatter_gather,
                   plan.reshard_after_forward, plan.fsdp_shard_size, plan.tp_overlap, plan.dp_overlap,
                   plan.offload_optimizer, plan.offload_activations, plan.rank_order, plan.zeropp,
                   None if plan.etp in (None, plan.tp) else plan.etp, plan.stage_split)


class StepTerms(NamedTuple):
    """Seconds of one step, term by term (the fields of `results.StepTime`)."""

    step_time_s: float
    compute_s: float
    recompute_s: float
    tp_comm_s: float
    pp_comm_s: float
    bubble_s: float
    dp_comm_s: float
    embedding_sync_s: float
    optimizer_s: float
    dp_comm_total_s: float
    tp_hidden_s: float
    ep_comm_s: float
    cp_comm_s: float
    cp_hidden_s: float
    offload_s: float = 0.0
    host_s: float = 0.0


class Evaluation(NamedTuple):
    """One plan's step terms, FLOPs and the memory of its first and last pipeline rank."""

    step: StepTerms
    model_flops: float
    hardware_flops: float
    memory_first: StageMemory
    memory_last: StageMemory
    num_microbatches: int
    memory_mid: StageMemory | None = None
    """The middle pipeline rank holding the most activations (`mid_rank`), when pp > 2: an uneven
    split gives middle ranks more blocks than the first one."""
    mid_rank: int = 0

    @property
    def peak_memory_bytes(self) -> float:
        """Largest stage's total."""
        mid = self.memory_mid.total if self.memory_mid is not None else 0.0
        return max(self.memory_first.total, self.memory_last.total, mid)


class Evaluator(BlockPricing, StagePricing, DpPricing, StageMemories, StepFloors):
    """Prices plans for one model, training batch, cluster and cost model."""

    def __init__(self, spec: TransformerSpec, training: TrainingSpec, cluster: Cluster, cost: CostModel | None = None):
        self.spec = planning_spec(spec)
        self.training, self.cluster = training, cluster
        profile = load_engine(training.framework)  # the engine's defaults (`plan/engine.py`)
        self.software = engine_settings(training, profile)
        self.cost = cost or profile.cost_model()
        if training.dp_overlap is not None:
            self.cost = self.cost.model_copy(update={"dp_overlap": training.dp_overlap})
        if training.tp_comm_overlap is not None:
            self.software = self.software._replace(tp_comm_overlap=training.tp_comm_overlap)
        self.tensor_rate = tensor_rate(training, profile, cluster.accelerator)  # `plan/tensor_rate.py`
        self.roofline = Roofline.of(cluster.accelerator, training.precision, self.cost, self.software.attention_kernels,
                                    self.tensor_rate.factor)
        self.pricer = CommPricer(cluster)
        self.dtype_bytes, self.grad_bytes, self.state_bytes, self.opt_bytes = state_rates(training)
        # bytes per gradient element the data-parallel reduction moves (the engine's reduce dtype)
        self.dp_grad_bytes = 4 if self.software.reduce_in_fp32 and training.grad_dtype == "fp32" else self.dtype_bytes
        # DeepSpeed stages gradients in a reduce bucket and parameters in an all-gather bucket (ZeRO >= 1)
        self.bucket_bytes = self.software.dp_bucket_elements * (self.dp_grad_bytes + self.dtype_bytes)
        self._modes: dict[tuple, object] = {}
        self.memory_bytes = cluster.accelerator.memory_capacity_bytes
        moe = self.spec.moe
        self.capacity_factor = planned_capacity_factor(moe) if moe is not None else None
        self.held = RankStates(self.spec, training, self.software)
        self.finetune = self.held.finetune  # LoRA / QLoRA: frozen base, adapters train (`plan/finetune.py`)
        if self.finetune is not None:
            self.dp_grad_bytes = self.finetune.adapter_bytes
            # DeepSpeed's buckets hold at most the adapters (min(bucket, trainable) elements)
            staged = min(self.software.dp_bucket_elements, self.finetune.lora.trainable_params)
            self.bucket_bytes = staged * 2 * self.finetune.adapter_bytes
            self.opt_bytes = self.finetune.optimizer_bytes_per_param()
        self.host = host_link(cluster)
        self.mech = Mechanisms(self)
        # the TP overlap an engine runs when asked for (`comm/tp_overlap.py`): async TP / userbuffers
        self.tp_overlap_default = (("ring" if self.software.framework == "torchtitan" else "userbuffers")
                                   if self.software.tp_comm_overlap else "none")
        self._cache: dict[tuple, object] = {}
        # the hot path's caches, one dict per kind
        self._stages: dict[tuple, StageEntry] = {}
        self._dps: dict[tuple, DpEntry] = {}
        self._dps_shared: dict[tuple, DpEntry] = {}
        self._tp_most: dict[int, float] = {}
        self._block_cache: dict[tuple, BlockTerms] = {}
        self._p2ps: dict[tuple, float] = {}
        self._flops: dict[str, tuple[float, float]] = {}
        self._states: dict[tuple, tuple] = {}
        self._blocks: dict[tuple, tuple[int, list[RankBlocks]]] = {}
        self._block_ids: dict[tuple, int] = {}
        self._pipes: dict[tuple, tuple[float, int | float]] = {}
        self._inflight: dict[tuple, tuple[float, float]] = {}
        self._mems: dict[tuple, tuple[StageMemory, StageMemory]] = {}
        self._splits: dict[tuple, tuple] = {}
        self._block_floors: dict[tuple, float] = {}
        self._flop_floors: dict[tuple, float | None] = {}
        self._global_batch, self._layers = training.global_batch, self.spec.num_blocks  # read per search point

    def _memo(self, key: tuple, make):
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = make()
        return hit

    def vocab_padded(self, tp: int) -> int:
        """Vocabulary padded for this tp (Megatron)."""
        return padded_vocab(self.spec.vocab, tp, self.cost.vocab_divisible_by)

    def shapes(self, tp: int, dp: int, pp: int, ep: int = 1, cp: int = 1, order: str = DEFAULT_ORDER,
               etp: int | None = None) -> dict:
        """Process-group shapes of a tp x cp x dp x pp grid (ep inside dp) on this cluster, ranks
        laid out in `order` (`plan/placement.py`). With etp, the one rule for expert tensor
        parallelism: the dense grid has ep 1 and the experts Megatron-core's expert grid (etp, ep,
        expert dp) folded over the stage's tp x cp x dp ranks."""
        gpn = self.cluster.domain_gpus
        if etp is not None:
            def expert_grid() -> dict:
                shapes = dict(self.shapes(tp, dp, pp, 1, cp, order))
                shapes[EXPERT_DP] = strided_shape(tp * dp * cp // (ep * etp), ep * etp, gpn)
                return shapes
            return self._memo(("shapes_etp", tp, dp, pp, ep, cp, order, etp), expert_grid)
        if order == DEFAULT_ORDER:
            return self._memo(("shapes", tp, dp, pp, ep, cp),
                              lambda: ParallelDims(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep).group_shapes(gpn))
        return self._memo(("shapes", tp, dp, pp, ep, cp, order), lambda: placed_shapes(order, tp, cp, dp, pp, ep, gpn))

    def flops_per_sequence(self, recompute: str) -> tuple[float, float]:
        """(model, hardware) FLOPs of one sequence (`modelplan.count.flops` convention)."""
        hit = self._flops.get(recompute)
        if hit is None:
            one = self.training.model_copy(update={"global_batch": 1, "recompute": recompute})
            counted = count_flops(self.spec, one)
            hit = self._flops[recompute] = float(counted.model), float(counted.hardware)
            if self.finetune is not None:
                hit = self._flops[recompute] = self.finetune.flops_per_sequence(*hit, recompute)
        return hit

    # -- data parallel, model states and memory ----------------------------------------------------

    def resolved_tp_overlap(self, tp_overlap: str | None, sp: bool, tp: int) -> str:
        """A point's TP overlap mode: its own, else the engine's; 'none' without SP or at tp 1."""
        mode = self.tp_overlap_default if tp_overlap is None else tp_overlap
        return mode if sp and tp > 1 else "none"

    # -- the step ---------------------------------------------------------------------------------

    def step_lower_bound_s(self, point: PlanPoint) -> float:
        """The step time without its data-parallel, optimizer and optimizer-offload terms (all
        >= 0): a lower bound the search uses to skip plans that cannot enter the top-k, before
        their memory and DP traffic are priced. It prices the pipeline exactly as `evaluate` does."""
        stage, bubble, m, p2p = self.context(point)
        if point.offload_activations:
            p2p += self.mech.activation_offload_s(stage)
        return pp_mod.pipeline_time_s(m, bubble, stage.slowest_s + p2p, stage.mean_s + p2p)

    def evaluate(self, point: PlanPoint) -> Evaluation:
        """All terms of one valid plan (validity is the caller's job: see validate.py). ZeRO-3
        gathers per micro-batch follow the plan's reshard_after_forward (`plan/fsdp.py`): not
        resharded under pipeline parallelism, the stage gathers and reduces once per step (priced as
        ZeRO-1's traffic); not resharded without it, no backward gather. HSDP: `dp_entry`. Offload:
        the activations' exposed copies sit in every micro-batch, the optimizer's on the host
        replaces the GPU step (`plan/mechanisms.py`)."""
        stage, _, m, p2p, act_s, t_max, pipeline, dp_after, dp_mb, dp_total, replica_sync, optimizer, offload, \
            accumulate = self._step(point)
        st = stage.terms
        recompute = point.recompute
        model_seq, hardware_seq = self._flops.get(recompute) or self.flops_per_sequence(recompute)
        mem_first, mem_last, mid = self.memories(point)
        unmerged = self.ep_unmerged_s(point, stage, m)  # in `pipeline`: EP time, not bubble
        host = self.ep_host_s(point, stage, m)  # in `pipeline`: host issue time, not bubble
        step = StepTerms(
            step_time_s=pipeline + dp_after + replica_sync + optimizer + offload - m * act_s,
            compute_s=m * st.compute_s, recompute_s=m * st.recompute_s, tp_comm_s=m * st.tp_s,
            pp_comm_s=m * p2p, bubble_s=pipeline - unmerged - host - m * t_max, dp_comm_s=dp_after + m * dp_mb,
            embedding_sync_s=replica_sync, optimizer_s=optimizer + m * accumulate, dp_comm_total_s=dp_total,
            tp_hidden_s=m * st.tp_hidden_s, ep_comm_s=m * st.ep_s + unmerged, cp_comm_s=m * st.cp_s,
            cp_hidden_s=m * st.cp_hidden_s, offload_s=offload, host_s=host,
        )
        batch = self.training.global_batch
        if mid is not None:
            return Evaluation(step, batch * model_seq, batch * hardware_seq, mem_first, mem_last, m, mid[1], mid[0])
        return Evaluation(step, batch * model_seq, batch * hardware_seq, mem_first, mem_last, m)

    def step_time_s(self, point: PlanPoint) -> float:
        """`evaluate(point).step.step_time_s` without the memory and the term table (the search's
        hot path: memory is priced only for plans fast enough to enter the top-k)."""
        _, _, m, _, act_s, _, pipeline, dp_after, _, _, replica_sync, optimizer, offload, _ = self._step(point)
        return pipeline + dp_after + replica_sync + optimizer + offload - m * act_s

    def ep_unmerged_s(self, point: PlanPoint, stage: StageEntry, m: int) -> float:
        """The merged-1F1B EP overlap's warm-up and cool-down chunks on the critical rank, whose
        AllToAlls run exposed (`parallel/ep.py` `unmerged_s`); 0 without the overlap."""
        if not self.training.ep_comm_overlap or stage.moe is None:
            return 0.0
        crit = stage.terms.critical_rank
        return ep_mod.unmerged_s(stage.moe.ep, point.pp, point.vpp, crit, m, stage.blocks[crit].moe_run)

    def ep_host_s(self, point: PlanPoint, stage: StageEntry, m: int) -> float:
        """Host issue time beyond the device's in the merged-1F1B EP-overlap slots of the critical
        rank (`host_issue.py`): where the dispatcher waits once per MoE block, each merged slot takes
        max(device, host); 0 without the overlap or the wait."""
        if not self.training.ep_comm_overlap or stage.moe is None or not host_issue.dispatcher_syncs(
                self.spec, point.tp, point.ep):
            return 0.0
        crit = stage.terms.critical_rank
        bt = self.block_terms(point.tp, point.sequence_parallel, point.micro_batch, point.recompute, point.cp,
                              point.ep, point.etp)
        fwd, bwd = host_issue.moe_block_host_ops(self.spec, self.training, self.software, self.dtype_bytes,
                                                 self.capacity_factor, point.tp, point.sequence_parallel,
                                                 point.micro_batch, point.cp, point.ep, point.etp)
        slots = host_issue.merged_slots(point.pp, point.vpp, crit, m, stage.blocks[crit].moe_run)
        ops = fwd + bwd + sum(host_issue.MERGED_NODE_OPS)
        return host_issue.merged_host_s(ops, self.cost.ep_overlap_host_op_us * 1e-6,
                                        bt.layer_fwd_s + bt.layer_bwd_s, slots)

    def context(self, point: PlanPoint) -> tuple:
        """(stage entry, bubble, m, p2p seconds per micro-batch on the critical path) of a point:
        what its ZeRO, offload and DP choices share."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, sg = point[:12]
        tpo = self.resolved_tp_overlap(point.tp_overlap, sp, tp)
        etp, split = point.etp, point.split
        blocks = self._blocks.get((schedule, pp, vpp, split))
        stage = self._stages.get((tp, sp, mb, recompute, pp, ep, cp, blocks[0], tpo)) if blocks and etp is None else None
        if stage is None:
            stage = self.stage_entry(tp, sp, mb, recompute, pp, ep, cp, schedule, vpp, etp, split, tpo)
        m = self.training.global_batch // (mb * dp)
        pipe = self._pipes.get((schedule, pp, m, vpp))
        bubble, hops = pipe if pipe is not None else self.pipe(schedule, pp, m, vpp)
        if pp > 1:  # pipeline messages: per micro-batch, direction and chunk on the critical path
            order = point.rank_order
            p2p = self._p2ps.get((tp, sp, mb, dp, pp, cp, sg, order))
            if p2p is None:
                p2p = self.p2p_s(tp, sp, mb, dp, pp, cp, sg, order)
            p2p *= hops * self.cost.pp_p2p_exposed_fraction
        else:
            p2p = 0.0
        return stage, bubble, m, p2p

    def variant_times_s(self, ctx: tuple, point: PlanPoint, acts: list[bool], opts: list[str]) -> list[float]:
        """Step seconds of `point` (given without offload) under each offload choice, acts x opts
        in that order, in its `context` (shared by its ZeRO and DP choices): one DP entry and one
        pipeline sum priced, the offloads derived exactly from them: activation offload adds its
        per-micro-batch exposure to every micro-batch time, (m + bubble) times; optimizer offload
        swaps the GPU step for the host's exposed step and copies (as `_finish` composes them)."""
        stage, bubble, m, p2p = ctx
        tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, sg, reshard, shard, tpo, dpo, opt, act, order, \
            zeropp, etp, split = point
        st = stage.terms
        dpe = self._dps.get((tp, pp, dp, zero, sp, st.critical_rank, ep, cp, schedule, vpp, shard, order, zeropp)) if (
            etp is None and split is None) else None
        if dpe is None:
            dpe = self.dp_entry(tp, pp, dp, zero, sp, st.critical_rank, ep, cp, schedule, vpp, shard, order, zeropp,
                                etp, split)
        dp_after, dp_mb, _ = self._dp_terms(st, dpe, m, zero, reshard, dpo, pp, dp * cp, vpp)
        q = p2p + dp_mb + dpe.accumulate_s
        optimizer = dpe.optimizer_s
        base = pp_mod.pipeline_time_s(m, bubble, stage.slowest_s + q, stage.mean_s + q) + dp_after + dpe.replica_s + optimizer
        base += self.ep_unmerged_s(point, stage, m) + self.ep_host_s(point, stage, m)
        if len(acts) == 1 and len(opts) == 1 and not acts[0] and opts[0] == "none":
            return [base]
        act_extra = (m + bubble) * self.mech.activation_offload_s(stage) if True in acts else 0.0
        hosts = [0.0 if o == "none" else self.mech.optimizer_offload_s(stage, point, m, o) - optimizer for o in opts]
        return [base + (act_extra if a else 0.0) + h for a in acts for h in hosts]

    def _step(self, point: PlanPoint) -> tuple:
        """The step's pieces (`_finish`)."""
        return self._finish(point, self.context(point))

    def _finish(self, point: PlanPoint, ctx: tuple) -> tuple:
        """The step's pieces: (stage entry, bubble, m, p2p per micro-batch, activation offload per
        micro-batch, t_max, pipeline, DP after the pipeline, DP per micro-batch, all DP, replica
        sync, optimizer, offload) seconds."""
        stage, bubble, m, p2p = ctx
        (tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, sg, reshard, shard, tpo, dpo, opt, act, order,
         zeropp, etp, split) = point
        st = stage.terms
        act_s = self.mech.activation_offload_s(stage) if act else 0.0
        crit = st.critical_rank
        dpe = self._dps.get((tp, pp, dp, zero, sp, crit, ep, cp, schedule, vpp, shard, order, zeropp)) if (
            etp is None and split is None) else None
        if dpe is None:
            dpe = self.dp_entry(tp, pp, dp, zero, sp, crit, ep, cp, schedule, vpp, shard, order, zeropp, etp, split)
        dp_after, dp_mb, dp_total = self._dp_terms(st, dpe, m, zero, reshard, dpo, pp, dp * cp, vpp)
        # the engine's fp32 accumulation of 16-bit gradients follows every backward (`DpEntry.accumulate_s`)
        per_mb = p2p + act_s + dp_mb + dpe.accumulate_s
        t_max = stage.slowest_s + per_mb
        pipeline = (pp_mod.pipeline_time_s(m, bubble, t_max, stage.mean_s + per_mb) + self.ep_unmerged_s(point, stage, m)
                    + self.ep_host_s(point, stage, m))
        optimizer, offload = dpe.optimizer_s, m * act_s
        if opt != "none":  # the step runs on the host: its exposed copies and CPU time replace the GPU's
            optimizer = 0.0
            offload += self.mech.optimizer_offload_s(stage, point, m, opt)
        return (stage, bubble, m, p2p, act_s, t_max, pipeline, dp_after, dp_mb, dp_total, dpe.replica_s, optimizer,
                offload, dpe.accumulate_s)
