"""Price plans fast: cache everything a plan shares with its neighbours, keep the hot loop floats.

Caches: block / embedding / head terms per (tp, sequence_parallel, micro_batch, recompute);
stage sums per that and pp; pipeline send/recv per (tp, sp, micro_batch, dp, pp); priced DP
items per (tp, pp, dp, zero, sp); collective times per (op, bytes, group shape). Every
communication term is a priced item of `modelplan.plan.commlist.communication_list` (what
verify checks against the executor's ledger), see listprice.py. The formulas themselves are in
steptime.py (time) and memory.py (bytes).
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.ops import Axis
from modelplan.count.flops import count_flops
from modelplan.errors import SpecError
from modelplan.plan.commcost import CommPricer, GroupShape, plan_group_shapes
from modelplan.plan.compute import Roofline
from modelplan.plan.commlist import communication_list
from modelplan.plan.layerterms import LayerTerms, build_layer_terms
from modelplan.plan.listprice import DpPrices, TpPrices, dp_prices, tp_prices
from modelplan.plan.memory import (
    StageMemory,
    inflight_microbatches,
    model_state_bytes,
    stage_memory,
    state_bytes_per_param,
)
from modelplan.plan.shard import rank_elements, unit_shards
from modelplan.plan.steptime import dp_exposure, optimizer_bytes_per_param, pipeline_time_s
from modelplan.plan.validate import padded_vocab
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
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

    @property
    def peak_memory_bytes(self) -> float:
        """Largest stage's total."""
        return max(self.memory_first.total, self.memory_last.total)


class StageTerms(NamedTuple):
    """One micro-batch on the stages of a pipeline (seconds; `critical` is the slowest stage)."""

    first_s: float
    last_s: float
    mid_s: float
    compute_s: float
    tp_s: float
    recompute_s: float
    fwd_s: float
    bwd_s: float
    critical_is_first: bool
    tp_hidden_s: float
    """TP traffic overlapped with compute on one stage."""


def planning_spec(model: object) -> TransformerSpec:
    """The model as a dense TransformerSpec, or a one-line error for what cannot be planned yet."""
    if not isinstance(model, TransformerSpec):
        raise SpecError("planning network specs is not supported yet (transformers only)")
    if model.moe is not None:
        raise SpecError(f"planning MoE models is not supported yet (moe.num_experts = {model.moe.num_experts})")
    return model


