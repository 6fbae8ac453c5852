"""The rank grid, once: `ParallelDims` names the parallel axes in rank order, their sizes, the
map rank <-> coordinates, each rank's groups and how those groups sit on nodes. The planner
(group shapes), the executor (process groups), verify's checks (a rank's index in a group) and
export all ask this one type.

Rank order is Megatron-LM's default `tp-cp-ep-dp-pp` (parallel_state.py docstring; its
`order` string): tp varies fastest, then cp, then dp, then pp, and an ep group is a block of
`ep` consecutive dp ranks (ep is carved out of dp, as Megatron's expert grid carves it out of
the data-parallel ranks). A tp group is then a run of consecutive ranks and stays inside one
node whenever tp divides the node size.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.comm.ops import Axis
from modelplan.comm.topology import GroupShape

RANK_ORDER = "tp-cp-ep-dp-pp"
"""Megatron-LM's rank-order string (fastest axis first); ep lives inside dp."""

EXPERT_DP = "expert_dp"
"""Key of the expert-data-parallel group in `ParallelDims.group_shapes` (the dp ranks, with all
their cp ranks, that hold the same experts and reduce their gradients; the ledger files it under
the DP axis)."""


@dataclass(frozen=True)
class RankCoords:
    """Coordinates of one rank on the grid."""

    tp_rank: int
    cp_rank: int
    dp_rank: int
    pp_rank: int


