"""A block that runs several passes per forward (Inkling 2 Loop's looped range: `count/conv_relative.py`
`block_passes`, the count's FLOPs and activations already x passes).

The stack is data: each block kind carries its passes, and the planner prices one pass of the kind
(its kernels, TP collectives, EP AllToAlls, CP exchanges) and repeats it `passes` times, as
Inkling2LoopTextModel.forward calls each loop layer once a pass. The later passes' message path runs
once a pass after the first: message_input's 4 queries pooling the previous pass's S sources
((4, h) @ (h, S) and (4, S) @ (S, h) per token) and four message gates, (t, 2h) @ (2h, r) then two
(t, r) @ (r, h) each (Inkling2LoopMessageGate), every TP rank whole (small replicated linears,
like `kernels.side_path_gemms`). The embedding and the head are not part of a block: never repeated.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, NamedTuple, TypeVar

from modelplan.count.blocks import block_of
from modelplan.count.conv_relative import block_passes, pool_sources
from modelplan.plan.kernel_types import Gemm

if TYPE_CHECKING:
    from modelplan.count.blocks import Block
    from modelplan.plan.compute import KernelTimes, Roofline
    from modelplan.specs.transformer import TransformerSpec

T = TypeVar("T", bound=NamedTuple)

EDGE_FIELDS = frozenset({"head_fwd_s", "head_bwd_s", "embedding_fwd_s", "embedding_bwd_s", "embedding_s", "head_s"})
"""Fields of the per-block NamedTuples (`KernelTimes`, `TpSeconds`) that are the embedding's or the head's."""


def passes_of(spec: "TransformerSpec", block: "Block | None") -> int:
    """Times a block of this kind runs per forward (1 for the default block)."""
    return 1 if block is None else block_passes(spec, block)


def block_runs(spec: "TransformerSpec", indices, key=lambda block: block) -> Counter:
    """Block passes per `key(block)` over the blocks `indices` (a looped block counts its passes):
    the runs a stage's communication list repeats each kind's calls."""
    runs: Counter = Counter()
    for i in indices:
        block = block_of(spec, i)
        runs[key(block)] += block_passes(spec, block)
    return runs


def repeated(terms: T, passes: int) -> T:
    """A block's per-pass figures (a NamedTuple of seconds) over `passes` passes; the embedding's
    and the head's fields (`EDGE_FIELDS`) once."""
    if passes == 1:
        return terms
    return terms._replace(**{name: getattr(terms, name) * passes for name in terms._fields
                             if name not in EDGE_FIELDS})


def message_gemms(spec: "TransformerSpec", block: "Block", tokens: int) -> list[Gemm]:
    """The message path's GEMMs of all later passes of one looped block over `tokens` tokens
    (module docstring); none for a block that runs once."""
    later = passes_of(spec, block) - 1
    if later < 1:
        return []
    h, r, sources = spec.hidden, spec.extras.conv_relative.loop_gate_rank, pool_sources(spec)
    one = [Gemm("loop/message_pool/scores", 4, sources, h, tokens),  # (4, h) @ (h, S) per token
           Gemm("loop/message_pool/context", 4, h, sources, tokens)]  # (4, S) @ (S, h) per token
    for _ in range(4):  # four Inkling2LoopMessageGate
        one += [Gemm("loop/message_gate/down", tokens, r, 2 * h),  # (t, 2h) @ (2h, r)
                Gemm("loop/message_gate/up", tokens, h, r), Gemm("loop/message_gate/gate", tokens, h, r)]
    return one * later


def looped_times(times: "KernelTimes", spec: "TransformerSpec", block: "Block | None", tokens: int,
                 roofline: "Roofline", dtype_bytes: int) -> "KernelTimes":
    """One pass's kernel times x the block's passes, plus the message path's GEMMs (forward; dgrad and
    wgrad in backward), which a full recompute runs again with the block's forward."""
    passes = passes_of(spec, block)
    if passes == 1:
        return times
    gemms = message_gemms(spec, block, tokens)
    fwd = sum(roofline.gemm_time_s(g, dtype_bytes) for g in gemms)
    bwd = sum(roofline.gemm_time_s(x, dtype_bytes) for g in gemms for x in g.backward())
    out = repeated(times, passes)
    return out._replace(fwd_gemm_s=out.fwd_gemm_s + fwd, bwd_gemm_s=out.bwd_gemm_s + bwd,
                        linear_fwd_s=out.linear_fwd_s + fwd)
