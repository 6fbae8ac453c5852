"""Model states and memory of a plan's stages, for the `Evaluator` (a mixin sharing its caches).

Parameters per GPU come from the shard counts verify checks (`plan/shard.py`): dense parameters
split over tp, routed experts over tp and ep. ZeRO shards dense states over the dp ranks and
expert states over the dp/ep ranks that hold the same experts (Megatron-core's expert data
parallel group); the byte formulas are `plan/memory.py`'s.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.plan.memory import StageMemory, model_state_bytes, stage_memory
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.profile import inflight_microbatches
from modelplan.plan.shard import unit_shards
from modelplan.plan.stages import rank_units
from modelplan.specs.plan import Plan, Schedule

if TYPE_CHECKING:
    from modelplan.plan.evaluator import StageEntry


class StateTerms:
    """Parameter, model-state and memory terms; expects the Evaluator's spec, training, cost,
    byte sizes, `_memo`, its `_states` cache and `stage_entry`."""

    def rank_params(self, tp: int, pp: int, ep: int = 1, schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1
                    ) -> tuple[list[tuple[int, int]], int, int]:
        """Per pipeline rank (dense, routed-expert) parameters on one GPU under the schedule's
        layout, and the largest block's dense and expert parameters, from the shard counts verify
        checks (`plan/shard.py`)."""
        def count():
            numel, experts, dense, expert = self._memo(("unit_numels", tp, ep), lambda: self._unit_numels(tp, ep))
            held = self._memo(("rank_units", schedule, pp, vpp),
                              lambda: rank_units(self.spec, schedule_layout(schedule, pp, vpp)))
            per_rank = []
            for names in held:
                total = sum(numel.get(u, 0) for u in names)
                routed = sum(numel.get(u, 0) for u in names if u in experts)
                per_rank.append((total - routed, routed))
            return per_rank, dense, expert

        return self._memo(("rank_params", tp, pp, ep, schedule, vpp), count)

    def _unit_numels(self, tp: int, ep: int) -> tuple[dict[str, int], set[str], int, int]:
        """(numel per unit, the routed-expert units, largest block's dense and expert numel)."""
        units = self.shards(tp, ep)
        numel = {u: s.numel for u, s in units.items()}
        experts = {u for u in units if u.endswith("/experts")}
        layers = range(self.spec.layers)
        dense = max(numel[f"layers/{i}"] for i in layers)
        expert = max((numel[f"layers/{i}/experts"] for i in layers if f"layers/{i}/experts" in numel), default=0)
        return numel, experts, dense, expert

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
                    cp: int = 1, schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1) -> tuple[float, float, float]:
        """Model-state bytes (weights, gradients, optimizer) of one GPU of stage `pp_rank`: dense
        parameters sharded by ZeRO over the dp x cp ranks that reduce their gradients, routed
        experts over the dp x cp / ep ranks holding the same experts."""
        per_rank, layer, expert_layer = self.rank_params(tp, pp, ep, schedule, vpp)
        dense, experts = per_rank[pp_rank]
        sizes = (self.dtype_bytes, self.grad_bytes, self.state_bytes)
        a = model_state_bytes(dense, layer, dp * cp, zero, *sizes)
        b = model_state_bytes(experts, expert_layer, dp * cp // ep, zero, *sizes)
        return a[0] + b[0], a[1] + b[1], a[2] + b[2]

    def states(self, tp: int, pp: int, dp: int, zero: int, ep: int = 1, cp: int = 1,
               schedule: str = Schedule.ONE_F_ONE_B, vpp: int = 1
               ) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
        """Model-state bytes (weights, gradients, optimizer) of the first and the last pipeline rank."""
        return self._memo(("states", tp, pp, dp, zero, ep, cp, schedule, vpp), lambda: (
            self.rank_states(tp, pp, dp, zero, 0, ep, cp, schedule, vpp),
            self.rank_states(tp, pp, dp, zero, pp - 1, ep, cp, schedule, vpp)))

    def memory(
        self, tp: int, pp: int, dp: int, vpp: int, micro_batch: int, schedule: str,
        sp: bool, recompute: str, zero: int, ep: int = 1, cp: int = 1,
    ) -> tuple[StageMemory, StageMemory]:
        """Memory of the first and the last stage (the largest two)."""
        stage = self.stage_entry(tp, sp, micro_batch, recompute, pp, ep, cp, schedule, vpp)
        m = self.training.global_batch // (micro_batch * dp)
        return self.stage_memories(stage, tp, pp, dp, vpp, m, schedule, zero, ep, cp)

    def stage_memories(self, stage: StageEntry, tp: int, pp: int, dp: int, vpp: int, m: int, schedule: str, zero: int,
                       ep: int, cp: int) -> tuple[StageMemory, StageMemory]:
        """`memory` from the plan's cached `StageEntry` and its m micro-batches per step."""
        key = (tp, pp, dp, zero, ep, cp, schedule, vpp)
        hit = self._states.get(key)
        if hit is None:
            hit = self._states[key] = (*self.states(*key), self.groups(tp, pp, dp, ep, cp))
        first_states, last_states, groups = hit
        t, mt, blocks = stage.dense, stage.moe, stage.blocks
        inflight = self._inflight.get((schedule, pp, m, vpp))
        if inflight is None:
            kind = Schedule(schedule)
            inflight = self._inflight[(schedule, pp, m, vpp)] = (
                float(inflight_microbatches(kind, pp, 0, m, vpp)), float(inflight_microbatches(kind, pp, pp - 1, m, vpp)))
        b = blocks[0]
        first = stage_memory(first_states, b.dense + b.moe, inflight[0], t, b.embedding > 0, b.head > 0, groups,
                             self.cost, mt, b.moe, pp > 1)
        if pp == 1:
            return first, first
        b = blocks[-1]
        last = stage_memory(last_states, b.dense + b.moe, inflight[1], t, b.embedding > 0, b.head > 0, groups,
                            self.cost, mt, b.moe, True)
        return first, last

    def groups(self, tp: int, pp: int, dp: int, ep: int, cp: int) -> int:
        """Communicators a GPU belongs to (each keeps NCCL buffers)."""
        groups = (tp > 1) + (dp * cp > 1) + (pp > 1) + (pp > 1 and self.spec.tied_embeddings)
        return groups + (ep > 1) + (1 < ep < dp * cp) + (cp > 1)  # expert, expert-data and context parallel
