"""One micro-batch on every pipeline stage: the blocks a stage holds (dense and MoE, from
`plan/experts.py`) times their per-block terms, plus the embedding on the first stage and the
head + loss on the last (`plan/layerterms.py` gives the per-block numbers)."""

from __future__ import annotations

from typing import NamedTuple

from modelplan.plan.layerterms import LayerTerms


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


def compose_stages(counts: list[tuple[int, int]], dense: LayerTerms, moe: LayerTerms | None) -> StageTerms:
    """Stage times from (dense blocks, MoE blocks) per pipeline rank and the per-block terms."""
    pp = len(counts)
    rows = []
    for r, (n_dense, n_moe) in enumerate(counts):
        kinds = [(n_dense, dense)] + ([(n_moe, moe)] if moe is not None and n_moe else [])
        compute = sum(n * t.compute_s for n, t in kinds)
        tp = sum(n * t.tp_s for n, t in kinds)
        ep = sum(n * t.ep_s for n, t in kinds)
        rec = sum(n * t.recompute_s for n, t in kinds)
        fwd = sum(n * t.layer_fwd_s for n, t in kinds)
        bwd = sum(n * t.layer_bwd_s for n, t in kinds)
        hidden = sum(n * t.tp_hidden_s for n, t in kinds)
        if r == 0:
            compute += dense.embedding_fwd_s + dense.embedding_bwd_s
            tp += dense.embedding_tp_s
        if r == pp - 1:
            compute += dense.head_fwd_s + dense.head_bwd_s
            tp += dense.head_tp_s
        rows.append((compute + tp + ep + rec, compute, tp, ep, rec, fwd, bwd, hidden))
    first, last, mid = rows[0], rows[-1], rows[1:-1]
    crit = 0 if first[0] >= last[0] else pp - 1
    mid_max = max((row[0] for row in mid), default=0.0)
    if mid and mid_max > rows[crit][0]:
        crit = 1 + max(range(len(mid)), key=lambda i: mid[i][0])
    c = rows[crit]
    mid_mean = sum(row[0] for row in mid) / len(mid) if mid else 0.0
    return StageTerms(first[0], last[0], mid_mean, c[1], c[2], c[4], c[5], c[6], crit == 0, c[7],
                      mid_max, crit, c[3])
