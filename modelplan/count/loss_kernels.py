"""The loss on the last pipeline stage as each engine's kernels run it: HBM bytes per logit.

One entry per cross-entropy implementation, counted pass by pass at its source (d is the bytes of
the logits' dtype, fp32 values take 4; the per-row reductions, the label gather and the scatter of
one value per row are a vocab-th of a pass and left out). The kind is a property of what the
engine runs (`EngineProfile.loss_kernel`, the run's `TrainingSpec.loss_kernel`):

- megatron: Megatron's unfused `vocab_parallel_cross_entropy` (Megatron-LM mpu/cross_entropy.py
  2020-21, megatron/core/tensor_parallel/cross_entropy.py since 2022, the same code in
  Megatron-DeepSpeed): fp32 copy, max, subtract, exp, sum, divide; backward multiply in place and
  the cast's backward.
- megatron_native: Megatron-core `--cross-entropy-loss-fusion` with `cross_entropy_fusion_impl`
  "native" (core/fusions/fused_cross_entropy.py): the same steps in three `jit_fuser`
  (torch.compile from torch 2.2, core/jit.py) functions, each one generated kernel.
- te: `cross_entropy_fusion_impl` "te", Transformer Engine's `parallel_cross_entropy` Triton kernels
  (TE 2.2-2.17): an online-softmax pass, a pass writing the gradient over the 16-bit logits in
  place, backward one in-place multiply by the per-token output gradient.
- te_fp32_grad: the same from TE 2.18 (#3193): the gradient is written to a new fp32 tensor.
- eager: `F.cross_entropy(logits.float(), labels)` in eager PyTorch (HF Trainer, torchtitan without
  compile; `count.eager.cross_entropy_bytes`).
- compiled: the same under torch.compile (torchtitan's loss with `compile`).
- flash_attn: flash-attn's Triton `cross_entropy_loss` (llm-foundry's default loss_fn
  "fused_crossentropy"): one online-softmax pass, backward reads the logits and writes dlogits.
"""

from __future__ import annotations

from modelplan.count.eager import CROSS_ENTROPY_KERNELS, FP32, cross_entropy_bytes
from modelplan.specs.engine import LossKernel

__all__ = ["loss_kernel_bytes", "loss_kernel_launches"]

# Kernels over the logits each implementation launches (forward, backward), from the same sources.
_LAUNCHES: dict[str, tuple[int, int]] = {
    "megatron": (6, 2),  # float, max, sub, exp, sum, div; mul_, the cast's backward
    "megatron_native": (3, 1),  # one per jit_fuser function: logits_max, predicted_logits, loss; gradients
    "te": (2, 1),  # online_softmax_kernel, cross_entropy_kernel; element_mul_kernel
    "te_fp32_grad": (2, 2),  # the same; element_mul_kernel and autograd's cast to the logits' dtype
    "eager": CROSS_ENTROPY_KERNELS,
    "compiled": (1, 1),  # Inductor: one reduction kernel forward, one recompute-and-write backward
    "flash_attn": (1, 1),  # cross_entropy_fwd_kernel; cross_entropy_bwd_kernel
}


def loss_kernel_bytes(kind: LossKernel, d: int, upcast: bool = True) -> tuple[int, int]:
    """(forward, backward) HBM bytes per logit of the loss `kind` over d-byte logits (`upcast`:
    the eager loss casts them to fp32 first, `TrainingSpec.loss_upcast`)."""
    if kind == "megatron":
        # fwd: .float() d + 4, max 4, in-place (core) / out-of-place (DeepSpeed) subtract 4 + 4,
        # exp(out=) 4 + 4, sum 4, div_ 4 + 4; bwd: grad_input.mul_ 4 + 4, .float()'s backward 4 + d
        return d + 36, 12 + d
    if kind == "megatron_native":
        # fwd: calculate_logits_max writes the fp32 copy with its max, d + 4; calculate_predicted_logits
        # subtracts and exps in place with the sum, 4 + 4; calculate_cross_entropy_loss div_ 4 + 4;
        # bwd: calculate_gradients mul_ in place (the mutated input written back) 4 + 4 and .to(bf16) d
        return d + 20, 8 + d
    if kind == "te":
        # fwd: online_softmax_kernel reads X, d; cross_entropy_kernel reads X and stores the
        # gradient into X, 2 d; bwd: element_mul_kernel reads and writes X, 2 d (Megatron passes
        # reduce_loss False, so grad_output is per token and the torch.equal(1.0) skip never fires)
        return 3 * d, 2 * d
    if kind == "te_fp32_grad":
        # fwd: reads X twice, writes the fp32 grad_input, 2 d + 4; bwd: element_mul_kernel 4 + 4,
        # autograd casts the fp32 gradient to the d-byte input's dtype, 4 + d
        return 2 * d + FP32, 12 + d
    if kind == "eager":
        return cross_entropy_bytes(d, upcast)
    if kind == "compiled":
        # Inductor's online softmax (torch/_inductor/fx_passes/post_grad.py prepare_softmax_online,
        # config.online_softmax on by default, torch 2.13) takes the max and the sum of exp in one
        # read of the d-byte logits, d (an Inductor without it reads them twice); nll gathers one value
        # per row; AOTAutograd's min-cut partitioner saves the logits and the row statistics, so
        # backward recomputes the softmax and writes the d-byte gradient in one kernel, 2 d
        # (torch/_functorch/partitioners.py)
        return d, 2 * d
    if kind == "flash_attn":
        # fwd: cross_entropy_fwd_kernel one online-softmax pass over the logits, d;
        # bwd: cross_entropy_bwd_kernel reads the logits and writes dlogits, 2 d
        return d, 2 * d
    raise ValueError(f"loss_kernel: unknown kind {kind!r}")


def loss_kernel_launches(kind: LossKernel) -> tuple[int, int]:
    """Kernels over the logits the loss `kind` launches (forward, backward)."""
    return _LAUNCHES[kind]
