"""Placing a group on a cluster: nodes crossed, ranks per node, the links its collectives use."""

import pytest
from _comm_toy import B_E, B_I, toy_cluster

from modelplan.comm.topology import cluster_links, group_shape, path_links, shape_of_ranks
from modelplan.errors import SpecError
from modelplan.plan.dims import ParallelDims


def test_tp_group_inside_a_node():
    """Megatron order tp-dp: a tp=8 group is ranks 0..7, one node of 8."""
    grid = ParallelDims(dp=8, tp=8)
    shape = shape_of_ranks(grid.group("tp", 0), gpus_per_node=8)
    assert (shape.size, shape.nodes, shape.ranks_per_node) == (8, 1, 8)


def test_dp_group_one_rank_per_node():
    """tp=8, dp=8 on 8-GPU nodes: a dp group is ranks 0, 8, ..., 56: 8 nodes, 1 rank each."""
    grid = ParallelDims(dp=8, tp=8)
    shape = shape_of_ranks(grid.group("dp", 0), gpus_per_node=8)
    assert (shape.size, shape.nodes, shape.ranks_per_node) == (8, 8, 1)


def test_dp_group_of_64_over_8_nodes():
    """tp=1, dp=64: 8 nodes with 8 ranks each."""
    shape = shape_of_ranks(tuple(range(64)), gpus_per_node=8)
    assert (shape.nodes, shape.ranks_per_node, shape.min_ranks_per_node) == (8, 8, 8)


def test_fill_nodes_by_default():
    """12 ranks, 8 per node, filled in order: 8 + 4 on 2 nodes."""
    shape = group_shape(12, None, gpus_per_node=8)
    assert (shape.nodes, shape.ranks_per_node, shape.min_ranks_per_node) == (2, 8, 4)


def test_group_larger_than_fixed_cluster():
    """64 ranks need 8 nodes of 8; a 2-node cluster says so with every number."""
    with pytest.raises(SpecError, match=r"64 ranks at 8 per node needs 8 nodes, but the cluster has 2 \(16 GPUs\)"):
        group_shape(64, 8, gpus_per_node=8, nodes=2)


def test_ranks_per_node_above_node_size():
    """ranks_per_node cannot exceed the node."""
    with pytest.raises(SpecError, match=r"ranks_per_node \(16\) must be <= gpus_per_node \(8\)"):
        group_shape(32, 16, gpus_per_node=8)


def test_repeated_rank_rejected():
    """A group lists each rank once."""
    with pytest.raises(SpecError, match="repeat a rank"):
        shape_of_ranks((0, 1, 1), gpus_per_node=8)


def test_intra_node_group_uses_intra_link():
    """A group inside one node runs its rings at the intra-node bandwidth."""
    links = cluster_links(toy_cluster())
    assert path_links(links, 4, 4, 4).b_ring == B_I


def test_node_boundary_aggregates_the_nodes_nics():
    """8 ranks on 2 nodes of 4: rings cross each boundary over 4 NICs (4 x 10 GB/s)."""
    links = cluster_links(toy_cluster())
    assert path_links(links, 8, 4, 4).b_ring == 4 * B_E


def test_ragged_group_limited_by_smaller_node():
    """6 ranks as 4 + 2: the node with 2 ranks has only 2 NICs for the boundary."""
    links = cluster_links(toy_cluster())
    assert path_links(links, 6, 4, 2).b_ring == 2 * B_E
