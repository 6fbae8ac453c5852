"""How many processes per node and how many nodes a plan's world needs (for torchrun lines)."""

from __future__ import annotations

from modelplan.specs.base import Spec
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan

# Used only when a plan document carries no cluster; the export says so in its notes.
ASSUMED_GPUS_PER_NODE = 8


class LaunchGeometry(Spec):
    """Processes per node and node count for `torchrun`."""

    world_size: int
    """Ranks the plan needs: dp * tp * pp * cp."""
    nproc_per_node: int
    """Processes (GPUs) per node."""
    nnodes: int
    """Nodes."""
    notes: tuple[str, ...] = ()
    """Assumptions made to get here (no cluster given, a partial last node)."""


def launch_geometry(plan: Plan, cluster: Cluster | None) -> LaunchGeometry:
    """Fill whole nodes of `cluster.gpus_per_node`; a world smaller than a node uses one node."""
    world = plan.world_size
    notes: list[str] = []
    if cluster is None:
        per_node = ASSUMED_GPUS_PER_NODE
        notes.append(f"the plan names no cluster: assuming {per_node} GPUs per node")
    else:
        per_node = cluster.gpus_per_node
    if world <= per_node:
        return LaunchGeometry(world_size=world, nproc_per_node=world, nnodes=1, notes=tuple(notes))
    nnodes = -(-world // per_node)  # ceil division
    if world % per_node:
        notes.append(
            f"world size ({world}) is not a multiple of gpus_per_node ({per_node}): "
            f"the last of {nnodes} nodes is partly used; torchrun needs equal nodes"
        )
    if cluster is not None and cluster.nodes is not None and nnodes > cluster.nodes:
        notes.append(
            f"the plan needs {nnodes} nodes but cluster '{cluster.name}' has {cluster.nodes}"
        )
    return LaunchGeometry(
        world_size=world, nproc_per_node=per_node, nnodes=nnodes, notes=tuple(notes)
    )
