"""The one evaluator protocol every model family implements (`specs/family.py` names each
family's class), and the entry that prices one given plan with it (`estimate_with`).

An evaluator is built once per (spec, training, cluster, cost model) and holds its caches. The
family supplies its units, kernels and stage model behind it; the communication it prices comes
from the per-parallelism modules (`plan/parallel/`) for every family. Every search runs the same
bounded loop (`Ranking.best_first`) in one function, `search.search_family_plans`, over the
family's `SearchProgram`: its hooks for what a point costs to visit, how a pruned subtree is
counted and what is ranked. `search.protocol_search` is the program over this protocol alone (its
`step_floor_s` orders and bounds the candidates; networks); the transformer family's adds its
memory and step-time floors (`search_transformer.py`)."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Protocol, runtime_checkable

from modelplan.errors import SpecError
from modelplan.plan.problems import Problem
from modelplan.plan.results import PlanEstimate
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan


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

    def step_floor_s(self, plan: Plan) -> float:
        """A lower bound of `estimate(plan)`'s step time (0.0: the family gives none, and a search
        over the protocol prices every candidate)."""

    def search_notes(self, best: PlanEstimate, best_of: dict[str, PlanEstimate]) -> list[str]:
        """Lines for the best plan of a search: why it beats the best with tp > 1, pp > 1 and
        neither (`best_of` "tp", "pp", "dp"; an axis without a fitting plan is absent)."""


class SearchProgram(NamedTuple):
    """What a family's search factory (`Family.search`: (spec, training, cluster, gpus, space, cost,
    rank, use_bound, floors) -> SearchProgram) gives the one search loop
    (`search.search_family_plans`): the walk's inputs, the hooks it calls at each step, and the
    result. The loop walks `candidates.walk(family, cands, pruned, prepare)`, hands every group of
    points to `enqueue`, runs `Ranking.best_first(frontier, visit, waiting, beyond)` and returns the
    ranked plans of `best`, or raises PlanInfeasible with `infeasible`'s message."""

    family: Any
    """The family's axes and rules (`candidates.WalkFamily`)."""
    cands: Any
    """The per-axis values (`candidates.Candidates`)."""
    pruned: Callable[[Problem, Any], None]
    """A rule of the walk dropped a subtree (`candidates.Subtree`): count what it held as rejected."""
    prepare: Callable[..., Any] | None
    """Once per grid: the context its points carry, or None to drop it (`candidates.walk`)."""
    enqueue: Callable[[Any, list], int]
    """(group, frontier) -> plans put on the frontier: the group's entries `(floor_s, seq, leaves, ...)`
    with `seq` their position in the frontier."""
    visit: Callable[[tuple], tuple | None]
    """Price one frontier entry (`Ranking.best_first`), or give it back with a tighter floor."""
    beyond: Callable[[float], bool]
    """No plan at or above this floor can change the result."""
    best: Callable[[], list[PlanEstimate]]
    """The ranked plans once the loop is done (the top-k is not empty)."""
    infeasible: Callable[[], str]
    """The PlanInfeasible message when no plan fits."""
    retry: bool = False
    """When no plan fits, run the search again with `floors` False (floors whose rejections carry
    no exact need hide the plan that comes closest to fitting)."""


def estimate_with(ev: PlanEvaluator, plan: Plan, cluster: Cluster, *, world_size: int | None = None,
                  memory_headroom: float = 0.0, allow_tp_across_nodes: bool = False) -> PlanEstimate:
    """Validate `plan` (one SpecError naming every broken rule) and price it."""
    problems = ev.problems(plan, cluster, world_size, allow_tp_across_nodes)
    if problems:
        raise SpecError("; ".join(p.message for p in problems))
    return ev.estimate(plan, memory_headroom)
