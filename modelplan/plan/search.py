"""Search every valid data / tensor / pipeline split of N GPUs and rank the ones that fit.

One search for every model family (`search_family_plans`): the candidates of one walk
(`candidates.walk`: tp -> cp -> pp -> dp -> ep -> micro_batch -> sp -> recompute -> (schedule,
vpp), each level checked by the shared rules and the family's, `candidates.FamilyAxes`: a network
takes tp, pp and dp only, a transformer also cp (see LONG_SEQUENCE), ep (MoE: divisors of dp that
divide num_experts), sequence parallelism and recompute, `transformer_axes.py`) and one bounded
loop (`Ranking.best_first`): plan points visited best first by a step-time floor until no point
left can enter the top-k. What a family does at a point, how it counts a pruned subtree and what
it ranks are the hooks of its `SearchProgram` (`protocol.py`; `Family.search` names its factory):
`protocol_search` makes every ZeRO stage of a point a plan over the `PlanEvaluator` protocol
alone and counts a pruned subtree as one rejection (networks); the transformer family's program
(`search_transformer.py`) counts rejections in plans, drops grids and points by memory floors
before any timing and prices the rest over the wider dimensions (`search_ext.py`). A family may
also run one search per variant of the run and merge them (`Family.search_runs`: transformers,
one per context-parallel exchange, `cp_search.py`).
"""
from __future__ import annotations

from modelplan.errors import PlanInfeasible
from modelplan.plan.candidates import Candidates, FamilyAxes, Group, walk
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.protocol import SearchProgram
from modelplan.plan.ranking import Ranking
from modelplan.plan.results import PlanEstimate, SearchResult
from modelplan.plan.space import IntRange, SearchSpace, divisors, paused_gc
from modelplan.specs.costmodel import CostModel
from modelplan.specs.family import family_of, resolve
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

__all__ = ["IntRange", "SearchSpace", "divisors", "protocol_search", "search_family_plans", "search_plans",
           "search_transformer_plans"]  # the space lives in space.py


def search_plans(spec, training: TrainingSpec, cluster: Cluster, gpus: int, space: SearchSpace | None = None,
                 cost: CostModel | None = None, top_k: int = 5) -> SearchResult:
    """Every valid plan of `gpus` GPUs ranked by predicted step time (`search_family_plans`; raises
    PlanInfeasible with the nearest blocker when none fits), once per variant of the run its family
    searches (`Family.search_runs`: a run that names no cp_comm_type gets each cp plan under the
    engine's cheapest, `plan/cp_search.py`), and once per expert tensor-parallel size the space
    lists (`plan/etp_search.py`)."""
    from modelplan.plan.etp_search import search_etps

    runs = family_of(spec).search_runs
    if runs is None:
        return search_etps(lambda sp: search_family_plans(spec, training, cluster, gpus, sp, cost, top_k), space, top_k)
    return search_etps(lambda space_etp: resolve(runs)(
        lambda tr, sp: search_family_plans(spec, tr, cluster, gpus, sp, cost, top_k), training, space_etp, gpus, top_k),
        space, top_k)


def search_family_plans(spec, training: TrainingSpec, cluster: Cluster, gpus: int, space: SearchSpace | None = None,
                        cost: CostModel | None = None, top_k: int = 5, use_bound: bool = True,
                        floors: bool | None = None, program=None) -> SearchResult:
    """The one search of every family: the family's `SearchProgram` (`program`, a factory as
    `Family.search` names one; default the family's) walked and ranked by one loop (module
    docstring). `use_bound` False prices every plan that fits (the benchmark's check that the
    floors never drop a top plan); `floors` the program's memory floors on or off, None: on, and
    searched again without them when no plan fits and the program asks (`SearchProgram.retry`).
    PlanInfeasible with the program's message when none fits."""
    make = program or resolve(family_of(spec).search)
    space = space or SearchSpace()
    with paused_gc():
        on = use_bound if floors is None else floors
        while True:
            rank = Ranking(top_k)  # its clock starts here
            prog: SearchProgram = make(spec, training, cluster, gpus, space, cost, rank, use_bound, on)
            frontier: list[tuple] = []
            waiting = 0
            """Plans under the entries still in the frontier."""
            enqueue = prog.enqueue
            for group in walk(prog.family, prog.cands, prog.pruned, prog.prepare):
                waiting += enqueue(group, frontier)
            rank.best_first(frontier, prog.visit, waiting, prog.beyond)
            if rank.heap:
                result = rank.result(gpus, prog.best())
                break
            if not (on and floors is None and prog.retry):
                raise PlanInfeasible(prog.infeasible())
            on = False
        # the search's objects (the evaluator's caches, the frontier) freed while the collector is
        # still paused: once it resumes, its first pass would walk every one still alive
        prog = frontier = enqueue = group = None
    return result


