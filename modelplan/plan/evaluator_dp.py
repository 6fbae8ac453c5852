"""Data-parallel terms of one pipeline rank: DP / ZeRO / HSDP calls priced, tied-unit sync, optimizer step.

Split out of `plan/evaluator.py`: the rank's DP calls (`parallel/dp_zero.py`), the AllReduce of units
several pipeline ranks hold (`parallel/pp.py`), and how much of them a step exposes (`_dp_terms`)."""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.dp_overlap import param_gather_window_s
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.pipeline.flush import flush_sizes
from modelplan.plan.dims import EXPERT_DP, pair_shape, strided_shape
from modelplan.plan.engine import keeps_low_precision_grads
from modelplan.plan.fp8 import param_gather_bytes
from modelplan.plan.fsdp import gather_copy_out_bytes, hsdp_groups, reduces_every_microbatch, zero3_mode
from modelplan.plan.parallel import dp_zero, pp as pp_mod
from modelplan.plan.parallel.calls import RankCalls
from modelplan.plan.placement import DEFAULT_ORDER
from modelplan.plan.shard import regrouped, unit_groups, unit_shards
from modelplan.plan.stages import unit_replicas
from modelplan.specs.plan import Plan, Schedule


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


def zero3_with_copy_out(times: dp_zero.DpTimes, copy_s: float) -> dp_zero.DpTimes:
    """ZeRO-3 gathers with the engine's copy-out of every gathered parameter (`copy_s` per gather
    of the rank's parameters) on the gather stream, so each gather ends after it; the first
    block's un-prefetched gather is left as priced."""
    bwd = None if times.all_gather_bwd is None else times.all_gather_bwd + copy_s
    return times._replace(all_gather=times.all_gather + copy_s, all_gather_bwd=bwd)


class DpPricing:
    """The `Evaluator`'s data-parallel methods (its caches `_dps`, `_dps_shared`, `_modes`)."""

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
                                        strided_shape(replicas_n, stride, self.cluster.domain_gpus))
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
            self.spec, Plan(tp=tp, dp=dp, ep=ep, cp=cp, sequence_parallel=sp, etp=etp), self.training.framework))
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
                gather = param_gather_bytes(unit, self.dtype_bytes, self.training.fp8_param_gather,
                                            self.software.fp8_recipe, self.software.fp8_backend)
                dp_zero.unit_calls(calls, u, tp, zero, 1, self.dtype_bytes, self.dp_grad_bytes, count, gather)
                if n:
                    owned = u.padded if zero == 0 else u.padded // u.group_size
                    pp_mod.replica_calls(tied, unit, n, owned * self.dp_grad_bytes)
        priced = dp_zero.dp_seconds(calls, lambda op, axis, size, nbytes: self.pricer.time_s(
            op, nbytes, self._dp_shape(shapes, axis, size)), zero)
        if zero == 3 and self.software.zero3_gather_copy_out and self.finetune is None:
            priced = priced._replace(times=zero3_with_copy_out(
                priced.times, self.roofline.memory_time_s(gather_copy_out_bytes(sum(params), self.dtype_bytes))))
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

    def _dp_terms(self, st, dpe: DpEntry, m: int, zero: int, reshard, dpo: bool | None, pp: int,
                  group: int, vpp: int = 1) -> tuple[float, float, float]:
        """(DP seconds after the pipeline, per micro-batch, in all) of one stage's DP entry; the
        ZeRO-1/2 parameter AllGather hides behind the engine's window (`EngineSettings.param_gather_window`)."""
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
            # kept gathered under torch pipelining: the schedule's REDUCE_GRAD action, after a chunk's
            # last backward, reduce-scatters its gradients and the compute stream waits for them
            # (torch 2.13 stage.py perform_reduce_grad -> FSDP _root_post_backward_final_callback with
            # is_last_backward: current_stream().wait_event per reduce-scatter): nothing hides it
            reduce_beside_backward=every_mb,
            # the distributed optimizer's window (ZeRO-1/2); ZeRO-3 kept gathered keeps the step's forwards
            gather_window_s=param_gather_window_s(self.software.param_gather_window, st.fwd_s, m, pp, vpp)
            if zero < 3 else None,
        )
        if zero >= 2:  # the engine's gradient copies before each ReduceScatter (memory-bound)
            if every_mb:
                dp_mb += dpe.grad_copy_s
            else:
                dp_after += dpe.grad_copy_s
        if not every_mb:
            # ZeRO-3 kept gathered across micro-batches: torch pipelining ends every schedule call with
            # FSDP's post-backward (stage.py perform_reduce_grad: set_requires_gradient_sync and
            # set_reshard_after_backward True), so each flush reduces and re-gathers (`pipeline/flush.py`)
            flushes = len(flush_sizes(m, self.training.pp_flush_microbatches))
            dp_after, dp_total = dp_after * flushes, dp_total * flushes
        return dp_after + dpe.partial_grads_s * (m if zero >= 2 else 1), dp_mb, dp_total
