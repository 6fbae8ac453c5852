"""Kernels and tensor-parallel shard of LFM2's gated short-convolution mixer on one tp rank.

Split by channel over tp, as Megatron-core splits Mamba's d_inner: in_proj column-parallel (each
rank its channels' B, C, x), the depthwise conv per channel, out_proj row-parallel (its bias
replicated). The projections are GEMMs; the conv and the two gating products are memory-bound
passes priced at HBM rate (count/short_conv.py counts the conv's L multiply-adds).
"""

from __future__ import annotations

from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.transformer import TransformerSpec


def _local(spec: TransformerSpec, tp: int) -> int:
    return -(-spec.hidden // tp)


def short_conv_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of a short-conv mixer, channels split over tp."""
    h, tokens, c = spec.hidden, b * s_q, _local(spec, tp)
    ew = [
        # B * x and C * y: each reads two, writes one; bwd reads both inputs and dy, writes two grads
        Elementwise("short_conv/gates", 2 * tokens * c, 3 * d, 5 * d),
        # depthwise causal conv: read, write; bwd reads x, dy, writes dx
        Elementwise("short_conv/conv", tokens * c, 2 * d, 3 * d),
    ]
    return [Gemm("short_conv/in_proj", tokens, 3 * c, h)], ew, Gemm("short_conv/out_proj", tokens, h, c)


def short_conv_shard(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements): the out_proj bias is replicated, its gradient a
    partial sum under sequence parallelism."""
    h, c, m = spec.hidden, _local(spec, tp), spec.short_conv
    bias = 1 if m.bias else 0
    numel = h * 3 * c + bias * 3 * c + c * m.conv_kernel + bias * c + c * h + bias * h
    return numel, bias * h if sp else 0
