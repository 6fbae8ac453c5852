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
"""

from __future__ import annotations

import math
from typing import NamedTuple

from modelplan.comm.ops import Axis, Collective
from modelplan.count.flops import count_flops
from modelplan.plan.commcost import CommPricer
from modelplan.plan.compute import Roofline, kernel_times
from modelplan.count.checkpointing import checkpointed_share, op_sac_recomputed_fraction
from modelplan.plan.dims import EXPERT_DP, ParallelDims, pair_shape, strided_shape
from modelplan.plan.engine import engine_settings, keeps_low_precision_grads
from modelplan.plan.fsdp import hsdp_groups, reduces_every_microbatch, zero3_mode
from modelplan.plan.experts import expert_capacity, planned_capacity_factor
from modelplan.plan.memory import block_activations, edge_activations, stage_memory
from modelplan.plan.results import StageMemory
from modelplan.plan.parallel import cp as cp_mod, dp_zero, ep as ep_mod, pp as pp_mod, tp as tp_mod
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.profile import boundary_messages, bubble_microbatches, chunk_shares, inflight_microbatches
from modelplan.plan.shard import unit_shards
from modelplan.plan.stage_time import BlockTerms, StageTerms, compose_stages
from modelplan.plan.rank_states import RankStates
from modelplan.plan.stages import RankBlocks, rank_blocks, split_layers, unit_replicas
from modelplan.plan.validate import padded_vocab, planning_spec
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.load import load_engine
from modelplan.specs.plan import Plan, Schedule, pipeline_scatter_gather
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
    etp: int | None = None
    """Expert tensor-parallel size when it differs from tp (`Plan.etp`; None: tp, ep inside dp)."""
    split: tuple[int | None, int | None] | None = None
    """Blocks of the first and last virtual stage when fixed (`Plan.stage_split`; None: the
    default rule of `plan.stages.split_layers`)."""

    @classmethod
    def of(cls, plan: Plan, training: TrainingSpec) -> "PlanPoint":
        return cls(plan.tp, plan.pp, plan.dp, plan.vpp, plan.micro_batch, plan.schedule, plan.sequence_parallel,
                   plan.recompute or training.recompute, plan.zero, plan.ep, plan.cp, plan.scatter_gather,
                   plan.reshard_after_forward, plan.fsdp_shard_size, None if plan.etp in (None, plan.tp) else plan.etp,
                   plan.stage_split)


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


class StageEntry(NamedTuple):
    """What every plan with one (tp, sp, micro_batch, recompute, pp, ep, cp, layout) shares."""

    terms: StageTerms
    slowest_s: float
    """The slowest stage's micro-batch (before pipeline and ZeRO-3 messages)."""
    mean_s: float
    """The mean stage's micro-batch."""
    dense: BlockTerms
    moe: BlockTerms | None
    blocks: list[RankBlocks]
    heavier_mid: bool = False
    """A middle rank holds more dense or MoE blocks than the first (`Evaluator.mid_memory`)."""


class DpEntry(NamedTuple):
    """The data-parallel terms of one pipeline rank (cached)."""

    times: dp_zero.DpTimes
    partial_grads_s: float
    replica_s: float
    """AllReduce of the units this rank shares with other pipeline ranks (tied embedding)."""
    optimizer_s: float
    """Optimizer step of the rank's (ZeRO-sharded) parameters."""
    grad_copy_s: float = 0.0
    """The engine's memory-bound gradient copies before one ZeRO-2/3 ReduceScatter of the rank."""
    accumulate_s: float = 0.0
    """Per micro-batch: the engine's accumulation of 16-bit gradients into fp32 ones (DeepSpeed
    BF16_Optimizer, `dp_zero.hp_grad_accumulate_s`), after every backward on the critical path."""


