"""nccl-tests' algorithm and bus bandwidth (doc/PERFORMANCE.md).

algbw = S / t with S the message size of §1.1 of comm_hw.md (AllReduce: per-rank buffer;
AllGather: whole output; ReduceScatter: whole input; AllToAll: whole per-rank send buffer);
busbw = algbw x a per-collective factor that makes it comparable with the link speed.
"""

from __future__ import annotations

from modelplan.comm.ops import Collective


def busbw_factor(op: Collective, group_size: int) -> float:
    """nccl-tests bus-bandwidth factor for `op` over `group_size` ranks.

    AllReduce 2(n-1)/n; AllGather, ReduceScatter, AllToAll (n-1)/n; Broadcast, Reduce,
    SendRecv 1 (nccl-tests doc/PERFORMANCE.md); Barrier moves no payload: 0.
    """
    n = group_size
    if op is Collective.ALL_REDUCE:
        return 2 * (n - 1) / n  # nccl-tests PERFORMANCE.md: AllReduce
    if op in (Collective.ALL_GATHER, Collective.REDUCE_SCATTER, Collective.ALL_TO_ALL):
        return (n - 1) / n  # nccl-tests PERFORMANCE.md: AllGather/ReduceScatter/AlltoAll
    if op is Collective.BARRIER:
        return 0.0
    return 1.0  # nccl-tests PERFORMANCE.md: Broadcast, Reduce (and SendRecv)


def algbw_gbps(nbytes: float, time_s: float) -> float:
    """Algorithm bandwidth in GB/s (1e9 B/s): size over time (0 when time is 0)."""
    return nbytes / time_s / 1e9 if time_s > 0 else 0.0


def busbw_gbps(op: Collective, nbytes: float, group_size: int, time_s: float) -> float:
    """Bus bandwidth in GB/s: algbw x busbw_factor."""
    return algbw_gbps(nbytes, time_s) * busbw_factor(op, group_size)
