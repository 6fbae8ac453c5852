"""Tensor-parallel collectives overlapped with the GEMMs next to them, as the engines run them.

With sequence parallelism every TP collective sits beside one GEMM (Korthikanti et al. 2022
sec. 4.2.2; Transformer Engine names the pairs): in forward the AllGather of the input before
the QKV and FC1 GEMMs (`qkv_fprop`, `fc1_fprop`) and the ReduceScatter after the projection and
FC2 GEMMs (`proj_fprop`, `fc2_fprop`); in backward the AllGather of the output gradient before
the projection and FC2 dgrad GEMMs (`proj_dgrad`, `fc2_dgrad`), the AllGather of the saved input
again for QKV's and FC1's wgrad beside their dgrad GEMM (`qkv_dgrad`, `fc1_dgrad`) and the
ReduceScatter of their input gradient beside the wgrad GEMM (`qkv_wgrad`, `fc1_wgrad`).

How a pair hides its collective (`Method`):
- ring: the GEMM is split into n = tp chunks and each chunk's operand moves to the next rank by
  copy engines while the GEMM works on the chunk it holds (TE userbuffers `ring_exchange`,
  CommOverlapP2P with use_ce and 1 SM; torchtitan async TP's micro-pipelined all-gather-matmul
  and matmul-reduce-scatter over SymmetricMemory). One chunk step per GEMM chunk: the exposed
  time is what the n - 1 transfers outlast the n - 1 chunks computed beside them.
- pipeline: the GEMM is split into `splits` chunks (TE default 4) and each chunk's
  ReduceScatter runs on `num_sm` SMs (TE default 16) while the next chunk computes on the rest
  (`set_sm_margin`): a two-stage pipeline whose GEMM stage is slowed by sm_count / (sm_count -
  num_sm), the SM cost that Megatron's `--tp-comm-overlap` pays.
- bulk: the collective runs on `num_sm` SMs beside one independent GEMM (TE `bulk`, backward
  only): exposed by what the collective outlasts the slowed GEMM.
- none: the collective waits for its GEMM and the next GEMM waits for it.

Engine modes (`TpOverlap`): "userbuffers" is TE's default map that Megatron `--tp-comm-overlap`
uses (transformer_engine/pytorch/module/base.py initialize_ub: ring_exchange for qkv_fprop,
fc1_fprop, proj_dgrad, fc2_dgrad; pipeline for proj_fprop, fc2_fprop; bulk for qkv_dgrad,
qkv_wgrad, fc1_dgrad, fc1_wgrad); "ring" rings every pair (torchtitan async TP; TE with every
pair configured `ring_exchange`); "none" is no overlap. A ring-exchanged ReduceScatter leaves
each rank the tp partial outputs of its shard; one more kernel sums them on the compute stream
after the last chunk (`ring_reductions`, `reduce_scatter_partials_bytes`): TE
comm_gemm_overlap.cpp CommOverlapP2PBase::split_overlap_rs `reduce_bf16(reduce_buf, rs_output,
tp_size, ...)`, torch distributed/_symmetric_memory `_fused_matmul_reduce_scatter_impl`
`reduce_fn(stacked_partials ...)` (torch.sum over the tp chunks). NCCL's ReduceScatter reduces
inside its own kernel, so the other methods have no such pass. Not modelled: the loss of GEMM
efficiency from splitting it into chunks (none is priced), the local shard's copy into the ring's
buffer before a ring AllGather (1/tp of the gathered bytes), and contention between overlapped
copies and HBM traffic of the GEMM.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from modelplan.specs.plan import TpOverlap

Method = Literal["none", "ring", "pipeline", "bulk"]

PAIRS: tuple[str, ...] = (
    "qkv_fprop", "proj_fprop", "fc1_fprop", "fc2_fprop",
    "proj_dgrad", "fc2_dgrad", "qkv_dgrad", "fc1_dgrad", "qkv_wgrad", "fc1_wgrad",
)
"""The GEMM-collective pairs of one sequence-parallel block, TE's names."""

USERBUFFERS_METHOD: dict[str, Method] = {
    "qkv_fprop": "ring", "fc1_fprop": "ring", "proj_dgrad": "ring", "fc2_dgrad": "ring",
    "proj_fprop": "pipeline", "fc2_fprop": "pipeline",
    "qkv_dgrad": "bulk", "qkv_wgrad": "bulk", "fc1_dgrad": "bulk", "fc1_wgrad": "bulk",
}
"""TE's default method per pair (initialize_ub `methods`)."""

UB_PIPELINE_SPLITS = 4
"""TE's default chunks of a pipelined ReduceScatter (initialize_ub: num_splits 4)."""
UB_COMM_SMS = 16
"""TE's default SMs of a pipelined or bulk collective (initialize_ub: num_sm 16)."""


