"""Price plans fast: cache everything a plan shares with its neighbours, keep the hot loop floats.

Caches: block / embedding / head terms per (tp, sequence_parallel, micro_batch, recompute);
stage sums per that and pp; pipeline send/recv per (tp, sp, micro_batch, dp, pp); raw DP
collective times per (tp, pp, dp, stage); collective times per (op, bytes, group shape).
The formulas themselves are in steptime.py (time) and memory.py (bytes).
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.ops import Axis, Collective
from modelplan.count.flops import count_flops
from modelplan.errors import SpecError
from modelplan.plan.commcost import CommPricer, GroupShape, plan_group_shapes
from modelplan.plan.compute import Roofline
from modelplan.plan.layerterms import LayerTerms, build_layer_terms
from modelplan.plan.memory import (
    StageMemory,
    inflight_microbatches,
    model_state_bytes,
    stage_memory,
    state_bytes_per_param,
)
from modelplan.plan.sizes import embedding_params_per_rank, head_params_per_rank, layer_params_per_rank
from modelplan.plan.steptime import DpTimes, dp_exposure, optimizer_bytes_per_param, pipeline_time_s
from modelplan.plan.validate import padded_vocab
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
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

    def terms(self, tp: int, sequence_parallel: bool, micro_batch: int, recompute: str) -> LayerTerms:
        """Per-micro-batch block / embedding / head terms."""
        key = ("terms", tp, sequence_parallel, micro_batch, recompute)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = build_layer_terms(
                self.spec, tp, sequence_parallel, micro_batch, recompute, self.training.seq_len,
                self.dtype_bytes, self.vocab_padded(tp), self.roofline, self.pricer,
                self.shapes(tp, 1, 1)[Axis.TP], self.cost,
            )
        return hit  # type: ignore[return-value]

    def params(self, tp: int, pp: int) -> tuple[int, int, int, int]:
        """(per block, first stage, last stage, embedding) parameters on one rank."""
        key = ("params", tp, pp)
        hit = self._cache.get(key)
        if hit is None:
            vp = self.vocab_padded(tp)
            layer = layer_params_per_rank(self.spec, tp)
            blocks = layer * (self.spec.layers // pp)
            emb = embedding_params_per_rank(self.spec, tp, vp)
            head = head_params_per_rank(self.spec, tp, vp, pp)
            first, last = (blocks + emb + head,) * 2 if pp == 1 else (blocks + emb, blocks + head)
            hit = self._cache[key] = (layer, first, last, emb)
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
                rec, fwd, bwd, crit_first,
            )
        return hit  # type: ignore[return-value]

    def p2p_s(self, tp: int, sp: bool, micro_batch: int, dp: int, pp: int) -> float:
        """One stage-boundary transfer: 1/tp of b*s*h over the link, re-gathered over TP unless
        SP keeps it sharded (Narayanan et al. 2021 sec. 4.1 scatter/gather)."""
        key = ("p2p", tp, sp, micro_batch, dp, pp)
        hit = self._cache.get(key)
        if hit is None:
            t = self.terms(tp, sp, micro_batch, "none")
            shapes = self.shapes(tp, dp, pp)
            hit = self.pricer.p2p_time_s(t.boundary_bytes, shapes[Axis.PP].crosses_nodes)
            if tp > 1 and not sp:
                hit += self.pricer.time_s(Collective.ALL_GATHER, t.boundary_bytes * tp, shapes[Axis.TP])
            self._cache[key] = hit
        return hit  # type: ignore[return-value]

    def dp_times(self, tp: int, pp: int, dp: int, first_stage: bool) -> DpTimes:
        """Raw DP collective times for one stage's parameters."""
        key = ("dp", tp, pp, dp, first_stage)
        hit = self._cache.get(key)
        if hit is None:
            layer_p, first_p, last_p, _ = self.params(tp, pp)
            n = first_p if first_stage else last_p
            shape = self.shapes(tp, dp, pp)[Axis.DP]
            grad_b, param_b = n * self.grad_bytes, n * self.dtype_bytes
            bucket = min(self.cost.dp_bucket_bytes, grad_b)
            time_s = self.pricer.time_s
            hit = self._cache[key] = DpTimes(
                time_s(Collective.ALL_REDUCE, grad_b, shape), time_s(Collective.ALL_REDUCE, bucket, shape),
                time_s(Collective.REDUCE_SCATTER, grad_b, shape), time_s(Collective.REDUCE_SCATTER, bucket, shape),
                time_s(Collective.ALL_GATHER, param_b, shape),
                time_s(Collective.ALL_GATHER, min(bucket, param_b), shape),
                time_s(Collective.ALL_GATHER, layer_p * self.dtype_bytes, shape),
            )
        return hit  # type: ignore[return-value]

    def embedding_sync_s(self, tp: int, dp: int, pp: int) -> float:
        """Tied word embeddings: AllReduce of their gradients between first and last stage."""
        if pp == 1 or not (self.spec.tied_embeddings and self.spec.lm_head):
            return 0.0
        key = ("emb_sync", tp, dp, pp)
        hit = self._cache.get(key)
        if hit is None:
            crosses = self.shapes(tp, dp, pp)[Axis.PP].crosses_nodes
            hit = self._cache[key] = self.pricer.time_s(
                Collective.ALL_REDUCE, self.params(tp, pp)[3] * self.grad_bytes, GroupShape(2, 1 if crosses else 2)
            )
        return hit  # type: ignore[return-value]

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

    def evaluate(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int,
    ) -> Evaluation:
        """All terms of one valid plan (validity is the caller's job: see validate.py)."""
        st = self.stage(tp, sp, micro_batch, recompute, pp)
        m = self.training.global_batch // (micro_batch * dp)
        p2p = 2 * vpp * self.p2p_s(tp, sp, micro_batch, dp, pp) * self.cost.pp_p2p_exposed_fraction if pp > 1 else 0.0
        cost = self.cost
        if dp > 1:
            dpx = dp_exposure(zero, self.dp_times(tp, pp, dp, st.critical_is_first), m, st.fwd_s, st.bwd_s,
                              cost.dp_overlap, cost.dp_overlap_fraction, cost.overlap_interference)
            dp_after, dp_mb, dp_total = dpx
        else:
            dp_after = dp_mb = dp_total = 0.0
        t_max = max(st.first_s, st.last_s) + p2p + dp_mb
        t_mean = ((st.first_s + st.last_s + (pp - 2) * st.mid_s) / pp if pp > 1 else st.first_s) + p2p + dp_mb
        pipeline = pipeline_time_s(m, pp, vpp, t_max, t_mean)
        emb_sync = self.embedding_sync_s(tp, dp, pp)
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
            tp_hidden_s=m * (self.spec.layers // pp) * self.terms(tp, sp, micro_batch, recompute).tp_hidden_s,
            model_flops=batch * model_seq, hardware_flops=batch * hardware_seq,
            memory_first=mem_first, memory_last=mem_last, num_microbatches=m,
        )
