"""A ring-exchanged ReduceScatter ends in a sum of the tp partial outputs on the compute stream
(comm/tp_overlap.py `ring_reductions`, `reduce_scatter_partials_bytes`; parallel/tp.py
`overlap_exposure(partials_sum_s=...)`). Sources of the expected numbers: torch
distributed/_symmetric_memory `_fused_matmul_reduce_scatter_impl` (the tp chunks of tokens / tp
rows land in `stacked_partials`, then `torch.sum` over the chunk dim writes the rank's shard) and
TE comm_gemm_overlap.cpp CommOverlapP2PBase::split_overlap_rs (`reduce_bf16(..., tp_size, ...)`);
NCCL reduces inside its kernel, so TE's pipelined / bulk pairs have no such pass."""

from __future__ import annotations

import pytest

from modelplan.comm.tp_overlap import ring_reductions, reduce_scatter_partials_bytes
from modelplan.plan.parallel.tp import TpSeconds, overlap_exposure
from modelplan.specs.costmodel import CostModel

SHARES = {"qkv": 0.25, "proj": 0.25, "fc1": 0.25, "fc2": 0.25}


def test_partials_sum_reads_every_chunk_and_writes_one():
    """8 tokens x width 4 over tp 2 at 2 B: read 8 x 4 x 2 = 64 B (two chunks of 4 rows), write
    the rank's 4 x 4 x 2 = 32 B."""
    assert reduce_scatter_partials_bytes(8, 4, 2, 2) == 64 + 32


def test_only_ring_exchanged_reduce_scatters_sum_partials():
    """'ring' rings all four ReduceScatter pairs; TE's userbuffers map pipelines proj/fc2 fprop and
    runs qkv/fc1 wgrad in bulk on SMs (NCCL-style, reduced in the kernel); 'none' is NCCL."""
    fwd, bwd = ("proj_fprop", "fc2_fprop", "qkv_fprop", "fc1_fprop"), ("qkv_wgrad", "fc1_wgrad", "proj_dgrad")
    assert (ring_reductions("ring", fwd), ring_reductions("ring", bwd)) == (2, 2)
    assert (ring_reductions("userbuffers", fwd), ring_reductions("userbuffers", bwd)) == (0, 0)
    assert ring_reductions("none", fwd + bwd) == 0


def test_ring_exposure_adds_two_sums_per_pass():
    """Under 'ring' the forward and the backward each add two partials sums (0.5 ms each here);
    under 'userbuffers' nothing changes."""
    t = TpSeconds(block_s=8e-3, block_recompute_s=12e-3, embedding_s=0.0, head_s=0.0)
    cost = CostModel()
    base = overlap_exposure(t, False, cost, "ring", SHARES, 10e-3, 8, 132)
    summed = overlap_exposure(t, False, cost, "ring", SHARES, 10e-3, 8, 132, partials_sum_s=0.5e-3)
    assert summed.fwd_s - base.fwd_s == pytest.approx(1e-3)
    assert summed.bwd_s - base.bwd_s == pytest.approx(1e-3)
    assert summed.hidden_s == pytest.approx(base.hidden_s)  # the sums are compute, not hidden traffic
    ub = overlap_exposure(t, False, cost, "userbuffers", SHARES, 10e-3, 8, 132)
    ub_summed = overlap_exposure(t, False, cost, "userbuffers", SHARES, 10e-3, 8, 132, partials_sum_s=0.5e-3)
    assert ub_summed == ub