class Evaluator:
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
        self.roofline = Roofline.of(cluster.accelerator, training.precision, self.cost, self.software.attention_kernels)
        self.pricer = CommPricer(cluster)
        self.dtype_bytes, self.grad_bytes = training.dtype_bytes, training.grad_bytes
        # bytes per gradient element the data-parallel reduction moves (the engine's reduce dtype)
        self.dp_grad_bytes = 4 if self.software.reduce_in_fp32 and training.grad_dtype == "fp32" else self.dtype_bytes
        # DeepSpeed stages gradients in a reduce bucket and parameters in an all-gather bucket (ZeRO >= 1)
        self.bucket_bytes = self.software.dp_bucket_elements * (self.dp_grad_bytes + self.dtype_bytes)
        self._modes: dict[tuple, object] = {}
        self.state_bytes = dp_zero.state_bytes_per_param(training.optimizer_states, training.uses_master_weights)
        self.opt_bytes = dp_zero.optimizer_bytes_per_param(
            self.grad_bytes, self.state_bytes, self.dtype_bytes, training.uses_master_weights
        )
        self.memory_bytes = cluster.accelerator.memory_capacity_bytes
        moe = self.spec.moe
        self.capacity_factor = planned_capacity_factor(moe) if moe is not None else None
        self.held = RankStates(self.spec, training, self.software)
        self._cache: dict[tuple, object] = {}
        # the hot path's caches, one dict per kind
        self._stages: dict[tuple, StageEntry] = {}
        self._dps: dict[tuple, DpEntry] = {}
        self._p2ps: dict[tuple, float] = {}
        self._flops: dict[str, tuple[float, float]] = {}
        self._states: dict[tuple, tuple] = {}
        self._blocks: dict[tuple, tuple[int, list[RankBlocks]]] = {}
        self._block_ids: dict[tuple, int] = {}
        self._pipes: dict[tuple, tuple[float, int | float]] = {}
        self._inflight: dict[tuple, tuple[float, float]] = {}
        self._splits: dict[tuple, tuple] = {}

    def _memo(self, key: tuple, make):
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = make()
        return hit

    def vocab_padded(self, tp: int) -> int:
        """Vocabulary padded for this tp (Megatron)."""
        return padded_vocab(self.spec.vocab, tp, self.cost.vocab_divisible_by)

    def shapes(self, tp: int, dp: int, pp: int, ep: int = 1, cp: int = 1) -> dict:
        """Process-group shapes of a tp x cp x dp x pp grid (ep inside dp) on this cluster."""
        return self._memo(("shapes", tp, dp, pp, ep, cp),
                          lambda: ParallelDims(dp=dp, tp=tp, pp=pp, cp=cp, ep=ep).group_shapes(self.cluster.gpus_per_node))

    # -- one block, the embedding and the head, per micro-batch on one TP rank -------------------

    def block_terms(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int = 1,
                    ep: int | None = None, etp: int | None = None) -> BlockTerms:
        """A dense block (or with `ep` an MoE block over ep ranks, its experts over `etp` ranks
        when that is not tp), the embedding and the head."""
        return self._memo(("block", tp, sp, micro_batch, recompute, cp, ep, etp),
                          lambda: self._block_terms(tp, sp, micro_batch, recompute, cp, ep, etp))

    def _block_terms(self, tp: int, sp: bool, b: int, recompute: str, cp: int, ep: int | None,
                     etp: int | None = None) -> BlockTerms:
        spec, training, d = self.spec, self.training, self.dtype_bytes
        s_local = training.seq_len // cp
        tokens = b * s_local
        moe = ep is not None
        etp = etp if moe else None
        routed = tokens * etp // tp if etp else tokens  # tokens one rank dispatches
        capacity = expert_capacity(routed, spec.moe, self.capacity_factor) if moe else None
        sw = self.software
        times = self._memo(("kernel_times", tp, sp, b, cp, ep, etp), lambda: kernel_times(
            spec, tp, sp, b, training.seq_len, d, self.vocab_padded(tp), self.roofline, moe_layer=moe,
            ep=ep or 1, capacity=capacity, cp=cp, attention=training.attention, software=sw,
            scaled_gemm_factor=self.cost.fp8_scaled_gemm_factor, etp=etp))
        full = recompute == "full"
        # what 'selective' recomputes under this engine (`count/checkpointing.py`; MoE blocks: attention core)
        mode = "attention_core" if moe and sw.ac_mode == "op_sac" else sw.ac_mode
        if mode == "op_sac" and training.attention == "eager":
            mode = "attention_core"
        layer_level = recompute == "selective" and mode in ("layer_sac", "every_nth_block")
        recompute_s = times.recompute_s(recompute, mode, op_sac_recomputed_fraction(spec), sw.ac_every)
        rerun = 1.0 if full else (checkpointed_share(sw.ac_every) if layer_level else 0.0)
        act = tokens * spec.hidden * d  # one (b, s/cp, h) activation
        tp_shape = self.shapes(tp, 1, 1)[Axis.TP]
        gpn = self.cluster.gpus_per_node
        gather = tokens * spec.hidden if sw.fp8_tp_gather and sp else None  # 1-byte fp8 AllGathers
        tp_t = self._memo(("tp", tp, sp, b, cp, etp), lambda: tp_mod.tp_seconds(
            self.pricer, tp_shape, tp, sp, act, tokens, tp_mod.LOSS_VALUE_BYTES, etp,
            strided_shape(etp, 1, gpn) if etp else None, gather))
        if moe:
            a2a = ep_mod.dispatch_bytes(spec.moe.num_experts, capacity, spec.hidden, d)
            # Megatron-core's expert grid: etp fastest, then ep (stride etp); else ep inside dp
            ep_shape = strided_shape(ep, etp, gpn) if etp else self.shapes(tp, ep, 2, ep, cp)[Axis.EP]
            ep_x = ep_mod.ep_exposure(self.pricer, ep_shape, ep, a2a, full)
        else:
            ep_x = ep_mod.EpExposure(0.0, 0.0, 0.0)
        kv_send = self.cp_kv_send_s(tp, b, cp) if cp > 1 else 0.0
        cp_x = cp_mod.cp_exposure(cp, kv_send, times.core_fwd_s, times.core_bwd_s, full, self.cost)
        stored, working = block_activations(spec, b, training.seq_len, d, tp, sp, recompute, moe, training.attention, cp,
                                            sw)
        emb_act, head_act = edge_activations(spec, b, training.seq_len, d, tp, sp, cp, sw.fused_cross_entropy,
                                             sw.compiled_loss, sw.sp_saves_gathered_inputs)
        message, _ = self.boundary(tp, sp, b, cp, True)
        overlap = 3 * times.linear_fwd_s if sw.tp_comm_overlap else None  # forward, dgrad and wgrad GEMMs
        tp_x = tp_mod.tp_exposure(tp_t, rerun, self.cost, overlap, tp)
        return BlockTerms(times, recompute_s, tp_x, ep_x, cp_x, stored, working, emb_act, head_act, message)

    def cp_kv_send_s(self, tp: int, micro_batch: int, cp: int) -> float:
        """One K, V block sent to the next rank of the cp ring (`parallel/cp.py`)."""
        tokens = micro_batch * self.training.seq_len // cp
        kv = cp_mod.kv_bytes(tokens, tp_mod.local_kv_heads(self.spec.num_kv_heads, tp), self.spec.dim_head,
                             self.dtype_bytes)
        return self.pricer.p2p_time_s(kv, self.shapes(tp, 1, 1, cp=cp)[Axis.CP].crosses_nodes)

    def boundary(self, tp: int, sp: bool, micro_batch: int, cp: int, scatter_gather: bool) -> tuple[int, int | None]:
        """(bytes sent, bytes the receiver all-gathers) of one stage-boundary tensor (`parallel/pp.py`)."""
        s_local = self.training.seq_len // cp
        numel = micro_batch * (s_local // tp if sp else s_local) * self.spec.hidden
        return pp_mod.boundary_message(micro_batch, s_local, self.spec.hidden, tp, sp,
                                       pipeline_scatter_gather(scatter_gather, tp, sp, numel), self.dtype_bytes)

    # -- stages and the pipeline ------------------------------------------------------------------

    def rank_blocks(self, schedule: str, pp: int, vpp: int, split=None) -> tuple[int, list[RankBlocks]]:
        """(id, blocks) of what each pipeline rank holds and runs under the schedule's layout (and
        the plan's first / last stage blocks, `split`); the id is shared by layouts that give every
        rank the same blocks (cache keys)."""
        key = (schedule, pp, vpp, split)
        hit = self._blocks.get(key)
        if hit is None:
            blocks = rank_blocks(self.spec, schedule_layout(schedule, pp, vpp), chunk_shares(Schedule(schedule), pp, vpp),
                                 split)
            bid = self._block_ids.setdefault(tuple(blocks), len(self._block_ids))
            hit = self._blocks[key] = (bid, blocks)
        return hit

    def stage_entry(self, tp: int, sp: bool, micro_batch: int, recompute: str, pp: int, ep: int = 1,
                    cp: int = 1, schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1,
                    etp: int | None = None, split=None) -> StageEntry:
        """Per-micro-batch stage times (`stage_time.py`) with the slowest and the mean stage."""
        bid, blocks = self.rank_blocks(schedule, pp, vpp, split)
        key = (tp, sp, micro_batch, recompute, pp, ep, cp, bid) if etp is None else (
            tp, sp, micro_batch, recompute, pp, ep, cp, bid, etp)
        hit = self._stages.get(key)
        if hit is None:
            moe = self.block_terms(tp, sp, micro_batch, recompute, cp, ep, etp) if self.spec.moe is not None else None
            dense = self.block_terms(tp, sp, micro_batch, recompute, cp)
            st = compose_stages(blocks, dense, moe)
            mean = (st.first_s + st.last_s + (pp - 2) * st.mid_s) / pp if pp > 1 else st.first_s
            b0 = blocks[0]
            heavier = any(b.dense > b0.dense or b.moe > b0.moe for b in blocks[1:-1])
            hit = self._stages[key] = StageEntry(st, max(st.first_s, st.last_s, st.mid_max_s), mean, dense, moe,
                                                 blocks, heavier)
        return hit

    def split_candidates(self, tp: int, sp: bool, micro_batch: int, recompute: str, pp: int, ep: int = 1,
                         cp: int = 1, schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1,
                         etp: int | None = None) -> tuple:
        """The stage splits the search tries, in order (`search.py` keeps the first that fits):
        the fastest (first, last) stage split, then, when the default split is uneven, two that move
        blocks to the last stage, which holds the fewest in-flight micro-batches (memory relief). The fastest is found on the
        stage times (`compose_stages`, slowest stage): the last stage runs the output layer and
        the loss, worth e = head / block seconds, so it tries the last stage's default blocks minus
        1 .. floor(e) (Megatron's --decoder-last-pipeline-num-layers; moving a block off pays only
        when the head outweighs a block; the embedding costs little time, the first stage keeps
        its blocks), the rest spread as evenly as `split_layers` does. None is the default split."""
        key = (tp, sp, micro_batch, recompute, pp, ep, cp, schedule, vpp, etp)
        hit = self._splits.get(key)
        if hit is not None:
            return hit
        shape = self._splits.get((schedule, pp, vpp))
        if shape is None:
            stages = schedule_layout(schedule, pp, vpp).num_stages
            shape = self._splits[(schedule, pp, vpp)] = (stages, split_layers(self.spec.layers, stages))
        stages, counts = shape
        last = counts[-1]
        out: list = [None]
        if stages >= 2:
            dense = self.block_terms(tp, sp, micro_batch, recompute, cp)
            k = dense.kernels
            block_s = dense.layer_fwd_s + dense.layer_bwd_s
            head_s = k.head_fwd_s + k.head_bwd_s + dense.tp.head_s
            shift = math.floor(head_s / block_s) if block_s > 0 else 0
            best = self.stage_entry(tp, sp, micro_batch, recompute, pp, ep, cp, schedule, vpp, etp).slowest_s
            for n in range(max(1, last - shift), last):
                split = (None, n)
                try:
                    split_layers(self.spec.layers, stages, split)
                except ValueError:
                    continue
                slowest = self.stage_entry(tp, sp, micro_batch, recompute, pp, ep, cp, schedule, vpp, etp, split).slowest_s
                if slowest < best * (1 - 1e-9):
                    best, out[0] = slowest, split
            chosen = out[0][1] if out[0] is not None else last
            # memory relief where the default split is already uneven (its middle ranks hold one
            # block more than the first and peak above it): the last stage holds the fewest
            # in-flight micro-batches (1F1B: one)
            for extra in ((1, 2) if len(set(counts)) > 1 else ()):
                split = (None, chosen + extra)
                try:
                    split_layers(self.spec.layers, stages, split)
                except ValueError:
                    continue
                out.append(split)
        hit = self._splits[key] = tuple(out)
        return hit

    def pipe(self, schedule: str, pp: int, m: int, vpp: int) -> tuple[float, int | float]:
        """(bubble in micro-batch times, stage-boundary messages per micro-batch) of a schedule,
        read off its action list (`pipeline/profile.py`)."""
        key = (schedule, pp, m, vpp)
        hit = self._pipes.get(key)
        if hit is None:
            kind = Schedule(schedule)
            hit = self._pipes[key] = (float(bubble_microbatches(kind, pp, m, vpp)), boundary_messages(kind, pp, vpp))
        return hit

    def p2p_s(self, tp: int, sp: bool, micro_batch: int, dp: int, pp: int, cp: int = 1,
              scatter_gather: bool = True) -> float:
        """One stage-boundary message on the link between neighbouring stages (`parallel/pp.py`)."""
        key = (tp, sp, micro_batch, dp, pp, cp, scatter_gather)
        hit = self._p2ps.get(key)
        if hit is None:
            message, gathered = self.boundary(tp, sp, micro_batch, cp, scatter_gather)
            shapes = self.shapes(tp, dp, pp, cp=cp)
            hit = self._p2ps[key] = pp_mod.p2p_seconds(self.pricer, message, shapes[Axis.PP].crosses_nodes, gathered,
                                                       shapes[Axis.TP])
        return hit

    def flops_per_sequence(self, recompute: str) -> tuple[float, float]:
        """(model, hardware) FLOPs of one sequence (`modelplan.count.flops` convention)."""
        hit = self._flops.get(recompute)
        if hit is None:
            one = self.training.model_copy(update={"global_batch": 1, "recompute": recompute})
            counted = count_flops(self.spec, one)
            hit = self._flops[recompute] = float(counted.model), float(counted.hardware)
        return hit

    # -- data parallel, model states and memory ----------------------------------------------------

    def dp_entry(self, tp: int, pp: int, dp: int, zero: int, sp: bool, pp_rank: int, ep: int = 1, cp: int = 1,
                 schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1, shard: int | None = None,
                 etp: int | None = None, split=None) -> DpEntry:
        """The DP calls of rank `pp_rank`'s units for one micro-batch per step, priced
        (`parallel/dp_zero.py`), its replicated units' AllReduce and its optimizer step. HSDP
        (`shard` < dp, ZeRO >= 2, `plan/fsdp.py`): gathers and ReduceScatters in the shard group of
        `shard` data-parallel ranks, plus the AllReduce of each gradient shard over the replicas,
        hidden like the ReduceScatter it follows. `etp`: routed experts reduced over Megatron-core's
        expert-data-parallel group, tp x dp x cp / (ep x etp) ranks `etp * ep` apart."""
        key = (tp, pp, dp, zero, sp, pp_rank, ep, cp, schedule, vpp, shard) if etp is None and split is None else (
            tp, pp, dp, zero, sp, pp_rank, ep, cp, schedule, vpp, shard, etp, split)
        hit = self._dps.get(key)
        if hit is None:
            group, replicas_n = hsdp_groups(dp * cp, shard if zero >= 2 and ep == 1 and cp == 1 else None)
            dp_list = group if replicas_n > 1 else dp
            kid, kinds = self.held.unit_kinds(schedule, pp, vpp, split)[pp_rank]
            replicas = self._memo(("replicas", schedule, pp, vpp, split),
                                  lambda: unit_replicas(self.held.rank_units(schedule, pp, vpp, split)))
            mine = tuple(len(replicas[u]) if u in replicas else 0 for u, _ in kinds)
            params = self.held.rank_params(tp, pp, ep, schedule, vpp, etp, split)[0][pp_rank]
            hit = self._memo(("dp", tp, pp, dp_list, zero, sp, ep, cp, kid, mine, etp), lambda: self._dp_entry(
                tp, pp, dp_list, zero, sp, ep, cp, kinds, mine, params, etp))
            if replicas_n > 1:
                stride = ParallelDims(dp=dp, tp=tp, pp=pp, cp=cp).stride(Axis.DP) * group
                ar = self.pricer.time_s(Collective.ALL_REDUCE, params[0] * self.dp_grad_bytes / group,
                                        strided_shape(replicas_n, stride, self.cluster.gpus_per_node))
                hit = hit._replace(times=hit.times._replace(reduce_scatter=hit.times.reduce_scatter + ar))
            self._dps[key] = hit
        return hit

    def _dp_entry(self, tp: int, pp: int, dp: int, zero: int, sp: bool, ep: int, cp: int,
                  kinds: tuple[tuple[str, int], ...], copies: tuple[int, ...], params: tuple[int, int],
                  etp: int | None = None) -> DpEntry:
        shards = self._memo(("dp_shards", tp, dp, ep, cp, sp, etp), lambda: unit_shards(
            self.spec, Plan(tp=tp, dp=dp, ep=ep, cp=cp, sequence_parallel=sp, etp=etp)))
        if etp is None:
            shapes = self.shapes(tp, dp, pp, ep, cp)
        else:  # Megatron-core's expert grid over the stage's tp x cp x dp ranks: etp, ep, expert dp
            shapes = dict(self.shapes(tp, dp, pp, 1, cp))
            shapes[EXPERT_DP] = strided_shape(tp * dp * cp // (ep * etp), ep * etp, self.cluster.gpus_per_node)
        calls, tied = RankCalls(), RankCalls()
        for (unit, count), n in zip(kinds, copies):
            if unit in shards:
                u = shards[unit]
                dp_zero.unit_calls(calls, u, tp, zero, 1, self.dtype_bytes, self.dp_grad_bytes, count)
                if n:
                    owned = u.padded if zero == 0 else u.padded // u.group_size
                    pp_mod.replica_calls(tied, unit, n, owned * self.dp_grad_bytes)
        priced = dp_zero.dp_seconds(calls, lambda op, axis, size, nbytes: self.pricer.time_s(
            op, nbytes, self._dp_shape(shapes, axis, size)), zero)
        replica_s = tied.price(self.pricer, lambda axis, size: pair_shape(shapes[Axis.PP].crosses_nodes))
        optimizer = dp_zero.optimizer_s(*params, dp * cp, ep, zero, self.opt_bytes, self.roofline,
                                        tp * dp * cp // (ep * etp) if etp else None)
        grad_copy = self.roofline.memory_time_s(sum(params) * self.software.grad_copy_bytes)
        accumulate = dp_zero.hp_grad_accumulate_s(*params, self.roofline) if keeps_low_precision_grads(
            self.software, zero, self.training.precision, self.grad_bytes) else 0.0
        return DpEntry(priced.times, priced.partial_grads_s, replica_s, optimizer, grad_copy, accumulate)

    @staticmethod
    def _dp_shape(shapes: dict, axis: Axis, size: int):
        """The DP group's shape; a DP call smaller than the group is the routed experts' reduction."""
        shape = shapes[axis]
        return shapes[EXPERT_DP] if axis is Axis.DP and size != shape.size else shape

    def memory(self, point: PlanPoint) -> tuple[StageMemory, StageMemory]:
        """Memory of the first (or of the heaviest middle rank when it holds more: `mid_memory`)
        and the last pipeline rank."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, _, reshard, shard, etp, split = point
        stage = self.stage_entry(tp, sp, mb, recompute, pp, ep, cp, schedule, vpp, etp, split)
        m = self.training.global_batch // (mb * dp)
        first, last = self.stage_memories(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard, etp, split)
        mid = self.mid_memory(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard, etp, split)
        return (mid[1] if mid is not None and mid[1].total > first.total else first), last

    def mid_memory(self, stage: StageEntry, tp: int, pp: int, dp: int, vpp: int, m: int, schedule: str,
                   zero: int, ep: int, cp: int, reshard: bool | str = "default", shard: int | None = None,
                   etp: int | None = None, split=None) -> tuple[int, StageMemory] | None:
        """(rank, memory) of the middle pipeline rank whose in-flight micro-batches x blocks held
        is largest (pp > 2): under 1F1B rank r holds pp - r micro-batches, so a middle rank with
        one block more than the first (an uneven split's remainder) can peak above it."""
        if not stage.heavier_mid:
            return None
        t, mt = stage.dense.activation_bytes, (stage.moe.activation_bytes if stage.moe is not None else 0)
        key = ("mid", schedule, pp, m, vpp, split, t, mt)  # the blocks follow (schedule, pp, vpp, split)
        pick = self._inflight.get(key, False)
        if pick is False:
            # in-flight micro-batches never grow with the rank (1F1B pp - r, interleaved, GPipe m):
            # only the first rank of each heavier block count can peak above rank 0
            kind, base = Schedule(schedule), stage.blocks[0].dense * t + stage.blocks[0].moe * mt
            seen: set = set()
            loads = []
            for r, b in enumerate(stage.blocks[1:-1], start=1):
                load = b.dense * t + b.moe * mt
                if load > base and load not in seen:
                    seen.add(load)
                    n = float(inflight_microbatches(kind, pp, r, m, vpp))
                    loads.append((n * load, n, r))
            pick = self._inflight[key] = max(loads)[1:] if loads else None
        if pick is None:
            return None
        inflight, r = pick
        skey = ("mid", tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard, etp, split, r)
        states = self._states.get(skey)
        if states is None:
            states = self._states[skey] = (self.held.rank_states(tp, pp, dp, zero, r, ep, cp, schedule, vpp, reshard,
                                                                 shard, etp, split),
                                           self.held.groups(tp, pp, dp, ep, cp))
        b = stage.blocks[r]
        buckets = self.bucket_bytes if zero >= 1 else 0.0
        return r, stage_memory(states[0], b.dense + b.moe, inflight, stage.dense, False, False, states[1], self.cost,
                               stage.moe, b.moe, True, buckets, r)

    def stage_memories(self, stage: StageEntry, tp: int, pp: int, dp: int, vpp: int, m: int, schedule: str,
                       zero: int, ep: int, cp: int, reshard: bool | str = "default", shard: int | None = None,
                       etp: int | None = None, split=None) -> tuple[StageMemory, StageMemory]:
        """`memory` from the plan's cached `StageEntry` and its m micro-batches per step."""
        key = (tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard) if etp is None and split is None else (
            tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard, etp, split)
        hit = self._states.get(key)
        if hit is None:
            hit = self._states[key] = (*self.held.states(*key), self.held.groups(tp, pp, dp, ep, cp))
        first_states, last_states, groups = hit
        t, mt, blocks = stage.dense, stage.moe, stage.blocks
        inflight = self._inflight.get((schedule, pp, m, vpp))
        if inflight is None:
            kind = Schedule(schedule)
            inflight = self._inflight[(schedule, pp, m, vpp)] = (
                float(inflight_microbatches(kind, pp, 0, m, vpp)), float(inflight_microbatches(kind, pp, pp - 1, m, vpp)))
        buckets = self.bucket_bytes if zero >= 1 else 0.0
        b = blocks[0]
        first = stage_memory(first_states, b.dense + b.moe, inflight[0], t, b.embedding > 0, b.head > 0, groups,
                             self.cost, mt, b.moe, pp > 1, buckets)
        if pp == 1:
            return first, first
        b = blocks[-1]
        last = stage_memory(last_states, b.dense + b.moe, inflight[1], t, b.embedding > 0, b.head > 0, groups,
                            self.cost, mt, b.moe, True, buckets, pp - 1)
        return first, last

    # -- the step ---------------------------------------------------------------------------------

    def step_lower_bound_s(self, point: PlanPoint) -> float:
        """The step time without its data-parallel terms (all >= 0): a lower bound the search
        uses to skip plans that cannot enter the top-k, before pricing their DP traffic."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, sg = point[:12]
        stage = self.stage_entry(tp, sp, mb, recompute, pp, ep, cp, schedule, vpp, point.etp, point.split)
        m = self.training.global_batch // (mb * dp)
        bubble, hops = self.pipe(schedule, pp, m, vpp)
        p2p = self.p2p_s(tp, sp, mb, dp, pp, cp, sg) if pp > 1 else 0.0
        p2p *= hops * self.cost.pp_p2p_exposed_fraction
        return pp_mod.pipeline_time_s(m, bubble, stage.slowest_s + p2p, stage.mean_s + p2p)

    def evaluate(self, point: PlanPoint) -> Evaluation:
        """All terms of one valid plan (validity is the caller's job: see validate.py). ZeRO-3
        gathers per micro-batch follow the plan's reshard_after_forward (`plan/fsdp.py`): not
        resharded under pipeline parallelism, the stage gathers and reduces once per step (priced as
        ZeRO-1's traffic); not resharded without it, no backward gather. HSDP: `dp_entry`."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, sg, reshard, shard, etp, split = point
        # the hot loop: cache hits are plain dict lookups (`stage_entry`, `dp_entry`, ... on a miss)
        blocks = self._blocks.get((schedule, pp, vpp, split))
        stage = self._stages.get((tp, sp, mb, recompute, pp, ep, cp, blocks[0])) if blocks and etp is None else None
        if stage is None:
            stage = self.stage_entry(tp, sp, mb, recompute, pp, ep, cp, schedule, vpp, etp, split)
        st = stage.terms
        batch = self.training.global_batch
        m = batch // (mb * dp)
        pipe = self._pipes.get((schedule, pp, m, vpp))
        bubble, hops = pipe if pipe is not None else self.pipe(schedule, pp, m, vpp)
        if pp > 1:  # pipeline messages: per micro-batch, direction and chunk on the critical path
            p2p = self._p2ps.get((tp, sp, mb, dp, pp, cp, sg))
            if p2p is None:
                p2p = self.p2p_s(tp, sp, mb, dp, pp, cp, sg)
        else:
            p2p = 0.0
        cost = self.cost
        p2p *= hops * cost.pp_p2p_exposed_fraction
        crit = st.critical_rank
        dpe = self._dps.get((tp, pp, dp, zero, sp, crit, ep, cp, schedule, vpp, shard)) if etp is None and split is None \
            else None
        if dpe is None:
            dpe = self.dp_entry(tp, pp, dp, zero, sp, crit, ep, cp, schedule, vpp, shard, etp, split)
        if zero == 3:
            mode = self._modes.get((reshard, pp))
            if mode is None:
                mode = self._modes[(reshard, pp)] = zero3_mode(reshard, self.software, pp)
            every_mb = reduces_every_microbatch(mode)
        else:
            mode, every_mb = None, True
        if dp * cp > 1:
            dp_after, dp_mb, dp_total = dp_zero.dp_exposure(
                zero if every_mb else 1, dpe.times, m, st.fwd_s, st.bwd_s, cost.dp_overlap, cost.dp_overlap_fraction,
                cost.overlap_interference, backward_gathers=mode is None or mode.reshard_after_forward,
            )
            if zero >= 2:  # the engine's gradient copies before each ReduceScatter (memory-bound)
                if every_mb:
                    dp_mb += dpe.grad_copy_s
                else:
                    dp_after += dpe.grad_copy_s
        else:
            dp_after = dp_mb = dp_total = 0.0
        dp_after += dpe.partial_grads_s * (m if zero >= 2 else 1)
        per_mb = p2p + dp_mb + dpe.accumulate_s
        t_max = stage.slowest_s + per_mb
        pipeline = pp_mod.pipeline_time_s(m, bubble, t_max, stage.mean_s + per_mb)
        replica_sync = dpe.replica_s
        optimizer = dpe.optimizer_s
        model_seq, hardware_seq = self._flops.get(recompute) or self.flops_per_sequence(recompute)
        mem_first, mem_last = self.stage_memories(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard,
                                                  etp, split)
        mid = self.mid_memory(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard, etp, split)
        step = StepTerms(
            step_time_s=pipeline + dp_after + replica_sync + optimizer,
            compute_s=m * st.compute_s, recompute_s=m * st.recompute_s, tp_comm_s=m * st.tp_s,
            pp_comm_s=m * p2p, bubble_s=pipeline - m * t_max, dp_comm_s=dp_after + m * dp_mb,
            embedding_sync_s=replica_sync, optimizer_s=optimizer + m * dpe.accumulate_s, dp_comm_total_s=dp_total,
            tp_hidden_s=m * st.tp_hidden_s, ep_comm_s=m * st.ep_s, cp_comm_s=m * st.cp_s,
            cp_hidden_s=m * st.cp_hidden_s,
        )
        if mid is not None:
            return Evaluation(step, batch * model_seq, batch * hardware_seq, mem_first, mem_last, m, mid[1], mid[0])
        return Evaluation(step, batch * model_seq, batch * hardware_seq, mem_first, mem_last, m)
