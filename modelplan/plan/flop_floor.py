"""A lower bound of one block's kernel seconds from its FLOPs alone, without the roofline's memory
roof, the per-kernel overhead or any element-wise kernel: the search's first, cheapest step-time
floor (`Evaluator.block_flop_floor_s`), which lets it leave the full block terms (kernels, TP,
CP and EP traffic, activation bytes) unpriced for points that never come near the top-k.

It holds because every kernel time of `compute.kernel_times` is at least its FLOP term: a GEMM
takes overhead + max(FLOPs / rate, bytes / bandwidth) >= FLOPs / rate (its own rate: fp8 GEMMs
the fp8 one), a fused attention call overhead + FLOPs x tile factor / its rate with a tile factor
>= 1 (a head dim runs the compiled one that holds it), an element-wise kernel >= 0; a backward
GEMM is the dgrad + wgrad pair of its forward (`Gemm.backward`), priced the same way.
"""

from __future__ import annotations

from modelplan.plan.compute import Roofline
from modelplan.plan.fp8 import is_fp8_gemm
from modelplan.plan.kernels import LayerKernels
from modelplan.plan.kernel_types import Gemm

SHAVE = 1 - 1e-9
"""The floor is shaved so that its own rounding (another summation order than `kernel_times`)
never lifts it above the exact kernel seconds."""


def flop_floor_s(kernels: LayerKernels, roofline: Roofline, fp8_factor: float = 0.0) -> tuple[float, float]:
    """(forward, backward) seconds at least of one block's kernels (module docstring);
    `fp8_factor` > 0: the linear layers' GEMMs at that fraction of the fp8 rate (`kernel_times`)."""
    fp8 = fp8_factor * roofline.fp8_matmul_flops_per_s
    half = roofline.matmul_flops_per_s

    def gemm_s(g: Gemm) -> float:
        return g.flops / (fp8 if fp8 and is_fp8_gemm(g.name) else half)

    fwd = sum(gemm_s(g) for g in kernels.gemms)
    bwd = sum(gemm_s(x) for g in kernels.gemms for x in g.backward())
    fwd += sum(a.fwd_flops for a in kernels.fused) / roofline.flash_fwd_flops_per_s if kernels.fused else 0.0
    bwd += sum(a.bwd_flops for a in kernels.fused) / roofline.flash_bwd_flops_per_s if kernels.fused else 0.0
    return fwd * SHAVE, bwd * SHAVE