class TpPair(NamedTuple):
    """One GEMM and the TP collective beside it, in seconds on one TP rank."""

    gemm_s: float
    comm_s: float


def ring_exposed_s(gemm_s: float, comm_s: float, chunks: int) -> float:
    """Exposed seconds of a ring-exchanged collective beside a GEMM cut into `chunks` (= tp):
    (n - 1) steps, each max(0, comm/(n-1) - gemm/n) (TE ring_exchange; async TP)."""
    if chunks < 2:
        return comm_s
    return max(0.0, comm_s - (chunks - 1) / chunks * gemm_s)


def sm_slowdown(num_sm: int, sm_count: int) -> float:
    """How much longer a GEMM runs on sm_count - num_sm SMs than on all of them."""
    if num_sm <= 0:
        return 1.0
    if sm_count <= 0:
        raise ValueError("TP overlap with userbuffers takes SMs from the GEMMs: the accelerator needs "
                         "sm_count (its preset states none)")
    if num_sm >= sm_count:
        raise ValueError(f"num_sm ({num_sm}) must be < sm_count ({sm_count})")
    return sm_count / (sm_count - num_sm)


def pipelined_exposed_s(gemm_s: float, comm_s: float, splits: int, slowdown: float) -> float:
    """Exposed seconds (SM cost included) of a collective pipelined with its GEMM in `splits`
    chunks, the GEMM slowed by `slowdown`: a two-stage pipeline a + (s-1) max(a, b) + b."""
    a, b = gemm_s * slowdown / splits, comm_s / splits
    return a + (splits - 1) * max(a, b) + b - gemm_s


def bulk_exposed_s(gemm_s: float, comm_s: float, slowdown: float) -> float:
    """Exposed seconds (SM cost included) of a collective run beside an independent GEMM."""
    return max(gemm_s * slowdown, comm_s) - gemm_s


def pair_exposed_s(method: Method, pair: TpPair, tp: int, sm_count: int, num_sm: int = UB_COMM_SMS,
                   splits: int = UB_PIPELINE_SPLITS) -> float:
    """Seconds a pair adds beyond its GEMM under `method`."""
    if method == "none":
        return pair.comm_s
    if method == "ring":
        return ring_exposed_s(pair.gemm_s, pair.comm_s, tp)
    slow = sm_slowdown(num_sm, sm_count)
    if method == "pipeline":
        return pipelined_exposed_s(pair.gemm_s, pair.comm_s, splits, slow)
    return bulk_exposed_s(pair.gemm_s, pair.comm_s, slow)


def method_of(mode: TpOverlap, pair: str) -> Method:
    """The method an engine mode uses for one pair."""
    if mode == "none":
        return "none"
    if mode == "ring":
        return "ring"
    return USERBUFFERS_METHOD[pair]


REDUCE_SCATTER_PAIRS: frozenset[str] = frozenset({"proj_fprop", "fc2_fprop", "qkv_wgrad", "fc1_wgrad"})
"""The pairs whose collective is a ReduceScatter (the module docstring's pairs)."""


def ring_reductions(mode: TpOverlap, pairs: tuple[str, ...]) -> int:
    """How many of `pairs` are ReduceScatters the mode ring-exchanges (each ends in a partials sum)."""
    return sum(1 for name in pairs if name in REDUCE_SCATTER_PAIRS and method_of(mode, name) == "ring")


def reduce_scatter_partials_bytes(tokens: int, width: int, tp: int, dtype_bytes: int) -> int:
    """HBM bytes of summing a ring ReduceScatter's tp partials of a (tokens, width) output: each
    rank reads tp chunks of tokens / tp rows and writes its one chunk (module docstring)."""
    return tokens * width * dtype_bytes + tokens // tp * width * dtype_bytes


def block_exposed_s(mode: TpOverlap, pairs: dict[str, TpPair], tp: int, sm_count: int) -> float:
    """Exposed TP seconds of one block: the sum over its pairs (missing pairs add nothing)."""
    return sum(pair_exposed_s(method_of(mode, name), pair, tp, sm_count) for name, pair in pairs.items())


def overlap_problem(mode: TpOverlap, tp: int, sequence_parallel: bool) -> str | None:
    """Why a mode cannot run, or None: both engines overlap only sequence-parallel collectives
    (Megatron: --tp-comm-overlap needs --sequence-parallel; torchtitan async TP needs SP's
    all-gather/reduce-scatter pattern), and there is nothing to overlap at tp 1."""
    if mode == "none":
        return None
    if tp < 2:
        return f"tp_overlap '{mode}' needs tp > 1 (tp = {tp})"
    if not sequence_parallel:
        return f"tp_overlap '{mode}' needs sequence_parallel (Megatron --tp-comm-overlap and async TP overlap AG/RS)"
    return None
