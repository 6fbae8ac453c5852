"""fp8 expert padding: Megatron-core pads each local expert's rows to the fp8 GEMM alignment and back.

Megatron-core `TEGroupedMLP.forward` (core_v0.15.0 - core_v0.17.x; `experts.py`): under fp8 it
passes the received tokens through TransformerEngine's `Fp8Padding` before the experts (hidden
states and probs) and `Fp8Unpadding` on their output. TE `Fp8Padding.forward` returns its input
untouched only when every expert's row count is already a multiple of the alignment (16; 32 for
MXFP8: "if m_splits == padded_m_splits: return inp"); otherwise `fused_multi_row_padding` copies
the rows into a padded buffer, its backward splits and concatenates the gradient back, and
`Fp8Unpadding` does the reverse on the output. Under forced-balanced dropless routing
(`moe_router_force_load_balancing`: random logits, `moe_utils.apply_random_logits`) the counts are
random, so the copies run; the recipes here set no `moe_router_padding_for_fp8`. Two passes each
way over the received rows (the hidden input, the expert output), each reading and writing every
value. HybridEP pads inside its dispatch under fp8 (`MoEFlexTokenDispatcher` HybridEP manager:
`pad_multiple = get_align_size_for_quantization` since core_v0.16; core_v0.18 skips the expert
padding for it, `skip_routed_expert_padding`): no copy. A drop-and-pad run's experts get ep x
capacity rows each: a copy only when that is not aligned.
"""

from __future__ import annotations

from modelplan.plan.compute import KernelTimes, Roofline
from modelplan.plan.kernel_types import Elementwise

PAD_PASSES = 2
"""Pad the experts' input rows, unpad their output rows (module docstring)."""
PAD_KERNELS = (3, 3)
"""Forward: pad hidden, pad probs, unpad output; backward: their three reverses."""


ALIGN_ROWS = 16
"""Rows per expert TE's Fp8Padding aligns to for the recipes modelplan takes (TE `Fp8Padding`:
32 for MXFP8, 16 for the others)."""


def pads(recipe: str | None, framework: str, flex_dispatcher: str | None, dropless: bool,
         rows_per_expert: int) -> bool:
    """Whether the experts' fp8 padding copies run (module docstring)."""
    if recipe is None or framework != "megatron" or flex_dispatcher == "hybridep":
        return False
    return dropless or rows_per_expert % ALIGN_ROWS != 0


def padding_kernel(num_experts: int, capacity: int, hidden: int, dtype_bytes: int) -> Elementwise:
    """The pad and unpad passes of one MoE block over its received rows (E x capacity rows of h
    values), forward and backward: 2 x (read d + write d) bytes per value each way."""
    d = dtype_bytes
    return Elementwise("mlp/experts/fp8_padding", num_experts * capacity * hidden, PAD_PASSES * 2 * d,
                       PAD_PASSES * 2 * d, PAD_KERNELS)


def with_fp8_padding(times: KernelTimes, roofline: Roofline, recipe: str | None, framework: str,
                     flex_dispatcher: str | None, dropless: bool, num_experts: int, ep: int, capacity: int,
                     hidden: int, dtype_bytes: int) -> KernelTimes:
    """`times` with the experts' fp8 pad / unpad copies in the block's element-wise seconds."""
    if not pads(recipe, framework, flex_dispatcher, dropless, ep * capacity):
        return times
    op = padding_kernel(num_experts, capacity, hidden, dtype_bytes)
    return times._replace(fwd_elementwise_s=times.fwd_elementwise_s + roofline.elementwise_fwd_s(op),
                          bwd_elementwise_s=times.bwd_elementwise_s + roofline.elementwise_bwd_s(op))
