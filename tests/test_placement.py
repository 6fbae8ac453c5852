"""Topology placement: rank orders decide which axis shares the NVLink node (plan/placement.py).

Expected shapes are counted by hand from the rank layout (tp fastest: ranks 0..tp-1 on one node)."""

import pytest

from modelplan.comm.ops import Axis
from modelplan.plan.dims import ParallelDims
from modelplan.plan.placement import DEFAULT_ORDER, candidate_orders, placed_shapes, strides


def test_default_order_matches_parallel_dims():
    """tp-cp-dp-pp is ParallelDims' own layout: the same group shapes on 8-GPU nodes."""
    dims = ParallelDims(dp=8, tp=4, pp=4, cp=2, ep=2)
    assert placed_shapes(DEFAULT_ORDER, 4, 2, 8, 4, 2, 8) == dims.group_shapes(8)


def test_strides():
    """tp 2, cp 1, dp 4, pp 8 in tp-cp-pp-dp: pp neighbours 2 apart, dp neighbours 16 apart."""
    assert strides("tp-cp-pp-dp", 2, 1, 4, 8) == {"tp": 1, "cp": 2, "pp": 2, "dp": 16}


def test_tp_pp_dp_mapping_keeps_pipeline_in_the_node():
    """tp 2, pp 4, dp 8 on 8-GPU nodes: tp-cp-pp-dp puts 4 pp ranks per node, dp one per node;
    the default puts 4 dp ranks per node and pp one per node."""
    megatron_tp_pp_dp = placed_shapes("tp-cp-pp-dp", 2, 1, 8, 4, 1, 8)
    default = placed_shapes(DEFAULT_ORDER, 2, 1, 8, 4, 1, 8)
    assert (megatron_tp_pp_dp[Axis.PP].ranks_per_node, megatron_tp_pp_dp[Axis.DP].ranks_per_node) == (4, 1)
    assert (default[Axis.PP].ranks_per_node, default[Axis.DP].ranks_per_node) == (1, 4)


def test_dp_outermost_with_cp_between():
    """Order dp-tp-cp-pp (tp across nodes when asked): dp 2, tp 4, cp 2: the dp x cp group is
    ranks {0, 1, 8, 9}: 2 nodes of 2 (counted exactly, the axes are not adjacent)."""
    shapes = placed_shapes("dp-tp-cp-pp", 4, 2, 2, 1, 1, 8)
    assert (shapes[Axis.DP].size, shapes[Axis.DP].nodes, shapes[Axis.DP].ranks_per_node) == (4, 2, 2)
    assert shapes[Axis.TP].ranks_per_node == 4


def test_candidate_orders_dedupe_and_keep_tp_in_node():
    """pp 1: both engine orders place alike, one candidate; asked, more orders appear, but never
    one that splits a node-sized TP group without the flag."""
    assert candidate_orders(8, 1, 16, 1, 8) == ["tp-cp-dp-pp"]
    assert len(candidate_orders(4, 1, 8, 4, 8)) == 2
    wide = candidate_orders(4, 1, 8, 4, 8, allow_tp_across_nodes=True)
    assert len(wide) > 2
    assert any(placed_shapes(o, 4, 1, 8, 4, 1, 8)[Axis.TP].nodes > 1 for o in wide)


def test_bad_order():
    """An order must name each axis once."""
    with pytest.raises(ValueError, match="must name each of tp, cp, dp, pp once"):
        strides("tp-dp-pp", 1, 1, 1, 1)
