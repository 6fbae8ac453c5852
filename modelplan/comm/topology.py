"""Where a process group sits on a cluster, and the links its collectives run over.

A group is p ranks placed on K nodes with at most g of them on one node. Traffic between ranks
of one node uses the intra-node link (NVLink, xGMI); traffic between nodes uses each GPU's NIC.
Collectives whose many channels spread over the node's NICs (NCCL rings and trees) see the
node's aggregate g_min * B_nic at a node boundary; a single point-to-point message sees one NIC.

`cluster_links` flattens a `Cluster` into plain floats once (hashable), and `path_links` turns
that plus a group shape into the numbers the alpha-beta formulas read. Planners should call
`cluster_links` once and pass its result to the cost functions inside their loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import NamedTuple, Sequence

from modelplan.comm.fabric import alltoall_slowdown, ring_slowdown
from modelplan.comm.nccl_tuning import nccl_arch
from modelplan.errors import SpecError
from modelplan.specs.hardware import Cluster


class ClusterLinks(NamedTuple):
    """A cluster's link parameters as plain numbers (SI units)."""

    name: str
    gpus_per_node: int
    """GPUs of one NVLink domain (`Cluster.domain_gpus`: a node unless the intra switch spans nodes)."""
    nodes: int | None
    """NVLink domains available (`Cluster.domains`); None: open."""
    call_s: float
    """Fixed start-up of one collective call."""
    intra_alpha_s: float
    intra_Bps: float
    """Achievable intra-node bytes/s per GPU per direction (nominal x efficiency)."""
    intra_mesh: bool
    intra_name: str
    inter_alpha_s: float
    inter_Bps: float
    """Achievable bytes/s of one GPU's NIC share per direction."""
    inter_name: str
    fits: tuple[tuple[str, str, int | None, int, float, float], ...]
    """Measured (op, scope, ranks, min_bytes, alpha_s, busbw_Bps) overrides."""
    nvls_min_ranks: int = 0
    """Fewest ranks for NVLS in-switch AllReduce inside one node; 0: the node has no NVLS."""
    nvls_Bps: float = 0.0
    """Bytes/s per GPU per direction an NVLS reduction gets (intra_Bps x nvlsEfficiency)."""
    nvls_alpha_s: float = 0.0
    """Latency of one NVLS call (no per-call base added, as NCCL tuning.cc)."""
    leaf_nodes: int = 0
    """Nodes one leaf of the scale-out fabric joins at full rate; 0: non-blocking (`comm.fabric`)."""
    oversubscription: float = 1.0
    """Leaf down:up bandwidth ratio above `leaf_nodes`."""
    nccl_arch: str = ""
    """NCCL tuning.cc architecture row (volta, ampere, hopper, blackwell); '': not an NVIDIA
    accelerator, so no NCCL protocol model (`comm.nccl_tuning`)."""
    intra_nvlink: bool = True
    """The intra-node link is NVLink (tuning.cc NCCL_HW_NVLINK), not PCIe."""
    intra_protocols: tuple[str, ...] = ("ll", "ll128", "simple")
    """NCCL protocols inside a node (Link.nccl_protocols)."""
    inter_protocols: tuple[str, ...] = ("ll", "ll128", "simple")
    """NCCL protocols groups that span nodes may use (Link.nccl_protocols of both links)."""
    net_latency_s: float = 0.0
    """The NCCL net plugin's reported latency (Link.nccl_net_latency_us of the inter link)."""


