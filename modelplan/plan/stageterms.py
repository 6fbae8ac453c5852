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
    cp_s: float = 0.0
    """Exposed context-parallel ring traffic on the critical stage."""
    cp_hidden_s: float = 0.0


def compose_stages(counts: list[tuple[int, int]], dense: LayerTerms, moe: LayerTerms | None) -> StageTerms:
    """Stage times from (dense blocks, MoE blocks) per pipeline rank and the per-block terms
    (middle ranks with the same blocks are priced once)."""
    pp = len(counts)

    def row(n_dense: int, n_moe: int, first: bool, last: bool) -> tuple:
        kinds = [(n_dense, dense)] + ([(n_moe, moe)] if moe is not None and n_moe else [])
        compute = sum(n * t.compute_s for n, t in kinds)
        tp = sum(n * t.tp_s for n, t in kinds)
        ep = sum(n * t.ep_s for n, t in kinds)
        cp = sum(n * t.cp_s for n, t in kinds)
        rec = sum(n * t.recompute_s for n, t in kinds)
        fwd = sum(n * t.layer_fwd_s for n, t in kinds)
        bwd = sum(n * t.layer_bwd_s for n, t in kinds)
        hidden = sum(n * t.tp_hidden_s for n, t in kinds)
        cp_hidden = sum(n * t.cp_hidden_s for n, t in kinds)
        if first:
            compute += dense.embedding_fwd_s + dense.embedding_bwd_s
            tp += dense.embedding_tp_s
        if last:
            compute += dense.head_fwd_s + dense.head_bwd_s
            tp += dense.head_tp_s
        return (compute + tp + ep + cp + rec, compute, tp, ep, rec, fwd, bwd, hidden, cp, cp_hidden)

    first, last = row(*counts[0], True, pp == 1), row(*counts[-1], pp == 1, True)
    mids: dict[tuple[int, int], tuple] = {}
    for kind in counts[1:-1]:
        if kind not in mids:
            mids[kind] = row(*kind, False, False)
    crit, c = (0, first) if first[0] >= last[0] else (pp - 1, last)
    mid_rows = [mids[kind] for kind in counts[1:-1]]
    mid_max = max((r[0] for r in mids.values()), default=0.0)
    if mids and mid_max > c[0]:
        crit = 1 + next(i for i, r in enumerate(mid_rows) if r[0] == mid_max)
        c = mid_rows[crit - 1]
    mid_mean = sum(r[0] for r in mid_rows) / len(mid_rows) if mid_rows else 0.0
    return StageTerms(first[0], last[0], mid_mean, c[1], c[2], c[4], c[5], c[6], crit == 0, c[7],
                      mid_max, crit, c[3], c[8], c[9])
