"""The collective cost model's entry points: time of one collective, or its full cost.

`collective_time_s` is the hot-loop call (plain floats, no pydantic objects built); pass it
`cluster_links(cluster)` once instead of the `Cluster` to skip even the flattening.
`collective_cost` returns a frozen `CollectiveCost` with bytes, steps, links and bandwidths.

Message sizes follow nccl-tests: AllReduce / Broadcast / Reduce / SendRecv: the per-rank buffer;
AllGather: the whole gathered output; ReduceScatter: the whole input; AllToAll: the whole
per-rank send buffer; Barrier: ignored.
"""

from __future__ import annotations

from functools import lru_cache
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from modelplan.comm.alphabeta import FORMULAS, NCCL_ALGOS, Estimate, Formula, invalid_reason
from modelplan.comm.bandwidth import algbw_gbps, busbw_factor
from modelplan.comm.nccl_tuning import Choice, choices
from modelplan.comm.ops import Algo, Collective, parse_algo, parse_collective
from modelplan.comm.topology import (
    ClusterLinks,
    GroupShape,
    PathLinks,
    cluster_links,
    group_shape,
    path_links,
)
from modelplan.errors import SpecError
from modelplan.specs.hardware import Cluster


class CollectiveCost(BaseModel):
    """One collective priced on a cluster."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    op: Collective
    """The operation priced."""
    algo: Algo
    """The algorithm priced (the one `auto` picked, or `fitted`)."""
    protocol: str = ""
    """NCCL protocol priced (ll, ll128, simple) where NCCL's tuning model priced it; '' otherwise."""
    nbytes: int
    """Message size in nccl-tests' convention for `op`."""
    group_size: int
    """p: ranks in the group."""
    ranks_per_node: int
    """g: most of the group's ranks on one node."""
    nodes: int
    """k: nodes the group spans."""
    time_s: float
    """Predicted seconds (alpha-beta; the fit when algo is 'fitted')."""
    bytes_sent_per_rank: float
    """Bytes sent by the busiest rank (all ranks alike for ring, pairwise, halving-doubling)."""
    bytes_received_per_rank: float
    """Bytes received by the busiest rank."""
    inter_node_bytes_per_rank: float
    """Bytes per rank through its NIC (0 when the group stays in one node)."""
    steps: int
    """Sequential communication rounds (ring AllReduce: 2(p-1))."""
    links: tuple[str, ...]
    """Names of the cluster links the collective uses."""
    algbw_gbps: float
    """nccl-tests algorithm bandwidth: nbytes / time, GB/s."""
    busbw_gbps: float
    """nccl-tests bus bandwidth: algbw x busbw_factor(op, group_size), GB/s."""


Fit = tuple[tuple[int, float, float], ...]
"""A cluster's measured (min_bytes, alpha_s, busbw_Bps) for one op and group, by min_bytes."""


def _fit(links: ClusterLinks, op: Collective, p: int, k: int) -> Fit | None:
    """The measured fits for this op and scope: those for the exact group size, else the
    size-independent ones (ranks = None)."""
    scope = "inter" if k > 1 else "intra"
    exact, generic = [], []
    for f_op, f_scope, f_ranks, min_bytes, alpha_s, busbw_Bps in links.fits:
        if f_op == op and f_scope == scope:
            if f_ranks == p:
                exact.append((min_bytes, alpha_s, busbw_Bps))
            elif f_ranks is None:
                generic.append((min_bytes, alpha_s, busbw_Bps))
    return tuple(sorted(exact or generic)) or None


class _Plan(NamedTuple):
    """Everything about one (op, algo, group placement, cluster) that does not depend on size."""

    shape: GroupShape
    path: PathLinks | None
    """None for a group of one rank (nothing to send)."""
    candidates: tuple[tuple[Algo, Formula], ...]
    fit: Fit | None
    """The measured fits when the fitted model prices this call."""
    nccl: tuple[Choice, ...] = ()
    """NCCL's (algorithm, protocol) table when tuning.cc's model prices this call (NVIDIA)."""


TUNED_OPS = frozenset({Collective.ALL_REDUCE, Collective.ALL_GATHER, Collective.REDUCE_SCATTER,
                       Collective.BROADCAST, Collective.REDUCE})
"""Ops NCCL's tuning.cc prices by (algorithm, protocol); the others keep the alpha-beta formulas."""
TUNED_ALGOS = frozenset({Algo.RING, Algo.TREE, Algo.NVLS, Algo.PAT})


def _place(group_size: int, placement: int | None | GroupShape, links: ClusterLinks) -> GroupShape:
    """The group's shape from ranks-per-node (or None: fill nodes) or a ready GroupShape."""
    if not isinstance(placement, GroupShape):
        return group_shape(group_size, placement, links.gpus_per_node, links.nodes)
    if placement.size != group_size:
        raise SpecError(f"group_size ({group_size}) differs from the placement's {placement.size} ranks")
    if placement.ranks_per_node > links.gpus_per_node:
        raise SpecError(f"ranks_per_node ({placement.ranks_per_node}) must be <= gpus_per_node "
                        f"({links.gpus_per_node})")
    if links.nodes is not None and placement.nodes > links.nodes:
        raise SpecError(f"the group spans {placement.nodes} nodes, but the cluster has {links.nodes}")
    return placement


