"""Model states and memory of a plan's stages, for the `Evaluator` (a mixin sharing its caches).

Parameters per GPU come from the shard counts verify checks (`plan/shard.py`): dense parameters
split over tp, routed experts over tp and ep. ZeRO shards dense states over the dp ranks and
expert states over the dp/ep ranks that hold the same experts (Megatron-core's expert data
parallel group); the byte formulas are `plan/memory.py`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.plan.fsdp import UNITS_IN_FLIGHT, zero3_mode
from modelplan.plan.memory import StageMemory, inflight_microbatches, model_state_bytes, stage_memory
from modelplan.plan.shard import unit_shards
from modelplan.plan.stages import stage_units
from modelplan.specs.plan import Plan

if TYPE_CHECKING:
    from modelplan.plan.evaluator import StageEntry


class StateTerms:
    """Parameter, model-state and memory terms; expects the Evaluator's spec, training, cost,
    byte sizes, `_memo`, its `_states` cache and `stage_entry`."""

    def rank_params(self, tp: int, pp: int, ep: int = 1) -> tuple[list[tuple[int, int]], int, int]:
        """Per pipeline rank (dense, routed-expert) parameters on one GPU, and the largest block's
        dense and expert parameters, from the shard counts verify checks (`plan/shard.py`)."""
        def count():
            units = self.shards(tp, ep)
            per_rank = []
            for names in self._memo(("stage_units", pp), lambda: stage_units(self.spec, pp)):
                held = [(u, units[u].numel) for u in names if u in units]
                experts = sum(n for u, n in held if u.endswith("/experts"))
                per_rank.append((sum(n for _, n in held) - experts, experts))
            layers = range(self.spec.layers)
            dense = max(units[f"layers/{i}"].numel for i in layers)
            expert = max((units[f"layers/{i}/experts"].numel for i in layers if f"layers/{i}/experts" in units), default=0)
            return per_rank, dense, expert

        return self._memo(("rank_params", tp, pp, ep), count)

    def shards(self, tp: int, ep: int = 1) -> dict:
        """Every unit's shard on one rank (`plan/shard.py`); the element counts depend on tp and
        ep only (dp = ep here: the counts do not depend on dp, only the padding does)."""
        return self._memo(("shards", tp, ep), lambda: unit_shards(self.spec, Plan(tp=tp, dp=ep, ep=ep)))

    def params(self, tp: int, pp: int) -> tuple[int, int, int, int]:
        """(per block, first stage, last stage, word embedding) parameters on one rank (ep = 1)."""
        per_rank, layer, expert = self.rank_params(tp, pp)
        emb = self.shards(tp).get("embedding/word")
        return layer + expert, sum(per_rank[0]), sum(per_rank[-1]), emb.numel if emb else 0

    def rank_states(self, tp: int, pp: int, dp: int, zero: int, pp_rank: int, ep: int = 1,
                    cp: int = 1, reshard: bool | str = "default", shard: int | None = None) -> tuple[float, float, float]:
        """Model-state bytes (weights, gradients, optimizer) of one GPU of stage `pp_rank`: dense
        parameters sharded by ZeRO over the dp x cp ranks that reduce their gradients (the HSDP
        shard group of `shard` ranks when given), routed experts over the dp x cp / ep ranks
        holding the same experts; ZeRO-3 as the engine runs it (`plan/fsdp.py`), `reshard`: the
        plan's reshard_after_forward."""
        per_rank, layer, expert_layer = self.rank_params(tp, pp, ep)
        dense, experts = per_rank[pp_rank]
        sizes = (self.dtype_bytes, self.grad_bytes, self.state_bytes)
        sw = self.software
        mode = zero3_mode(reshard, sw, pp)
        reduce_bytes = 4 if sw.reduce_in_fp32 else self.dtype_bytes
        group = dp * cp
        zero3 = (mode, shard or group, sw.sharded_low_precision_copy, reduce_bytes)
        a = model_state_bytes(dense, layer, group, zero, *sizes, zero3=zero3)
        b = model_state_bytes(experts, expert_layer, group // ep, zero, *sizes, zero3=zero3)
        weights, gradients, optimizer = a[0] + b[0], a[1] + b[1], a[2] + b[2]
        if sw.fp8_recipe is not None and sw.fp8_backend == "te":
            # TE keeps fp8 weights and their transposes (cached across micro-batches); with
            # fp8_param_gather they are the parameters and no 16-bit copy exists
            fp8_copy = 2 * (dense + experts)
            weights += fp8_copy - (self.dtype_bytes * (dense + experts) if self.training.fp8_param_gather and zero < 3 else 0)
        elif sw.fp8_recipe is not None and self.training.fp8_param_gather and zero >= 3:
            # torchao fp8 all-gather: the gathered units are fp8 (1 byte) instead of 16-bit
            weights -= (self.dtype_bytes - 1) * layer * UNITS_IN_FLIGHT
        return weights, gradients, optimizer

    def states(self, tp: int, pp: int, dp: int, zero: int, ep: int = 1, cp: int = 1,
               reshard: bool | str = "default", shard: int | None = None
               ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Model-state bytes (weights, gradients, optimizer) of the first and the last stage."""
        return self._memo(("states", tp, pp, dp, zero, ep, cp, reshard, shard), lambda: (
            self.rank_states(tp, pp, dp, zero, 0, ep, cp, reshard, shard),
            self.rank_states(tp, pp, dp, zero, pp - 1, ep, cp, reshard, shard)))

    def memory(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int, ep: int = 1, cp: int = 1,
        reshard: bool | str = "default", shard: int | None = None,
    ) -> tuple[StageMemory, StageMemory]:
        """Memory of the first and the last stage (the largest two)."""
        stage = self.stage_entry(tp, sp, micro_batch, recompute, pp, ep, cp)
        m = self.training.global_batch // (micro_batch * dp)
        return self.stage_memories(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp, reshard, shard)

    def stage_memories(self, stage: StageEntry, tp: int, pp: int, dp: int, vpp: int, m: int, schedule: str, zero: int,
                       ep: int, cp: int, reshard: bool | str = "default", shard: int | None = None
                       ) -> tuple[StageMemory, StageMemory]:
        """`memory` from the plan's cached `StageEntry` and its m micro-batches per step."""
        key = (tp, pp, dp, zero, ep, cp, reshard, shard)
        hit = self._states.get(key)
        if hit is None:
            hit = self._states[key] = (*self.states(*key), self.groups(tp, pp, dp, ep, cp))
        first_states, last_states, groups = hit
        t, mt, counts = stage.dense, stage.moe, stage.counts
        # DeepSpeed stages gradients in a reduce bucket and parameters in an all-gather bucket
        buckets = self.software.dp_bucket_elements * (self.dp_grad_bytes + self.dtype_bytes) if zero >= 1 else 0.0
        first = stage_memory(first_states, sum(counts[0]), inflight_microbatches(schedule, pp, 0, m, vpp), t,
                             True, pp == 1, groups, self.cost, mt, counts[0][1], buckets)
        if pp == 1:
            return first, first
        last = stage_memory(last_states, sum(counts[-1]), inflight_microbatches(schedule, pp, pp - 1, m, vpp), t,
                            False, True, groups, self.cost, mt, counts[-1][1], buckets)
        return first, last

    def groups(self, tp: int, pp: int, dp: int, ep: int, cp: int) -> int:
        """Communicators a GPU belongs to (each keeps NCCL buffers)."""
        groups = (tp > 1) + (dp * cp > 1) + (pp > 1) + (pp > 1 and self.spec.tied_embeddings)
        return groups + (ep > 1) + (1 < ep < dp * cp) + (cp > 1)  # expert, expert-data and context parallel