def cluster_links(cluster: Cluster | ClusterLinks) -> ClusterLinks:
    """Flatten a cluster spec into the numbers the cost model reads (idempotent)."""
    if isinstance(cluster, ClusterLinks):
        return cluster
    intra, inter = cluster.intra, cluster.inter
    return ClusterLinks(
        name=cluster.name,
        gpus_per_node=cluster.domain_gpus,
        nodes=cluster.domains,
        call_s=cluster.call_latency_us * 1e-6,
        intra_alpha_s=intra.latency_us * 1e-6,
        intra_Bps=intra.effective_bandwidth_Bps,
        intra_mesh=intra.fabric == "mesh",
        intra_name=intra.name,
        # a network hop of the alpha-beta formulas is tuning.cc's Simple interLat: the link's hop
        # latency plus the net plugin's latency twice ("the flush extra latency")
        inter_alpha_s=(inter.latency_us + 2 * inter.nccl_net_latency_us) * 1e-6,
        inter_Bps=inter.effective_bandwidth_Bps,
        inter_name=inter.name,
        fits=tuple(
            (f.op, f.scope, f.ranks, f.min_bytes, f.alpha_us * 1e-6, f.busbw_gbps * 1e9)
            for f in cluster.collective_fits
        ),
        nvls_min_ranks=intra.nvls_min_ranks if intra.nvls else 0,
        nvls_Bps=intra.effective_bandwidth_Bps * intra.nvls_efficiency if intra.nvls else 0.0,
        nvls_alpha_s=intra.nvls_latency_us * 1e-6 if intra.nvls else 0.0,
        leaf_nodes=cluster.fabric.leaf_nodes or 0,
        oversubscription=cluster.fabric.oversubscription,
        nccl_arch=nccl_arch(cluster.accelerator.name),
        intra_nvlink="pcie" not in intra.name.lower(),
        intra_protocols=tuple(intra.nccl_protocols),
        inter_protocols=tuple(p for p in intra.nccl_protocols if p in inter.nccl_protocols),
        net_latency_s=inter.nccl_net_latency_us * 1e-6,
    )


@dataclass(frozen=True)
class GroupShape:
    """How a group of ranks is spread over nodes."""

    size: int
    """p: ranks in the group."""
    nodes: int
    """K: nodes the group touches."""
    ranks_per_node: int
    """g: most ranks of the group on one node."""
    min_ranks_per_node: int
    """Fewest ranks of the group on one of its nodes (= g unless the placement is ragged)."""

    @property
    def crosses_nodes(self) -> bool:
        """True when the group spans more than one node."""
        return self.nodes > 1


