"""Megatron-core's per-expert output bias of biased routed experts (GPT-OSS).

Megatron-core `TEGroupedMLP` (transformer/moe/experts.py, core 0.15 at the 25.11 rows' 0d8e0714
through core_r0.18.0 and dev) builds `linear_fc1` with `skip_bias_add=False` (TransformerEngine
GroupedLinear adds that bias in its GEMMs) but `linear_fc2` with `skip_bias_add=True`, and adds the
returned biases in PyTorch, one local expert at a time (`_apply_bias`):

    torch.cat([t + b * p for t, b, p in zip(torch.split(out, tokens_per_expert), biases,
                                              torch.split(permuted_probs, tokens_per_expert))])

Per output value of d bytes (the probs are in the router's dtype, the model's unless
moe_router_dtype is fp32; priced at d): forward `b * p` writes d, the sum reads 2d and writes d,
`torch.cat` reads and writes d: 6d, in 2 kernels per local expert and one cat; backward the
gradient times p and its sum over tokens (b's gradient: 2d + d), times b and its sum over h (p's
gradient: 2d + d), and the split's gradients joined for fc2 (2d): 8d, in 4 kernels per local expert
and one cat. Nothing else in the planner prices this bias (the fused bias of a dense layer rides
its GEMM's epilogue).
"""

from __future__ import annotations

from dataclasses import replace

from modelplan.plan.kernel_types import Elementwise
from modelplan.plan.kernels import LayerKernels
from modelplan.specs.transformer import TransformerSpec

BIAS_BYTES = (6, 8)
"""HBM bytes per expert output value, in units of the dtype's bytes, forward and backward (docstring)."""
BIAS_KERNELS_PER_EXPERT = (2, 4)
"""Kernels per local expert, forward and backward, besides one torch.cat each way (docstring)."""
EXPERTS_OUT = "mlp/experts/out"


def adds_expert_bias(spec: TransformerSpec, framework: str) -> bool:
    """Megatron-core adds the routed experts' fc2 bias in PyTorch: biased experts (MoESpec.expert_bias,
    else the model's mlp_bias)."""
    moe = spec.moe
    if framework != "megatron" or moe is None:
        return False
    return spec.mlp_bias if moe.expert_bias is None else moe.expert_bias


def bias_kernel(local_experts: int, rows_per_expert: int, hidden: int, dtype_bytes: int) -> Elementwise:
    """`_apply_bias` over the local experts' fc2 outputs (local x rows x hidden values)."""
    fwd, bwd = BIAS_BYTES
    kernels = (BIAS_KERNELS_PER_EXPERT[0] * local_experts + 1, BIAS_KERNELS_PER_EXPERT[1] * local_experts + 1)
    return Elementwise("mlp/experts/bias", local_experts * rows_per_expert * hidden, fwd * dtype_bytes,
                       bwd * dtype_bytes, kernels)


def with_expert_bias(kernels: LayerKernels, spec: TransformerSpec, framework: str, dtype_bytes: int) -> LayerKernels:
    """`kernels` with the experts' output bias added where Megatron-core runs it (`adds_expert_bias`);
    the fc2 GEMM (`mlp/experts/out`: rows per expert x hidden, batch = local experts) gives its shape."""
    fc2 = next((g for g in kernels.gemms if g.name == EXPERTS_OUT), None)
    if fc2 is None or not adds_expert_bias(spec, framework):
        return kernels
    op = bias_kernel(fc2.batch, fc2.m, fc2.n, dtype_bytes)
    return replace(kernels, elementwise=kernels.elementwise + (op,))
