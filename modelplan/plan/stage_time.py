"""One micro-batch on every pipeline stage, term by term: each block's compute and exposed
communication (`BlockTerms`, from `compute.py` and the parallelism modules `parallel/tp.py`,
`ep.py`, `cp.py`), summed over the blocks a rank runs, plus the embedding on the first stage and
the head + loss on the last (`compose_stages`); the slowest rank is the critical one.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import NamedTuple

from modelplan.plan.compute import KernelTimes
from modelplan.plan.parallel.cp import CpExposure
from modelplan.plan.parallel.ep import EpExposure
from modelplan.plan.parallel.tp import TpExposure
from modelplan.plan.stages import RankBlocks


@dataclass(frozen=True)
class BlockTerms:
    """Seconds and bytes per micro-batch on one TP rank (block terms are per block)."""

    kernels: KernelTimes
    recompute_s: float
    """Compute of the recomputed forward (full: the whole block; selective: attention core)."""
    tp: TpExposure
    ep: EpExposure
    cp: CpExposure
    activation_bytes: int
    """Bytes one block keeps per in-flight micro-batch (Korthikanti et al. 2022; `memory.py`)."""
    working_bytes: int
    """Transient bytes of the block being recomputed / back-propagated (full: a whole block)."""
    embedding_activation_bytes: int
    head_activation_bytes: int
    boundary_bytes: int
    """Bytes of one stage-boundary send per micro-batch (`parallel/pp.py`)."""

    @property
    def layer_fwd_s(self) -> float:
        """Forward of one block, with its exposed TP, EP and CP communication."""
        k = self.kernels
        return k.fwd_gemm_s + k.fwd_elementwise_s + self.tp.fwd_s + self.ep.fwd_s + self.cp.fwd_s

    @property
    def layer_bwd_s(self) -> float:
        """Backward of one block with recompute and exposed TP, EP and CP communication."""
        k = self.kernels
        return (k.bwd_gemm_s + k.bwd_elementwise_s + self.recompute_s + self.tp.bwd_s + self.tp.recompute_s
                + self.ep.bwd_s + self.ep.recompute_s + self.cp.bwd_s + self.cp.recompute_s)

    @property
    def compute_s(self) -> float:
        """Kernels of one block's forward and backward (no recompute, no communication)."""
        k = self.kernels
        return k.fwd_gemm_s + k.fwd_elementwise_s + k.bwd_gemm_s + k.bwd_elementwise_s

    @property
    def tp_s(self) -> float:
        """Exposed TP collectives of one block, recompute included (`parallel/tp.py`)."""
        return self.tp.fwd_s + self.tp.bwd_s + self.tp.recompute_s

    @property
    def ep_s(self) -> float:
        """Exposed EP AllToAlls of one block, recompute included (`parallel/ep.py`)."""
        return self.ep.fwd_s + self.ep.bwd_s + self.ep.recompute_s

    @property
    def cp_s(self) -> float:
        """Exposed context-parallel ring traffic of one block, recompute included (`parallel/cp.py`)."""
        return self.cp.fwd_s + self.cp.bwd_s + self.cp.recompute_s

    def row(self) -> tuple[float, ...]:
        """(compute, tp, ep, cp, recompute, fwd, bwd, tp hidden, cp hidden) seconds of one block."""
        return (self.compute_s, self.tp_s, self.ep_s, self.cp_s, self.recompute_s, self.layer_fwd_s,
                self.layer_bwd_s, self.tp.hidden_s, self.cp.hidden_s)


class StageTerms(NamedTuple):
    """One micro-batch on the stages of a pipeline (seconds; the critical rank is the slowest)."""

    first_s: float
    last_s: float
    mid_s: float
    """Mean of the middle stages (pp > 2)."""
    compute_s: float
    tp_s: float
    recompute_s: float
    fwd_s: float
    bwd_s: float
    critical_is_first: bool
    tp_hidden_s: float
    """TP traffic overlapped with compute on one stage."""
    mid_max_s: float = 0.0
    """Slowest middle stage (a middle stage of MoE blocks can outweigh a first stage of dense ones)."""
    critical_rank: int = 0
    """Pipeline rank of the slowest stage."""
    ep_s: float = 0.0
    """Exposed expert-parallel AllToAll on the critical stage."""
    cp_s: float = 0.0
    """Exposed context-parallel ring traffic on the critical stage."""
    cp_hidden_s: float = 0.0


def compose_stages(blocks: list[RankBlocks], dense: BlockTerms, moe: BlockTerms | None) -> StageTerms:
    """Stage times from what one micro-batch runs on each pipeline rank (`plan/stages.py`
    RankBlocks: dense and MoE blocks, embedding and head shares) and the per-block terms (middle
    ranks that run the same are priced once)."""
    pp = len(blocks)
    dense_row = dense.row()
    moe_row = moe.row() if moe is not None else None
    k = dense.kernels

    def row(rb: RankBlocks) -> tuple:
        if moe_row is not None and rb.moe_run:
            compute, tp, ep, cp, rec, fwd, bwd, hidden, cp_hidden = (
                rb.dense_run * d + rb.moe_run * e for d, e in zip(dense_row, moe_row))
        else:
            compute, tp, ep, cp, rec, fwd, bwd, hidden, cp_hidden = (rb.dense_run * d for d in dense_row)
        if rb.embedding:
            compute += rb.embedding * (k.embedding_fwd_s + k.embedding_bwd_s)
            tp += rb.embedding * dense.tp.embedding_s
        if rb.head:
            compute += rb.head * (k.head_fwd_s + k.head_bwd_s)
            tp += rb.head * dense.tp.head_s
        return (compute + tp + ep + cp + rec, compute, tp, ep, rec, fwd, bwd, hidden, cp, cp_hidden)

    first, last = row(blocks[0]), row(blocks[-1])
    middle = blocks[1:-1]
    kinds = Counter(middle)  # middle ranks that run the same are priced once
    mids = {kind: row(kind) for kind in kinds}
    crit, c = (0, first) if first[0] >= last[0] else (pp - 1, last)
    mid_max = max((r[0] for r in mids.values()), default=0.0)
    if mids and mid_max > c[0]:
        crit = 1 + next(i for i, kind in enumerate(middle) if mids[kind][0] == mid_max)
        c = mids[middle[crit - 1]]
    mid_mean = sum(n * mids[kind][0] for kind, n in kinds.items()) / len(middle) if middle else 0.0
    return StageTerms(first[0], last[0], mid_mean, c[1], c[2], c[4], c[5], c[6], crit == 0, c[7],
                      mid_max, crit, c[3], c[8], c[9])
