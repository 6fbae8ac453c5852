"""TP collectives overlapped with GEMMs: ring exchange, pipelined and bulk overlap, engine modes.

Expected numbers are worked by hand from the schedules in the module docstring (TE
initialize_ub defaults: pipeline 4 splits on 16 SMs, ring exchange in tp chunks)."""

import pytest

from modelplan.comm.tp_overlap import (
    PAIRS,
    USERBUFFERS_METHOD,
    TpPair,
    block_exposed_s,
    bulk_exposed_s,
    method_of,
    overlap_problem,
    pair_exposed_s,
    pipelined_exposed_s,
    ring_exposed_s,
    sm_slowdown,
)


def test_ring_hides_everything_when_the_gemm_is_long():
    """tp 4, GEMM 8 s, AllGather 3 s: 3 steps of 1 s beside 3 chunks of 2 s: nothing exposed."""
    assert ring_exposed_s(8.0, 3.0, 4) == 0.0


def test_ring_exposes_what_the_transfers_outlast():
    """tp 4, GEMM 2 s, AllGather 3 s: 3 steps of 1 s beside 3 chunks of 0.5 s: 1.5 s exposed."""
    assert ring_exposed_s(2.0, 3.0, 4) == pytest.approx(1.5)


def test_ring_at_tp_one_hides_nothing():
    """No chunks to overlap: the collective is exposed whole."""
    assert ring_exposed_s(5.0, 2.0, 1) == 2.0


def test_sm_slowdown_of_te_default_on_a100():
    """16 of the A100's 108 SMs taken: the GEMM runs 108/92 as long."""
    assert sm_slowdown(16, 108) == pytest.approx(108 / 92)


def test_sm_slowdown_rejects_all_sms():
    """A collective cannot take every SM."""
    with pytest.raises(ValueError, match=r"num_sm \(132\) must be < sm_count \(132\)"):
        sm_slowdown(132, 132)


def test_pipelined_comm_bound():
    """GEMM 4 s, RS 8 s, 4 splits, no SM cost: 1 + 3*2 + 2 = 9 s, so 5 s beyond the GEMM."""
    assert pipelined_exposed_s(4.0, 8.0, 4, 1.0) == pytest.approx(5.0)


def test_pipelined_gemm_bound_pays_sm_cost_and_last_chunk():
    """GEMM 8 s slowed 1.25x, RS 2 s, 4 splits: 2.5 + 3*2.5 + 0.5 = 10.5 s, 2.5 s beyond 8 s."""
    assert pipelined_exposed_s(8.0, 2.0, 4, 1.25) == pytest.approx(2.5)


def test_bulk_overlap():
    """GEMM 4 s slowed 1.25x beside a 3 s collective: 5 s, 1 s beyond; a 7 s one: 3 s beyond."""
    assert bulk_exposed_s(4.0, 3.0, 1.25) == pytest.approx(1.0)
    assert bulk_exposed_s(4.0, 7.0, 1.25) == pytest.approx(3.0)


def test_none_exposes_the_collective():
    """Without overlap a pair adds its whole collective."""
    assert pair_exposed_s("none", TpPair(5.0, 2.0), tp=8, sm_count=132) == 2.0


def test_userbuffers_map_is_te_default():
    """TE initialize_ub: AllGathers ring-exchanged, forward ReduceScatters pipelined, wgrad-side bulk."""
    assert set(USERBUFFERS_METHOD) == set(PAIRS)
    assert [method_of("userbuffers", p) for p in ("qkv_fprop", "proj_fprop", "qkv_wgrad")] == ["ring", "pipeline", "bulk"]
    assert method_of("ring", "proj_fprop") == "ring"


def test_block_sums_its_pairs():
    """A block with two pairs under ring at tp 2: (3 - 0.5*2) + (1 - 0.5*4 -> 0) = 2 s."""
    pairs = {"qkv_fprop": TpPair(2.0, 3.0), "proj_fprop": TpPair(4.0, 1.0)}
    assert block_exposed_s("ring", pairs, tp=2, sm_count=108) == pytest.approx(2.0)
    assert block_exposed_s("none", pairs, tp=2, sm_count=108) == pytest.approx(4.0)


def test_overlap_needs_sequence_parallel_and_tp():
    """Megatron --tp-comm-overlap needs --sequence-parallel; tp 1 has nothing to overlap."""
    assert overlap_problem("userbuffers", 8, False) is not None
    assert "tp > 1" in overlap_problem("ring", 1, True)
    assert overlap_problem("ring", 8, True) is None
    assert overlap_problem("none", 1, False) is None
