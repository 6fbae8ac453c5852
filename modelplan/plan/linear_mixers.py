"""Kernels and tensor-parallel shards of the Mamba-2 and gated DeltaNet mixers on one tp rank.

Both split their heads over tp the way Megatron-core's MambaMixer and its gated-DeltaNet mixer
do: in_proj column-parallel (each rank its heads' z, x, dt / q, k, v, z, b, a and its groups'
B, C), the conv, dt_bias, A_log, D split by channel or head, out_proj row-parallel (its bias
replicated). Mamba-2's B and C groups are split when tp divides them, else replicated (each rank
computes all of them, as GQA replicates kv heads); DeltaNet's key heads likewise.

Kernels: the projections are GEMMs; the chunked scans are the batched matmuls of their chunkwise
algorithms (Dao & Gu 2024 sec. 6; Yang et al. 2024 arXiv 2406.06484 sec. 3.2), so their FLOPs
are `count.mixers`' scan FLOPs; the conv, the scan's element-wise in/out traffic and the gated
RMSNorm are memory-bound passes priced at HBM rate.

`_MIXERS` keys every linear mixer's kernels and shard by layer type (the other five mixers live
in plan/short_conv.py, rglru.py, lightning.py, rwkv.py, mlstm.py), as count/mixers.py keys its counts.
"""

from __future__ import annotations

from typing import Callable, NamedTuple

from modelplan.count.mixers import LIGHTNING, MLSTM, RGLRU, RWKV, SHORT_CONV
from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.plan.parallel.tp import local_kv_heads
from modelplan.plan.lightning import lightning_kernels, lightning_shard
from modelplan.plan.mlstm import mlstm_kernels, mlstm_shard
from modelplan.plan.rglru import rglru_kernels, rglru_shard
from modelplan.plan.rwkv import rwkv_kernels, rwkv_shard
from modelplan.plan.short_conv import short_conv_kernels, short_conv_shard
from modelplan.specs.transformer import TransformerSpec


