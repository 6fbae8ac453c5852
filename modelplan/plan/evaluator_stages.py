"""Stages and the pipeline: each rank's blocks, per-micro-batch stage times, stage splits, bubble and messages.

Split out of `plan/evaluator.py`: blocks per rank from the schedule's layout (`plan/stages.py`),
stage times composed from block terms (`stage_time.py`), the bubble and boundary messages read off
the schedule's action list (`pipeline/profile.py`), one message priced by `parallel/pp.py`."""

from __future__ import annotations

import math
from typing import NamedTuple

from modelplan.comm.ops import Axis
from modelplan.plan.recompute_layers import block_method_terms
from modelplan.plan.parallel import pp as pp_mod
from modelplan.plan.placement import DEFAULT_ORDER
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.flush import step_bubble_microbatches
from modelplan.plan.pipeline.profile import boundary_messages, chunk_shares
from modelplan.plan.stage_time import BlockTerms, StageTerms, compose_stages
from modelplan.plan.stages import RankBlocks, rank_blocks, split_layers
from modelplan.specs.plan import Schedule


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


class StagePricing:
    """The `Evaluator`'s stage and pipeline methods (its caches `_stages`, `_blocks`, `_splits`, `_pipes`, `_p2ps`)."""

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
        sw, chunk = self.software, -(-self.spec.num_blocks // (pp * vpp))
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
            shape = self._splits[(schedule, pp, vpp)] = (stages, split_layers(self.spec.num_blocks, stages))
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
                    split_layers(self.spec.num_blocks, stages, split)
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
                    split_layers(self.spec.num_blocks, stages, split)
                except ValueError:
                    continue
                out.append(split)
        hit = self._splits[key] = tuple(out)
        return hit

    def pipe(self, schedule: str, pp: int, m: int, vpp: int) -> tuple[float, int | float]:
        """(bubble in micro-batch times, stage-boundary messages per micro-batch) of a schedule,
        read off its action list (`pipeline/profile.py`), once per flush of the step's m
        (`pipeline/flush.py`, `TrainingSpec.pp_flush_microbatches`)."""
        key = (schedule, pp, m, vpp)
        hit = self._pipes.get(key)
        if hit is None:
            kind = Schedule(schedule)
            bubble = step_bubble_microbatches(kind, pp, m, vpp, self.training.pp_flush_microbatches)
            hit = self._pipes[key] = (float(bubble), boundary_messages(kind, pp, vpp))
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
