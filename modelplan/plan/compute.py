"""Time of one kernel on one accelerator: a roofline with a per-kernel overhead.

GEMM: t = overhead + max(FLOPs / (peak * matmul_efficiency), bytes / (HBM * hbm_efficiency)),
all divided by the sustained fraction. The roofline makes the efficiency depend on shape:
large square GEMMs saturate at the accelerator's measured matmul efficiency (MAMF / peak,
comm_hw.md section 4.3); skinny ones (attention's K = head_dim) hit the memory roof; tiny ones
pay the fixed overhead (Williams et al. 2009 roofline; Calculon's size-dependent efficiency).
Elementwise kernels are memory-bound: bytes / (HBM * hbm_efficiency).
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.count.attention import FusedAttention
from modelplan.plan.kernels import Elementwise, Gemm
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Accelerator


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
    """Fused attention backward: 16-bit peak * its backward efficiency * sustained_fraction."""
    fp8_matmul_flops_per_s: float = 0.0
    """fp8 GEMMs (fp8 training's linear layers): fp8 peak * fp8 matmul efficiency *
    sustained_fraction (0 when the precision is not fp8: every GEMM is 16-bit)."""

    @classmethod
    def of(cls, accelerator: Accelerator, precision: str, cost: CostModel,
           attention_kernels: tuple[str, ...] = ()) -> "Roofline":
        """Rates for one accelerator running one precision under one cost model. The fused
        attention rates are those of the first of `attention_kernels` (the engine's preference)
        the accelerator lists, else the cost model's flash efficiencies. Under fp8 training only
        the linear layers' GEMMs run at the fp8 rate (`plan/fp8.py`); the other GEMMs and
        attention stay 16-bit (Transformer Engine / torchao)."""
        fp8 = precision == "fp8"
        peak = accelerator.peak_flops(precision)
        half = accelerator.peak_flops("bf16") if fp8 else peak
        rates = accelerator.attention_rates(attention_kernels) or (cost.flash_fwd_efficiency, cost.flash_bwd_efficiency)
        fp8_eff = accelerator.matmul_efficiency_fp8 or accelerator.matmul_efficiency
        sustained = cost.sustained_fraction * accelerator.sustained_clock_fraction  # tensor-core work
        return cls(
            matmul_flops_per_s=half * accelerator.matmul_efficiency * sustained,
            hbm_bytes_per_s=accelerator.memory_bw_tbps * 1e12 * cost.hbm_efficiency * cost.sustained_fraction,
            overhead_s=cost.kernel_overhead_us * 1e-6,
            peak_flops_per_s=peak,
            flash_fwd_flops_per_s=half * rates[0] * sustained,
            flash_bwd_flops_per_s=half * rates[1] * sustained,
            fp8_matmul_flops_per_s=peak * fp8_eff * sustained if fp8 else 0.0,
        )

    def gemm_time_s(self, gemm: Gemm, dtype_bytes: int, fp8_factor: float = 0.0) -> float:
        """Roofline time of one GEMM (Williams et al. 2009) plus the per-kernel overhead;
        `fp8_factor` > 0: an fp8 GEMM at that fraction of the fp8 rate, 1-byte operands."""
        if fp8_factor and self.fp8_matmul_flops_per_s:
            compute_s = gemm.flops / (self.fp8_matmul_flops_per_s * fp8_factor)
            memory_s = gemm.bytes_moved(1) / self.hbm_bytes_per_s
        else:
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
        """Forward time of a memory-bound op (each of its kernels pays the overhead)."""
        return op.kernels[0] * self.overhead_s + op.fwd_bytes / self.hbm_bytes_per_s

    def elementwise_bwd_s(self, op: Elementwise) -> float:
        """Backward time of a memory-bound op."""
        return op.kernels[1] * self.overhead_s + op.bwd_bytes / self.hbm_bytes_per_s
