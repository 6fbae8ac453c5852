"""HSDP and ZeRO++ collectives per step (comm/hierarchy.py).

Volumes follow the papers' accounting: ZeRO-3 moves 3 x the parameters per micro-batch
(Rajbhandari et al. 2020 sec. 7), ZeRO++ cuts the cross-node part 4x (Wang et al. 2023: qwZ
halves the forward gather, hpZ keeps the backward gather in the node, qgZ sends int4)."""

import pytest

from modelplan.comm.hierarchy import (
    QUANT_BLOCK,
    HierCall,
    hsdp_calls,
    hsdp_groups,
    hsdp_state_shards,
    zero3_calls,
    zeropp_calls,
    zeropp_secondary_bytes,
)

P = 1_000_000_000


def _cross_node_bytes(calls, node_groups=("shard",)):
    return sum(c.nbytes * c.count for c in calls if c.group not in node_groups)


def test_zero3_moves_three_parameter_volumes():
    """bf16 weights, bf16 grads, 1 micro-batch: 2 gathers + 1 reduce-scatter of 2 GB each."""
    calls = zero3_calls(P, 2, 2, 1)
    assert sum(c.nbytes * c.count for c in calls) == 3 * 2 * P


def test_hsdp_groups():
    """dp 64 sharded over 8: 8 shard ranks, 8 replicas; a shard size that does not divide fails."""
    assert hsdp_groups(64, 8) == (8, 8)
    assert hsdp_state_shards(64, 8) == 8
    with pytest.raises(ValueError, match=r"fsdp_shard_size \(6\) must divide dp \* cp \(64\)"):
        hsdp_groups(64, 6)


def test_hsdp_all_reduces_the_shard_across_replicas():
    """dp 64 shard 8, 4 micro-batches: gathers and RS in the shard group, one AllReduce of P/8."""
    calls = hsdp_calls(P, 2, 4, 4, 64, 8)
    assert HierCall("all_reduce", "replica", 4 * P / 8, 1) in calls
    assert {c.group for c in calls if c.op != "all_reduce"} == {"shard"}


def test_hsdp_with_one_replica_is_zero3_in_the_group():
    """shard = dp: no replica AllReduce."""
    assert all(c.op != "all_reduce" for c in hsdp_calls(P, 2, 4, 1, 8, 8))


def test_zeropp_cuts_cross_node_volume_about_four_times():
    """Per micro-batch ZeRO-3 sends 3 x 2P bytes across nodes; ZeRO++ sends P(1 + 4/2048)
    (qwZ) + 0.5P (qgZ's cross-node all-to-all): ~4x less."""
    base = _cross_node_bytes(zero3_calls(P, 2, 2, 1))
    pp = _cross_node_bytes(zeropp_calls(P, 2, 1))
    assert pp == pytest.approx(P * (1 + 4 / QUANT_BLOCK) + 0.5 * P)
    assert base / pp == pytest.approx(4.0, rel=0.01)


def test_zeropp_secondary_copy():
    """hpZ over 8 ranks keeps 2P/8 bytes; without hpZ nothing."""
    assert zeropp_secondary_bytes(P, 2, 8) == pytest.approx(P / 4)
    assert zeropp_secondary_bytes(P, 2, 8, hpz=False) == 0.0
