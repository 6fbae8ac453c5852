"""The vocabulary shared by the cost model, the communication list and the executor's ledger."""

from __future__ import annotations

from enum import StrEnum

from modelplan.errors import SpecError


class Collective(StrEnum):
    """Communication operations (names as in NCCL / torch.distributed)."""

    ALL_REDUCE = "all_reduce"
    ALL_GATHER = "all_gather"
    REDUCE_SCATTER = "reduce_scatter"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"
    BARRIER = "barrier"


class Axis(StrEnum):
    """Process-group axes of the rank grid (torchtitan's word 'axis', never 'dim')."""

    TP = "tp"
    CP = "cp"
    DP = "dp"
    PP = "pp"
    EP = "ep"
    WORLD = "world"


class Algo(StrEnum):
    """Collective algorithms the cost model knows (which op takes which: `comm.algorithms`)."""

    AUTO = "auto"
    """NVIDIA clusters: as `nccl`; others: the fastest modelled algorithm; or a measured fit."""
    NCCL = "nccl"
    """The fastest (algorithm, protocol) NCCL itself runs for the op, by NCCL's tuning.cc model on
    NVIDIA clusters (ring, tree, nvls, pat x LL, LL128, Simple; grouped send/recv)."""
    RING = "ring"
    """Ring: AllReduce = ring ReduceScatter + ring AllGather; Broadcast/Reduce = pipelined chain."""
    TREE = "tree"
    """NCCL's double binary tree AllReduce: a tree over nodes, a chain inside each node."""
    NVLS = "nvls"
    """NVLink SHARP AllReduce inside one NVSwitch node: the switch reduces and multicasts."""
    PAT = "pat"
    """NCCL's Parallel Aggregated Trees AllGather / ReduceScatter, one rank per node (NCCL 2.23+)."""
    BINOMIAL = "binomial"
    """Binomial tree: Broadcast, Reduce; AllReduce = binomial Reduce + binomial Broadcast."""
    RECURSIVE_DOUBLING = "recursive_doubling"
    """Recursive doubling: AllGather, and AllReduce exchanging the whole vector each round."""
    HALVING_DOUBLING = "halving_doubling"
    """Rabenseifner: recursive-halving ReduceScatter (+ recursive-doubling AllGather for AllReduce)."""
    HIERARCHICAL = "hierarchical"
    """Two-level: ring inside each node, ring across nodes over the 1/g shard, ring inside again."""
    PAIRWISE = "pairwise"
    """All-to-all in p-1 rounds, one peer per round."""
    DIRECT = "direct"
    """All messages posted at once (NCCL grouped send/recv): all-to-all, send/recv."""
    DISSEMINATION = "dissemination"
    """Barrier in ceil(lg p) rounds (Hensgen, Finkel & Manber 1988)."""
    FITTED = "fitted"
    """The cluster's measured alpha-beta fit for this op (Cluster.collective_fits)."""


def _squash(name: str) -> str:
    return name.strip().lower().replace("-", "").replace("_", "").replace(" ", "")


_COLLECTIVE_ALIASES = {_squash(c.value): c for c in Collective} | {
    "bcast": Collective.BROADCAST,
    "alltoallv": Collective.ALL_TO_ALL,
    "a2a": Collective.ALL_TO_ALL,
    "p2p": Collective.SEND_RECV,
}
_ALGO_ALIASES = {_squash(a.value): a for a in Algo} | {
    "rabenseifner": Algo.HALVING_DOUBLING,
    "doublebinarytree": Algo.TREE,
    "recursivehalving": Algo.HALVING_DOUBLING,
    "twolevel": Algo.HIERARCHICAL,
    "nvlinksharp": Algo.NVLS,
    "parallelaggregatedtrees": Algo.PAT,
}


def parse_collective(name: str | Collective) -> Collective:
    """A collective from any common spelling: all_reduce, all-reduce, allreduce, AllReduce,
    all_reduce_perf (the nccl-tests binary)."""
    if isinstance(name, Collective):
        return name
    key = _squash(name)
    key = key[: -len("perf")] if key.endswith("perf") else key
    if key not in _COLLECTIVE_ALIASES:
        names = ", ".join(c.value for c in Collective)
        raise SpecError(f"unknown collective '{name}' (one of {names})")
    return _COLLECTIVE_ALIASES[key]


def parse_algo(name: str | Algo) -> Algo:
    """An algorithm from its name or a common alias (rabenseifner, double-binary-tree)."""
    if isinstance(name, Algo):
        return name
    key = _squash(name)
    if key not in _ALGO_ALIASES:
        names = ", ".join(a.value for a in Algo)
        raise SpecError(f"unknown algorithm '{name}' (one of {names})")
    return _ALGO_ALIASES[key]
