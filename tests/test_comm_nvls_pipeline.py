"""The pipeline fill of NCCL's one-node NVLS AllReduce (modelplan/comm/nvls_pipeline.py).

Expected chunk sizes are NCCL's enqueue.cc calcCollChunking (NVIDIA/nccl master 5067397) worked by
hand: chunkSize starts at NCCL_NVLS_CHUNKSIZE 128 KiB (nvls.cc) and drops to 64 / 32 / 16 KiB while
nBytes < 64 / 8 / 2 x nChannels x nHeads x chunkSize; nChannels is NVLS_NCHANNELS_SM90 16 on
Hopper and NVLS_NCHANNELS_SM100_NVL 24 on Blackwell in one node (nvls.cc ncclNvlsTuning), nHeads
one per GPU (search.cc: NVLS maxChannels = ngpus, minChannels = maxChannels in one node).
"""

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.comm.cost import collective_cost
from modelplan.comm.nvls_pipeline import nvls_chunk_bytes, nvls_concurrent_ops, nvls_fill_bytes
from modelplan.comm.ops import Algo

KIB, MIB, GIB = 2**10, 2**20, 2**30


def test_concurrent_ops_are_channels_times_heads():
    """8x H100: 16 channels x 8 heads = 128; 8x B200: 24 x 8 = 192; no NVLS row elsewhere: 0."""
    assert nvls_concurrent_ops("hopper", 8) == 128
    assert nvls_concurrent_ops("blackwell", 8) == 192
    assert nvls_concurrent_ops("ampere", 8) == 0


@pytest.mark.parametrize("nbytes, chunk", [
    (2 * MIB, 16 * KIB),        # < 2 x 128 x 32 KiB = 8 MiB
    (8 * MIB - 1, 16 * KIB),
    (8 * MIB, 32 * KIB),        # < 8 x 128 x 64 KiB = 64 MiB
    (64 * MIB - 1, 32 * KIB),
    (64 * MIB, 64 * KIB),       # < 64 x 128 x 128 KiB = 1 GiB
    (GIB - 1, 64 * KIB),
    (GIB, 128 * KIB),
])
def test_hopper_chunk_steps(nbytes, chunk):
    """calcCollChunking on 8x H100 (concurrentOps 128), worked by hand at each boundary."""
    assert nvls_chunk_bytes(nbytes, 128) == chunk


@pytest.mark.parametrize("nbytes, chunk", [
    (12 * MIB - 1, 16 * KIB),   # < 2 x 192 x 32 KiB = 12 MiB
    (16 * MIB, 32 * KIB),       # < 8 x 192 x 64 KiB = 96 MiB
    (128 * MIB, 64 * KIB),      # < 64 x 192 x 128 KiB = 1.5 GiB
    (3 * GIB // 2, 128 * KIB),
])
def test_blackwell_chunk_steps(nbytes, chunk):
    """calcCollChunking on 8x B200 (concurrentOps 192)."""
    assert nvls_chunk_bytes(nbytes, 192) == chunk


def test_fill_is_two_loops_or_twice_a_smaller_call():
    """Three warp groups (scatter, reduce, gather; all_reduce.h) fill and drain over 2 loops of
    concurrentOps x chunk; a call below one loop fills with its own bytes."""
    assert nvls_fill_bytes(16 * MIB, 128) == 2 * 128 * 32 * KIB  # 2 x 4 MiB
    assert nvls_fill_bytes(4 * GIB, 128) == 2 * 128 * 128 * KIB  # 2 x 16 MiB
    assert nvls_fill_bytes(1 * MIB, 128) == 2 * MIB  # one partial loop of 1 MiB
    assert nvls_fill_bytes(16 * MIB, 0) == 0.0


def test_h200_16mib_all_reduce_pays_two_4mib_loops():
    """8x H200, 16 MiB: tuning.cc's NVLS time 25 us + n / algbw (algbw = 370.8 x 0.85 x 8/9 GB/s,
    dgx-h200 preset) plus 2 x 4 MiB at algbw."""
    algbw = 370.8e9 * 0.85 * 8 / 9
    cost = collective_cost("all_reduce", 16 * MIB, 8, 8, load_cluster("dgx-h200"))
    assert (cost.algo, cost.protocol) == (Algo.NVLS, "simple")
    assert cost.time_s == pytest.approx(25e-6 + (16 + 8) * MIB / algbw, rel=1e-3)


def test_fill_does_not_change_nccls_choice():
    """NCCL picks by tuning.cc's time alone (enqueue.cc topoGetAlgoInfo): at 2 MiB on 8x H100 NVLS
    (32.5 us) beats ring LL (41 us) although NVLS runs 47.5 us with its fill; the measured 8x H200
    switch is ring/LL to 1 MiB, NVLS from 2 MiB (comm_hw.md §1.2)."""
    cost = collective_cost("all_reduce", 2 * MIB, 8, 8, load_cluster("dgx-h100"))
    assert cost.algo is Algo.NVLS
    assert cost.time_s > collective_cost("all_reduce", 2 * MIB, 8, 8, load_cluster("dgx-h100"), "ring").time_s


def test_medium_nvls_busbw_within_15pct_of_published_h200_sweep():
    """stas00/ml-engineering 8x H200 sweep (NCCL's choice, torch harness): 16 MiB 219.9, 64 MiB
    346.5 GB/s busbw. The harness adds ~21 us a call (bench_comm_busbw.py, fitted on <= 1 MiB rows),
    so the model's tuning.cc + fill time is compared with 21 us added."""
    cluster = load_cluster("dgx-h200")
    for nbytes, published in ((16 * MIB, 219.9), (64 * MIB, 346.5)):
        t = collective_cost("all_reduce", nbytes, 8, 8, cluster).time_s + 21.1e-6
        assert nbytes * 2 * 7 / 8 / t / 1e9 == pytest.approx(published, rel=0.15)


def test_channel_table_uses_nccl_tunings_arch_names():
    """The NVLS channel table is keyed by nccl_tuning's architecture rows (H100 / H200 -> hopper,
    B200 -> blackwell), so the presets' accelerators find their channel count."""
    from modelplan.comm.nccl_tuning import BLACKWELL, HOPPER, nccl_arch
    from modelplan.comm.nvls_pipeline import NVLS_CHANNELS

    assert set(NVLS_CHANNELS) == {HOPPER, BLACKWELL}
    assert nccl_arch("H200") == HOPPER and nccl_arch("B200") == BLACKWELL
