"""nccl-tests algbw/busbw conventions (NVIDIA/nccl-tests doc/PERFORMANCE.md)."""

import pytest

from modelplan.comm.bandwidth import algbw_gbps, busbw_factor, busbw_gbps
from modelplan.comm.ops import Collective


@pytest.mark.parametrize("op, n, factor", [
    (Collective.ALL_REDUCE, 8, 2 * 7 / 8),      # 2(n-1)/n
    (Collective.ALL_REDUCE, 2, 1.0),
    (Collective.ALL_GATHER, 8, 7 / 8),          # (n-1)/n
    (Collective.REDUCE_SCATTER, 4, 3 / 4),
    (Collective.ALL_TO_ALL, 16, 15 / 16),       # added to PERFORMANCE.md in 2024
    (Collective.BROADCAST, 8, 1.0),             # all data leaves the root: factor 1
    (Collective.REDUCE, 8, 1.0),
    (Collective.SEND_RECV, 2, 1.0),
])
def test_busbw_factor(op, n, factor):
    """The per-collective bus-bandwidth factors of nccl-tests' PERFORMANCE.md."""
    assert busbw_factor(op, n) == pytest.approx(factor)


def test_algbw_is_size_over_time():
    """algbw = S / t: 1 GB in 10 ms is 100 GB/s."""
    assert algbw_gbps(1e9, 0.01) == pytest.approx(100.0)


def test_busbw_all_reduce_eight_ranks():
    """AllReduce on 8 ranks: busbw = algbw x 1.75; 1 GB in 10 ms -> 175 GB/s."""
    assert busbw_gbps(Collective.ALL_REDUCE, 1e9, 8, 0.01) == pytest.approx(175.0)
