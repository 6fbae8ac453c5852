"""What an oversubscribed scale-out fabric costs a group whose nodes span several leaves.

A leaf joins `leaf_nodes` nodes at the full NIC rate (a top-of-rack switch of a fat tree; one
rail's leaf of a rail-optimized scalable unit, where NCCL keeps GPU i's channels on NIC i and
PXN moves cross-rail data over NVLink first, so collectives see the rail as the leaf). Above the
leaf the up-links carry 1/oversubscription of what its nodes can send. When every group of an
axis runs its collective at once (data-parallel gradients, expert all-to-all), per rail and leaf:
- a ring (or NCCL's tree) crosses the leaf boundary with one flow per group: with n of a
  group's nodes in the leaf, the leaf's N nodes belong to N / n groups whose N / n flows share
  N / oversubscription up-links, slowed by max(1, oversubscription / n);
- an all-to-all sends (k - n) / k of every node's traffic out of the leaf, slowed by
  max(1, oversubscription * (k - n) / k) (bisection bound).
Groups are taken as contiguous nodes (n = min(k, leaf_nodes)), as the rank orders of the
engines place them. A non-blocking fabric (oversubscription 1) or a group inside one leaf is not
slowed.
"""

from __future__ import annotations


def nodes_in_leaf(group_nodes: int, leaf_nodes: int) -> int:
    """Nodes of a contiguous group under one leaf."""
    return min(group_nodes, leaf_nodes)


def ring_slowdown(group_nodes: int, leaf_nodes: int | None, oversubscription: float) -> float:
    """Factor on the NIC time of a ring or tree collective over `group_nodes` nodes."""
    if not leaf_nodes or group_nodes <= leaf_nodes or oversubscription <= 1.0:
        return 1.0
    return max(1.0, oversubscription / nodes_in_leaf(group_nodes, leaf_nodes))


def alltoall_slowdown(group_nodes: int, leaf_nodes: int | None, oversubscription: float) -> float:
    """Factor on the NIC time of an all-to-all over `group_nodes` nodes."""
    if not leaf_nodes or group_nodes <= leaf_nodes or oversubscription <= 1.0:
        return 1.0
    n = nodes_in_leaf(group_nodes, leaf_nodes)
    return max(1.0, oversubscription * (group_nodes - n) / group_nodes)
