"""Price collectives for the planner: how long one collective takes on the links its group
crosses (the project's alpha-beta model, `modelplan.comm.cost`). Group shapes come from
`modelplan.plan.dims.ParallelDims.group_shapes`. The planner prices what NCCL runs
(`algo="nccl"`: ring or tree), or a cluster's measured fits when it has them (`auto`).
"""

from __future__ import annotations

from modelplan.comm.cost import collective_time_s
from modelplan.comm.ops import Algo, Collective
from modelplan.comm.topology import GroupShape, cluster_links
from modelplan.plan.dims import pair_shape
from modelplan.specs.hardware import Cluster


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
        return self.time_s(Collective.SEND_RECV, nbytes, pair_shape(crosses_nodes))