class Evaluator:
    """Prices plans for one model, training batch, cluster and cost model."""

    def __init__(self, spec: TransformerSpec, training: TrainingSpec, cluster: Cluster, cost: CostModel | None = None):
        self.spec = planning_spec(spec)
        self.training, self.cluster = training, cluster
        self.cost = cost or CostModel()
        self.roofline = Roofline.of(cluster.accelerator, training.precision, self.cost)
        self.pricer = CommPricer(cluster)
        self.dtype_bytes, self.grad_bytes = training.dtype_bytes, training.grad_bytes
        self.state_bytes = state_bytes_per_param(training.optimizer_states, training.uses_master_weights)
        self.opt_bytes = optimizer_bytes_per_param(
            self.grad_bytes, self.state_bytes, self.dtype_bytes, training.uses_master_weights
        )
        self.memory_bytes = cluster.accelerator.memory_gb * 1e9
        self._cache: dict[tuple, object] = {}

    def vocab_padded(self, tp: int) -> int:
        """Vocabulary padded for this tp (Megatron)."""
        return padded_vocab(self.spec.vocab, tp, self.cost.vocab_divisible_by)

    def shapes(self, tp: int, dp: int, pp: int) -> dict[Axis, GroupShape]:
        """Process-group shapes of a tp x dp x pp grid on this cluster."""
        key = ("shapes", tp, dp, pp)
        if key not in self._cache:
            self._cache[key] = plan_group_shapes(tp, 1, dp, pp, self.cluster.gpus_per_node)
        return self._cache[key]  # type: ignore[return-value]

    def tp_list_prices(self, tp: int, sp: bool, micro_batch: int, recompute: str) -> TpPrices:
        """Price the communication list of a 2-block copy of the model on pp 2 (one sequence,
        scaled to the micro-batch)."""
        key = ("tp_list", tp, sp, micro_batch, recompute)
        hit = self._cache.get(key)
        if hit is None:
            list_key = ("tp_items", tp, sp, recompute)
            items = self._cache.get(list_key)
            if items is None:
                two_blocks = self.spec.model_copy(update={"layers": 2})
                one_seq = self.training.model_copy(update={"global_batch": 1})
                plan = Plan(tp=tp, pp=2, micro_batch=1, sequence_parallel=sp, recompute=recompute)
                items = self._cache[list_key] = communication_list(two_blocks, one_seq, plan)
            hit = self._cache[key] = tp_prices(items, self.pricer, self.shapes(tp, 1, 2), micro_batch)  # type: ignore[arg-type]
        return hit  # type: ignore[return-value]

    def terms(self, tp: int, sequence_parallel: bool, micro_batch: int, recompute: str) -> LayerTerms:
        """Per-micro-batch block / embedding / head terms."""
        key = ("terms", tp, sequence_parallel, micro_batch, recompute)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = build_layer_terms(
                self.spec, tp, sequence_parallel, micro_batch, recompute, self.training.seq_len,
                self.dtype_bytes, self.vocab_padded(tp), self.roofline,
                self.tp_list_prices(tp, sequence_parallel, micro_batch, recompute),
                self.tp_list_prices(tp, sequence_parallel, micro_batch, "none"), self.cost,
            )
        return hit  # type: ignore[return-value]

    def params(self, tp: int, pp: int) -> tuple[int, int, int, int]:
        """(per block, first stage, last stage, word embedding) parameters on one rank, from the
        shard counts verify checks (`modelplan.plan.shard`)."""
        key = ("params", tp, pp)
        hit = self._cache.get(key)
        if hit is None:
            plan = Plan(tp=tp, pp=pp)
            ranks = rank_elements(self.spec, plan, self.training)
            units = unit_shards(self.spec, plan)
            layer = max(units[f"layers/{i}"].numel for i in range(self.spec.layers))
            emb = units["embedding/word"].numel if "embedding/word" in units else 0
            hit = self._cache[key] = (layer, ranks[0].weights, ranks[-1].weights, emb)
        return hit  # type: ignore[return-value]

    def stage(self, tp: int, sp: bool, micro_batch: int, recompute: str, pp: int) -> StageTerms:
        """Per-micro-batch stage times: first stage adds the embedding, last the head + loss."""
        key = ("stage", tp, sp, micro_batch, recompute, pp)
        hit = self._cache.get(key)
        if hit is None:
            t = self.terms(tp, sp, micro_batch, recompute)
            lps = self.spec.layers // pp
            blk_compute = t.fwd_gemm_s + t.fwd_elementwise_s + t.bwd_gemm_s + t.bwd_elementwise_s
            blk_tp = t.tp_fwd_s + t.tp_bwd_s + t.tp_recompute_s
            emb_c, head_c = t.embedding_fwd_s + t.embedding_bwd_s, t.head_fwd_s + t.head_bwd_s
            one = pp == 1
            first_c = lps * blk_compute + emb_c + (head_c if one else 0.0)
            last_c = lps * blk_compute + head_c + (emb_c if one else 0.0)
            first_tp = lps * blk_tp + t.embedding_tp_s + (t.head_tp_s if one else 0.0)
            last_tp = lps * blk_tp + t.head_tp_s + (t.embedding_tp_s if one else 0.0)
            rec = lps * t.recompute_s
            first, last = first_c + first_tp + rec, last_c + last_tp + rec
            crit_first = first >= last
            fwd = lps * (t.fwd_gemm_s + t.fwd_elementwise_s + t.tp_fwd_s)
            bwd = lps * (t.bwd_gemm_s + t.bwd_elementwise_s + t.recompute_s + t.tp_bwd_s + t.tp_recompute_s)
            hit = self._cache[key] = StageTerms(
                first, last, lps * (blk_compute + blk_tp) + rec,
                first_c if crit_first else last_c, first_tp if crit_first else last_tp,
                rec, fwd, bwd, crit_first, lps * t.tp_hidden_s,
            )
        return hit  # type: ignore[return-value]

    def p2p_s(self, tp: int, sp: bool, micro_batch: int, dp: int, pp: int) -> float:
        """One stage-boundary send of the communication list (b*s*h, /tp with SP) on the link
        between neighbouring stages."""
        key = ("p2p", tp, sp, micro_batch, dp, pp)
        hit = self._cache.get(key)
        if hit is None:
            msg = self.tp_list_prices(tp, sp, micro_batch, "none").boundary_bytes
            hit = self._cache[key] = self.pricer.p2p_time_s(msg, self.shapes(tp, dp, pp)[Axis.PP].crosses_nodes)
        return hit  # type: ignore[return-value]

    def dp_list_prices(self, tp: int, pp: int, dp: int, zero: int, sp: bool, first_stage: bool) -> DpPrices:
        """Price the DP items of one stage in the communication list of one micro-batch per step.

        With one micro-batch per step the lists of ZeRO 1, 2 and 3 hold the same collectives per
        unit (one ReduceScatter, one AllGather per pass), and the DP items do not depend on
        sequence parallelism (only the TP AllReduce of partial gradients does, which is absent
        without it): one list per (tp, pp, dp, zero 0 or >= 1) serves all of them.
        """
        list_zero = min(zero, 1)
        key = ("dp_list", tp, pp, dp, list_zero)
        hit = self._cache.get(key)
        if hit is None:
            plan = Plan(tp=tp, pp=pp, dp=dp, micro_batch=self.training.global_batch // dp,
                        sequence_parallel=tp > 1, zero=list_zero, recompute="none")
            items = communication_list(self.spec, self.training, plan)
            shapes = self.shapes(tp, dp, pp)
            first = dp_prices(items, self.pricer, shapes, 0, list_zero)
            last = dp_prices(items, self.pricer, shapes, pp - 1, list_zero)
            hit = self._cache[key] = (first, last, first._replace(partial_grads_s=0.0),
                                      last._replace(partial_grads_s=0.0))
        return hit[(0 if first_stage else 1) + (0 if sp else 2)]  # type: ignore[index]

    def flops_per_sequence(self, recompute: str) -> tuple[float, float]:
        """(model, hardware) FLOPs of one sequence (`modelplan.count.flops` convention)."""
        key = ("flops", recompute)
        hit = self._cache.get(key)
        if hit is None:
            one = self.training.model_copy(update={"global_batch": 1, "recompute": recompute})
            counted = count_flops(self.spec, one)
            hit = self._cache[key] = (float(counted.model), float(counted.hardware))
        return hit  # type: ignore[return-value]

    def states(self, tp: int, pp: int, dp: int, zero: int) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Model-state bytes (weights, gradients, optimizer) of the first and the last stage."""
        key = ("states", tp, pp, dp, zero)
        hit = self._cache.get(key)
        if hit is None:
            layer_p, first_p, last_p, _ = self.params(tp, pp)
            args = (layer_p, dp, zero, self.dtype_bytes, self.grad_bytes, self.state_bytes)
            hit = self._cache[key] = (model_state_bytes(first_p, *args), model_state_bytes(last_p, *args))
        return hit  # type: ignore[return-value]

    def memory(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int,
    ) -> tuple[StageMemory, StageMemory]:
        """Memory of the first and the last stage (the largest two)."""
        t = self.terms(tp, sp, micro_batch, recompute)
        first_states, last_states = self.states(tp, pp, dp, zero)
        m = self.training.global_batch // (micro_batch * dp)
        lps = self.spec.layers // pp
        groups = (tp > 1) + (dp > 1) + (pp > 1) + (pp > 1 and self.spec.tied_embeddings)
        first = stage_memory(first_states, lps, inflight_microbatches(schedule, pp, 0, m, vpp), t,
                             True, pp == 1, groups, self.cost)
        if pp == 1:
            return first, first
        last = stage_memory(last_states, lps, inflight_microbatches(schedule, pp, pp - 1, m, vpp), t,
                            False, True, groups, self.cost)
        return first, last

    def step_lower_bound_s(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int,
    ) -> float:
        """The step time without its data-parallel terms (all >= 0): a lower bound the search
        uses to skip plans that cannot enter the top-k, before pricing their DP traffic."""
        st = self.stage(tp, sp, micro_batch, recompute, pp)
        m = self.training.global_batch // (micro_batch * dp)
        p2p = 2 * vpp * self.p2p_s(tp, sp, micro_batch, dp, pp) * self.cost.pp_p2p_exposed_fraction if pp > 1 else 0.0
        t_max = max(st.first_s, st.last_s) + p2p
        t_mean = ((st.first_s + st.last_s + (pp - 2) * st.mid_s) / pp if pp > 1 else st.first_s) + p2p
        return pipeline_time_s(m, pp, vpp, t_max, t_mean)

    def evaluate(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int,
    ) -> Evaluation:
        """All terms of one valid plan (validity is the caller's job: see validate.py)."""
        st = self.stage(tp, sp, micro_batch, recompute, pp)
        m = self.training.global_batch // (micro_batch * dp)
        p2p = 2 * vpp * self.p2p_s(tp, sp, micro_batch, dp, pp) * self.cost.pp_p2p_exposed_fraction if pp > 1 else 0.0
        cost = self.cost
        dpp = self.dp_list_prices(tp, pp, dp, zero, sp, st.critical_is_first)
        if dp > 1:
            dp_after, dp_mb, dp_total = dp_exposure(
                zero, dpp.times, m, st.fwd_s, st.bwd_s, cost.dp_overlap, cost.dp_overlap_fraction,
                cost.overlap_interference,
            )
        else:
            dp_after = dp_mb = dp_total = 0.0
        dp_after += dpp.partial_grads_s * (m if zero >= 2 else 1)
        t_max = max(st.first_s, st.last_s) + p2p + dp_mb
        t_mean = ((st.first_s + st.last_s + (pp - 2) * st.mid_s) / pp if pp > 1 else st.first_s) + p2p + dp_mb
        pipeline = pipeline_time_s(m, pp, vpp, t_max, t_mean)
        emb_sync = dpp.tied_embedding_s
        _, first_p, last_p, _ = self.params(tp, pp)
        n_params = first_p if st.critical_is_first else last_p
        optimizer = self.roofline.memory_time_s(n_params / (dp if zero >= 1 else 1) * self.opt_bytes)
        model_seq, hardware_seq = self.flops_per_sequence(recompute)
        mem_first, mem_last = self.memory(tp, pp, dp, vpp, micro_batch, schedule, sp, recompute, zero)
        batch = self.training.global_batch
        return Evaluation(
            step_time_s=pipeline + dp_after + emb_sync + optimizer,
            compute_s=m * st.compute_s, recompute_s=m * st.recompute_s, tp_comm_s=m * st.tp_s,
            pp_comm_s=m * p2p, bubble_s=pipeline - m * t_max, dp_comm_s=dp_after + m * dp_mb,
            dp_comm_total_s=dp_total, embedding_sync_s=emb_sync, optimizer_s=optimizer,
            tp_hidden_s=m * st.tp_hidden_s,
            model_flops=batch * model_seq, hardware_flops=batch * hardware_seq,
            memory_first=mem_first, memory_last=mem_last, num_microbatches=m,
        )
