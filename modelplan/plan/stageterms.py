"""One micro-batch on every pipeline stage: the blocks a stage holds (dense and MoE, from
`plan/experts.py`) times their per-block terms, plus the embedding on the first stage and the
head + loss on the last (`plan/layerterms.py` gives the per-block numbers)."""

from __future__ import annotations

from typing import NamedTuple

from modelplan.plan.layerterms import LayerTerms
from modelplan.plan.stages import RankBlocks


class StageTerms(NamedTuple):
    """One micro-batch on the stages of a pipeline (seconds; `critical` is the slowest stage)."""

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


def block_row(t: LayerTerms) -> tuple[float, ...]:
    """One block's (compute, tp, ep, cp, recompute, fwd, bwd, tp hidden, cp hidden) seconds."""
    return (t.compute_s, t.tp_s, t.ep_s, t.cp_s, t.recompute_s, t.layer_fwd_s, t.layer_bwd_s, t.tp_hidden_s,
            t.cp_hidden_s)


def compose_stages(blocks: list[RankBlocks], dense: LayerTerms, moe: LayerTerms | None) -> StageTerms:
    """Stage times from what one micro-batch runs on each pipeline rank (`plan/stages.py`
    RankBlocks: dense and MoE blocks, embedding and head shares) and the per-block terms (middle
    ranks that run the same are priced once)."""
    pp = len(blocks)
    dense_row = block_row(dense)
    moe_row = block_row(moe) if moe is not None else None

    def row(rb: RankBlocks) -> tuple:
        if moe_row is not None and rb.moe_run:
            compute, tp, ep, cp, rec, fwd, bwd, hidden, cp_hidden = (
                rb.dense_run * d + rb.moe_run * e for d, e in zip(dense_row, moe_row))
        else:
            compute, tp, ep, cp, rec, fwd, bwd, hidden, cp_hidden = (rb.dense_run * d for d in dense_row)
        if rb.embedding:
            compute += rb.embedding * (dense.embedding_fwd_s + dense.embedding_bwd_s)
            tp += rb.embedding * dense.embedding_tp_s
        if rb.head:
            compute += rb.head * (dense.head_fwd_s + dense.head_bwd_s)
            tp += rb.head * dense.head_tp_s
        return (compute + tp + ep + cp + rec, compute, tp, ep, rec, fwd, bwd, hidden, cp, cp_hidden)

    first, last = row(blocks[0]), row(blocks[-1])
    middle = blocks[1:-1]
    mids = {kind: row(kind) for kind in set(middle)}
    crit, c = (0, first) if first[0] >= last[0] else (pp - 1, last)
    mid_max = max((r[0] for r in mids.values()), default=0.0)
    if mids and mid_max > c[0]:
        crit = 1 + next(i for i, kind in enumerate(middle) if mids[kind][0] == mid_max)
        c = mids[middle[crit - 1]]
    mid_mean = sum(mids[kind][0] for kind in middle) / len(middle) if middle else 0.0
    return StageTerms(first[0], last[0], mid_mean, c[1], c[2], c[4], c[5], c[6], crit == 0, c[7],
                      mid_max, crit, c[3], c[8], c[9])
