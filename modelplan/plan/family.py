"""Model families, the one place a spec's `kind` is looked at: what the planner, the executor and
the renderers call for each family. A new family (issue: new model families) registers here with
its search, its single-plan estimate, its verify and what its batches count; nothing else
dispatches on `kind`.

Functions are named as "module:function" and imported when first used, so this registry depends
on no family's code (and the execute layer's verify is only named here, never imported)."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Literal


@dataclass(frozen=True)
class Family:
    """What one model family provides."""

    kind: str
    """The spec's `kind`."""
    search: str
    """`search_plans`' implementation: (spec, training, cluster, gpus, space, cost, top_k) -> SearchResult."""
    estimate: str
    """`estimate_plan`'s implementation: (spec, training, plan, cluster, cost, *, world_size,
    memory_headroom, allow_tp_across_nodes) -> PlanEstimate."""
    verify: str
    """What verify runs (execute layer): (spec, training, plan, *, seed, scale, layers_per_stage,
    optimizer, oracle, steps) -> `execute.family_run.FamilyRun`, the family's rank program and the
    plan's data that `execute.verify.run_and_check` runs and checks the same way for every family."""
    throughput_unit: Literal["tokens", "samples"]
    """What a step's global batch is counted in for throughput (tokens: batch x seq_len)."""
    walkthrough: bool = False
    """Whether `verify --explain` has a tensor-parallel walk-through for it."""
    stage_split: bool = False
    """Whether its pipeline stages may be uneven (first / last stage blocks searched, `estimate_split`)."""

    def call(self, which: str, *args: Any, **kwargs: Any) -> Any:
        """Call the function registered under `which` ('search', 'estimate', 'verify')."""
        return resolve(getattr(self, which))(*args, **kwargs)


def resolve(target: str) -> Callable[..., Any]:
    """The function a "module:function" name refers to."""
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


FAMILIES: dict[str, Family] = {
    "transformer": Family(
        "transformer", "modelplan.plan.search:search_transformer_plans",
        "modelplan.plan.estimate:estimate_transformer_plan", "modelplan.execute.verify:transformer_run",
        "tokens", stage_split=True),
    "network": Family(
        "network", "modelplan.plan.net_search:search_network_plans",
        "modelplan.plan.net_search:estimate_network_plan", "modelplan.execute.net.verify:network_run",
        "samples", walkthrough=True),
}


def family_of(spec: Any) -> Family:
    """The family of a model spec (by its `kind`)."""
    return FAMILIES[spec.kind]
