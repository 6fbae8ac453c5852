"""Price collectives for the planner: which links each process group crosses, and how long one
collective takes on them (the project's alpha-beta model, `modelplan.comm.cost`).

Group shapes follow the Megatron rank order tp-cp-dp-pp (`modelplan.plan.grid`): an axis whose
ranks are `stride` apart (product of the faster axes) has `gpus_per_node // stride` ranks per
node while stride < gpus_per_node, else one rank per node (each on its own NIC). The planner
prices what NCCL runs (`algo="nccl"`: ring or tree), or a cluster's measured fits when it has
them (`auto`).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.comm.cost import collective_time_s
from modelplan.comm.ops import Algo, Axis, Collective
from modelplan.comm.topology import cluster_links
from modelplan.specs.hardware import Cluster


@dataclass(frozen=True)
class GroupShape:
    """Size of a process group and how many of its ranks share a node."""

    size: int
    ranks_per_node: int

    @property
    def crosses_nodes(self) -> bool:
        """Whether the group spans more than one node."""
        return self.size > self.ranks_per_node


def group_shape(size: int, stride: int, gpus_per_node: int) -> GroupShape:
    """Shape of a group of `size` ranks spaced `stride` apart in the global rank order."""
    if size == 1:
        return GroupShape(1, 1)
    if stride >= gpus_per_node:
        return GroupShape(size, 1)
    return GroupShape(size, max(1, min(size, gpus_per_node // stride)))


EXPERT_DP = "expert_dp"
"""Key of the expert-data-parallel group in `plan_group_shapes` (the dp/ep ranks that hold the
same experts and reduce their gradients; the ledger files it under the DP axis)."""


def plan_group_shapes(tp: int, cp: int, dp: int, pp: int, gpus_per_node: int, ep: int = 1
                      ) -> dict[Axis | str, GroupShape]:
    """Group shape of every axis of a tp-cp-dp-pp grid (Megatron order: tp fastest). The DP
    entry is the gradient-reduction group, dp x cp consecutive ranks of stride tp (Megatron's
    data-parallel group with cp); ep groups are blocks of ep consecutive dp ranks; the
    expert-data-parallel group is every ep-th dp rank, with all its cp ranks."""
    expert_ranks = [tp * (c + cp * d) for d in range(0, dp, ep) for c in range(cp)]
    per_node: dict[int, int] = {}
    for r in expert_ranks:
        per_node[r // gpus_per_node] = per_node.get(r // gpus_per_node, 0) + 1
    return {
        Axis.TP: group_shape(tp, 1, gpus_per_node),
        Axis.CP: group_shape(cp, tp, gpus_per_node),
        Axis.DP: group_shape(dp * cp, tp, gpus_per_node),
        Axis.PP: group_shape(pp, tp * cp * dp, gpus_per_node),
        Axis.EP: group_shape(ep, tp * cp, gpus_per_node),
        EXPERT_DP: GroupShape(len(expert_ranks), max(per_node.values())) if len(expert_ranks) > 1 else GroupShape(1, 1),
    }


class CommPricer:
    """Collective times on one cluster, memoised by (op, bytes, group shape)."""

    def __init__(self, cluster: Cluster) -> None:
        self.links = cluster_links(cluster)
        self.algo = Algo.AUTO if cluster.collective_fits else Algo.NCCL
        self._cache: dict[tuple, float] = {}

    def time_s(self, op: Collective, nbytes: float, shape: GroupShape) -> float:
        """Seconds for one collective; `nbytes` in nccl-tests' convention (per-rank buffer for
        AllReduce and send/recv, the whole gathered / scattered buffer for AllGather and
        ReduceScatter)."""
        if shape.size == 1 or nbytes <= 0:
            return 0.0
        key = (op, int(nbytes), shape.size, shape.ranks_per_node)
        hit = self._cache.get(key)
        if hit is None:
            hit = collective_time_s(op, int(nbytes), shape.size, shape.ranks_per_node, self.links, self.algo)
            self._cache[key] = hit
        return hit

    def p2p_time_s(self, nbytes: float, crosses_nodes: bool) -> float:
        """One point-to-point transfer between neighbouring pipeline stages."""
        shape = GroupShape(2, 1 if crosses_nodes else 2)
        return self.time_s(Collective.SEND_RECV, nbytes, shape)
