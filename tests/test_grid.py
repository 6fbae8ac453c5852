"""Rank grid: Megatron-LM's tp-cp-dp-pp order (parallel_state.py docstring example)."""

import pytest

from modelplan.plan.grid import RankGrid


def test_megatron_docstring_example():
    """16 GPUs, tp=2, pp=4, dp=2: tp groups [0,1],[2,3]..., pp groups [0,4,8,12],[1,5,9,13]...

    Megatron's docstring lists these groups for tp=2, pp=4 on 16 GPUs.
    """
    grid = RankGrid(dp=2, tp=2, pp=4)
    assert grid.groups("tp")[:2] == [(0, 1), (2, 3)]
    assert grid.groups("pp")[:2] == [(0, 4, 8, 12), (1, 5, 9, 13)]
    assert grid.groups("dp")[:2] == [(0, 2), (1, 3)]


def test_coords_round_trip():
    """rank(coords(r)) == r for every rank."""
    grid = RankGrid(dp=3, tp=2, pp=2, cp=2)
    for r in range(grid.world_size):
        c = grid.coords(r)
        assert grid.rank(c.tp_rank, c.cp_rank, c.dp_rank, c.pp_rank) == r


def test_ep_groups_are_blocks_of_dp():
    """ep=2 inside dp=4: expert groups pair dp ranks (0,1) and (2,3)."""
    grid = RankGrid(dp=4, tp=1, pp=1, ep=2)
    assert grid.groups("ep") == [(0, 1), (2, 3)]


def test_ep_must_divide_dp():
    """An ep that does not divide dp is rejected with both numbers."""
    with pytest.raises(ValueError, match=r"ep \(3\) must divide dp \(4\)"):
        RankGrid(dp=4, ep=3)
