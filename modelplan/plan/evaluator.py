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
from modelplan.comm.offload import host_link
from modelplan.count.blocks import Block, mtp_block
from modelplan.count.flops import count_flops
from modelplan.plan.commcost import CommPricer
from modelplan.plan.block_mix import block_kinds, mean_terms, with_mtp
from modelplan.plan.compute import Roofline, kernel_times
from modelplan.count.checkpointing import checkpointed_share, op_sac_recomputed_fraction
from modelplan.plan.recompute_layers import block_method_terms
from modelplan.plan.dims import EXPERT_DP, ParallelDims, pair_shape, strided_shape
from modelplan.plan.engine import engine_settings, keeps_low_precision_grads
from modelplan.plan.fsdp import hsdp_groups, reduces_every_microbatch, zero3_mode
from modelplan.plan.experts import expert_capacity, planned_capacity_factor
from modelplan.plan.flop_floor import flop_floor_s
from modelplan.plan.fp8 import gemm_rate_factor
from modelplan.plan.kernels import layer_kernels
from modelplan.plan.memory import (block_activations, edge_activations, pipeline_stage_bytes, stage_memory,
                                   stage_output_bytes)
from modelplan.plan.results import StageMemory
from modelplan.plan.parallel import cp as cp_mod, dp_zero, ep as ep_mod, pp as pp_mod, tp as tp_mod
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.mechanisms import Mechanisms
from modelplan.plan.placement import DEFAULT_ORDER, placed_shapes
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.profile import boundary_messages, bubble_microbatches, chunk_shares, inflight_microbatches
from modelplan.plan.shard import regrouped, unit_groups, unit_shards
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
        self._global_batch, self._layers = training.global_batch, self.spec.layers  # read per search point

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
        gpn = self.cluster.gpus_per_node
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

    # -- one block, the embedding and the head, per micro-batch on one TP rank -------------------

    def block_terms(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int = 1,
                    ep: int | None = None, etp: int | None = None, tp_overlap: str = "none",
                    mtp_ep: int = 1) -> BlockTerms:
        """A dense block (or with `ep` an MoE block over ep ranks, its experts over `etp` ranks
        when that is not tp), the embedding and the head; block kinds mixed at the model's shares,
        the dense terms' head with the MTP modules (`block_mix.py`; an MoE MTP block over `mtp_ep`
        ranks); TP collectives overlapped under `tp_overlap` (`comm/tp_overlap.py`)."""
        key = (tp, sp, micro_batch, recompute, cp, ep, tp_overlap, etp, mtp_ep)
        hit = self._block_cache.get(key)
        if hit is None:
            hit = self._block_cache[key] = self._mixed_terms(tp, sp, micro_batch, recompute, cp, ep, etp,
                                                             tp_overlap, mtp_ep)
        return hit

    def kinds_of(self, moe: bool) -> list[tuple[Block, int]]:
        """The model's block kinds of one class (MoE or not) with their counts (`block_mix.py`; empty:
        the class's terms are its default block's, `memory.block_activations`)."""
        return self._memo(("block_kinds", moe), lambda: block_kinds(self.spec, moe))

    def block_bytes(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int, moe: bool,
                    block: Block | None, etp: int | None = None) -> tuple[int, int]:
        """(bytes kept per in-flight micro-batch, transient bytes) of one block of a kind
        (`memory.block_activations` under the engine's settings; cached: the search's memory
        floor asks first); a recomputing block reuses the bytes it keeps without recompute."""
        key = ("block_bytes", tp, sp, micro_batch, recompute, cp, moe, block, etp)
        hit = self._cache.get(key)
        if hit is None:
            training = self.training
            none = None if recompute == "none" else self.block_bytes(tp, sp, micro_batch, "none", cp, moe, block, etp)[0]
            hit = self._cache[key] = block_activations(
                self.spec, micro_batch, training.seq_len, self.dtype_bytes, tp, sp, recompute, moe, training.attention,
                cp, self.software, block, etp, none_bytes=none)
        return hit

    def edge_bytes(self, tp: int, sp: bool, micro_batch: int, cp: int) -> tuple[int, int]:
        """(first stage, last stage) bytes per in-flight micro-batch (`memory.edge_activations`; cached)."""
        key = ("edge_bytes", tp, sp, micro_batch, cp)
        hit = self._cache.get(key)
        if hit is None:
            sw = self.software
            hit = self._cache[key] = edge_activations(
                self.spec, micro_batch, self.training.seq_len, self.dtype_bytes, tp, sp, cp, sw.fused_cross_entropy,
                sw.compiled_loss, sw.sp_saves_gathered_inputs, sw.loss_parallel)
        return hit

    def _mixed_terms(self, tp: int, sp: bool, b: int, recompute: str, cp: int, ep: int | None,
                     etp: int | None, tp_overlap: str, mtp_ep: int) -> BlockTerms:
        spec = self.spec
        kinds = self.kinds_of(ep is not None)
        if not kinds:
            terms = self._block_terms(tp, sp, b, recompute, cp, ep, None, etp, tp_overlap)
        else:
            terms = mean_terms([self._block_terms(tp, sp, b, recompute, cp, ep, block, etp, tp_overlap)
                                for block, _ in kinds], [n for _, n in kinds])
        if ep is None and spec.mtp_layers:
            block = mtp_block(spec)
            mtp = self._block_terms(tp, sp, b, "none", cp, mtp_ep if block.moe else None, block,
                                    etp if block.moe else None, tp_overlap)
            terms = with_mtp(terms, mtp, spec.mtp_layers)
        return terms

    def _block_terms(self, tp: int, sp: bool, b: int, recompute: str, cp: int, ep: int | None,
                     block: Block | None, etp: int | None = None, tp_overlap: str = "none") -> BlockTerms:
        spec, training, d = self.spec, self.training, self.dtype_bytes
        s_local = training.seq_len // cp
        tokens = b * s_local
        moe = ep is not None
        etp = etp if moe else None
        routed = tokens * etp // tp if etp else tokens  # tokens one rank dispatches
        capacity = expert_capacity(routed, spec.moe, self.capacity_factor) if moe else None
        sw = self.software
        times = self._memo(("kernel_times", tp, sp, b, cp, ep, etp, block), lambda: kernel_times(
            spec, tp, sp, b, training.seq_len, d, self.vocab_padded(tp), self.roofline, moe_layer=moe,
            ep=ep or 1, capacity=capacity, cp=cp, attention=training.attention, software=sw,
            scaled_gemm_factor=self.cost.fp8_scaled_gemm_factor, block=block, etp=etp))
        ft = self.finetune
        if ft is not None:
            times = ft.kernel_times(times, tp, sp, b, cp, self.vocab_padded(tp), self.roofline, training.attention,
                                    sw.elementwise)
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
        # sequence-parallel dispatch (`parallel/ep.py`): no f / g around the routed experts (a shared
        # expert keeps its own, `mlp_tp` None), the TP group's expert-buffer calls priced with the EP ones
        sp_dispatch = moe and ep_mod.sequence_parallel_dispatch(tp, sp, ep, etp)
        mlp_tp = (None if spec.moe.shared_experts else 1) if sp_dispatch else etp
        tp_t = self._memo(("tp", tp, sp, b, cp, etp, block, sp_dispatch), lambda: tp_mod.tp_seconds(
            self.pricer, tp_shape, tp, sp, act, tokens, tp_mod.LOSS_VALUE_BYTES, mlp_tp,
            strided_shape(etp, 1, gpn) if etp else None, gather, spec, block, d))
        if moe:
            sent = expert_capacity(tokens // tp, spec.moe, self.capacity_factor) if sp_dispatch else capacity
            a2a = ep_mod.dispatch_bytes(spec.moe.num_experts, sent, spec.hidden, d)
            # Megatron-core's expert grid: etp fastest, then ep (stride etp); else ep inside dp
            ep_shape = strided_shape(ep, etp, gpn) if etp else self.shapes(tp, ep, 2, ep, cp)[Axis.EP]
            ep_x = ep_mod.ep_exposure(self.pricer, ep_shape, ep, a2a, full, tp if sp_dispatch else 1, tp_shape)
            if training.ep_comm_overlap:  # merged 1F1B: AllToAlls under the other micro-batch's compute
                ep_x = ep_mod.overlapped(ep_x, times.fwd_gemm_s + times.fwd_elementwise_s + times.bwd_gemm_s
                                         + times.bwd_elementwise_s)
        else:
            ep_x = ep_mod.EpExposure(0.0, 0.0, 0.0)
        cp_type, torch_cp = sw.cp_comm_type, sw.cp_fp32_merge
        cp_x = cp_mod.cp_exposure(cp, cp_type, torch_cp, self.cp_seconds(tp, b, cp) if cp > 1 else None,
                                  times.core_fwd_s, times.core_bwd_s, full, self.cost)
        stored, working = self.block_bytes(tp, sp, b, recompute, cp, moe, block, etp)
        if cp > 1:  # the exchange's transient buffers (`parallel/cp.py` working_bytes)
            kv, q = self.cp_block_bytes(tp, b, cp)
            working += cp_mod.working_bytes(cp, cp_type, torch_cp, kv, q, d)
        if ft is not None:  # lora_A outputs kept for backward (full recompute: only while recomputed)
            adapters = ft.adapter_activation_bytes(tp, b, s_local)
            stored, working = (stored, working + adapters) if full else (stored + adapters, working)
        emb_act, head_act = self.edge_bytes(tp, sp, b, cp)
        message, _ = self.boundary(tp, sp, b, cp, True)
        if tp_overlap != "none" and sp and tp > 1:
            tp_x = tp_mod.overlap_exposure(tp_t, rerun, self.cost, tp_overlap, self.mech.gemm_shares(moe),
                                           times.linear_fwd_s, tp, self.mech.sm_count)
        else:
            tp_x = tp_mod.tp_exposure(tp_t, rerun, self.cost, None, tp)
        return BlockTerms(times, recompute_s, tp_x, ep_x, cp_x, stored, working, emb_act, head_act, message)

    def cp_block_bytes(self, tp: int, micro_batch: int, cp: int) -> tuple[int, int]:
        """(K, V block, queries) bytes of this rank's tokens on one TP rank (`parallel/cp.py`); K, V
        at the query heads where the engine repeats them before attention (`sdpa_repeats_kv`)."""
        tokens = micro_batch * self.training.seq_len // cp
        kv_heads = self.spec.heads if self.software.sdpa_repeats_kv else self.spec.num_kv_heads
        kv = cp_mod.kv_bytes(tokens, tp_mod.local_kv_heads(kv_heads, tp), self.spec.dim_head, self.dtype_bytes)
        return kv, cp_mod.q_bytes(tokens, self.spec.heads // tp, self.spec.dim_head, self.dtype_bytes)

    def cp_seconds(self, tp: int, micro_batch: int, cp: int) -> cp_mod.CpSeconds:
        """One call of each context-parallel transfer of one block on the cp group's links."""
        kv, q = self.cp_block_bytes(tp, micro_batch, cp)
        shape = self.shapes(tp, 1, 1, cp=cp)[Axis.CP]
        dkv = cp_mod.dkv_bytes(kv, self.dtype_bytes, self.software.cp_fp32_merge)
        price = self.pricer.time_s
        return cp_mod.CpSeconds(
            kv_send_s=self.pricer.p2p_time_s(kv, shape.crosses_nodes),
            dkv_send_s=self.pricer.p2p_time_s(dkv, shape.crosses_nodes),
            gather_s=price(Collective.ALL_GATHER, cp * kv, shape),
            scatter_s=price(Collective.REDUCE_SCATTER, cp * kv, shape),
            qkv_a2a_s=cp_mod.qkv_a2a_seconds(price, q, kv, shape),
            out_a2a_s=price(Collective.ALL_TO_ALL, q, shape))

    def boundary(self, tp: int, sp: bool, micro_batch: int, cp: int, scatter_gather: bool) -> tuple[int, int | None]:
        """(bytes sent, bytes the receiver all-gathers) of one stage-boundary tensor (`parallel/pp.py`; cached)."""
        key = ("boundary", tp, sp, micro_batch, cp, scatter_gather)
        hit = self._cache.get(key)
        if hit is None:
            s_local = self.training.seq_len // cp
            numel = micro_batch * (s_local // tp if sp else s_local) * self.spec.hidden
            split = pipeline_scatter_gather(scatter_gather, tp, sp, numel)
            hit = self._cache[key] = pp_mod.boundary_message(micro_batch, s_local, self.spec.hidden, tp, sp, split,
                                                             self.dtype_bytes)
        return hit

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
                    etp: int | None = None, split=None, tp_overlap: str = "none") -> StageEntry:
        """Per-micro-batch stage times (`stage_time.py`) with the slowest and the mean stage."""
        bid, blocks = self.rank_blocks(schedule, pp, vpp, split)
        key = (tp, sp, micro_batch, recompute, pp, ep, cp, bid, tp_overlap) if etp is None else (
            tp, sp, micro_batch, recompute, pp, ep, cp, bid, tp_overlap, etp)
        if recompute == "full" and self.software.recompute_method == "block":
            key += (vpp,)  # the block method's chunk is layers / (pp vpp)
        hit = self._stages.get(key)
        if hit is None:
            moe = (self.block_terms(tp, sp, micro_batch, recompute, cp, ep, etp, tp_overlap)
                   if self.spec.moe is not None else None)
            # the MTP modules' MoE block (if any) over the plan's ep and etp, like the other MoE blocks
            dense = self.block_terms(tp, sp, micro_batch, recompute, cp, None, etp, tp_overlap, mtp_ep=ep)
            if recompute == "full" and self.software.recompute_method == "block":  # plan/recompute_layers.py
                dense, moe = self._block_method(tp, sp, micro_batch, pp, vpp, ep, cp, etp, tp_overlap, dense, moe)
            st = compose_stages(blocks, dense, moe)
            mean = (st.first_s + st.last_s + (pp - 2) * st.mid_s) / pp if pp > 1 else st.first_s
            b0 = blocks[0]
            heavier = any(b.dense > b0.dense or b.moe > b0.moe for b in blocks[1:-1])
            hit = self._stages[key] = StageEntry(st, max(st.first_s, st.last_s, st.mid_max_s), mean, dense, moe,
                                                 blocks, heavier)
        return hit

    def _block_method(self, tp, sp, micro_batch, pp, vpp, ep, cp, etp, tp_overlap, dense, moe):
        """Megatron-core's block method: the first N layers of each chunk recomputed, the rest not."""
        sw, chunk = self.software, -(-self.spec.layers // (pp * vpp))
        plain = self.block_terms(tp, sp, micro_batch, "none", cp, None, etp, tp_overlap, mtp_ep=ep)
        plain_moe = self.block_terms(tp, sp, micro_batch, "none", cp, ep, etp, tp_overlap) if moe is not None else None
        return (block_method_terms(dense, plain, sw.recompute_method, sw.recompute_num_layers, chunk),
                block_method_terms(moe, plain_moe, sw.recompute_method, sw.recompute_num_layers, chunk))

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
              scatter_gather: bool = True, order: str = DEFAULT_ORDER) -> float:
        """One stage-boundary message on the link between neighbouring stages (`parallel/pp.py`)."""
        key = (tp, sp, micro_batch, dp, pp, cp, scatter_gather, order)
        hit = self._p2ps.get(key)
        if hit is None:
            message, gathered = self.boundary(tp, sp, micro_batch, cp, scatter_gather)
            shapes = self.shapes(tp, dp, pp, cp=cp, order=order)
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
            if self.finetune is not None:
                hit = self._flops[recompute] = self.finetune.flops_per_sequence(*hit, recompute)
        return hit

    # -- data parallel, model states and memory ----------------------------------------------------

    def dp_entry(self, tp: int, pp: int, dp: int, zero: int, sp: bool, pp_rank: int, ep: int = 1, cp: int = 1,
                 schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1, shard: int | None = None,
                 order: str = DEFAULT_ORDER, zeropp: bool = False, etp: int | None = None, split=None) -> DpEntry:
        """The DP calls of rank `pp_rank`'s units for one micro-batch per step, priced
        (`parallel/dp_zero.py`), its replicated units' AllReduce and its optimizer step. HSDP
        (`shard` < dp, ZeRO >= 2, `plan/fsdp.py`): gathers and ReduceScatters in the shard group of
        `shard` data-parallel ranks, plus the AllReduce of each gradient shard over the replicas,
        hidden like the ReduceScatter it follows. `etp`: routed experts reduced over Megatron-core's
        expert-data-parallel group, tp x dp x cp / (ep x etp) ranks `etp * ep` apart."""
        key = (tp, pp, dp, zero, sp, pp_rank, ep, cp, schedule, vpp, shard, order, zeropp) if (
            etp is None and split is None) else (
            tp, pp, dp, zero, sp, pp_rank, ep, cp, schedule, vpp, shard, order, zeropp, etp, split)
        hit = self._dps.get(key)
        if hit is None:
            # what the rank holds under this layout; layouts holding the same share the entry
            lay = self._memo(("dp_layout", tp, pp, ep, schedule, vpp, pp_rank, etp, split),
                             lambda: self._dp_layout(tp, pp, ep, schedule, vpp, pp_rank, etp, split))
            kid, kinds, mine, params = lay
            if self.finetune is not None:  # only the adapters reduce gradients and step
                blocks = self.held.rank_blocks(schedule, pp, vpp, split)[pp_rank]
                params = (blocks * self.finetune.adapter_params_per_block(tp), 0)
            shared = (tp, pp, dp, zero, sp, ep, cp, kid, mine, params, shard, order, zeropp, etp)
            hit = self._dps_shared.get(shared)
            if hit is not None:
                self._dps[key] = hit
                return hit
            group, replicas_n = hsdp_groups(dp * cp, shard if zero >= 2 and ep == 1 and cp == 1 else None)
            dp_list = group if replicas_n > 1 else dp
            hit = self._memo(("dp", tp, pp, dp_list, zero, sp, ep, cp, kid, mine, order, etp), lambda: self._dp_entry(
                tp, pp, dp_list, zero, sp, ep, cp, kinds, mine, params, etp, order))
            if zeropp:
                hit = self.mech.zeropp_entry(hit, tp, pp, dp, cp, params, order)
            if replicas_n > 1:
                stride = self.mech.dp_stride(tp, dp, pp, cp, order) * group
                ar = self.pricer.time_s(Collective.ALL_REDUCE, params[0] * self.dp_grad_bytes / group,
                                        strided_shape(replicas_n, stride, self.cluster.gpus_per_node))
                hit = hit._replace(times=hit.times._replace(reduce_scatter=hit.times.reduce_scatter + ar))
            self._dps[key] = self._dps_shared[shared] = hit
        return hit

    def _dp_layout(self, tp: int, pp: int, ep: int, schedule: str, vpp: int, pp_rank: int, etp: int | None = None,
                   split=None) -> tuple:
        """(kinds id, unit kinds, replica counts, (dense, expert) parameters) of one pipeline rank."""
        kid, kinds = self.held.unit_kinds(schedule, pp, vpp, split)[pp_rank]
        replicas = self._memo(("replicas", schedule, pp, vpp, split),
                              lambda: unit_replicas(self.held.rank_units(schedule, pp, vpp, split)))
        mine = tuple(len(replicas[u]) if u in replicas else 0 for u, _ in kinds)
        return kid, kinds, mine, self.held.rank_params(tp, pp, ep, schedule, vpp, etp, split)[0][pp_rank]

    def _dp_entry(self, tp: int, pp: int, dp: int, zero: int, sp: bool, ep: int, cp: int,
                  kinds: tuple[tuple[str, int], ...], copies: tuple[int, ...], params: tuple[int, int],
                  etp: int | None = None, order: str = DEFAULT_ORDER) -> DpEntry:
        # the units' sizes depend on (tp, sp, ep, etp) only; the rank's unit kinds regrouped for dp, cp
        sized = self._memo(("unit_sizes", tp, sp, ep, etp), lambda: unit_shards(
            self.spec, Plan(tp=tp, dp=dp, ep=ep, cp=cp, sequence_parallel=sp, etp=etp)))
        groups = unit_groups(tp, dp, cp, ep, etp)
        shards = {unit: regrouped(sized[unit], groups) for unit, _ in kinds if unit in sized}
        shapes = self.shapes(tp, dp, pp, ep, cp, order, etp)
        calls, tied = RankCalls(), RankCalls()
        if self.finetune is not None:
            blocks = sum(count for unit, count in kinds if unit.startswith("layers/"))
            rest = sum(shards[unit].numel * count for unit, count in kinds
                       if unit in shards and not unit.startswith("layers/"))
            self.finetune.dp_calls(calls, blocks, tp, dp * cp, zero, rest * self.dtype_bytes)
            kinds = ()
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

    def resolved_tp_overlap(self, tp_overlap: str | None, sp: bool, tp: int) -> str:
        """A point's TP overlap mode: its own, else the engine's; 'none' without SP or at tp 1."""
        mode = self.tp_overlap_default if tp_overlap is None else tp_overlap
        return mode if sp and tp > 1 else "none"

    def memory(self, point: PlanPoint) -> tuple[StageMemory, StageMemory]:
        """Memory of the first (or of the heaviest middle rank when it holds more: `mid_memory`)
        and the last pipeline rank; the same for plans that differ only in TP overlap, DP overlap
        or (without ZeRO++) rank order (cached)."""
        first, last, mid = self.memories(point)
        return (mid[1] if mid is not None and mid[1].total > first.total else first), last

    def memories(self, point: PlanPoint) -> tuple[StageMemory, StageMemory, tuple[int, StageMemory] | None]:
        """(first, last, (rank, memory) of the heaviest middle rank or None) of a point (cached)."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, _, reshard, shard = point[:14]
        opt, act, order, zeropp = point.offload_optimizer, point.offload_activations, point.rank_order, point.zeropp
        etp, split = point.etp, point.split
        key = (tp, pp, dp, vpp, mb, schedule, sp, recompute, zero, ep, cp, reshard, shard, opt, act, zeropp,
               order if zeropp else None, etp, split)
        hit = self._mems.get(key)
        if hit is None:
            stage = self.stage_entry(tp, sp, mb, recompute, pp, ep, cp, schedule, vpp, etp, split)
            m = self.training.global_batch // (mb * dp)
            first, last = self.stage_memories(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard, etp,
                                              split, opt, act, zeropp, order)
            mid = self.mid_memory(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard, etp, split,
                                  opt, act, zeropp, order)
            hit = self._mems[key] = (first, last, mid)
        return hit

    def inflight(self, schedule: str, pp: int, m: int, vpp: int) -> tuple[float, float]:
        """Micro-batches whose activations the first and the last pipeline rank hold at peak."""
        hit = self._inflight.get((schedule, pp, m, vpp))
        if hit is None:
            kind = Schedule(schedule)
            hit = self._inflight[(schedule, pp, m, vpp)] = (
                float(inflight_microbatches(kind, pp, 0, m, vpp)), float(inflight_microbatches(kind, pp, pp - 1, m, vpp)))
        return hit

    def _rank_memory(self, states: tuple, b: RankBlocks, held: float, index: int, groups: int, stage: StageEntry,
                     tp: int, pp: int, dp: int, zero: int, ep: int, cp: int, schedule: str, vpp: int,
                     etp: int | None, split, offload_optimizer: str, offload_activations: bool, zeropp: bool,
                     order: str, m: int = 0) -> StageMemory:
        """`stage_memory` of pipeline rank `index` holding `b`, its states and `held` in-flight
        micro-batches, less what offload moves to the host, plus ZeRO++'s secondary shard."""
        if offload_optimizer != "none":
            states = self.mech.offloaded_states(states, dp, zero)
        if zeropp:
            params = float(sum(self.held.rank_params(tp, pp, ep, schedule, vpp, etp, split)[0][0]))
            states = (states[0] + self.mech.zeropp_bytes(tp, dp, pp, cp, order, params), *states[1:])
        layers, moe_layers = b.dense + b.moe, b.moe
        if offload_activations and layers > 2:  # comm/offload.py: RESIDENT_LAYERS stay, for one micro-batch
            layers, moe_layers, held = 2, min(moe_layers, 2), 1.0
        buckets = self.bucket_bytes if zero >= 1 else 0.0
        pipe = None
        if pp > 1 and m and self.software.pp_microbatch_buffers:  # torch.distributed.pipelining
            layout = schedule_layout(schedule, pp, vpp)
            out = stage_output_bytes(self.spec, self.training.global_batch // (m * dp), self.training.seq_len,
                                     self.dtype_bytes, tp, cp, self.software.loss_parallel)
            pipe = pipeline_stage_bytes(layout.rank_stages[index], layout.num_stages, m, held,
                                        stage.dense.boundary_bytes, out, self.software.pp_keeps_outputs)
        return stage_memory(states, layers, held, stage.dense, b.embedding > 0, b.head > 0, groups, self.cost,
                            stage.moe, moe_layers, pp > 1, buckets, index, pipe)

    def mid_memory(self, stage: StageEntry, tp: int, pp: int, dp: int, vpp: int, m: int, schedule: str,
                   zero: int, ep: int, cp: int, reshard: bool | str = "default", shard: int | None = None,
                   etp: int | None = None, split=None, offload_optimizer: str = "none",
                   offload_activations: bool = False, zeropp: bool = False,
                   order: str = DEFAULT_ORDER) -> tuple[int, StageMemory] | None:
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
        return r, self._rank_memory(states[0], stage.blocks[r], inflight, r, states[1], stage, tp, pp, dp, zero, ep, cp,
                                    schedule, vpp, etp, split, offload_optimizer, offload_activations, zeropp, order, m)

    def stage_memories(self, stage: StageEntry, tp: int, pp: int, dp: int, vpp: int, m: int, schedule: str,
                       zero: int, ep: int, cp: int, reshard: bool | str = "default", shard: int | None = None,
                       etp: int | None = None, split=None, offload_optimizer: str = "none",
                       offload_activations: bool = False, zeropp: bool = False,
                       order: str = DEFAULT_ORDER) -> tuple[StageMemory, StageMemory]:
        """`memory` from the plan's cached `StageEntry` and its m micro-batches per step; offload
        leaves the optimizer states (all but one gradient bucket) or all but two blocks'
        activations on the host, ZeRO++ adds hpZ's secondary weight shard (`plan/mechanisms.py`)."""
        key = (tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard) if etp is None and split is None else (
            tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, shard, etp, split)
        hit = self._states.get(key)
        if hit is None:
            hit = self._states[key] = (*self.held.states(*key), self.held.groups(tp, pp, dp, ep, cp))
        first_states, last_states, groups = hit
        blocks = stage.blocks
        inflight = self.inflight(schedule, pp, m, vpp)
        rest = (tp, pp, dp, zero, ep, cp, schedule, vpp, etp, split, offload_optimizer, offload_activations, zeropp,
                order)
        first = self._rank_memory(first_states, blocks[0], inflight[0], 0, groups, stage, *rest, m)
        if pp == 1:
            return first, first
        return first, self._rank_memory(last_states, blocks[-1], inflight[1], pp - 1, groups, stage, *rest, m)

    # -- the step ---------------------------------------------------------------------------------

    def block_floor_s(self, tp: int, sp: bool, micro_batch: int, recompute: str, ep: int = 1, cp: int = 1,
                      tp_overlaps: list[str] | None = None) -> float:
        """The least seconds one block of a micro-batch takes under any of the model's block
        kinds: compute, recompute and exposed EP / CP seconds, and its TP seconds when no mode in
        `tp_overlaps` overlaps them (None: some may). Cached."""
        exposed_tp = tp_overlaps is not None and all(self.resolved_tp_overlap(t, sp, tp) == "none"
                                                     for t in tp_overlaps)
        if recompute == "full" and self.software.recompute_method == "block":
            recompute = "none"  # some layers are not recomputed: the plain block is the floor
        key = (tp, sp, micro_batch, recompute, ep, cp, exposed_tp)
        hit = self._block_floors.get(key)
        if hit is None:
            dense = self.block_terms(tp, sp, micro_batch, recompute, cp)
            hit = dense.compute_s + dense.recompute_s + dense.ep_s + dense.cp_s + (dense.tp_s if exposed_tp else 0.0)
            if self.spec.moe is not None:
                moe = self.block_terms(tp, sp, micro_batch, recompute, cp, ep)
                hit = min(hit, moe.compute_s + moe.recompute_s + moe.ep_s + moe.cp_s + (moe.tp_s if exposed_tp else 0.0))
            self._block_floors[key] = hit
        return hit

    def block_flop_floor_s(self, tp: int, micro_batch: int, recompute: str, ep: int = 1, cp: int = 1
                           ) -> float | None:
        """A lower bound of `block_floor_s` under either sequence-parallel choice and any TP
        overlap, from the FLOPs of the block kinds' kernels alone (`plan/flop_floor.py`): the
        least kind's forward and backward, plus its forward again under full recompute (what
        full recomputes, `KernelTimes.recompute_s`); communication and the other recompute modes
        count as 0. SP changes only element-wise kernels, which the floor leaves out. None under
        a fine-tune, whose frozen weights skip weight gradients (no such floor). Cached."""
        full = recompute == "full"
        key = (tp, micro_batch, full, ep, cp)
        hit = self._flop_floors.get(key, False)
        if hit is False:
            if self.finetune is not None:
                hit = None
            else:  # the kinds' (forward, backward) floors, shared by every recompute
                kinds = self._memo(("flop_floors", tp, micro_batch, ep, cp), lambda: self._flop_floors_of(
                    tp, micro_batch, ep, cp))
                hit = min((2 * fwd if full else fwd) + bwd for fwd, bwd in kinds)
            self._flop_floors[key] = hit
        return hit

    def _flop_floors_of(self, tp: int, b: int, ep: int, cp: int) -> list[tuple[float, float]]:
        """(forward, backward) FLOP floors of each block kind `_mixed_terms` prices: each class's
        kinds, else its default block (None)."""
        spec, training, sw = self.spec, self.training, self.software
        recipe = sw.fp8_recipe
        factor = gemm_rate_factor(recipe, self.cost.fp8_scaled_gemm_factor) if recipe else 0.0
        tokens = b * training.seq_len // cp
        out = []
        for moe in ([False, True] if spec.moe is not None else [False]):
            capacity = expert_capacity(tokens, spec.moe, self.capacity_factor) if moe else None
            for block in [k for k, _ in self.kinds_of(moe)] or [None]:
                k = layer_kernels(spec, tp, b, training.seq_len, self.dtype_bytes, False, moe_layer=moe,
                                  ep=ep if moe else 1, capacity=capacity, cp=cp, attention=training.attention,
                                  elementwise=sw.elementwise, block=block, memory_len=training.seq_len,
                                  norm_elementwise=sw.norm_elementwise, cp_fp32_merge=sw.cp_fp32_merge)
                out.append(flop_floor_s(k, self.roofline, factor))
        return out

    def compute_floor_s(self, cls: tuple, tp_overlaps: list[str] | None = None, block_s: float | None = None) -> float:
        """A lower bound of `pipeline_floor_s` from block terms alone (pipeline = m t_max +
        bubble t_mean, `parallel/pp.py`): every one of the m micro-batches waits for a stage that
        runs at least ceil(layers / pp) blocks, and the mean stage runs layers / pp of them, each
        taking at least `block_floor_s` (`block_s` when the caller has it; messages and edges are
        >= 0). Shaved by 1e-12 so that rounding never lifts it above the exact sum."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, ep, cp = cls
        if block_s is None:
            block_s = self.block_floor_s(tp, sp, mb, recompute, ep, cp, tp_overlaps)
        m = self._global_batch // (mb * dp)
        pipe = self._pipes.get((schedule, pp, m, vpp)) or self.pipe(schedule, pp, m, vpp)
        layers = self._layers
        return (m * -(-layers // pp) + max(0.0, pipe[0]) * layers / pp) * block_s * (1 - 1e-12)

    def pipeline_floor_s(self, cls: tuple, tp_overlaps: list[str], orders: list[str], splits: tuple = (None,)
                         ) -> float:
        """A lower bound of `step_lower_bound_s` over every TP overlap mode, rank order,
        activation offload and stage split in `splits` of a classic point (tp, pp, dp, vpp,
        micro_batch, schedule, sp, recompute, ep, cp), from its stages without overlap: an overlap
        mode changes only a stage's exposed TP seconds (>= 0), so each stage takes at least its
        time less its TP seconds; messages at the cheapest order's, no offload (pipeline_time_s
        grows with both stage times)."""
        return min(self._pipeline_floor_s(cls, tp_overlaps, orders, split) for split in splits)

    def _pipeline_floor_s(self, cls: tuple, tp_overlaps: list[str], orders: list[str], split) -> float:
        tp, pp, dp, vpp, mb, schedule, sp, recompute, ep, cp = cls
        stage = self.stage_entry(tp, sp, mb, recompute, pp, ep, cp, schedule, vpp, None, split)
        slowest, mean = stage.slowest_s, stage.mean_s
        if any(self.resolved_tp_overlap(t, sp, tp) != "none" for t in tp_overlaps):
            most = self._tp_most.get(id(stage))
            if most is None:  # the most TP seconds any one stage spends
                d, e = stage.dense.tp, stage.moe.tp if stage.moe is not None else None
                most = self._tp_most[id(stage)] = max(
                    rb.dense_run * (d.fwd_s + d.bwd_s + d.recompute_s) + rb.embedding * d.embedding_s
                    + rb.head * d.head_s + (rb.moe_run * (e.fwd_s + e.bwd_s + e.recompute_s) if e is not None else 0.0)
                    for rb in set(stage.blocks))
            slowest, mean = slowest - most, mean - most
        m = self.training.global_batch // (mb * dp)
        bubble, hops = self.pipe(schedule, pp, m, vpp)
        p2p = min(self.p2p_s(tp, sp, mb, dp, pp, cp, True, o) for o in orders) if pp > 1 else 0.0
        p2p *= hops * self.cost.pp_p2p_exposed_fraction
        return pp_mod.pipeline_time_s(m, bubble, slowest + p2p, mean + p2p)

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
        step = StepTerms(
            step_time_s=pipeline + dp_after + replica_sync + optimizer + offload - m * act_s,
            compute_s=m * st.compute_s, recompute_s=m * st.recompute_s, tp_comm_s=m * st.tp_s,
            pp_comm_s=m * p2p, bubble_s=pipeline - unmerged - m * t_max, dp_comm_s=dp_after + m * dp_mb,
            embedding_sync_s=replica_sync, optimizer_s=optimizer + m * accumulate, dp_comm_total_s=dp_total,
            tp_hidden_s=m * st.tp_hidden_s, ep_comm_s=m * st.ep_s + unmerged, cp_comm_s=m * st.cp_s,
            cp_hidden_s=m * st.cp_hidden_s, offload_s=offload,
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

    def _dp_terms(self, st, dpe: DpEntry, m: int, zero: int, reshard, dpo: bool | None, pp: int,
                  group: int) -> tuple[float, float, float]:
        """(DP seconds after the pipeline, per micro-batch, in all) of one stage's DP entry."""
        if group <= 1:
            return dpe.partial_grads_s * (m if zero >= 2 else 1), 0.0, 0.0
        cost = self.cost
        if zero == 3:
            mode = self._modes.get((reshard, pp))
            if mode is None:
                mode = self._modes[(reshard, pp)] = zero3_mode(reshard, self.software, pp)
            every_mb = reduces_every_microbatch(mode)
        else:
            mode, every_mb = None, True
        dp_after, dp_mb, dp_total = dp_zero.dp_exposure(
            zero if every_mb else 1, dpe.times, m, st.fwd_s, st.bwd_s, cost.dp_overlap if dpo is None else dpo,
            cost.dp_overlap_fraction, cost.overlap_interference,
            backward_gathers=mode is None or mode.reshard_after_forward,
        )
        if zero >= 2:  # the engine's gradient copies before each ReduceScatter (memory-bound)
            if every_mb:
                dp_mb += dpe.grad_copy_s
            else:
                dp_after += dpe.grad_copy_s
        return dp_after + dpe.partial_grads_s * (m if zero >= 2 else 1), dp_mb, dp_total

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
        dp_after, dp_mb, _ = self._dp_terms(st, dpe, m, zero, reshard, dpo, pp, dp * cp)
        q = p2p + dp_mb + dpe.accumulate_s
        optimizer = dpe.optimizer_s
        base = pp_mod.pipeline_time_s(m, bubble, stage.slowest_s + q, stage.mean_s + q) + dp_after + dpe.replica_s + optimizer
        base += self.ep_unmerged_s(point, stage, m)
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
        dp_after, dp_mb, dp_total = self._dp_terms(st, dpe, m, zero, reshard, dpo, pp, dp * cp)
        # the engine's fp32 accumulation of 16-bit gradients follows every backward (`DpEntry.accumulate_s`)
        per_mb = p2p + act_s + dp_mb + dpe.accumulate_s
        t_max = stage.slowest_s + per_mb
        pipeline = pp_mod.pipeline_time_s(m, bubble, t_max, stage.mean_s + per_mb) + self.ep_unmerged_s(point, stage, m)
        optimizer, offload = dpe.optimizer_s, m * act_s
        if opt != "none":  # the step runs on the host: its exposed copies and CPU time replace the GPU's
            optimizer = 0.0
            offload += self.mech.optimizer_offload_s(stage, point, m, opt)
        return (stage, bubble, m, p2p, act_s, t_max, pipeline, dp_after, dp_mb, dp_total, dpe.replica_s, optimizer,
                offload, dpe.accumulate_s)
