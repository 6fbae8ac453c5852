"""What one rank holds when it trains a network under a plan: model state and activations.

Model state per unit (one DP bucket per unit: a leaf or a residual block) follows `plan/shard.py`'s table (weights,
gradients and optimizer state under ZeRO 0-3, padded to a multiple of dp); a unit's local
elements are its parameters after the tensor-parallel split of `plan/net_tp.py`: column- and
row-parallel weights, column biases and the BatchNorm affine of a sharded run hold 1/tp;
everything else is whole.

Activations: per micro-batch, each leaf keeps what `count/network_layers.py` says per sample,
times micro_batch; under tensor parallelism a row-parallel or sharded leaf keeps 1/tp of it
(its tensors are feature slices), a column-parallel one its whole input. A pipeline rank holds
the activations of every micro-batch it has run forward but not yet backward; the peak over
its schedule (data from `plan/pipeline/`: pp - r for 1F1B rank r, m for GPipe) times the
per-micro-batch amount of each chunk is the activation memory of that rank.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from modelplan.count.network_tree import leaves_of
from modelplan.plan.net_layout import StagePlan
from modelplan.plan.net_tp import TpRole
from modelplan.plan.pipeline import Action, ActionKind, PipelineSchedule, schedule_layout
from modelplan.plan.shard import RankElements, UnitShard, held_elements
from modelplan.specs.plan import Plan


def net_unit_shards(stages: list[StagePlan], plan: Plan) -> dict[str, UnitShard]:
    """Every unit with parameters, as one rank holds it after the tensor-parallel split."""
    out = {}
    for st in stages:
        for unit, nodes in zip(st.units, st.unit_nodes):
            numel = 0
            for leaf in leaves_of(nodes):
                role = st.roles[leaf.path].role
                for name, shape in leaf.info.param_shapes.items():
                    split = role in (TpRole.COLUMN, TpRole.SHARDED) or (role is TpRole.ROW and name == "weight")
                    numel += math.prod(shape) // (plan.tp if split else 1)
            if numel:
                out[unit] = UnitShard(unit=unit, numel=numel, partial_over_tp=0, group_size=plan.dp)
    return out


def net_rank_elements(stages: list[StagePlan], plan: Plan, optimizer_states: int) -> list[RankElements]:
    """Per pipeline rank: weight, gradient and optimizer-state elements held (plan/shard.py table)."""
    layout = schedule_layout(plan.schedule, plan.pp, plan.vpp)
    units = [[u for s in chunks for u in stages[s].units] for chunks in layout.rank_stages]
    return held_elements(units, net_unit_shards(stages, plan), plan, optimizer_states)


@dataclass(frozen=True)
class StageActivations:
    """What one micro-batch keeps for backward on one stage (per tp rank)."""

    elements: int
    """Float elements (stored in the compute dtype)."""
    fixed_bytes: int
    """Masks and indices, whatever the dtype."""


def stage_activations(stage: StagePlan, plan: Plan) -> StageActivations:
    """Per micro-batch of `plan.micro_batch` samples, by the module docstring's rules."""
    elements = fixed = 0
    for leaf in stage.leaves:
        role = stage.roles[leaf.path].role
        share = plan.tp if role in (TpRole.ROW, TpRole.SHARDED) else 1
        elements += leaf.info.saved_elements // share
        fixed += leaf.info.saved_fixed_bytes // share
    return StageActivations(elements * plan.micro_batch, fixed * plan.micro_batch)


def in_flight_peak(actions: Sequence[Action], per_chunk: list[StageActivations]) -> StageActivations:
    """Peak of the activations held along one pipeline rank's actions: a micro-batch's are held
    from its F until its weight gradient (its W, or a B that leaves no W)."""
    split = {(a.microbatch, a.chunk) for a in actions if a.kind is ActionKind.W}
    held_e = held_f = peak_e = peak_f = 0
    for a in actions:
        act = per_chunk[a.chunk]
        if a.kind is ActionKind.F:
            held_e, held_f = held_e + act.elements, held_f + act.fixed_bytes
            peak_e, peak_f = max(peak_e, held_e), max(peak_f, held_f)
        elif a.kind is ActionKind.W or (a.microbatch, a.chunk) not in split:
            held_e, held_f = held_e - act.elements, held_f - act.fixed_bytes
    return StageActivations(peak_e, peak_f)


def rank_activations(stages: list[StagePlan], plan: Plan, schedule: PipelineSchedule) -> list[StageActivations]:
    """Per pipeline rank, the peak activations over its actions."""
    out = []
    for r in range(plan.pp):
        per_chunk = [stage_activations(stages[v], plan) for v in schedule.layout.rank_stages[r]]
        out.append(in_flight_peak(schedule.actions[r], per_chunk))
    return out
