"""Megatron's fused scale-mask-softmax and the PyTorch softmax it falls back to (eager attention).

Megatron-LM, Megatron-core and Megatron-DeepSpeed run the attention softmax of their unfused
("local") attention through `FusedScaleMaskSoftmax` (megatron/core/fusions/fused_softmax.py;
Megatron-DeepSpeed megatron/model/fused_softmax.py). Its CUDA kernel runs only when
`is_kernel_available(mask, b, np, sq, sk)` holds: a 16-bit input, 16 < sk <= 4096, sq and sk
multiples of 4, b np a multiple of 4 and, for the causal mask, b np a multiple of the kernel's
`batch_per_block` (for a padding mask: sq a multiple of it). Otherwise `forward_torch_softmax`
runs eager PyTorch ops on the scores in fp32: cast up, scale (only with query-key layer
scaling: `scale = layer_number`), `masked_fill_`, softmax, cast down; autograd runs each one's
backward. The fused kernel is one pass forward (read scores, write probs) and one backward (read
probs and their gradient, write the scores' gradient), which is what `block_kernels._core`
prices.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from modelplan.plan.kernel_types import Elementwise
from modelplan.plan.kernels import LayerKernels

SoftmaxMode = Literal["fused", "megatron", "megatron_layer_scaled"]
"""How an engine's eager attention runs its softmax: fused (one fused pass whatever the shape),
megatron (`FusedScaleMaskSoftmax` with its PyTorch fallback), megatron_layer_scaled (the same
with query-key layer scaling on: the fallback multiplies the fp32 scores by the layer number)."""

THREADS_PER_BLOCK = 128  # scaled_masked_softmax.h / scaled_upper_triang_masked_softmax.h
WARP_SIZE = 32  # C10_WARP_SIZE on NVIDIA GPUs


def batch_per_block(sk: int) -> int:
    """Softmax rows one thread block takes (`get_batch_per_block`, scaled_masked_softmax.h): a warp
    of min(32, 2^ceil(log2 sk)) threads, 2 rows a warp when 2^ceil(log2 sk) <= 128, else 1."""
    pow2 = 1 << max(0, sk - 1).bit_length()
    warp = min(pow2, WARP_SIZE)
    return (THREADS_PER_BLOCK // warp) * (2 if pow2 <= 128 else 1)


def kernel_available(b: int, local_heads: int, sq: int, sk: int, float16: bool, causal: bool) -> bool:
    """`FusedScaleMaskSoftmax.is_kernel_available` (masked_softmax_fusion on, the engines' default)."""
    batches = b * local_heads
    if not (float16 and 16 < sk <= 4096 and sq % 4 == 0 and sk % 4 == 0 and batches % 4 == 0):
        return False
    return (batches if causal else sq) % batch_per_block(sk) == 0


def torch_softmax_kernel(name: str, scores: int, dtype_bytes: int, scaled: bool) -> Elementwise:
    """`forward_torch_softmax` over `scores` values (softmax in fp32, the engines' default). Forward:
    cast up (d + 4), scale (4 + 4, if scaled), masked_fill_ in place (4 + 4), softmax (4 + 4), cast
    down (4 + d); backward: cast (d + 4), softmax backward (read grad and output, write: 12),
    masked_fill (4 + 4), scale (4 + 4, if scaled), cast (4 + d). An fp32 input skips the casts. The
    s x s boolean mask, shared by all b np rows, is left out."""
    d, casts = dtype_bytes, dtype_bytes < 4
    fwd, bwd, kernels = 8 + 8, 12 + 8, 2
    if scaled:
        fwd, bwd, kernels = fwd + 8, bwd + 8, kernels + 1
    if casts:
        fwd, bwd, kernels = fwd + 2 * (d + 4), bwd + 2 * (d + 4), kernels + 2
    return Elementwise(name, scores, fwd, bwd, (kernels, kernels))


def with_softmax_fallback(kernels: LayerKernels, mode: SoftmaxMode, b: int, local_heads: int, sq: int, sk: int,
                          dtype_bytes: int, causal: bool) -> LayerKernels:
    """`kernels` with the eager self-attention softmax replaced by the PyTorch fallback where the
    engine runs Megatron's `FusedScaleMaskSoftmax` and its kernel is not available for the shape."""
    if mode == "fused" or kernel_available(b, local_heads, sq, sk, dtype_bytes < 4, causal):
        return kernels
    name = "attention/softmax"

    def swap(ops: tuple[Elementwise, ...]) -> tuple[Elementwise, ...]:
        return tuple(torch_softmax_kernel(name, e.elements, dtype_bytes, mode == "megatron_layer_scaled")
                     if e.name == name else e for e in ops)

    return replace(kernels, elementwise=swap(kernels.elementwise),
                   attention_core_elementwise=swap(kernels.attention_core_elementwise))
