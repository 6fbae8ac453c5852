"""The rank grid: which global ranks form each tp / cp / dp / pp / ep group.

Layout follows Megatron-LM's default order `tp-cp-ep-dp-pp`: tp varies fastest, then cp, then
dp, then pp (parallel_state.py docstring), so a tp group is a run of consecutive ranks and stays
inside one node whenever tp divides the node size.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.comm.ops import Axis


@dataclass(frozen=True)
class RankCoords:
    """Coordinates of one rank on the grid."""

    tp_rank: int
    cp_rank: int
    dp_rank: int
    pp_rank: int


@dataclass(frozen=True)
class RankGrid:
    """A dp x pp x tp (x cp) grid; ep groups are blocks of `ep` consecutive dp ranks."""

    dp: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("dp", "tp", "pp", "cp", "ep"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} ({getattr(self, name)}) must be >= 1")
        if self.dp % self.ep:
            raise ValueError(f"ep ({self.ep}) must divide dp ({self.dp})")

    @property
    def world_size(self) -> int:
        """Total ranks."""
        return self.dp * self.tp * self.pp * self.cp

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
        """The global ranks of `rank`'s group along `axis`, in group-rank order."""
        c = self.coords(rank)
        axis = Axis(axis)
        if axis is Axis.TP:
            return tuple(self.rank(i, c.cp_rank, c.dp_rank, c.pp_rank) for i in range(self.tp))
        if axis is Axis.CP:
            return tuple(self.rank(c.tp_rank, i, c.dp_rank, c.pp_rank) for i in range(self.cp))
        if axis is Axis.DP:
            return tuple(self.rank(c.tp_rank, c.cp_rank, i, c.pp_rank) for i in range(self.dp))
        if axis is Axis.PP:
            return tuple(self.rank(c.tp_rank, c.cp_rank, c.dp_rank, i) for i in range(self.pp))
        if axis is Axis.EP:
            start = (c.dp_rank // self.ep) * self.ep
            return tuple(
                self.rank(c.tp_rank, c.cp_rank, d, c.pp_rank) for d in range(start, start + self.ep)
            )
        return tuple(range(self.world_size))

    def groups(self, axis: Axis | str) -> list[tuple[int, ...]]:
        """Every distinct group along `axis`, ordered by their lowest rank."""
        seen: dict[tuple[int, ...], None] = {}
        for r in range(self.world_size):
            seen.setdefault(self.group(axis, r), None)
        return list(seen)