def _split(n: int, parts: int) -> int:
    return -(-n // parts)


def mamba2_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of a Mamba-2 mixer, heads split over tp."""
    m, h, tokens = spec.mamba2, spec.hidden, b * s_q
    heads, groups = _split(m.heads, tp), local_kv_heads(m.groups, tp)
    inner, n, p = heads * m.head_dim, m.state_size, m.head_dim
    conv = inner + 2 * groups * n
    q = min(m.chunk_size, s_q)
    chunks = b * _split(s_q, q)
    gemms = [Gemm("mamba2/in_proj", tokens, inner + conv + heads, h),  # column-parallel: z, x, B, C, dt
             Gemm("mamba2/scan/cb", q, q, n, chunks * groups),  # C B^T per chunk and group
             Gemm("mamba2/scan/diag", q, p, q, chunks * heads),  # (L o C B^T) x per head
             Gemm("mamba2/scan/states", n, p, q, chunks * heads),  # B^T x: each chunk's state
             Gemm("mamba2/scan/out", q, p, n, chunks * heads)]  # C h: the states' output
    ew = [
        # depthwise causal conv over x, B, C: read, write (SiLU fused); bwd reads x, dy, writes dx
        Elementwise("mamba2/conv", tokens * conv, 2 * d, 3 * d),
        # the scan's element-wise traffic: read x, B, C, dt, write y; bwd reads those and dy, writes
        # their gradients (states recomputed in SRAM, mamba_ssm ssd_combined.py)
        Elementwise("mamba2/scan", tokens * conv, 2 * d, 4 * d),
        # gated RMSNorm: read y and z, write out; bwd reads y, z, dy, writes dy, dz
        Elementwise("mamba2/norm", tokens * inner, 3 * d, 5 * d),
    ]
    return gemms, ew, Gemm("mamba2/out_proj", tokens, h, inner)  # row-parallel


def deltanet_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of a gated DeltaNet mixer, value heads split over tp."""
    g, h, tokens = spec.deltanet, spec.hidden, b * s_q
    hv, hk = _split(g.value_heads, tp), local_kv_heads(g.key_heads, tp)
    dk, dv = g.key_head_dim, g.value_head_dim
    conv = 2 * hk * dk + hv * dv
    c = min(g.chunk_size, s_q)
    batch = b * _split(s_q, c) * hv  # chunks x local value heads (q, k repeated to them)
    if g.kda and g.kda_full_rank_gates:  # Bailing hybrid: q, k, v, b and f_proj, g_proj column-parallel
        gemms = [Gemm("deltanet/in_proj", tokens, conv + hv, h), Gemm("deltanet/gates", tokens, 2 * hv * dv, h)]
    elif g.kda:  # Kimi Linear: q, k, v, b column-parallel; the gates' h -> d_k halves replicated
        gemms = [Gemm("deltanet/in_proj", tokens, conv + hv, h), Gemm("deltanet/gates/down", tokens, 2 * dk, h),
                 Gemm("deltanet/gates/up", tokens, 2 * hv * dv, dk)]
    else:
        gemms = [Gemm("deltanet/in_proj", tokens, conv + hv * dv + 2 * hv, h)]  # column-parallel: q, k, v, z, b, a
    gemms += [Gemm("deltanet/scan/kk", c, c, dk, batch),  # K K^T
              Gemm("deltanet/scan/w", c, dk, c, batch),  # W = T (beta K)
              Gemm("deltanet/scan/u", c, dv, c, batch),  # U = T (beta V)
              Gemm("deltanet/scan/qk", c, c, dk, batch),  # Q K^T
              Gemm("deltanet/scan/intra", c, dv, c, batch),  # (Q K^T) (U - W S)
              Gemm("deltanet/scan/ws", c, dv, dk, batch),  # W S
              Gemm("deltanet/scan/qs", c, dv, dk, batch),  # Q S
              Gemm("deltanet/scan/update", dk, dv, c, batch)]  # K^T (U - W S)
    ew = [
        Elementwise("deltanet/conv", tokens * conv, 2 * d, 3 * d),
        # l2 norms of q, k, the gates and the scan's element-wise traffic (fla chunk.py)
        Elementwise("deltanet/scan", tokens * conv, 2 * d, 4 * d),
        Elementwise("deltanet/norm", tokens * hv * dv, 3 * d, 5 * d),
    ]
    return gemms, ew, Gemm("deltanet/out_proj", tokens, h, hv * dv)  # row-parallel


def mamba2_shard(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements) of a Mamba-2 mixer: the out_proj bias is replicated, its
    gradient a partial sum under sequence parallelism."""
    m, h = spec.mamba2, spec.hidden
    heads, groups = _split(m.heads, tp), local_kv_heads(m.groups, tp)
    inner = heads * m.head_dim
    conv = inner + 2 * groups * m.state_size
    width = inner + conv + heads
    out_bias = h if m.has_out_bias else 0
    numel = h * width + (width if m.proj_bias else 0) + conv * m.conv_kernel + (conv if m.conv_bias else 0)
    numel += 3 * heads + (inner if m.gated_norm else 0) + inner * h + out_bias  # dt_bias, A_log, D; norm; out_proj
    return numel, out_bias if sp else 0


def deltanet_shard(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements) of a gated DeltaNet mixer: the shared norm weight (and
    Kimi Linear's replicated gate halves) have partial-sum gradients over tp."""
    g, h = spec.deltanet, spec.hidden
    hv, hk = _split(g.value_heads, tp), local_kv_heads(g.key_heads, tp)
    conv = 2 * hk * g.key_head_dim + hv * g.value_head_dim
    if g.kda:  # Kimi Linear: f_a, g_a (h -> d_k) and the o_norm weight replicated, the rest split
        full = g.kda_full_rank_gates  # Bailing hybrid: f_proj, g_proj split with the value heads
        replicated = (0 if full else 2 * h * g.key_head_dim) + g.value_head_dim
        gates = 2 * h * hv * g.value_head_dim if full else 2 * g.key_head_dim * hv * g.value_head_dim
        numel = h * (conv + hv) + gates + conv * g.conv_kernel
        numel += hv * g.value_head_dim + hv + hv * g.value_head_dim * h + replicated  # dt_bias, A_log, o_proj
        return numel, replicated if tp > 1 else 0
    numel = h * (conv + hv * g.value_head_dim + 2 * hv) + conv * g.conv_kernel + 2 * hv
    norm = g.value_head_dim  # one weight for all heads: replicated
    numel += norm + hv * g.value_head_dim * h
    return numel, norm if tp > 1 else 0


class _MixerPlan(NamedTuple):
    """One linear mixer's kernels and tensor-parallel shard on one tp rank."""

    kernels: Callable[[TransformerSpec, int, int, int, int], tuple]  # (spec, tp, b, s_q, d)
    shard: Callable[[TransformerSpec, int, bool], tuple[int, int]]  # (spec, tp, sp)


_MIXERS: dict[str, _MixerPlan] = {
    "mamba2": _MixerPlan(mamba2_kernels, mamba2_shard),
    "gated_deltanet": _MixerPlan(deltanet_kernels, deltanet_shard),
    SHORT_CONV: _MixerPlan(short_conv_kernels, short_conv_shard),  # LFM2 (plan/short_conv.py)
    RGLRU: _MixerPlan(rglru_kernels, rglru_shard),  # RecurrentGemma (plan/rglru.py)
    LIGHTNING: _MixerPlan(lightning_kernels, lightning_shard),  # MiniMax-01 (plan/lightning.py)
    RWKV: _MixerPlan(rwkv_kernels, rwkv_shard),  # RWKV-4 (plan/rwkv.py)
    MLSTM: _MixerPlan(mlstm_kernels, mlstm_shard),  # xLSTM (plan/mlstm.py)
}
"""Each linear mixer's kernels and shard, by layer type: the same keys as count.mixers' table."""


def linear_mixer_kernels(spec: TransformerSpec, mixer: str, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of the linear mixer of layer type `mixer`."""
    return _MIXERS[mixer].kernels(spec, tp, b, s_q, d)


def linear_mixer_shard(spec: TransformerSpec, mixer: str, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements) of a linear mixer on one tp rank: `partial` is what is
    replicated while its gradient is a partial sum over tp (DeltaNet's shared norm weight; the
    out_proj bias under sequence parallelism)."""
    return _MIXERS[mixer].shard(spec, tp, sp)
