"""Price plans fast: cache everything a plan shares with its neighbours, keep the hot loop floats.

Caches: kernel times per (tp, sequence_parallel, micro_batch, cp); block / embedding / head
terms per that and recompute, MoE blocks also per ep; stage sums (`StageEntry`) per that and pp;
pipeline send/recv per (tp, sp, micro_batch, dp, pp); priced DP items and the optimizer step
(`DpEntry`) per (tp, pp, dp, zero, sp, critical stage); collective times per (op, bytes, group
shape). The hot loop (`evaluate`) reads its entries from plain dicts. Every communication term
is a priced item of `modelplan.plan.commlist.communication_list` (what verify checks against the
executor's ledger), see evallists.py and listprice.py. The formulas themselves are in
steptime.py (time) and memory.py (bytes); model states and memory per plan are in
evalstates.py.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.count.flops import count_flops
from modelplan.plan.commcost import CommPricer
from modelplan.plan.compute import Roofline
from modelplan.plan.evallists import ListTerms
from modelplan.plan.evalstates import StateTerms
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.dims import ParallelDims, strided_shape
from modelplan.plan.engine import engine_settings
from modelplan.plan.fsdp import hsdp_groups, reduces_every_microbatch, zero3_mode
from modelplan.plan.experts import expert_capacity, moe_layer_counts, planned_capacity_factor
from modelplan.plan.layerterms import LayerTerms, build_layer_terms, kernel_times
from modelplan.plan.memory import StageMemory, state_bytes_per_param
from modelplan.plan.stageterms import StageTerms, compose_stages
from modelplan.plan.steptime import DpTimes, dp_exposure, optimizer_bytes_per_param, pipeline_time_s
from modelplan.plan.validate import padded_vocab, planning_spec
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.load import load_engine
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


class Evaluation(NamedTuple):
    """Every term of one plan's step (seconds per step, slowest stage) and its memory."""

    step_time_s: float
    compute_s: float
    recompute_s: float
    tp_comm_s: float
    pp_comm_s: float
    bubble_s: float
    dp_comm_s: float
    dp_comm_total_s: float
    embedding_sync_s: float
    optimizer_s: float
    tp_hidden_s: float
    model_flops: float
    hardware_flops: float
    memory_first: StageMemory
    memory_last: StageMemory
    num_microbatches: int
    ep_comm_s: float = 0.0
    cp_comm_s: float = 0.0
    cp_hidden_s: float = 0.0

    @property
    def peak_memory_bytes(self) -> float:
        """Largest stage's total."""
        return max(self.memory_first.total, self.memory_last.total)


class StageEntry(NamedTuple):
    """What every plan with one (tp, sp, micro_batch, recompute, pp, ep, cp) shares (cached)."""

    terms: StageTerms
    slowest_s: float
    """The slowest stage's micro-batch (before pipeline and ZeRO-3 messages)."""
    mean_s: float
    """The mean stage's micro-batch."""
    dense: LayerTerms
    moe: LayerTerms | None
    counts: list[tuple[int, int]]
    """(dense, MoE) blocks of each pipeline rank."""


class DpEntry(NamedTuple):
    """What every plan with one (tp, pp, dp, zero, sp, critical rank, ep, cp) shares (cached)."""

    times: DpTimes
    partial_grads_s: float
    tied_embedding_s: float
    optimizer_s: float
    """Optimizer step of the critical stage's (ZeRO-sharded) parameters."""
    grad_copy_s: float = 0.0
    """The engine's memory-bound gradient copies before one ZeRO-2/3 ReduceScatter of the stage."""


