"""Pipeline schedules as data (STYLE.md, "the spine"): one module per `Schedule`, named after the
enum member (`Schedule.ONE_F_ONE_B` -> `one_f_one_b.py`), each a pure function of
(pp, num_microbatches, vpp) to per-rank actions, with its stage layout and validity rule. Adding a
schedule is one enum member and one module; the planner (`profile.py`) and the executor both
read what `pipeline_schedule` returns.
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from types import ModuleType

from modelplan.plan.pipeline.actions import Action, ActionKind, PipelineSchedule, StageLayout
from modelplan.plan.problems import Problem
from modelplan.specs.plan import Schedule

__all__ = ["Action", "ActionKind", "PipelineSchedule", "StageLayout", "pipeline_schedule", "schedule_layout",
           "schedule_module", "schedule_problem"]


def schedule_module(kind: Schedule | str) -> ModuleType:
    """The module that defines schedule `kind` (`modelplan.plan.pipeline.<enum member name>`)."""
    module = _MODULES.get(kind)
    if module is None:
        module = _MODULES[kind] = importlib.import_module(f"{__name__}.{Schedule(kind).name.lower()}")
    return module


_MODULES: dict[str, ModuleType] = {}


def schedule_layout(kind: Schedule | str, pp: int, vpp: int = 1) -> StageLayout:
    """Which virtual stages each pipeline rank holds under `kind` (cached: a StrEnum member and its
    string are one key)."""
    layout = _LAYOUTS.get((kind, pp, vpp))
    if layout is None:
        layout = _LAYOUTS[kind, pp, vpp] = schedule_module(kind).layout(pp, vpp)
    return layout


_LAYOUTS: dict[tuple, StageLayout] = {}


def schedule_problem(kind: Schedule | str, pp: int, num_microbatches: int, vpp: int = 1) -> Problem | None:
    """The rule `kind` breaks for this pipeline (None: it can run)."""
    return schedule_module(kind).problem(pp, num_microbatches, vpp)


def pipeline_schedule(kind: Schedule | str, pp: int, num_microbatches: int, vpp: int = 1) -> PipelineSchedule:
    """Every pipeline rank's ordered actions of one training step under `kind` (ValueError when
    the schedule cannot run this pipeline, with its rule's message)."""
    if pp < 1 or num_microbatches < 1 or vpp < 1:
        raise ValueError(f"pp ({pp}), num_microbatches ({num_microbatches}) and vpp ({vpp}) must be >= 1")
    return _schedule(Schedule(kind), pp, num_microbatches, vpp)


@lru_cache(maxsize=256)
def _schedule(kind: Schedule, pp: int, m: int, vpp: int) -> PipelineSchedule:
    module = schedule_module(kind)
    problem = module.problem(pp, m, vpp)
    if problem is not None:
        raise ValueError(problem.message)
    actions = tuple(tuple(module.rank_actions(pp, m, vpp, r)) for r in range(pp))
    routes = getattr(module, "route_of", None)
    return PipelineSchedule(kind, pp, m, vpp, schedule_layout(kind, pp, vpp), actions,
                            tuple(routes(pp, m)) if routes is not None else ())