@lru_cache(maxsize=8192)
def _plan(op: Collective, algo: Algo, group_size: int, placement: int | None | GroupShape,
          links: ClusterLinks) -> _Plan:
    shape = _place(group_size, placement, links)
    if group_size == 1:
        return _Plan(shape, None, (), None)
    L = path_links(links, group_size, shape.ranks_per_node, shape.min_ranks_per_node)
    fit = _fit(links, op, L.p, L.k) if algo in (Algo.AUTO, Algo.FITTED) else None
    if algo is Algo.FITTED and fit is None:
        scope = "inter" if L.k > 1 else "intra"
        raise SpecError(f"cluster '{links.name}' has no fitted {op.value} for {scope}-node groups")
    tuned = bool(links.nccl_arch) and op in TUNED_OPS
    if algo in (Algo.AUTO, Algo.FITTED, Algo.NCCL):
        # NVIDIA: auto is what NCCL runs; elsewhere (RCCL, MPI) every modelled algorithm but PAT
        nccl_only = algo is Algo.NCCL or bool(links.nccl_arch)
        allowed = NCCL_ALGOS.get(op, frozenset({Algo.RING})) if nccl_only else FORMULAS[op]
        cands = tuple(
            (a, f) for a, f in FORMULAS[op].items()
            if a in allowed and (a is not Algo.PAT or tuned)
            and invalid_reason(op, a, L.p, L.g, L.k, L.nvls_min) is None
        )
    else:
        reason = invalid_reason(op, algo, L.p, L.g, L.k, L.nvls_min)
        if reason is None and algo is Algo.PAT and not links.nccl_arch:
            reason = f"pat is NCCL's, and cluster '{links.name}' has no NVIDIA accelerator"
        if reason is not None:
            raise SpecError(reason)
        cands = ((algo, FORMULAS[op][algo]),)
        tuned = tuned and algo in TUNED_ALGOS
    nccl: tuple[Choice, ...] = ()
    if tuned:
        protos = links.inter_protocols if L.k > 1 else links.intra_protocols
        nccl = choices(op, L, links.nccl_arch, links.intra_nvlink, frozenset(a for a, _ in cands), protos,
                       links.net_latency_s * 1e6)
    return _Plan(shape, L, cands, fit, nccl)


def _fitted(op: Collective, n: float, plan: _Plan) -> Estimate:
    """Fitted alpha + n * busbw_factor / busbw; bytes and steps from the op's first algorithm."""
    fits: Fit = plan.fit  # type: ignore[assignment]
    # the fit of the largest min_bytes <= n (the first one for messages below them all)
    _, alpha_s, busbw_Bps = next((f for f in reversed(fits) if f[0] <= n), fits[0])
    base = next(iter(FORMULAS[op].values()))(n, plan.path)  # type: ignore[arg-type]
    return base._replace(time_s=alpha_s + n * busbw_factor(op, plan.path.p) / busbw_Bps)  # type: ignore[union-attr]


def _nccl_pick(nccl: tuple[Choice, ...], n: float) -> Choice:
    """NCCL's (algorithm, protocol) for n bytes: the least tuning.cc time, ties to the first listed
    (enqueue.cc topoGetAlgoInfo; the pipeline fill, `Choice.fill_s`, is not part of the choice)."""
    return min(nccl, key=lambda c: c.time_s(n))


def _estimate(op: Collective, n: float, plan: _Plan) -> tuple[Algo, str, Estimate]:
    """(algorithm, protocol, estimate): the fit, NCCL's fastest (algorithm, protocol) with the
    algorithm's bytes and steps, or the fastest candidate (ties go to the first listed)."""
    if plan.fit is not None:
        return Algo.FITTED, "", _fitted(op, n, plan)
    if plan.nccl:
        pick = _nccl_pick(plan.nccl, n)
        est = FORMULAS[op][pick.algo](n, plan.path)  # type: ignore[arg-type]
        return pick.algo, pick.proto, est._replace(time_s=pick.run_time_s(n))
    best_algo, best = None, None
    for algo, formula in plan.candidates:
        est = formula(n, plan.path)  # type: ignore[arg-type]
        if best is None or est.time_s < best.time_s:
            best_algo, best = algo, est
    return best_algo, "", best  # type: ignore[return-value]


def _prepare(op, nbytes, group_size, ranks_per_node, cluster, algo) -> tuple[Collective, _Plan, ClusterLinks]:
    op = op if isinstance(op, Collective) else parse_collective(op)
    algo = algo if isinstance(algo, Algo) else parse_algo(algo)
    if nbytes < 0:
        raise SpecError(f"nbytes ({nbytes}) must be >= 0")
    links = cluster_links(cluster)
    return op, _plan(op, algo, group_size, ranks_per_node, links), links  # type: ignore[arg-type]


