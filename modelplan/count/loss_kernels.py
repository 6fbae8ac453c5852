"""The loss on the last pipeline stage as each engine's kernels run it: HBM bytes per logit moved
(the step's time) and held at the loss's peak (the last stage's memory), from one setting.

One entry per cross-entropy implementation, counted pass by pass and tensor by tensor at its
source (d is the bytes of the logits' dtype, fp32 values take 4; the per-row reductions, the label
gather and the scatter of one value per row are a vocab-th of a pass and left out). The kind is a
property of what the engine runs (`EngineProfile.loss_kernel`, the run's `TrainingSpec.loss_kernel`):

- megatron: Megatron's unfused `vocab_parallel_cross_entropy` with its in-place subtract
  (Megatron-LM mpu/cross_entropy.py 57064fd6f2 2020-03 to 2022-09, megatron/core/tensor_parallel/
  cross_entropy.py from 9634c0e4a3, 2024-06-13): fp32 copy, max, subtract, exp, sum, divide;
  backward multiply in place and the cast's backward.
- megatron_2022: the same in megatron/core/tensor_parallel/cross_entropy.py 55817ec9b9 (2022-09-27)
  to 9634c0e4a3: `vocab_parallel_logits = vocab_parallel_logits - logits_max` out of place, so
  forward holds a second fp32 copy (Megatron-LM 992da75, 2023-07; microsoft/Megatron-DeepSpeed
  keeps that file, main f4157bea, #347 only dropped a duplicate save_for_backward).
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

from modelplan.count.eager import CROSS_ENTROPY_KERNELS, FP32, cross_entropy_bytes, cross_entropy_peak_bytes
from modelplan.specs.engine import LossKernel

__all__ = ["loss_kernel_bytes", "loss_kernel_launches", "loss_kernel_peak_bytes"]

# Megatron's unfused variants move the same bytes (an out-of-place subtract or exp reads and
# writes what the in-place one does); only what forward holds differs (`loss_kernel_peak_bytes`).
_MEGATRON_UNFUSED = ("megatron", "megatron_2022")

# Kernels over the logits each implementation launches (forward, backward), from the same sources.
_LAUNCHES: dict[str, tuple[int, int]] = {
    "megatron": (6, 2),  # float, max, sub, exp, sum, div; mul_, the cast's backward
    "megatron_2022": (6, 2),
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
    if kind in _MEGATRON_UNFUSED:
        # fwd: .float() d + 4, max 4, in-place / out-of-place (megatron_2022) subtract 4 + 4,
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


def loss_kernel_peak_bytes(kind: LossKernel, d: int, upcast: bool = True, loss_parallel: bool = False) -> int:
    """Bytes per logit the loss `kind` holds at its peak on the last stage, over d-byte logits the
    output layer wrote and the caller holds while the loss's forward runs (`upcast`: the eager loss
    casts them to fp32 first; `loss_parallel`: the eager loss over DTensor vocab-sharded logits).
    Each is the larger of the forward's and the backward's peak; the backward ends when the
    d-byte gradient for the output layer exists."""
    if kind in ("megatron", "megatron_native"):
        # fwd: the caller's logits d beside the fp32 copy (.float() / calculate_logits_max), which
        # the in-place subtract, exp and div_ turn into the saved softmax, d + 4; bwd: mul_ in place,
        # then autograd's cast of the fp32 gradient to the input's dtype beside it, 4 + d
        return d + FP32
    if kind == "megatron_2022":
        # fwd: the logits d, the fp32 copy 4 (the caller's `output.float()`, or calculate_logits_max's,
        # alive until forward returns) and the out-of-place difference 4, which exp(out=) and div_
        # make the saved softmax; bwd as above
        return d + 2 * FP32
    if kind == "te":
        # parallel_cross_entropy keeps only the d-byte logits: cross_entropy_kernel stores the
        # gradient into them (tl.store(X_ptr, ... .to(input_dtype))), element_mul_kernel scales it
        # in place; m, d and X_y are three fp32 values per row
        return d
    if kind == "te_fp32_grad":
        # fwd: the logits d and the new fp32 gradient 4; bwd: that gradient 4 and autograd's cast d
        return d + FP32
    if kind == "eager":
        return cross_entropy_peak_bytes(d, upcast, loss_parallel)
    if kind in ("compiled", "flash_attn"):
        # compiled: AOTAutograd's min-cut partitioner (torch/_functorch/partitioners.py) saves the
        # d-byte logits and the per-row reductions; backward recomputes the softmax in the kernel
        # that writes the d-byte gradient: 2 d. flash_attn: CrossEntropyLoss saves the logits
        # (ctx.save_for_backward(logits, lse, labels)); backward writes dlogits =
        # torch.empty_like(logits) (inplace_backward False, flash_attn.losses' default): 2 d
        return 2 * d
    raise ValueError(f"loss_kernel: unknown kind {kind!r}")


def loss_kernel_launches(kind: LossKernel) -> tuple[int, int]:
    """Kernels over the logits the loss `kind` launches (forward, backward)."""
    return _LAUNCHES[kind]
