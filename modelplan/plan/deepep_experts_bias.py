"""NeMo AutoModel's biased routed experts under DeepEP: both biases added in eager PyTorch, one local
expert at a time, the second in fp32.

NeMo AutoModel 89e3a9fdd `components/moe/layers.py` `GroupedExpertsDeepEP.forward` (the experts of
every MoE model the `enable_deepep` backend builds; GPT-OSS sets `expert_bias=True`,
`components/models/gpt_oss/model.py`) runs both projections as `grouped_gemm.ops.gmm` (no bias
operand) and adds each bias with `_apply_bias`:

    fc1: torch.cat([t + b for t, b in zip(torch.split(out1, tokens_per_expert), biases)])
    fc2: torch.cat([t + b * p for t, b, p in zip(torch.split(out2, tokens_per_expert), biases,
                                                  torch.split(permuted_probs, tokens_per_expert))]).to(out2.dtype)

`permuted_probs` are fp32: the dispatcher casts the router's probs to float32 and asserts it before
`permute` (`components/moe/megatron/token_dispatcher.py`: "DeepEP only supports float32 probs"), so
`b * p`, the sum and the cat of fc2 are fp32 (rows, h) tensors and `.to` casts back.

HBM bytes per output value, d the model dtype's bytes, f = 4 (fp32):
- fc1 forward: the add reads and writes d, the cat reads and writes d: 4d; local + 1 kernels (the
  `.to` is a no-op, same dtype). Backward: b's gradient sums the output gradient over the expert's
  rows (reads d; the add passes t's gradient through, the cat's gradients are views), the split's
  gradients are joined by a cat (2d): 3d; local + 1 kernels.
- fc2 forward: `b * p` writes f, the sum reads d + f and writes f, the cat reads and writes f, `.to`
  reads f and writes d: 6f + 2d; 2 local + 2 kernels. Backward: `.to`'s gradient cast up (d + f);
  per expert t's fp32 gradient cast back to t's dtype (the autograd engine casts a gradient to its
  input's dtype: f + d) and b's gradient, grad x p then its sum over rows (2f + f); the split's
  gradients joined (2d): 5f + 4d; 3 local + 2 kernels. With a learned gate p's gradient too, grad x b
  and its sum over h (+3f, 2 more kernels per expert); FakeBalancedGate's weights are constants
  (`torch.ones(...) / k`), so no gradient reaches p.
Only under DeepEP: without it AutoModel's `GroupedExperts` adds the biases inside the compiled
per-expert `quick_geglu` / `swiglu`.
"""

from __future__ import annotations

from modelplan.plan.compute import KernelTimes, Roofline
from modelplan.plan.kernel_types import Elementwise
from modelplan.specs.transformer import TransformerSpec

PROBS_BYTES = 4
"""fp32 probs (module docstring: DeepEP's dispatcher casts them to float32)."""


def adds_biases_eagerly(spec: TransformerSpec, framework: str, flex_dispatcher: str | None) -> bool:
    """AutoModel's `GroupedExpertsDeepEP` with biased experts (MoESpec.expert_bias, else mlp_bias)."""
    moe = spec.moe
    if framework != "automodel" or flex_dispatcher != "deepep" or moe is None:
        return False
    return spec.mlp_bias if moe.expert_bias is None else moe.expert_bias


def fc1_bias_kernel(local_experts: int, rows: int, width: int, dtype_bytes: int) -> Elementwise:
    """fc1's `_apply_bias` over `local_experts` x `rows` x `width` output values (module docstring)."""
    d = dtype_bytes
    return Elementwise("mlp/experts/in_bias", local_experts * rows * width, 4 * d, 3 * d,
                       (local_experts + 1, local_experts + 1))


def fc2_bias_kernel(local_experts: int, rows: int, hidden: int, dtype_bytes: int,
                    probs_grad: bool) -> Elementwise:
    """fc2's `_apply_bias` with the fp32 probs over `local_experts` x `rows` x `hidden` values;
    `probs_grad`: a learned gate (p's gradient computed too)."""
    d, f = dtype_bytes, PROBS_BYTES
    bwd, bwd_kernels = 5 * f + 4 * d, 3 * local_experts + 2
    if probs_grad:
        bwd, bwd_kernels = bwd + 3 * f, bwd_kernels + 2 * local_experts
    return Elementwise("mlp/experts/out_bias", local_experts * rows * hidden, 6 * f + 2 * d, bwd,
                       (2 * local_experts + 2, bwd_kernels))


def with_deepep_experts_bias(times: KernelTimes, roofline: Roofline, spec: TransformerSpec, framework: str,
                             flex_dispatcher: str | None, fake_balanced_gate: bool, ep: int, capacity: int,
                             etp: int, dtype_bytes: int) -> KernelTimes:
    """`times` with both bias passes in the block's element-wise seconds where AutoModel runs them
    (`adds_biases_eagerly`); the forward ones are re-run by a full recompute with the rest of the
    forward. Each local expert holds ep x capacity rows (`plan/kernels.py` `moe_mlp_kernels`)."""
    if not adds_biases_eagerly(spec, framework, flex_dispatcher):
        return times
    moe = spec.moe
    local, rows = moe.num_experts // ep, ep * capacity
    width = (2 if spec.gated_mlp else 1) * moe.expert_ffn_hidden // etp
    ops = (fc1_bias_kernel(local, rows, width, dtype_bytes),
           fc2_bias_kernel(local, rows, spec.hidden, dtype_bytes, not fake_balanced_gate))
    return times._replace(
        fwd_elementwise_s=times.fwd_elementwise_s + sum(roofline.elementwise_fwd_s(op) for op in ops),
        bwd_elementwise_s=times.bwd_elementwise_s + sum(roofline.elementwise_bwd_s(op) for op in ops))
