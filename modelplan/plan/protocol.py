"""The one evaluator protocol every model family implements (`specs/family.py` names each
family's class), and the two entry points over it: price one given plan (`estimate_with`) and
search a family's plans by pricing each candidate (`priced_search`, `search_priced`).

An evaluator is built once per (spec, training, cluster, cost model) and holds its caches. The
family supplies its units, kernels and stage model behind it; the communication it prices comes
from the per-parallelism modules (`plan/parallel/`) for every family. The transformer family's
search adds step-time and memory bounds over the same candidates (`search.py`)."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from modelplan.errors import PlanInfeasible, SpecError
from modelplan.plan.candidates import Candidates, walk
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.ranking import Ranking
from modelplan.plan.results import PlanEstimate, SearchResult
from modelplan.plan.space import SearchSpace
from modelplan.specs.costmodel import CostModel
from modelplan.specs.family import family_of
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec


@runtime_checkable
class PlanEvaluator(Protocol):
    """What a family's evaluator gives the planner: its rules as Problems, its search defaults,
    and the price of one valid plan."""

    memory_bytes: float
    """The accelerator's memory (the budget before headroom)."""
    units: int
    """Pipeline units: what the schedule's stages may not exceed (blocks; a network's units)."""
    max_microbatches: int | None
    """The search's default micro-batch sizes give at most this many micro-batches (None: no cap)."""

    def problems(self, plan: Plan, cluster: Cluster | None = None, world_size: int | None = None,
                 allow_tp_across_nodes: bool = False) -> list[Problem]:
        """Every rule `plan` breaks (empty: valid)."""

    def tp_problems(self, tp: int) -> list[Problem]:
        """The family's rules for a tensor-parallel size."""

    def stage_problem(self, pp: int, vpp: int, num_stages: int) -> Problem | None:
        """The family's rule for cutting it into `num_stages` pipeline stages (pp ranks x vpp chunks)."""

    def vpp_default(self, pp: int) -> list[int]:
        """The interleaved schedule's vpps a search tries by default at this pp."""

    def estimate(self, plan: Plan, memory_headroom: float = 0.0) -> PlanEstimate:
        """Step time, throughput and memory of one valid plan."""

    def search_notes(self, best: PlanEstimate, best_of: dict[str, PlanEstimate]) -> list[str]:
        """Lines for the best plan of a search: why it beats the best with tp > 1, pp > 1 and
        neither (`best_of` "tp", "pp", "dp"; an axis without a fitting plan is absent)."""


def estimate_with(ev: PlanEvaluator, plan: Plan, cluster: Cluster, *, world_size: int | None = None,
                  memory_headroom: float = 0.0, allow_tp_across_nodes: bool = False) -> PlanEstimate:
    """Validate `plan` (one SpecError naming every broken rule) and price it."""
    problems = ev.problems(plan, cluster, world_size, allow_tp_across_nodes)
    if problems:
        raise SpecError("; ".join(p.message for p in problems))
    return ev.estimate(plan, memory_headroom)


def priced_search(ev: PlanEvaluator, name: str, global_batch: int, cluster: Cluster, gpus: int,
                  space: SearchSpace | None, top_k: int) -> tuple[list[PlanEstimate], dict[str, PlanEstimate], Ranking]:
    """Price every plan of `candidates.walk` and keep the top-k that fit (fastest first), with the
    best plan using tp > 1, pp > 1 and neither ("tp", "pp", "dp") for the family's explanation;
    PlanInfeasible with the first rejection's example when none fits."""
    rank = Ranking(top_k)
    space = space or SearchSpace()
    cands = Candidates(space, gpus, cluster.gpus_per_node, global_batch, ev.units, ev.max_microbatches)
    budget = ev.memory_bytes * (1 - space.memory_headroom)
    best_of: dict[str, PlanEstimate] = {}
    for plan in walk(ev, cands):
        if isinstance(plan, Problem):
            rank.reject(plan)
            continue
        est = ev.estimate(plan, space.memory_headroom)
        if not est.fits:
            rank.reject(Problem(Reason.MEMORY, f"tp {plan.tp}, pp {plan.pp}, dp {plan.dp}, micro_batch "
                                f"{plan.micro_batch}, zero {plan.zero} needs {est.peak_memory_bytes / 1e9:.1f} GB "
                                f"per GPU > {budget / 1e9:.1f} GB"), need_bytes=est.peak_memory_bytes)
            continue
        rank.evaluated += 1
        for axis, member in (("tp", plan.tp > 1), ("pp", plan.pp > 1), ("dp", plan.tp == plan.pp == 1)):
            if member and (axis not in best_of or est.step.step_time_s < best_of[axis].step.step_time_s):
                best_of[axis] = est
        rank.offer((-est.step.step_time_s, -rank.evaluated, est))
    if not rank.heap:
        detail = next(iter(rank.examples.values()), "no plan to try")
        raise PlanInfeasible(f"no plan of {gpus} GPUs fits {name}: {detail}")
    return rank.ranked(), best_of, rank



def search_priced(spec, training: TrainingSpec, cluster: Cluster, gpus: int, space: SearchSpace | None = None,
                  cost: CostModel | None = None, top_k: int = 5) -> SearchResult:
    """`search_plans` of a family without a bounded search of its own: every candidate priced
    (`priced_search`), the best plan's notes extended by the family's `search_notes`."""
    ev = family_of(spec).call("evaluator", spec, training, cluster, cost)
    best, best_of, rank = priced_search(ev, spec.name, training.global_batch, cluster, gpus, space, top_k)
    best[0] = best[0].model_copy(update={"notes": best[0].notes + ev.search_notes(best[0], best_of)})
    return rank.result(gpus, best)