def collective_time_s(
    op: Collective | str,
    nbytes: float,
    group_size: int,
    ranks_per_node: int | None | GroupShape,
    cluster: Cluster | ClusterLinks,
    algo: Algo | str = Algo.AUTO,
) -> float:
    """Seconds one collective takes (alpha-beta; 0 for a group of one rank).

    nbytes (nccl-tests' convention): AllReduce / Broadcast / Reduce / SendRecv: the per-rank
    buffer; AllGather: the whole gathered output (p x per-rank input); ReduceScatter: the whole
    input (p x per-rank output); AllToAll: the whole per-rank send buffer; Barrier: ignored.
    ranks_per_node: how many of the group's ranks share a node (None: fill nodes, i.e.
    min(group_size, gpus_per_node)), or a `GroupShape` from `shape_of_ranks(global ranks)`.
    algo: 'auto' (NVIDIA: NCCL's tuning.cc pick of (algorithm, protocol); others: the fastest
    modelled algorithm; a cluster's measured fit first), 'nccl' (the fastest of what NCCL runs), or
    one `Algo` (ring / tree / nvls / pat on NVIDIA: the best protocol for it, as NCCL_ALGO). For
    hot loops pass `cluster_links(cluster)` as `cluster`.
    """
    op = op if isinstance(op, Collective) else parse_collective(op)
    algo = algo if isinstance(algo, Algo) else parse_algo(algo)
    if nbytes < 0:
        raise SpecError(f"nbytes ({nbytes}) must be >= 0")
    links = cluster if isinstance(cluster, ClusterLinks) else cluster_links(cluster)
    return _time_s(op, nbytes, group_size, ranks_per_node, links, algo)


@lru_cache(maxsize=65536)
def _time_s(op: Collective, nbytes: float, group_size: int, ranks_per_node: int | None | GroupShape,
            links: ClusterLinks, algo: Algo) -> float:
    """Memoised body of `collective_time_s` (planners ask the same question many times)."""
    plan = _plan(op, algo, group_size, ranks_per_node, links)
    if plan.path is None:
        return 0.0
    if plan.fit is not None:
        return _fitted(op, nbytes, plan).time_s
    n = float(nbytes)
    if plan.nccl:  # the chosen kernel's pipeline fill is added after the choice
        return _nccl_pick(plan.nccl, n).run_time_s(n)
    L = plan.path
    return min(formula(n, L).time_s for _, formula in plan.candidates)


def collective_cost(
    op: Collective | str,
    nbytes: int,
    group_size: int,
    ranks_per_node: int | None | GroupShape,
    cluster: Cluster | ClusterLinks,
    algo: Algo | str = Algo.AUTO,
) -> CollectiveCost:
    """Time, bytes per rank, steps, links and nccl-tests bandwidths of one collective.

    Arguments as `collective_time_s` (nbytes in nccl-tests' convention: AllReduce per-rank
    buffer, AllGather whole output, ReduceScatter whole input, AllToAll whole send buffer).
    """
    op, plan, links = _prepare(op, nbytes, group_size, ranks_per_node, cluster, algo)
    shape = plan.shape
    if plan.path is None:
        chosen, proto, est = parse_algo(algo), "", Estimate(0.0, 0.0, 0.0, 0, 0.0)
    else:
        chosen, proto, est = _estimate(op, float(nbytes), plan)
    used = []
    if shape.ranks_per_node > 1:
        used.append(links.intra_name)
    if shape.nodes > 1:
        used.append(links.inter_name)
    algbw = algbw_gbps(nbytes, est.time_s) if op is not Collective.BARRIER else 0.0
    return CollectiveCost(
        op=op,
        algo=chosen,
        protocol=proto,
        nbytes=int(nbytes),
        group_size=group_size,
        ranks_per_node=shape.ranks_per_node,
        nodes=shape.nodes,
        time_s=est.time_s,
        bytes_sent_per_rank=est.sent,
        bytes_received_per_rank=est.received,
        inter_node_bytes_per_rank=est.inter_bytes,
        steps=est.steps,
        links=tuple(used),
        algbw_gbps=algbw,
        busbw_gbps=algbw * busbw_factor(op, group_size),
    )


def valid_algos(op: Collective | str, group_size: int, ranks_per_node: int | None | GroupShape,
                cluster: Cluster | ClusterLinks) -> list[Algo]:
    """The concrete algorithms that can run `op` on this group (no auto, nccl or fitted)."""
    op = parse_collective(op)
    links = cluster_links(cluster)
    shape = _place(group_size, ranks_per_node, links)
    return [
        a for a in FORMULAS[op]
        if invalid_reason(op, a, group_size, shape.ranks_per_node, shape.nodes, links.nvls_min_ranks) is None
        and (a is not Algo.PAT or bool(links.nccl_arch))
    ]