search_transformer_plans = search_family_plans
"""The name `benchmarks/bench_planner.py` calls (`use_bound=False`): the one search."""


BEST_OF_AXES = ("tp", "pp", "dp")
"""The best plan with tp > 1, with pp > 1 and with neither: what a family's `search_notes`
compares its best plan with."""


class _EvaluatorAxes(FamilyAxes):
    """An evaluator's rules under `FamilyAxes`' default axes (no cp, ep, sequence parallelism; one
    recompute setting), for an evaluator that states no axes of its own."""

    def __init__(self, ev) -> None:
        self.tp_problems, self.stage_problem, self.vpp_default = ev.tp_problems, ev.stage_problem, ev.vpp_default


def protocol_search(spec, training: TrainingSpec, cluster: Cluster, gpus: int, space: SearchSpace,
                    cost: CostModel | None, rank: Ranking, use_bound: bool = True, floors: bool = True) -> SearchProgram:
    """The `SearchProgram` over the family's `PlanEvaluator` alone (`plan/protocol.py`; networks):
    every ZeRO stage of every point of `candidates.walk` over the evaluator's axes (`FamilyAxes`),
    visited best first by the evaluator's `step_floor_s`; a plan is priced unless its floor is above
    both the top-k's slowest step and the best step of each `BEST_OF_AXES` it belongs to (what the
    best plan's notes compare with, `search_notes`); each pruned subtree counts as one rejection.
    Ties keep the plan walked first, as a walk that priced every plan would. `use_bound` False
    prices every plan; it has no memory floors (`floors` unused). Its PlanInfeasible message is the
    first rejection's example."""
    ev = family_of(spec).call("evaluator", spec, training, cluster, cost)
    cands = Candidates(space, gpus, cluster.domain_gpus, training.global_batch, ev.units, ev.max_microbatches)
    budget = ev.memory_bytes * (1 - space.memory_headroom)

    def enqueue(g: Group, frontier: list[tuple]) -> int:
        """Every ZeRO stage of each point of the group, keyed by its step floor."""
        for sched, vpp in g.schedules:
            for zero in cands.zeros:
                plan = Plan(dp=g.dp, tp=g.tp, pp=g.pp, vpp=vpp, micro_batch=g.micro_batch, schedule=sched, zero=zero)
                frontier.append((ev.step_floor_s(plan) if use_bound else 0.0, len(frontier), 1, plan))
        return len(g.schedules) * len(cands.zeros)

    best_of: dict[str, tuple[float, int, PlanEstimate]] = {}
    """Per axis: (step time, walk order, estimate) of its fastest plan so far."""

    def beyond(floor: float, axes: tuple[str, ...] = BEST_OF_AXES) -> bool:
        """No plan of `axes` at or above this floor can enter the top-k or beat its axes' best."""
        return use_bound and rank.full and floor > rank.worst_s() and all(a in best_of and floor > best_of[a][0] for a in axes)

    def visit(entry: tuple) -> None:
        floor, seq, _, plan = entry
        axes = tuple(a for a, member in zip(BEST_OF_AXES, (plan.tp > 1, plan.pp > 1, plan.tp == plan.pp == 1))
                     if member)
        if beyond(floor, axes):
            rank.bounded += 1
            return
        est = ev.estimate(plan, space.memory_headroom)
        if not est.fits:
            rank.reject(Problem(Reason.MEMORY, f"tp {plan.tp}, pp {plan.pp}, dp {plan.dp}, micro_batch "
                                f"{plan.micro_batch}, zero {plan.zero} needs {est.peak_memory_bytes / 1e9:.1f} GB "
                                f"per GPU > {budget / 1e9:.1f} GB"), need_bytes=est.peak_memory_bytes)
            return
        rank.evaluated += 1
        t = est.step.step_time_s
        for a in axes:
            if a not in best_of or (t, seq) < best_of[a][:2]:
                best_of[a] = (t, seq, est)
        rank.offer((-t, -seq, est))

    def infeasible() -> str:
        detail = next(iter(rank.examples.values()), "no plan to try")
        return f"no plan of {gpus} GPUs fits {spec.name}: {detail}"

    def ranked() -> list[PlanEstimate]:
        best = rank.ranked()
        notes = ev.search_notes(best[0], {a: e for a, (_, _, e) in best_of.items()})
        best[0] = best[0].model_copy(update={"notes": best[0].notes + notes})
        return best

    axes = ev if isinstance(ev, FamilyAxes) else _EvaluatorAxes(ev)
    return SearchProgram(axes, cands, lambda problem, _: rank.reject(problem), None, enqueue, visit, beyond,
                         ranked, infeasible)
