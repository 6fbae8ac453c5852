"""When no plan fits the memory budget: the best plans whose estimated peak lies within the memory
estimate's own error above it (`CostModel.near_fit_margin`), priced and marked as not fitting by the
estimate, instead of a refusal. The estimate over-predicts some published peaks by 10-15 %
(benchmarks/bench_published_runs.py), so a run it puts a few per cent over the GPU's memory may well
have trained; calling it impossible would be the more confident claim, and the wrong one.

A plan that fits is never displaced: the widened search runs only after the search at the real
budget found nothing, and every plan it returns keeps `fits` False and says by how much it is over.
"""

from __future__ import annotations

from typing import Callable

from modelplan.errors import PlanInfeasible
from modelplan.plan.results import PlanEstimate, SearchResult
from modelplan.plan.space import SearchSpace


def widened(space: SearchSpace, margin: float) -> SearchSpace:
    """`space` with its budget, memory x (1 - headroom), raised by the factor 1 + margin. The
    headroom this needs is negative, which a user's `memory_headroom` may not be (validation is
    skipped on purpose: `model_copy` does not validate)."""
    return space.model_copy(update={"memory_headroom": 1 - (1 - space.memory_headroom) * (1 + margin)})


def over_budget(est: PlanEstimate, budget_bytes: float) -> float:
    """How far the plan's peak is above `budget_bytes`, as a fraction of it (<= 0: it fits)."""
    return est.peak_memory_bytes / budget_bytes - 1


def near_fit_note(est: PlanEstimate, budget_bytes: float, margin: float) -> str:
    """The note a near-fit plan carries: by this estimate it does not fit, by how much, and why it is shown."""
    return (f"by this estimate no plan fits: this one needs {est.peak_memory_bytes / 1e9:.1f} GB per GPU, "
            f"{100 * over_budget(est, budget_bytes):.1f} % over the {budget_bytes / 1e9:.1f} GB budget; shown because "
            f"that is within the memory estimate's {100 * margin:g} % error band (it may fit: check the peak of one "
            f"step before a long run)")


def marked(est: PlanEstimate, budget_bytes: float, margin: float) -> PlanEstimate:
    """`est` (priced against the widened budget) judged against the real one, with its note."""
    return est.model_copy(update={"memory_budget_bytes": budget_bytes, "fits": est.peak_memory_bytes <= budget_bytes,
                                  "notes": [near_fit_note(est, budget_bytes, margin), *est.notes]})


def search_near_fit(search: Callable[[SearchSpace], SearchResult], space: SearchSpace, margin: float) -> SearchResult:
    """`search(space)`; when it finds no plan (PlanInfeasible) and `margin` > 0, `search` again with
    the budget widened by `margin` and its plans `marked` against the real budget
    (`SearchResult.near_fit_margin` set). The first search's error when the widened one finds none either."""
    try:
        return search(space)
    except PlanInfeasible as first:
        if margin <= 0:
            raise
        try:
            result = search(widened(space, margin))
        except PlanInfeasible:
            raise first from None
    budget = result.best[0].memory_budget_bytes / (1 + margin)
    return result.model_copy(update={"best": [marked(e, budget, margin) for e in result.best],
                                     "near_fit_margin": margin})
