"""The context-parallel exchange as a searched choice: when the run names no `cp_comm_type` and a
search may try cp > 1, every exchange the engine can run (`EngineProfile.cp_comm_types`) is
priced on every plan and each plan keeps its cheapest; the chosen type is on the estimate
(`PlanEstimate.cp_comm_type`) and in its notes. A plan with cp 1 exchanges nothing, so it is
taken from the engine default's search only, and the other exchanges' searches try cp > 1 alone
(`cp_only`): their best cp > 1 plans are those a search of the whole space would keep.
"""

from __future__ import annotations

from collections import Counter
from typing import Callable

from modelplan.errors import PlanInfeasible
from modelplan.plan.results import PlanEstimate, SearchResult
from modelplan.plan.space import LONG_SEQUENCE, IntRange, SearchSpace, divisors
from modelplan.specs.load import load_engine
from modelplan.specs.training import TrainingSpec


def searched_cp_types(training: TrainingSpec, space: SearchSpace | None, gpus: int) -> tuple[str, ...]:
    """The exchanges to search, the engine's default first; one when the run fixes it, the
    engine runs one only, or no cp > 1 is tried (`SearchSpace.cp`; LONG_SEQUENCE)."""
    profile = load_engine(training.framework)
    if training.cp_comm_type is not None or gpus < 2:
        return (training.cp_comm_type or profile.cp_comm_type,)
    cp = None if space is None else space.cp
    tries_cp = (training.seq_len >= LONG_SEQUENCE if cp is None else
                cp.hi > 1 if isinstance(cp, IntRange) else any(c > 1 for c in cp))
    others = [t for t in profile.cp_comm_types if t != profile.cp_comm_type]
    return (profile.cp_comm_type, *others) if tries_cp else (profile.cp_comm_type,)


def cp_only(training: TrainingSpec, space: SearchSpace | None, gpus: int) -> SearchSpace | None:
    """The space with cp 1 left out (None: it has no cp > 1): the user's cp values above 1, or
    by default (a sequence of at least LONG_SEQUENCE) every divisor of the GPU count above 1 that
    divides seq_len, which for each tp leaves the divisors of gpus / tp the search tries there."""
    space = space or SearchSpace()
    cp = space.cp
    if cp is None:
        values: list[int] | IntRange = [c for c in divisors(gpus) if c > 1 and training.seq_len % c == 0]
    elif isinstance(cp, IntRange):
        values = IntRange(lo=max(2, cp.lo), hi=cp.hi) if cp.hi > 1 else []
    else:
        values = [c for c in cp if c > 1]
    return space.model_copy(update={"cp": values}) if values else None


def _chosen(est: PlanEstimate, kind: str, seconds: dict[str, float]) -> PlanEstimate:
    priced = ", ".join(f"{t} {s:.4g} s" for t, s in seconds.items())
    note = (f"cp_comm_type {kind}: the cheapest context-parallel exchange the engine runs for this plan "
            f"(step {priced}; --cp-comm-type fixes one)")
    return est.model_copy(update={"cp_comm_type": kind, "notes": [*est.notes, note]})


def search_cp_types(search: Callable[[TrainingSpec, SearchSpace | None], SearchResult], training: TrainingSpec,
                    space: SearchSpace | None, gpus: int, top_k: int) -> SearchResult:
    """`search(training, space)` under the engine's default exchange and `search(training,
    cp_only(space))` under each other, merged: the top_k distinct plans by step time, each under
    its cheapest exchange; counts summed over the searches."""
    kinds = searched_cp_types(training, space, gpus)
    if len(kinds) == 1:
        return search(training, space)
    results: dict[str, SearchResult] = {}
    failure: PlanInfeasible | None = None
    wider = cp_only(training, space, gpus)
    for kind in kinds:
        if kind != kinds[0] and wider is None:
            continue
        try:
            results[kind] = search(training.model_copy(update={"cp_comm_type": kind}),
                                   space if kind == kinds[0] else wider)
        except PlanInfeasible as exc:
            failure = failure or exc
    if not results:
        raise failure
    by_plan: dict[str, dict[str, PlanEstimate]] = {}
    for kind, result in results.items():
        for est in result.best:
            if est.plan.cp == 1 and kind != kinds[0] and kinds[0] in results:
                continue  # cp 1 exchanges nothing: the default's search has it
            by_plan.setdefault(est.plan.model_dump_json(), {})[kind] = est
    best = []
    for priced in by_plan.values():
        kind, est = min(priced.items(), key=lambda ke: ke[1].step.step_time_s)
        if est.plan.cp > 1:
            est = _chosen(est, kind, {t: e.step.step_time_s for t, e in priced.items()})
        best.append(est)
    best.sort(key=lambda e: e.step.step_time_s)
    first = results.get(kinds[0]) or next(iter(results.values()))
    rejected, examples = Counter(), {}
    for r in results.values():
        rejected.update(r.rejected)
        examples = {**r.examples, **examples}
    return first.model_copy(update={
        "best": best[:top_k], "evaluated": sum(r.evaluated for r in results.values()),
        "bounded": sum(r.bounded for r in results.values()),
        "candidates": sum(r.candidates for r in results.values()),
        "rejected": dict(rejected), "examples": examples, "wall_s": sum(r.wall_s for r in results.values())})
