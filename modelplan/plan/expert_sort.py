"""The all-to-all dispatcher's second permutation: received tokens sorted by local expert and back.

Megatron-core's `MoEAlltoAllTokenDispatcher` permutes a rank's tokens by destination expert before
the dispatch AllToAll (`dispatch_preprocess`, `plan/kernels.py` "mlp/permute") and unpermutes them
after the combine ("mlp/unpermute"). What arrives from the ep ranks is ordered by source rank, so
with more than one local expert it is sorted again into expert-major order before the experts
(`dispatch_postprocess`, "Permutation 2: Sort tokens by local expert": `sort_chunks_by_idxs`, or the
view / transpose / contiguous copy when dropping and padding) and sorted back before the combine
(`combine_preprocess`, "Unpermutation 2"). Each is one pass over the received rows: read and write
every value (TE's fused `moe_sort_chunks_by_index` or torch's split + cat), and its backward the
reverse sort of the gradient (TransformerEngine docs/features/mixture_of_experts/
mixture_of_experts.rst: "Over a generic all-to-all the tokens have to be permuted twice: sorted by
destination rank before the collective and regrouped by expert after it"). The flex dispatcher (DeepEP / HybridEP) hands its kernels the tokens
and the routing map and permutes once on the receiving side (`MoEFlexTokenDispatcher`
`dispatch_postprocess` / `combine_preprocess`): no second permutation.

The sort runs on the rows the local experts receive, after the tensor-parallel gather of a
sequence-parallel dispatch: the `mlp/permute` buffer of `moe_mlp_kernels` (E x capacity x h values).
"""

from __future__ import annotations

from modelplan.plan.compute import KernelTimes, Roofline
from modelplan.plan.kernel_types import Elementwise

SORT_PASSES = 2
"""Sort by local expert before the experts, sort back after them (module docstring)."""


def sort_kernel(num_experts: int, ep: int, capacity: int, hidden: int, dtype_bytes: int) -> Elementwise | None:
    """The two sort passes of one MoE block over its received rows, forward and backward (each
    pass reads and writes every value: 2 d bytes); None with one local expert (nothing to sort)."""
    if num_experts // ep <= 1:
        return None
    d = dtype_bytes
    values = num_experts * capacity * hidden
    return Elementwise("mlp/sort_chunks", values, SORT_PASSES * 2 * d, SORT_PASSES * 2 * d, (SORT_PASSES, SORT_PASSES))


def with_expert_sort(times: KernelTimes, roofline: Roofline, framework: str, flex_dispatcher: str | None,
                     num_experts: int, ep: int, capacity: int, hidden: int, dtype_bytes: int) -> KernelTimes:
    """`times` with the all-to-all dispatcher's sort passes in the block's element-wise seconds
    (Megatron-core only; none under the flex dispatcher or with one local expert)."""
    if framework != "megatron" or flex_dispatcher is not None:
        return times
    op = sort_kernel(num_experts, ep, capacity, hidden, dtype_bytes)
    if op is None:
        return times
    return times._replace(fwd_elementwise_s=times.fwd_elementwise_s + roofline.elementwise_fwd_s(op),
                          bwd_elementwise_s=times.bwd_elementwise_s + roofline.elementwise_bwd_s(op))
