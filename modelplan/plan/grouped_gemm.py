"""Kernel launches of the routed experts' grouped GEMMs: one per local expert, not one per layer.

`plan/kernels.py` lists each MoE block's expert projections as one batched `Gemm` (batch = the
local experts) and `compute.Roofline` charges a batched GEMM the per-kernel overhead once. That is
right for a single grouped-GEMM kernel, not for how Megatron-core runs its experts on Hopper:
`TEGroupedMLP` calls TransformerEngine's `GroupedLinear`, whose default path reads the per-expert
token counts on the host, splits and quantizes the input per expert and "launches one cuBLAS GEMM
per expert on a pool of CUDA streams" (TransformerEngine docs/features/mixture_of_experts/
mixture_of_experts.rst, "Per-expert GEMMs"; an earlier version of the page: the single-kernel
CUTLASS path is opt-in, `NVTE_USE_CUTLASS_GROUPED_GEMM=1`, and the single cuBLASLt grouped GEMM
needs cuBLAS 13.3+, 13.5+ for fp8 current scaling on Hopper). So every local expert pays the per-kernel overhead for its forward GEMM, its dgrad and
its wgrad, and under fp8 for the quantisation of its input (forward) and of its output gradient
(backward), which `split_quantize` runs per expert.

The overhead is the planner's own per-kernel constant (`CostModel.kernel_overhead_us`), applied at
the kernel count the engine launches; nothing here is fitted. NeMo AutoModel's experts
(`grouped_gemm.ops.gmm`) launch per expert too (`PER_EXPERT_FRAMEWORKS`). Engines that run one grouped
kernel (torchtitan's `torch._grouped_mm`) keep the single charge.
"""

from __future__ import annotations

from modelplan.plan.fp8 import is_fp8_gemm
from modelplan.plan.kernel_types import Gemm

PER_EXPERT_FRAMEWORKS = frozenset({"megatron", "automodel"})
"""Engines whose routed experts launch one GEMM per local expert: Megatron-core's TEGroupedMLP over
TransformerEngine `GroupedLinear` (the per-expert cuBLAS path above is its default); NeMo AutoModel
(89e3a9fdd `components/moe/layers.py`: `grouped_gemm.ops.gmm`, fanshiqing/grouped_gemm v1.1.4, whose
`csrc/grouped_gemm.cu` runs `CublasGroupedGemm` on every arch but sm_80, "Use cuBLAS for SM90 until
CUTLASS supports SM90-optimized grouped-gemm": one `cublasGemmEx` per expert on 4 streams, the
backward's dgrad and wgrad (`CublasGroupedGemmVariableK`) likewise; without DeepEP its
`GroupedExperts` loops over the local experts in Python)."""

EXPERT_GEMM_PREFIX = "mlp/experts/"
"""The routed experts' GEMMs in `plan/kernels.py` `moe_mlp_kernels` (batch = local experts)."""


def expert_gemms(gemms: tuple[Gemm, ...] | list[Gemm]) -> list[Gemm]:
    """The routed experts' grouped GEMMs among a block's GEMMs."""
    return [g for g in gemms if g.name.startswith(EXPERT_GEMM_PREFIX)]


def extra_launches(gemms: tuple[Gemm, ...] | list[Gemm], framework: str, fp8: bool) -> tuple[int, int]:
    """(forward, backward) kernel launches beyond the one per grouped GEMM (and per quantisation)
    the roofline already charges: per expert GEMM of `batch` local experts, batch - 1 more forward
    GEMMs, 2 (batch - 1) more backward (dgrad, wgrad), and under fp8 batch - 1 more quantisations
    each way. 0 for engines that launch one grouped kernel."""
    if framework not in PER_EXPERT_FRAMEWORKS:
        return 0, 0
    fwd = bwd = 0
    for g in expert_gemms(gemms):
        more = g.batch - 1
        quantised = fp8 and is_fp8_gemm(g.name)
        fwd += more * (1 + quantised)
        bwd += more * (2 + quantised)
    return fwd, bwd


def extra_launch_s(gemms: tuple[Gemm, ...] | list[Gemm], framework: str, fp8: bool,
                   overhead_s: float) -> tuple[float, float]:
    """(forward, backward) seconds of `extra_launches` at `overhead_s` per kernel."""
    fwd, bwd = extra_launches(gemms, framework, fp8)
    return fwd * overhead_s, bwd * overhead_s