def group_shape(
    size: int, ranks_per_node: int | None, gpus_per_node: int, nodes: int | None = None
) -> GroupShape:
    """Shape of a group of `size` ranks placed `ranks_per_node` to a node (None: fill nodes).

    Nodes are filled in order, so 12 ranks at 8 per node are 8 + 4 on 2 nodes. `nodes` is the
    cluster's fixed node count (None: open).
    """
    if size < 1:
        raise SpecError(f"group size ({size}) must be >= 1")
    g = min(size, gpus_per_node) if ranks_per_node is None else ranks_per_node
    if g < 1:
        raise SpecError(f"ranks_per_node ({g}) must be >= 1")
    if g > gpus_per_node:
        raise SpecError(f"ranks_per_node ({g}) must be <= gpus_per_node ({gpus_per_node})")
    if g > size:
        raise SpecError(f"ranks_per_node ({g}) must be <= the group size ({size})")
    k = -(-size // g)
    if nodes is not None and k > nodes:
        raise SpecError(
            f"a group of {size} ranks at {g} per node needs {k} nodes, "
            f"but the cluster has {nodes} ({nodes * gpus_per_node} GPUs)"
        )
    g_min = size - (k - 1) * g if k > 1 else g
    return GroupShape(size=size, nodes=k, ranks_per_node=g, min_ranks_per_node=g_min)


def shape_of_ranks(ranks: Sequence[int], gpus_per_node: int, nodes: int | None = None) -> GroupShape:
    """Shape of a group given by its global ranks (rank r lives on node r // gpus_per_node)."""
    if not ranks:
        raise SpecError("a group needs at least one rank")
    if len(set(ranks)) != len(ranks):
        raise SpecError(f"group ranks {tuple(ranks)} repeat a rank")
    if min(ranks) < 0:
        raise SpecError(f"group ranks {tuple(ranks)} must be >= 0")
    per_node: dict[int, int] = {}
    for r in ranks:
        per_node[r // gpus_per_node] = per_node.get(r // gpus_per_node, 0) + 1
    if nodes is not None and max(per_node) >= nodes:
        raise SpecError(
            f"rank {max(ranks)} lives on node {max(per_node)}, "
            f"but the cluster has {nodes} nodes of {gpus_per_node}"
        )
    counts = per_node.values()
    return GroupShape(len(ranks), len(per_node), max(counts), min(counts))


class PathLinks(NamedTuple):
    """The numbers one collective's formulas read for one group shape (SI units)."""

    p: int
    g: int
    k: int
    call_s: float
    ai: float
    """Intra-node alpha (s per hop)."""
    bi: float
    """Intra-node bytes/s per GPU for collectives that use all of a GPU's links (rings)."""
    bi_pair: float
    """Intra-node bytes/s of one message to one peer (a whole mesh is not one peer's)."""
    ae: float
    """Inter-node alpha (s per hop)."""
    be: float
    """One GPU's NIC bytes/s."""
    b_ring: float
    """Bytes/s per rank of a multi-channel ring or tree over the group: the slower of the
    intra-node link and the node boundary (g_min NICs); NCCL tuning.cc bwIntra/bwInter."""
    lg_p: int
    """ceil(lg p): rounds of a recursive (binomial, doubling, halving) algorithm."""
    lg_k: int
    """ceil(lg k): how many of those rounds cross nodes (node-aware order)."""
    nvls_min: int = 0
    """Fewest ranks for NVLS in one node (0: no NVLS)."""
    b_nvls: float = 0.0
    """Bytes/s per GPU per direction of an NVLS reduction."""
    a_nvls: float = 0.0
    """Latency of one NVLS call."""
    be_a2a: float = 0.0
    """One GPU's NIC bytes/s for all-to-all traffic over an oversubscribed fabric (0: be)."""


@lru_cache(maxsize=4096)
def path_links(links: ClusterLinks, size: int, ranks_per_node: int, min_ranks_per_node: int) -> PathLinks:
    """Link numbers for a group of `size` ranks, `ranks_per_node` (g) to a node."""
    g = ranks_per_node
    k = -(-size // g)
    gpn = links.gpus_per_node
    if links.intra_mesh and gpn > 1:
        # mesh: a GPU's bandwidth is split over gpn-1 direct links; g ranks use g-1 of them
        bi = links.intra_Bps * max(g - 1, 1) / (gpn - 1)
        bi_pair = links.intra_Bps / (gpn - 1)
    else:
        bi = bi_pair = links.intra_Bps
    be = links.inter_Bps
    be_a2a = 0.0
    if links.oversubscription > 1.0 and links.leaf_nodes and k > links.leaf_nodes:  # comm/fabric.py
        be_a2a = be / alltoall_slowdown(k, links.leaf_nodes, links.oversubscription)
        be /= ring_slowdown(k, links.leaf_nodes, links.oversubscription)
    # NCCL's channels spread a node boundary over its GPUs' NICs (comm_hw.md §2.6)
    b_ring = bi if k == 1 else min(bi, min_ranks_per_node * be) if g > 1 else be
    lg_p, lg_k = (size - 1).bit_length(), (k - 1).bit_length()
    return PathLinks(size, g, k, links.call_s, links.intra_alpha_s, bi, bi_pair,
                     links.inter_alpha_s, be, b_ring, lg_p, lg_k,
                     links.nvls_min_ranks, links.nvls_Bps, links.nvls_alpha_s, be_a2a)


def path_for(links: ClusterLinks, shape: GroupShape) -> PathLinks:
    """`path_links` for a `GroupShape`."""
    return path_links(links, shape.size, shape.ranks_per_node, shape.min_ranks_per_node)
