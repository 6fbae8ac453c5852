"""A lower bound of the peak memory of every plan under one classic point of the search (tp, pp,
dp, vpp, micro_batch, schedule, sp, recompute, ep, cp), so that points which cannot fit are
dropped before anything of them is timed (`search.py`).

A plan's peak is at least its first pipeline rank's `stage_memory` total. The floor prices that
rank with the least each term takes under any plan of the point:
- model states: the least of the point's ZeRO variants (an HSDP shard group holds more; ZeRO++
  adds its secondary shard), with the optimizer on the host where the space offers that
  (`Mechanisms.offloaded_states`);
- activations: the rank's blocks at the fewest bytes any block kind keeps (dense or MoE; the
  block terms hold the kinds' mean), the embedding's, the least working set; with activation
  offload in the space, at most two blocks of one micro-batch (`Evaluator._rank_memory`);
- buffers without the data-parallel buckets; LoRA adapters' activations left out;
then summed as `memory.stage_memory` sums them (tests pin the two together).
Stage splits (`Evaluator.split_candidates`): the fastest split moves blocks off the last virtual
stage and `split_layers` spreads them over the others, latest middle stage first, so every
other virtual stage keeps at least its default blocks; relief splits, which move blocks to the
last stage, are tried only when the fastest split is within RELIEF_REACH of the budget
(`limit_bytes`). The floor of rank 0 under the default split therefore holds when rank 0 does
not run the last virtual stage (1F1B, GPipe, interleaved, ZB-H1; not ZB-V or DualPipe, whose
first rank also runs the last stage: no floor there). Its states hold when rank 0 runs one
chunk (its blocks grow as a prefix) or every block has the same parameters; otherwise only
activations and buffers count. Floors are shaved by 1e-12 so that rounding never lifts one
above the exact total.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.stages import RankBlocks, split_layers

if TYPE_CHECKING:
    from modelplan.plan.evaluator import Evaluator


class BlockBytes(NamedTuple):
    """The bytes `stage_memory` reads of a block's terms, each the least over the model's block kinds."""

    activation_bytes: int
    working_bytes: int
    embedding_activation_bytes: int
    head_activation_bytes: int
    boundary_bytes: int


class FirstRank(NamedTuple):
    """Rank 0 under a schedule's layout with the default split, for the floor."""

    blocks: RankBlocks
    runs_last_stage: bool
    """Rank 0 also runs the last virtual stage (ZB-V, DualPipe; pp 1 aside): no floor."""
    prefix_only: bool
    """Rank 0 runs one chunk, the first blocks: a split can only add blocks to its end."""
    relief: bool
    """The default split is uneven, so the search may try relief splits (RELIEF_REACH)."""


