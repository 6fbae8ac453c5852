"""Compute time: one kernel on one accelerator (a roofline with a per-kernel overhead), and one
block's, the embedding's and the head's kernels for one micro-batch on one TP rank.

GEMM: t = overhead + max(FLOPs / (peak * matmul_efficiency), bytes / (HBM * hbm_efficiency)),
all divided by the sustained fraction. The roofline makes the efficiency depend on shape:
large square GEMMs saturate at the accelerator's measured matmul efficiency (MAMF / peak,
comm_hw.md section 4.3); skinny ones (attention's K = head_dim) hit the memory roof; tiny ones
pay the fixed overhead (Williams et al. 2009 roofline; Calculon's size-dependent efficiency).
Elementwise kernels are memory-bound: bytes / (HBM * hbm_efficiency). A backward GEMM is the
dgrad + wgrad pair of its forward (`Gemm.backward`); a fused attention kernel runs at its own
sustained rate. The kernels and their shapes are `plan/kernels.py`'s.

Recompute (Korthikanti et al. 2022 sec. 5): full redoes a block's forward before its backward,
selective only the attention core (QK^T, softmax, dropout, context; the fused kernel).
"""

from __future__ import annotations

from dataclasses import dataclass

from typing import NamedTuple

from modelplan.count.attention import FusedAttention
from modelplan.plan.kernels import Elementwise, Gemm, embedding_kernels, head_kernels, layer_kernels
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator
from modelplan.specs.transformer import TransformerSpec


@dataclass(frozen=True)
class Roofline:
    """The rates a kernel time needs, resolved once per (accelerator, precision, cost model)."""

    matmul_flops_per_s: float
    """peak * matmul_efficiency * sustained_fraction."""
    hbm_bytes_per_s: float
    """HBM peak * hbm_efficiency * sustained_fraction."""
    overhead_s: float
    """Fixed time per kernel."""
    peak_flops_per_s: float
    """Dense peak of the precision (the MFU / HFU denominator)."""
    flash_fwd_flops_per_s: float = 0.0
    """Fused attention forward: 16-bit peak * flash_fwd_efficiency * sustained_fraction."""
    flash_bwd_flops_per_s: float = 0.0
    """Fused attention backward: 16-bit peak * flash_bwd_efficiency * sustained_fraction."""

    @classmethod
    def of(cls, accelerator: Accelerator, precision: str, cost: CostModel) -> "Roofline":
        """Rates for one accelerator running one precision under one cost model."""
        peak = accelerator.peak_flops(precision)
        # attention runs in 16 bits also under fp8 training (Transformer Engine keeps it in bf16)
        attn_peak = accelerator.peak_flops("bf16" if precision == "fp8" else precision)
        return cls(
            matmul_flops_per_s=peak * accelerator.matmul_efficiency * cost.sustained_fraction,
            hbm_bytes_per_s=accelerator.memory_bw_tbps * 1e12 * cost.hbm_efficiency * cost.sustained_fraction,
            overhead_s=cost.kernel_overhead_us * 1e-6,
            peak_flops_per_s=peak,
            flash_fwd_flops_per_s=attn_peak * cost.flash_fwd_efficiency * cost.sustained_fraction,
            flash_bwd_flops_per_s=attn_peak * cost.flash_bwd_efficiency * cost.sustained_fraction,
        )

    def gemm_time_s(self, gemm: Gemm, dtype_bytes: int) -> float:
        """Roofline time of one GEMM (Williams et al. 2009) plus the per-kernel overhead."""
        compute_s = gemm.flops / self.matmul_flops_per_s
        memory_s = gemm.bytes_moved(dtype_bytes) / self.hbm_bytes_per_s
        return self.overhead_s + max(compute_s, memory_s)

    def gemm_efficiency(self, gemm: Gemm, dtype_bytes: int) -> float:
        """Achieved fraction of the dense peak for this shape."""
        return gemm.flops / (self.gemm_time_s(gemm, dtype_bytes) * self.peak_flops_per_s)

    def fused_fwd_s(self, op: FusedAttention) -> float:
        """Forward of a fused attention kernel at its own sustained rate, plus the overhead."""
        return self.overhead_s + op.fwd_flops / self.flash_fwd_flops_per_s

    def fused_bwd_s(self, op: FusedAttention) -> float:
        """Backward of a fused attention kernel (recomputes the scores) at its own rate."""
        return self.overhead_s + op.bwd_flops / self.flash_bwd_flops_per_s

    def memory_time_s(self, nbytes: float) -> float:
        """Time to stream `nbytes` through HBM (memory-bound kernels, optimizer step)."""
        return nbytes / self.hbm_bytes_per_s

    def elementwise_fwd_s(self, op: Elementwise) -> float:
        """Forward time of a memory-bound kernel."""
        return self.overhead_s + op.fwd_bytes / self.hbm_bytes_per_s

    def elementwise_bwd_s(self, op: Elementwise) -> float:
        """Backward time of a memory-bound kernel."""
        return self.overhead_s + op.bwd_bytes / self.hbm_bytes_per_s


