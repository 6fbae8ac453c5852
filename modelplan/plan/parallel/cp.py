"""Context parallelism (ring attention, Liu et al. 2023; Megatron-core/TE cp_comm_type 'p2p').

What it adds: every rank holds s/cp tokens of each sequence (so every activation message of the
other parallelisms is b*(s/cp)*h), and per block and micro-batch the K and V blocks
(2*b*(s/cp)*kv_width/tp) travel the cp ring in cp - 1 send/recv steps in forward (again in the
recompute forward) and in backward, where the dK, dV accumulators travel with them. The forward's
(cp-1)/cp * 2*b*s*kv_width/tp per rank is the volume of an AllGather of K and V.

States it shards: none; gradients and ZeRO shards are reduced over dp x cp (`dp_zero.py`).

Overlap: each ring step's send hides behind the attention on the block the rank holds, 1/cp of
the attention core; a step is exposed by what its send outlasts it (`ring_exposure`). The hidden
rest costs `overlap_interference` of itself.
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.comm.regions import Region
from modelplan.comm.ops import Axis, Collective
from modelplan.plan.parallel.calls import RankCalls
from modelplan.specs.costmodel import CostModel

P2P = Collective.SEND_RECV


def kv_bytes(tokens: int, kv_heads_local: int, dim_head: int, act_bytes: int) -> int:
    """One K, V block of this rank's tokens: 2 * b*(s/cp) * kv_heads/tp * head_dim values."""
    return 2 * tokens * kv_heads_local * dim_head * act_bytes


def ring_calls(calls: RankCalls, cp: int, nbytes: int, fwd_runs: int, bwd_runs: int, blocks: int) -> None:
    """The K, V (forward, recompute, backward) and dK, dV (backward) ring steps of `blocks` blocks."""
    ring = (cp - 1) * blocks
    for role in ("send", "recv"):
        calls.add(P2P, Axis.CP, cp, nbytes, (fwd_runs + bwd_runs) * ring, Region.CP_KV, role=role)
        calls.add(P2P, Axis.CP, cp, nbytes, bwd_runs * ring, Region.CP_DKV, role=role)


def ring_exposure(cp: int, kv_send_s: float, core_fwd_s: float, core_bwd_s: float) -> tuple[float, float, float]:
    """(forward exposed, backward exposed, hidden) seconds of one block's ring attention.

    Each of the cp - 1 ring steps sends one K, V block (forward) or K, V and dK, dV (backward) to
    the next rank while computing attention on the block it holds, 1/cp of the attention core
    (Liu et al. 2023, ring attention: 'overlapping the communication of key-value blocks with
    the computation of blockwise attention'); a step is exposed by what its send outlasts it."""
    steps = cp - 1
    fwd = steps * max(0.0, kv_send_s - core_fwd_s / cp)
    bwd = steps * max(0.0, 2 * kv_send_s - core_bwd_s / cp)
    return fwd, bwd, steps * 3 * kv_send_s - fwd - bwd


class CpExposure(NamedTuple):
    """Exposed context-parallel seconds of one block and micro-batch."""

    fwd_s: float
    bwd_s: float
    """Backward, plus the interference of the hidden traffic."""
    recompute_s: float
    """The recomputed forward runs the ring again (full recompute)."""
    hidden_s: float
    """Ring traffic hidden behind the attention core (for reference)."""


def cp_exposure(cp: int, kv_send_s: float, core_fwd_s: float, core_bwd_s: float, full_recompute: bool,
                cost: CostModel) -> CpExposure:
    """`ring_exposure` of one block, with the recompute forward's ring and the interference."""
    if cp == 1:
        return CpExposure(0.0, 0.0, 0.0, 0.0)
    fwd, bwd, hidden = ring_exposure(cp, kv_send_s, core_fwd_s, core_bwd_s)
    rec_f = rec_hidden = 0.0
    if full_recompute:
        rec_f, rec_hidden = fwd, (cp - 1) * kv_send_s - fwd
    return CpExposure(fwd, bwd + cost.overlap_interference * hidden, rec_f + cost.overlap_interference * rec_hidden,
                      hidden + rec_hidden)
