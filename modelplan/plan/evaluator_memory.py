"""Memory of a plan's first, last and heaviest middle pipeline rank (model states, activations, buffers).

Split out of `plan/evaluator.py`: `memory.stage_memory` of each rank from its cached `StageEntry`,
its `RankStates` and the schedule's in-flight micro-batches, less what offload moves to the host."""

from __future__ import annotations

from typing import TYPE_CHECKING

from modelplan.plan.memory import pipeline_stage_bytes, stage_memory, stage_output_bytes
from modelplan.plan.results import StageMemory
from modelplan.plan.placement import DEFAULT_ORDER
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.flush import flush_microbatches, step_inflight_microbatches
from modelplan.plan.stages import RankBlocks
from modelplan.specs.plan import Schedule

if TYPE_CHECKING:
    from modelplan.plan.evaluator import PlanPoint, StageEntry


class StageMemories:
    """The `Evaluator`'s memory methods (its caches `_mems`, `_states`, `_inflight`)."""

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
        """Micro-batches whose activations the first and the last pipeline rank hold at peak (in
        the step's largest flush, `pipeline/flush.py`)."""
        hit = self._inflight.get((schedule, pp, m, vpp))
        if hit is None:
            kind, f = Schedule(schedule), self.training.pp_flush_microbatches
            hit = self._inflight[(schedule, pp, m, vpp)] = (
                float(step_inflight_microbatches(kind, pp, 0, m, vpp, f)),
                float(step_inflight_microbatches(kind, pp, pp - 1, m, vpp, f)))
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
            flush = flush_microbatches(m, self.training.pp_flush_microbatches)  # buffers per schedule call
            pipe = pipeline_stage_bytes(layout.rank_stages[index], layout.num_stages, flush, held,
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
                    n = float(step_inflight_microbatches(kind, pp, r, m, vpp, self.training.pp_flush_microbatches))
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
