"""Kernels and tensor-parallel shard of Griffin's recurrent block (RecurrentGemma) on one tp rank.

Split by gate block over tp, as Megatron-core splits Mamba's d_inner: linear_y and linear_x
column-parallel (their biases split), the conv, the gates' blocks and recurrent_param split
by channel, linear_out row-parallel (its bias replicated). The linears and the block-diagonal
gates are GEMMs; the conv, the RG-LRU's element-wise gate maths and scan, and the output gating
are memory-bound passes priced at HBM rate (count/rglru.py counts the conv's and the
recurrence's multiply-adds).
"""

from __future__ import annotations

from modelplan.plan.kernel_types import Elementwise, Gemm
from modelplan.specs.transformer import TransformerSpec


def _local(spec: TransformerSpec, tp: int) -> tuple[int, int]:
    """(local gate blocks, local channels)."""
    m = spec.rglru
    heads = -(-m.heads // tp)
    return heads, heads * m.block_width


def rglru_kernels(spec: TransformerSpec, tp: int, b: int, s_q: int, d: int):
    """(gemms, elementwise, out_proj) of a recurrent block, gate blocks split over tp."""
    m, h, tokens = spec.rglru, spec.hidden, b * s_q
    heads, w = _local(spec, tp)
    bw = m.block_width
    gemms = [Gemm("rglru/in_proj", tokens, 2 * w, h),  # column-parallel: y and x
             Gemm("rglru/gates", tokens, bw, bw, 2 * heads)]  # input and recurrence gates per block
    ew = [
        Elementwise("rglru/conv", tokens * w, 2 * d, 3 * d),  # read, write; bwd reads x, dy, writes dx
        # RG-LRU: reads x and both gate logits, writes y (sigmoids, a, sqrt(1 - a^2), the scan fused);
        # bwd reads them and dy, writes dx and both gate gradients
        Elementwise("rglru/lru", tokens * w, 4 * d, 7 * d),
        # GeLU(y) * lru output: reads two, writes one; bwd reads both and dy, writes two
        Elementwise("rglru/gate", tokens * w, 3 * d, 5 * d),
    ]
    return gemms, ew, Gemm("rglru/out_proj", tokens, h, w)  # row-parallel


def rglru_shard(spec: TransformerSpec, tp: int, sp: bool) -> tuple[int, int]:
    """(local elements, partial elements): linear_out's bias is replicated, its gradient a
    partial sum under sequence parallelism."""
    m, h = spec.rglru, spec.hidden
    heads, w = _local(spec, tp)
    numel = 2 * (h * w + w) + w * m.conv_kernel + w + 2 * (heads * m.block_width ** 2 + w) + w + w * h + h
    return numel, h if sp else 0
