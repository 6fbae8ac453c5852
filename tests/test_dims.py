"""ParallelDims: Megatron-LM's tp-cp-ep-dp-pp rank order (parallel_state.py docstring example)."""

import pytest

from modelplan.comm.ops import Axis
from modelplan.plan.dims import EXPERT_DP, ParallelDims


def test_megatron_docstring_example():
    """16 GPUs, tp=2, pp=4, dp=2: tp groups [0,1],[2,3]..., pp groups [0,4,8,12],[1,5,9,13]...

    Megatron's docstring lists these groups for tp=2, pp=4 on 16 GPUs.
    """
    dims = ParallelDims(dp=2, tp=2, pp=4)
    assert dims.groups("tp")[:2] == [(0, 1), (2, 3)]
    assert dims.groups("pp")[:2] == [(0, 4, 8, 12), (1, 5, 9, 13)]
    assert dims.groups("dp")[:2] == [(0, 2), (1, 3)]


def test_coords_round_trip():
    """rank(coords(r)) == r for every rank."""
    dims = ParallelDims(dp=3, tp=2, pp=2, cp=2)
    for r in range(dims.world_size):
        c = dims.coords(r)
        assert dims.rank(c.tp_rank, c.cp_rank, c.dp_rank, c.pp_rank) == r


def test_cp_groups_have_stride_tp():
    """tp=2, cp=2: a cp group is ranks tp apart, (0, 2) and (1, 3) (cp varies right after tp)."""
    dims = ParallelDims(dp=1, tp=2, cp=2)
    assert dims.groups("cp") == [(0, 2), (1, 3)]


def test_ep_groups_are_blocks_of_dp():
    """ep=2 inside dp=4: expert groups pair dp ranks (0,1) and (2,3)."""
    dims = ParallelDims(dp=4, tp=1, pp=1, ep=2)
    assert dims.groups("ep") == [(0, 1), (2, 3)]


def test_expert_dp_group_is_every_ep_th_dp_rank():
    """dp=4, ep=2: rank 1 holds the same experts as rank 3 (dp ranks 1 and 3), index 1 of 2."""
    dims = ParallelDims(dp=4, ep=2)
    assert dims.expert_dp_group(1) == (1, 3)
    assert dims.group_index(Axis.DP, 3, group_size=2) == 1


def test_group_index_of_tied_embedding_pair():
    """pp=4: the last stage (pp_rank 3) is index 1 of the (first, last) pair, index 3 of the pipeline."""
    dims = ParallelDims(pp=4)
    assert dims.group_index(Axis.PP, 3, group_size=2) == 1
    assert dims.group_index(Axis.PP, 3) == 3


def test_every_rank_is_in_its_groups_at_its_index():
    """For each axis, group(axis, r)[group_index(axis, r)] == r (dp 4, tp 2, pp 2, cp 2, ep 2)."""
    dims = ParallelDims(dp=4, tp=2, pp=2, cp=2, ep=2)
    for axis in (Axis.TP, Axis.CP, Axis.DP, Axis.PP, Axis.EP):
        for r in range(dims.world_size):
            assert dims.group(axis, r)[dims.group_index(axis, r)] == r


def test_ep_must_divide_dp():
    """An ep that does not divide dp is rejected with both numbers."""
    with pytest.raises(ValueError, match=r"ep \(3\) must divide dp \(4\)"):
        ParallelDims(dp=4, ep=3)


def test_degrees_must_be_positive():
    """A zero degree is named with its value."""
    with pytest.raises(ValueError, match=r"tp \(0\) must be an integer >= 1"):
        ParallelDims(tp=0)


def test_world_size_mismatch_names_every_degree():
    """dp 2 x tp 2 x pp 2 x cp 1 = 8 ranks against a world of 6: every number in the message."""
    with pytest.raises(ValueError, match=r"dp \(2\) x tp \(2\) x pp \(2\) x cp \(1\) = 8 ranks, but the world has 6"):
        ParallelDims(dp=2, tp=2, pp=2).check_world_size(6)


def test_group_shapes_on_8_gpu_nodes():
    """tp 8, dp 4, pp 2 on 8-GPU nodes, worked by hand: tp fills a node; dp ranks are 8 apart, one
    per node (4 nodes); pp ranks 32 apart, one per node."""
    shapes = ParallelDims(dp=4, tp=8, pp=2).group_shapes(8)
    assert (shapes[Axis.TP].size, shapes[Axis.TP].nodes) == (8, 1)
    assert (shapes[Axis.DP].size, shapes[Axis.DP].ranks_per_node, shapes[Axis.DP].nodes) == (4, 1, 4)
    assert shapes[Axis.PP].crosses_nodes


def test_group_shapes_dp_with_cp_and_expert_dp():
    """tp 2, cp 2, dp 4, ep 2, 8-GPU nodes: the DP (gradient) group is dp x cp = 8 ranks 2 apart,
    4 per node (8 // 2); expert-dp ranks are 0, 2, 8, 10 (dp ranks 0, 2 with cp 0, 1): 2 per node."""
    shapes = ParallelDims(dp=4, tp=2, cp=2, ep=2).group_shapes(8)
    assert (shapes[Axis.DP].size, shapes[Axis.DP].ranks_per_node) == (8, 4)
    assert (shapes[EXPERT_DP].size, shapes[EXPERT_DP].ranks_per_node, shapes[EXPERT_DP].nodes) == (4, 2, 2)
