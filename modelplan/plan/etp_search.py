"""The expert tensor-parallel size as a searched choice: one search per value of
`SearchSpace.etp` (each search holds one etp, `TransformerAxes.etp`, so its floors and caches are
those of that expert grid), merged into one ranking: the top_k distinct plans by step time, the
counts summed. Megatron-core's `--expert-tensor-parallel-size` defaults to tp (`parallel_state.
initialize_model_parallel`: `expert_tensor_parallel_size = tensor_model_parallel_size` when None),
so a space that names none searches that one alone: a published run that leaves the flag out ran
at tp (searching etp 1 by default moved the two such Grok-1 rows of the bench from -1.5 / -7.8 %
to -15.2 / -25.6 %, published_runs_model.md, n18etp). `--etp 1,tp` asks for both.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from modelplan.errors import PlanInfeasible
from modelplan.plan.results import SearchResult
from modelplan.plan.space import SearchSpace


def search_etps(search: Callable[[SearchSpace | None], SearchResult], space: SearchSpace | None,
                top_k: int) -> SearchResult:
    """`search(space)` once per etp of `space.etp` (each with that one value), merged; one search
    when the space names none or one. PlanInfeasible (the first search's) when none fits."""
    values = None if space is None else space.etp
    if values is None or len(values) <= 1:
        return search(space)
    results: list[SearchResult] = []
    failure: PlanInfeasible | None = None
    for etp in dict.fromkeys(values):  # in the given order, each once
        try:
            results.append(search(space.model_copy(update={"etp": [etp]})))
        except PlanInfeasible as exc:
            failure = failure or exc
    if not results:
        raise failure
    seen: dict[str, object] = {}
    for result in results:
        for est in result.best:
            plan = est.plan
            # etp = tp is Megatron-core's default: the same plan whichever search found it
            key = plan.model_copy(update={"etp": None if plan.etp in (None, plan.tp) else plan.etp}).model_dump_json()
            if key not in seen or est.step.step_time_s < seen[key].step.step_time_s:
                seen[key] = est
    best = sorted(seen.values(), key=lambda e: e.step.step_time_s)
    rejected, examples = Counter(), {}
    for r in results:
        rejected.update(r.rejected)
        examples = {**r.examples, **examples}
    return results[0].model_copy(update={
        "best": best[:top_k], "evaluated": sum(r.evaluated for r in results),
        "bounded": sum(r.bounded for r in results), "candidates": sum(r.candidates for r in results),
        "rejected": dict(rejected), "examples": examples, "wall_s": sum(r.wall_s for r in results)})