@dataclass(frozen=True)
class ParallelDims:
    """Sizes of the parallel axes; validated here, every number in the message."""

    dp: int = 1
    """Data-parallel size (ep groups are blocks of it)."""
    tp: int = 1
    """Tensor-parallel size."""
    pp: int = 1
    """Pipeline-parallel size."""
    cp: int = 1
    """Context-parallel size."""
    ep: int = 1
    """Expert-parallel size (divides dp)."""

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "cp", "ep"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} ({value}) must be an integer >= 1")
        if self.dp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide dp ({self.dp})")

    @classmethod
    def from_plan(cls, plan) -> "ParallelDims":
        """The grid of a `modelplan.specs.plan.Plan` (anything with dp, tp, pp, cp, ep)."""
        return cls(dp=plan.dp, tp=plan.tp, pp=plan.pp, cp=plan.cp, ep=plan.ep)

    def check_world_size(self, world_size: int) -> None:
        """Raise unless the grid has exactly `world_size` ranks (both products in the message)."""
        if world_size != self.world_size:
            raise ValueError(
                f"dp ({self.dp}) x tp ({self.tp}) x pp ({self.pp}) x cp ({self.cp}) = "
                f"{self.world_size} ranks, but the world has {world_size}"
            )

    @property
    def axes(self) -> tuple[tuple[Axis, int], ...]:
        """(axis, size) in rank order, fastest first (ep is a sub-axis of dp, not listed)."""
        return ((Axis.TP, self.tp), (Axis.CP, self.cp), (Axis.DP, self.dp), (Axis.PP, self.pp))

    @property
    def world_size(self) -> int:
        """Total ranks: dp * tp * pp * cp (ep lives inside dp)."""
        return self.dp * self.tp * self.pp * self.cp

    def stride(self, axis: Axis) -> int:
        """Rank distance between neighbours along `axis`: the product of the faster axes."""
        axis = Axis(axis)
        if axis is Axis.EP:
            return self.tp * self.cp
        out = 1
        for a, size in self.axes:
            if a is axis:
                return out
            out *= size
        raise ValueError(f"axis ({axis.value}) is not one of tp, cp, dp, pp, ep")

    def rank(self, tp_rank: int = 0, cp_rank: int = 0, dp_rank: int = 0, pp_rank: int = 0) -> int:
        """Global rank of a coordinate (tp fastest, then cp, dp, pp)."""
        return tp_rank + self.tp * (cp_rank + self.cp * (dp_rank + self.dp * pp_rank))

    def coords(self, rank: int) -> RankCoords:
        """Coordinates of a global rank."""
        if not 0 <= rank < self.world_size:
            raise ValueError(f"rank ({rank}) must be in [0, {self.world_size})")
        tp_rank, rest = rank % self.tp, rank // self.tp
        cp_rank, rest = rest % self.cp, rest // self.cp
        dp_rank, pp_rank = rest % self.dp, rest // self.dp
        return RankCoords(tp_rank, cp_rank, dp_rank, pp_rank)

    def group(self, axis: Axis | str, rank: int) -> tuple[int, ...]:
        """The global ranks of `rank`'s group along `axis`, in group-rank order (WORLD: all)."""
        axis = Axis(axis)
        if axis is Axis.WORLD:
            return tuple(range(self.world_size))
        c = self.coords(rank)
        if axis is Axis.EP:
            start = (c.dp_rank // self.ep) * self.ep
            return tuple(self.rank(c.tp_rank, c.cp_rank, d, c.pp_rank) for d in range(start, start + self.ep))
        size, stride = dict(self.axes)[axis], self.stride(axis)
        first = rank - self.group_index(axis, rank) * stride
        return tuple(first + i * stride for i in range(size))

    def groups(self, axis: Axis | str) -> list[tuple[int, ...]]:
        """Every distinct group along `axis`, ordered by their lowest rank."""
        seen: dict[tuple[int, ...], None] = {}
        for r in range(self.world_size):
            seen.setdefault(self.group(axis, r), None)
        return list(seen)

    def expert_dp_group(self, rank: int) -> tuple[int, ...]:
        """The dp ranks of `rank`'s dp group holding the same experts (every ep-th dp rank)."""
        me = self.coords(rank).dp_rank % self.ep
        return tuple(r for r in self.group(Axis.DP, rank) if self.coords(r).dp_rank % self.ep == me)

    def group_index(self, axis: Axis | str, rank: int, group_size: int | None = None) -> int:
        """`rank`'s index in its group along `axis`. A `group_size` other than the axis size
        names the two smaller groups on an axis: the tied-embedding pair (first and last
        pipeline rank, PP size 2) and the expert-data-parallel group (DP size dp / ep)."""
        axis, c = Axis(axis), self.coords(rank)
        if axis is Axis.TP:
            return c.tp_rank
        if axis is Axis.CP:
            return c.cp_rank
        if axis is Axis.PP:
            return c.pp_rank if group_size in (None, self.pp) else int(c.pp_rank != 0)
        if axis is Axis.DP:
            if self.cp > 1 and group_size == self.dp * self.cp:  # the gradient group: dp x cp ranks
                return c.cp_rank + self.cp * c.dp_rank
            return c.dp_rank if group_size in (None, self.dp) else c.dp_rank // self.ep
        if axis is Axis.EP:
            return c.dp_rank % self.ep
        return rank

    def group_shapes(self, gpus_per_node: int) -> dict[Axis | str, GroupShape]:
        """How each axis's groups sit on nodes of `gpus_per_node` GPUs, as the planner prices
        them: an axis whose ranks are `stride` apart has `gpus_per_node // stride` ranks per node
        while stride < gpus_per_node, else one rank per node (each on its own NIC). The DP entry
        is the gradient-reduction group, dp x cp ranks of stride tp (Megatron's data-parallel
        group with cp); EXPERT_DP is every ep-th dp rank with all its cp ranks, placed exactly."""
        tp, cp, dp, ep = self.tp, self.cp, self.dp, self.ep
        expert_ranks = [tp * (c + cp * d) for d in range(0, dp, ep) for c in range(cp)]
        per_node: dict[int, int] = {}
        for r in expert_ranks:
            per_node[r // gpus_per_node] = per_node.get(r // gpus_per_node, 0) + 1
        return {
            Axis.TP: strided_shape(tp, 1, gpus_per_node),
            Axis.CP: strided_shape(cp, tp, gpus_per_node),
            Axis.DP: strided_shape(dp * cp, tp, gpus_per_node),
            Axis.PP: strided_shape(self.pp, tp * cp * dp, gpus_per_node),
            Axis.EP: strided_shape(ep, tp * cp, gpus_per_node),
            EXPERT_DP: shape(len(expert_ranks), max(per_node.values())),
        }


def shape(size: int, ranks_per_node: int) -> GroupShape:
    """A group of `size` ranks filling nodes `ranks_per_node` at a time (the last may be short)."""
    if size == 1:
        return GroupShape(1, 1, 1, 1)
    nodes = -(-size // ranks_per_node)
    return GroupShape(size, nodes, ranks_per_node, size - (nodes - 1) * ranks_per_node)


def strided_shape(size: int, stride: int, gpus_per_node: int) -> GroupShape:
    """Shape of a group of `size` ranks spaced `stride` apart in the global rank order."""
    if size == 1:
        return shape(1, 1)
    if stride >= gpus_per_node:
        return shape(size, 1)
    return shape(size, max(1, min(size, gpus_per_node // stride)))


def pair_shape(crosses_nodes: bool) -> GroupShape:
    """Two neighbouring ranks (pipeline stages, cp ring), on one node or on two."""
    return shape(2, 1 if crosses_nodes else 2)
