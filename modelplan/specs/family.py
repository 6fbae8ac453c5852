"""Model families, the one place a spec's `kind` is looked at: the protocol every family
implements (its spec class; its counts of parameters, FLOPs and memory; its search, its plan evaluator
and verify run) and what the renderers need to know. A new family registers here;
nothing else dispatches on `kind`. The layer units, kernels, parameter definitions and stage
model of a family are reached through these entries (networks: `count/network_tree.py` units,
`plan/net_cost.py` kernels, `plan/net_layout.py` stages, `execute/net/engine.py` parameters).

Functions are named as "module:function" and imported when first used, so this registry (in
specs/, left of every layer it names) depends on no family's code."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any, Callable, Literal


@dataclass(frozen=True)
class Family:
    """What one model family provides."""

    kind: str
    """The spec's `kind`."""
    spec: str
    """The pydantic model a spec of this kind validates as ("module:Class")."""
    params: str
    """`count_params`' implementation: (spec) -> ParamCount."""
    flops: str
    """`count_flops`' implementation: (spec, training) -> FlopCount."""
    memory: str
    """`count_memory`' implementation: (spec, training, micro_batch) -> MemoryCount."""
    search: str
    """The family's search program factory: (spec, training, cluster, gpus, space, cost, rank,
    use_bound, floors) -> `plan.protocol.SearchProgram`, the hooks the one search
    (`plan.search.search_family_plans`: one walk of `plan.candidates.walk` over the family's axes
    and rules, one bounded loop `plan.ranking.Ranking.best_first`) calls; networks the program over
    the evaluator protocol alone (`plan.search.protocol_search`), transformers theirs with memory and
    step-time floors (`plan.search_transformer.transformer_search`)."""
    evaluator: str
    """The family's `plan.protocol.PlanEvaluator` class: (spec, training, cluster, cost) -> its
    rules, search defaults and the price of one plan (`estimate_plan` validates and prices with it)."""
    verify: str
    """What verify runs (execute layer): (spec, training, plan, *, seed, scale, layers_per_stage,
    optimizer, oracle, steps) -> `execute.family_run.FamilyRun`, the family's rank program and the
    plan's data that `execute.verify.run_and_check` runs and checks the same way for every family."""
    throughput_unit: Literal["tokens", "samples"]
    """What a step's global batch is counted in for throughput (tokens: batch x seq_len)."""
    oracles: tuple[tuple[str, str], ...] = ()
    """The single-device oracles verify compares with, by `OracleKind` value ("numpy", "torch"):
    (spec, params, batches, optimizer, micro_batch, seed) -> OracleRun."""
    walkthrough: bool = False
    """Whether `verify --explain` has a tensor-parallel walk-through for it."""
    blocks: bool = False
    """Built of transformer blocks: linear-module layouts, fine-tuning and serving are modelled for it."""
    stage_split: bool = False
    """Whether its pipeline stages may be uneven (first / last stage blocks searched, `estimate_split`)."""
    search_runs: str | None = None
    """The searches one `search_plans` runs and merges: (search, training, space, gpus, top_k) ->
    SearchResult, `search(training)` the one search of a variant of the run (transformers: one per
    context-parallel exchange, `plan.cp_search.search_cp_types`); None: one search."""

    def oracle(self, kind: str) -> Callable[..., Any]:
        """The oracle registered under `kind` (an `OracleKind` value)."""
        return resolve(dict(self.oracles)[kind])

    def call(self, which: str, *args: Any, **kwargs: Any) -> Any:
        """Call the function registered under `which` ('params', 'flops', 'memory', 'search',
        'evaluator', 'verify')."""
        return resolve(getattr(self, which))(*args, **kwargs)


def resolve(target: str) -> Callable[..., Any]:
    """The function a "module:function" name refers to."""
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)


FAMILIES: dict[str, Family] = {
    "transformer": Family(
        "transformer", "modelplan.specs.transformer:TransformerSpec", "modelplan.count.params:count_transformer_params",
        "modelplan.count.flops:count_transformer_flops", "modelplan.count.memory:count_transformer_memory",
        "modelplan.plan.search_transformer:transformer_search",
        "modelplan.plan.estimate:TransformerEvaluator", "modelplan.execute.verify:transformer_run",
        "tokens", blocks=True, stage_split=True, search_runs="modelplan.plan.cp_search:search_cp_types",
        oracles=(("numpy", "modelplan.execute.oracle.numpy_ref:numpy_transformer_run"),
                 ("torch", "modelplan.execute.oracle.torch_transformer:torch_transformer_run"))),
    "network": Family(
        "network", "modelplan.specs.network:NetworkSpec", "modelplan.count.network:count_network_params",
        "modelplan.count.network:count_network_flops", "modelplan.count.network:count_network_memory",
        "modelplan.plan.search:protocol_search",
        "modelplan.plan.net_evaluator:NetEvaluator", "modelplan.execute.net.verify:network_run",
        "samples", walkthrough=True,
        oracles=(("numpy", "modelplan.execute.oracle.numpy_ref:numpy_network_run"),
                 ("torch", "modelplan.execute.oracle.torch_network:torch_network_run"))),
}


def family_of(spec: Any) -> Family:
    """The family of a model spec (by its `kind`)."""
    return FAMILIES[spec.kind]


def spec_class(kind: str) -> type | None:
    """The spec model of a `kind` (None: no such family)."""
    return resolve(FAMILIES[kind].spec) if kind in FAMILIES else None