class MemoryFloor:
    """Floors of one search's classic points (module docstring); it lives as long as the search."""

    def __init__(self, ev: "Evaluator", search_split: bool, relief_reach: float) -> None:
        self.ev = ev
        self.search_split = search_split
        self.relief_reach = relief_reach
        self._bytes: dict[tuple, BlockBytes] = {}
        self._ranks: dict[tuple, FirstRank] = {}
        self._uniform: dict[tuple, bool] = {}
        self._groups: dict[tuple, int] = {}
        self._pipes: dict[tuple, tuple | bool] = {}
        self.global_batch = ev.training.global_batch
        cost = ev.cost
        self.nccl_bytes, self.fragmentation = cost.nccl_buffer_bytes_per_group, cost.fragmentation_fraction
        self.reserved = float(cost.runtime_reserved_bytes)

    def block_bytes(self, tp: int, sp: bool, micro_batch: int, recompute: str, cp: int,
                    etp: int | None = None) -> BlockBytes:
        """The least bytes of any block kind, dense or MoE, its experts over `etp` ranks (None: tp)
        (cached per (tp, sp, micro_batch, recompute, cp, etp))."""
        key = (tp, sp, micro_batch, recompute, cp, etp)
        hit = self._bytes.get(key)
        if hit is None:
            ev = self.ev
            classes = [False] + ([True] if ev.spec.moe is not None else [])
            kinds = {moe: [b for b, _ in ev.kinds_of(moe)] or [None] for moe in classes}
            per_kind = {(moe, b): ev.block_bytes(tp, sp, micro_batch, recompute, cp, moe, b, etp if moe else None)
                        for moe in classes for b in kinds[moe]}
            stored = min(kept for kept, _ in per_kind.values())
            working = min(per_kind[False, b][1] for b in kinds[False])  # the stage's working set is the dense one's at least
            emb, head = ev.edge_bytes(tp, sp, micro_batch, cp)
            hit = self._bytes[key] = BlockBytes(stored, working, emb, head, ev.boundary(tp, sp, micro_batch, cp, True)[0])
        return hit

    def first_rank(self, schedule: str, pp: int, vpp: int) -> FirstRank:
        """Rank 0's blocks and what splits can do to them (cached per (schedule, pp, vpp))."""
        key = (schedule, pp, vpp)
        hit = self._ranks.get(key)
        if hit is None:
            layout = schedule_layout(schedule, pp, vpp)
            last = layout.num_stages - 1
            chunks = layout.rank_stages[0]
            splits = pp > 1 and self.search_split
            relief = splits and len(set(split_layers(self.ev.spec.num_blocks, layout.num_stages))) > 1
            hit = self._ranks[key] = FirstRank(self.ev.rank_blocks(schedule, pp, vpp)[1][0],
                                               splits and last in chunks, len(chunks) == 1, relief)
        return hit

    def uniform_blocks(self, tp: int, ep: int, etp: int | None = None) -> bool:
        """Every block holds the same dense and the same routed-expert parameters."""
        key = (tp, ep, etp)
        hit = self._uniform.get(key)
        if hit is None:
            hit = self._uniform[key] = self.ev.held.uniform_blocks(tp, ep, etp)
        return hit

    def states_bytes(self, tp: int, pp: int, dp: int, ep: int, cp: int, schedule: str, vpp: int,
                     variants: list[tuple], shed: bool, etp: int | None = None,
                     reshard: bool | str = "default") -> float:
        """The least model-state bytes rank 0 holds under any of `variants` ((zero, DpVariant)),
        with the optimizer offloaded when `shed`; 0 where a split may change rank 0's parameters
        other than by adding blocks (module docstring)."""
        rank = self.first_rank(schedule, pp, vpp)
        if not rank.prefix_only and pp > 1 and self.search_split and not self.uniform_blocks(tp, ep, etp):
            return 0.0
        ev = self.ev
        least = float("inf")
        for zero, variant in variants:
            states = ev.held.first_states(tp, pp, dp, zero, ep, cp, schedule, vpp, reshard, variant.fsdp_shard_size,
                                          etp)
            if shed:
                states = ev.mech.offloaded_states(states, dp, zero)
            least = min(least, sum(states))
        return least

    def exceeds(self, cls: tuple, states: float, offload_activations: bool, budget: float
                ) -> tuple[float, float] | None:
        """(floor, limit) when the floor of classic point `cls` with rank-0 `states` bytes
        (`states_bytes`) exceeds the bytes it must stay under for a plan of it to fit (the budget,
        or RELIEF_REACH of it where relief splits may be tried), else None (also where there is
        no floor); `offload_activations`: the space may offload them."""
        tp, pp, dp, vpp, mb, schedule, sp, recompute, ep, cp = cls
        return self.over(self.group_bytes(tp, pp, dp, ep, cp, sp, mb, recompute), schedule, pp, vpp, mb * dp,
                         offload_activations, states, budget)

    def group_bytes(self, tp: int, pp: int, dp: int, ep: int, cp: int, sp: bool, micro_batch: int, recompute: str,
                    etp: int | None = None) -> tuple[int, int, int, float]:
        """What rank 0's floor reads of one group of the walk (its points differ only in schedule
        and vpp): a block's least stored and working bytes, the embedding's activations, and the
        communication buffers (NCCL's per group, the pipeline's two boundary messages)."""
        t = self._bytes.get((tp, sp, micro_batch, recompute, cp, etp)) or self.block_bytes(
            tp, sp, micro_batch, recompute, cp, etp)
        groups = self._groups.get((tp, pp, dp, ep, cp))
        if groups is None:
            groups = self._groups[tp, pp, dp, ep, cp] = self.ev.held.groups(tp, pp, dp, ep, cp)
        return (t.activation_bytes, t.working_bytes, t.embedding_activation_bytes,
                groups * self.nccl_bytes + (2 * t.boundary_bytes if pp > 1 else 0))

    def over(self, group: tuple, schedule: str, pp: int, vpp: int, sequences: int, offload_activations: bool,
             states: float, budget: float) -> tuple[float, float] | None:
        """`exceeds` for one point of a group (`group_bytes`), `sequences` (micro_batch x dp) per micro-batch."""
        pipe = self._pipes.get((schedule, pp, vpp, sequences, offload_activations))
        if pipe is None:
            pipe = self._pipe(schedule, pp, vpp, sequences, offload_activations)
        if pipe is False:
            return None
        layers, held, embedding, relief = pipe
        stored, working, embedding_bytes, comm = group
        # `stage_memory`'s total for rank 0 (first stage, not last, no buckets), term by term
        activations = held * layers * stored + working
        if embedding:
            activations += held * embedding_bytes
        need = (states + activations + comm + (activations + comm) * self.fragmentation + self.reserved) * (1 - 1e-12)
        limit = budget * (self.relief_reach if relief else 1.0)
        return (need, limit) if need > limit else None

    def _pipe(self, schedule: str, pp: int, vpp: int, sequences: int, offload_activations: bool
              ) -> tuple[int, float, bool, bool] | bool:
        """(blocks, in-flight micro-batches, holds the embedding, relief splits) of rank 0 for
        `exceeds`, with `sequences` (micro_batch x dp) per micro-batch; False: no floor. Cached."""
        rank = self.first_rank(schedule, pp, vpp)
        hit: tuple[int, float, bool, bool] | bool = False
        if not rank.runs_last_stage:
            b = rank.blocks
            layers = b.dense + b.moe
            held = self.ev.inflight(schedule, pp, self.global_batch // sequences, vpp)[0]
            if offload_activations:
                layers, held = min(layers, 2), min(held, 1.0)
            hit = (layers, held, b.embedding > 0, rank.relief)
        self._pipes[schedule, pp, vpp, sequences, offload_activations] = hit
        return hit