class Evaluator(StateTerms, ListTerms):
    """Prices plans for one model, training batch, cluster and cost model."""

    def __init__(self, spec: TransformerSpec, training: TrainingSpec, cluster: Cluster, cost: CostModel | None = None):
        self.spec = planning_spec(spec)
        self.training, self.cluster = training, cluster
        profile = load_engine(training.framework)
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
        self.dp_training = training if self.dp_grad_bytes == training.grad_bytes else training.model_copy(
            update={"grad_dtype": "same"})
        self.state_bytes = state_bytes_per_param(training.optimizer_states, training.uses_master_weights)
        self.opt_bytes = optimizer_bytes_per_param(
            self.grad_bytes, self.state_bytes, self.dtype_bytes, training.uses_master_weights
        )
        self.memory_bytes = cluster.accelerator.memory_gb * 1e9
        moe = self.spec.moe
        self.capacity_factor = planned_capacity_factor(moe) if moe is not None else None
        self._cache: dict[tuple, object] = {}
        # the hot path's caches, one dict per kind (no key prefix, no closure per lookup)
        self._stages: dict[tuple, StageEntry] = {}
        self._dps: dict[tuple, DpEntry] = {}
        self._p2ps: dict[tuple, float] = {}
        self._flops: dict[str, tuple[float, float]] = {}
        self._states: dict[tuple, tuple] = {}

    def _memo(self, key: tuple, make):
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = make()
        return hit

    def vocab_padded(self, tp: int) -> int:
        """Vocabulary padded for this tp (Megatron)."""
        return padded_vocab(self.spec.vocab, tp, self.cost.vocab_divisible_by)

    def terms(self, tp: int, sequence_parallel: bool, micro_batch: int, recompute: str, cp: int = 1) -> LayerTerms:
        """Per-micro-batch terms of a dense block, the embedding and the head."""
        return self._memo(("terms", tp, sequence_parallel, micro_batch, recompute, cp),
                          lambda: self._layer_terms(tp, sequence_parallel, micro_batch, recompute, cp))

    def moe_terms(self, tp: int, sequence_parallel: bool, micro_batch: int, recompute: str, ep: int,
                  cp: int = 1) -> LayerTerms:
        """Per-micro-batch terms of an MoE block over ep ranks (AllToAll included)."""
        return self._memo(("moe_terms", tp, sequence_parallel, micro_batch, recompute, ep, cp),
                          lambda: self._layer_terms(tp, sequence_parallel, micro_batch, recompute, cp, ep))

    def _layer_terms(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int,
                     ep: int | None = None) -> LayerTerms:
        attention = self.training.attention
        extra: dict = {"cp": cp, "cp_kv_send_s": self.cp_kv_send_s(tp, sp, micro_batch, cp) if cp > 1 else 0.0,
                       "attention": attention, "software": self.software}
        kernels: dict = {"cp": cp, "attention": attention, "software": self.software,
                         "scaled_gemm_factor": self.cost.fp8_scaled_gemm_factor}
        if ep is not None:
            tokens = micro_batch * self.training.seq_len // cp
            kernels.update(moe_layer=True, ep=ep, capacity=expert_capacity(tokens, self.spec.moe, self.capacity_factor))
            extra.update(kernels, ep_priced=(self.ep_list_prices(tp, sp, micro_batch, "none", ep, cp),
                                             self.ep_list_prices(tp, sp, micro_batch, recompute, ep, cp)))
        extra["times"] = self._memo(("kernel_times", tp, sp, micro_batch, cp, ep), lambda: kernel_times(
            self.spec, tp, sp, micro_batch, self.training.seq_len, self.dtype_bytes, self.vocab_padded(tp),
            self.roofline, **kernels))
        extra.pop("scaled_gemm_factor", None)
        return build_layer_terms(
            self.spec, tp, sp, micro_batch, recompute, self.training.seq_len,
            self.dtype_bytes, self.vocab_padded(tp), self.roofline,
            self.tp_list_prices(tp, sp, micro_batch, recompute, cp),
            self.tp_list_prices(tp, sp, micro_batch, "none", cp), self.cost, **extra,
        )

    def stage(self, tp: int, sp: bool, micro_batch: int, recompute: str, pp: int, ep: int = 1,
              cp: int = 1) -> StageTerms:
        """Per-micro-batch stage times: each rank's dense and MoE blocks, the first stage adds the
        embedding, the last the head + loss."""
        return self.stage_entry(tp, sp, micro_batch, recompute, pp, ep, cp).terms

    def stage_entry(self, tp: int, sp: bool, micro_batch: int, recompute: str, pp: int, ep: int = 1,
                    cp: int = 1) -> StageEntry:
        """`stage` with the slowest and mean stage and the block terms the memory model needs."""
        key = (tp, sp, micro_batch, recompute, pp, ep, cp)
        hit = self._stages.get(key)
        if hit is None:
            moe = self.moe_terms(tp, sp, micro_batch, recompute, ep, cp) if self.spec.moe is not None else None
            dense = self.terms(tp, sp, micro_batch, recompute, cp)
            counts = self.layer_counts(pp)
            st = compose_stages(counts, dense, moe)
            mean = (st.first_s + st.last_s + (pp - 2) * st.mid_s) / pp if pp > 1 else st.first_s
            hit = self._stages[key] = StageEntry(st, max(st.first_s, st.last_s, st.mid_max_s), mean, dense, moe,
                                                 counts)
        return hit

    def layer_counts(self, pp: int) -> list[tuple[int, int]]:
        """(dense, MoE) blocks of each pipeline rank (`plan/experts.py`)."""
        return self._memo(("layer_counts", pp), lambda: moe_layer_counts(self.spec, pp))

    def flops_per_sequence(self, recompute: str) -> tuple[float, float]:
        """(model, hardware) FLOPs of one sequence (`modelplan.count.flops` convention)."""
        hit = self._flops.get(recompute)
        if hit is None:
            one = self.training.model_copy(update={"global_batch": 1, "recompute": recompute})
            counted = count_flops(self.spec, one)
            hit = self._flops[recompute] = float(counted.model), float(counted.hardware)
        return hit

    def dp_entry(self, tp: int, pp: int, dp: int, zero: int, sp: bool, pp_rank: int, ep: int = 1,
                 cp: int = 1, shard: int | None = None) -> DpEntry:
        """The priced DP items of stage `pp_rank` (`dp_rank_prices`) and its optimizer step.
        HSDP (`shard` < dp, ZeRO >= 2): gathers and ReduceScatters priced in the shard group of
        `shard` data-parallel ranks, plus the AllReduce of each gradient shard over the replicas
        (`plan/fsdp.py`), hidden like the ReduceScatter it follows."""
        key = (tp, pp, dp, zero, sp, pp_rank, ep, cp, shard)
        hit = self._dps.get(key)
        if hit is None:
            group, replicas = hsdp_groups(dp * cp, shard if zero >= 2 and ep == 1 and cp == 1 else None)
            dense, experts = self.rank_params(tp, pp, ep)[0][pp_rank]
            if replicas > 1:
                dpp = self.dp_rank_prices(tp, pp, group, zero, sp, pp_rank, ep, cp)
                stride = ParallelDims(dp=dp, tp=tp, pp=pp, cp=cp).stride(Axis.DP) * group
                ar = self.pricer.time_s(Collective.ALL_REDUCE, dense * self.dp_grad_bytes / group,
                                        strided_shape(replicas, stride, self.cluster.gpus_per_node))
                times = dpp.times._replace(reduce_scatter=dpp.times.reduce_scatter + ar)
                dpp = dpp._replace(times=times)
            else:
                dpp = self.dp_rank_prices(tp, pp, dp, zero, sp, pp_rank, ep, cp)
            shards = (group, dp * cp // ep) if zero >= 1 else (1, 1)  # ZeRO: the gradient-reduction groups
            sharded = dense / shards[0] + experts / shards[1]
            optimizer = self.roofline.memory_time_s(sharded * self.opt_bytes)
            grad_copy = self.roofline.memory_time_s((dense + experts) * self.software.grad_copy_bytes)
            hit = self._dps[key] = DpEntry(dpp.times, dpp.partial_grads_s, dpp.tied_embedding_s, optimizer, grad_copy)
        return hit

    def step_lower_bound_s(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int, ep: int = 1, cp: int = 1, scatter_gather: bool = True,
    ) -> float:
        """The step time without its data-parallel terms (all >= 0): a lower bound the search
        uses to skip plans that cannot enter the top-k, before pricing their DP traffic."""
        stage = self.stage_entry(tp, sp, micro_batch, recompute, pp, ep, cp)
        m = self.training.global_batch // (micro_batch * dp)
        p2p = self.p2p_s(tp, sp, micro_batch, dp, pp, cp, scatter_gather) if pp > 1 else 0.0
        p2p *= 2 * vpp * self.cost.pp_p2p_exposed_fraction
        return pipeline_time_s(m, pp, vpp, stage.slowest_s + p2p, stage.mean_s + p2p)

    def evaluate(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int, ep: int = 1, cp: int = 1, scatter_gather: bool = True,
        reshard: bool | str = "default", shard: int | None = None,
    ) -> Evaluation:
        """All terms of one valid plan (validity is the caller's job: see validate.py).

        Pipeline messages: one per micro-batch, direction and model chunk on the critical path
        (`p2p_s`, times `pp_p2p_exposed_fraction`). ZeRO-3 gathers per micro-batch follow the
        plan's reshard_after_forward (`plan/fsdp.py`): not resharded under pipeline parallelism,
        the stage gathers once and reduces once per step (priced as ZeRO-1's traffic); not
        resharded without it, no backward gather. `shard`: the HSDP shard group (`dp_entry`)."""
        # the hot loop: cache hits are plain dict lookups (`stage_entry`, `dp_entry`, `p2p_s` on a miss)
        stage = self._stages.get((tp, sp, micro_batch, recompute, pp, ep, cp))
        if stage is None:
            stage = self.stage_entry(tp, sp, micro_batch, recompute, pp, ep, cp)
        st = stage.terms
        batch = self.training.global_batch
        m = batch // (micro_batch * dp)
        if pp > 1:
            p2p = self._p2ps.get((tp, sp, micro_batch, dp, pp, cp, scatter_gather))
            if p2p is None:
                p2p = self.p2p_s(tp, sp, micro_batch, dp, pp, cp, scatter_gather)
        else:
            p2p = 0.0
        cost = self.cost
        p2p *= 2 * vpp * cost.pp_p2p_exposed_fraction
        crit = st.critical_rank
        dpe = self._dps.get((tp, pp, dp, zero, sp, crit, ep, cp, shard))
        if dpe is None:
            dpe = self.dp_entry(tp, pp, dp, zero, sp, crit, ep, cp, shard)
        mode = zero3_mode(reshard, self.software, pp) if zero == 3 else None
        priced_zero = 1 if mode is not None and not reduces_every_microbatch(mode) else zero
        if dp * cp > 1:
            dp_after, dp_mb, dp_total = dp_exposure(
                priced_zero, dpe.times, m, st.fwd_s, st.bwd_s, cost.dp_overlap, cost.dp_overlap_fraction,
                cost.overlap_interference, backward_gathers=mode is None or mode.reshard_after_forward,
            )
        else:
            dp_after = dp_mb = dp_total = 0.0
        dp_after += dpe.partial_grads_s * (m if zero >= 2 else 1)
        if zero >= 2 and dp * cp > 1:  # the engine's gradient copies before each ReduceScatter
            if mode is None or reduces_every_microbatch(mode):
                dp_mb += dpe.grad_copy_s
            else:
                dp_after += dpe.grad_copy_s
        t_max = stage.slowest_s + p2p + dp_mb
        pipeline = pipeline_time_s(m, pp, vpp, t_max, stage.mean_s + p2p + dp_mb)
        emb_sync = dpe.tied_embedding_s
        optimizer = dpe.optimizer_s
        model_seq, hardware_seq = self._flops.get(recompute) or self.flops_per_sequence(recompute)
        mem_first, mem_last = self.stage_memories(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard)
        return Evaluation(
            step_time_s=pipeline + dp_after + emb_sync + optimizer,
            compute_s=m * st.compute_s, recompute_s=m * st.recompute_s, tp_comm_s=m * st.tp_s,
            pp_comm_s=m * p2p, bubble_s=pipeline - m * t_max, dp_comm_s=dp_after + m * dp_mb,
            dp_comm_total_s=dp_total, embedding_sync_s=emb_sync, optimizer_s=optimizer,
            tp_hidden_s=m * st.tp_hidden_s,
            model_flops=batch * model_seq, hardware_flops=batch * hardware_seq,
            memory_first=mem_first, memory_last=mem_last, num_microbatches=m, ep_comm_s=m * st.ep_s,
            cp_comm_s=m * st.cp_s, cp_hidden_s=m * st.cp_hidden_s,
        )