class KernelTimes(NamedTuple):
    """Kernel seconds of one micro-batch on one TP rank that do not depend on recompute."""

    fwd_gemm_s: float
    bwd_gemm_s: float
    fwd_elementwise_s: float
    bwd_elementwise_s: float
    core_fwd_s: float
    """Attention core (what selective recompute redoes): QK^T, softmax, dropout, context."""
    core_bwd_s: float
    head_fwd_s: float
    head_bwd_s: float
    embedding_fwd_s: float
    embedding_bwd_s: float

    def recompute_s(self, recompute: str) -> float:
        """The recomputed forward of one block (module docstring)."""
        if recompute == "full":
            return self.fwd_gemm_s + self.fwd_elementwise_s
        if recompute == "selective":
            return self.core_fwd_s
        return 0.0


def kernel_times(
    spec: TransformerSpec, tp: int, sequence_parallel: bool, micro_batch: int, seq_len: int, dtype_bytes: int,
    vocab_padded: int, roofline: Roofline, *, moe_layer: bool = False, ep: int = 1, capacity: int | None = None,
    cp: int = 1, attention: str = "eager",
) -> KernelTimes:
    """Roofline times of one block's, the head's and the embedding's kernels (`plan/kernels.py`)."""
    d, s_local = dtype_bytes, seq_len // cp
    k = layer_kernels(spec, tp, micro_batch, seq_len, d, sequence_parallel, moe_layer=moe_layer, ep=ep,
                      capacity=capacity, cp=cp, attention=attention)
    fused_f = sum(roofline.fused_fwd_s(a) for a in k.fused)
    fused_b = sum(roofline.fused_bwd_s(a) for a in k.fused)
    gemm_f = sum(roofline.gemm_time_s(g, d) for g in k.gemms) + fused_f
    gemm_b = sum(roofline.gemm_time_s(x, d) for g in k.gemms for x in g.backward()) + fused_b
    ew_f = sum(roofline.elementwise_fwd_s(e) for e in k.elementwise)
    ew_b = sum(roofline.elementwise_bwd_s(e) for e in k.elementwise)
    core_f = sum(roofline.gemm_time_s(g, d) for g in k.attention_core_gemms)
    core_f += sum(roofline.elementwise_fwd_s(e) for e in k.attention_core_elementwise)
    core_b = sum(roofline.gemm_time_s(x, d) for g in k.attention_core_gemms for x in g.backward())
    core_b += sum(roofline.elementwise_bwd_s(e) for e in k.attention_core_elementwise)
    core_f, core_b = core_f + fused_f, core_b + fused_b
    head_gemms, head_ew = head_kernels(spec, tp, micro_batch, s_local, d, vocab_padded)
    emb_ew = embedding_kernels(spec, micro_batch, s_local, d)
    head_f = sum(roofline.gemm_time_s(g, d) for g in head_gemms) + sum(roofline.elementwise_fwd_s(e) for e in head_ew)
    head_b = sum(roofline.gemm_time_s(x, d) for g in head_gemms for x in g.backward())
    head_b += sum(roofline.elementwise_bwd_s(e) for e in head_ew)
    return KernelTimes(gemm_f, gemm_b, ew_f, ew_b, core_f, core_b, head_f, head_b,
                       sum(roofline.elementwise_fwd_s(e) for e in emb_ew),
                       sum(roofline.elementwise_bwd_s(e) for e in emb_ew))
