"""Megatron-core's clamp before the routed experts' fused clamped SwiGLU (GPT-OSS).

Megatron-core `TEGroupedMLP.bias_act_func` runs GPT-OSS's activation (quick-GELU GLU with
`activation_func_clamp_value`, Megatron-Bridge `GPTOSSProvider`: 7.0) through
`fusions/fused_bias_geglu.py` `weighted_bias_quick_geglu_impl` (core 0.15 at 0d8e0714 on), whose
fused autograd function starts only after an eager clamp of the fc1 output:

    x_glu, x_linear = input.chunk(2, -1)
    input = torch.cat((x_glu.clamp(min=None, max=clamp_value), x_linear.clamp(-clamp_value, clamp_value)), -1)

Per fc1 output value of d bytes: forward two clamps (read and write each half: 2d) and the cat
(2d): 4d in 3 kernels; backward the clamps' gradients (read the gradient and the saved input, write:
3d) and the chunk's gradients joined (2d): 5d in 3 kernels. Two fc1 values feed each activation
output value, so per output value of the activation: 8d forward, 10d backward. The pass belongs to
the activation (`mlp/experts/act`), so `moe_act` recompute re-runs it with the rest.
"""

from __future__ import annotations

from dataclasses import replace

from modelplan.plan.kernel_types import Elementwise
from modelplan.plan.kernels import LayerKernels
from modelplan.specs.transformer import TransformerSpec

CLAMP_BYTES = (8, 10)
"""HBM bytes per activation output value, in units of the dtype's bytes, forward and backward."""
CLAMP_KERNELS = (3, 3)
ACT = "mlp/experts/act"


def clamps_eagerly(spec: TransformerSpec, framework: str) -> bool:
    """Megatron-core clamps the routed experts' fc1 output in PyTorch: gated clamped SwiGLU experts."""
    return framework == "megatron" and spec.moe is not None and spec.gated_mlp and spec.activation == "swiglu_clamp"


def clamped_act(op: Elementwise, dtype_bytes: int) -> Elementwise:
    """The experts' activation with the eager clamp before it (per activation output value)."""
    fwd, bwd = CLAMP_BYTES
    return Elementwise(op.name, op.elements, op.fwd_bytes_per_element + fwd * dtype_bytes,
                       op.bwd_bytes_per_element + bwd * dtype_bytes,
                       (op.kernels[0] + CLAMP_KERNELS[0], op.kernels[1] + CLAMP_KERNELS[1]))


def with_expert_clamp(kernels: LayerKernels, spec: TransformerSpec, framework: str, dtype_bytes: int) -> LayerKernels:
    """`kernels` with the experts' activation priced as Megatron-core runs it (`clamps_eagerly`)."""
    if not clamps_eagerly(spec, framework):
        return kernels
    ops = tuple(clamped_act(e, dtype_bytes) if e.name == ACT else e for e in kernels.elementwise)
    return replace(kernels, elementwise=ops)
