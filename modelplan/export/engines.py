"""One entry point for every export target: `export_plan(engine, model, training, plan, ...)`."""

from __future__ import annotations

import json
from typing import Any

from modelplan.errors import ModelplanError
from modelplan.export.deepspeed import to_deepspeed
from modelplan.export.megatron import to_megatron
from modelplan.export.plan_file import plan_document_dict
from modelplan.export.result import Engine, EngineExport
from modelplan.export.torchtitan import to_torchtitan
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def parse_engine(name: str) -> Engine:
    """An engine name; an unknown one is a one-line error listing the choices."""
    try:
        return Engine(name.lower())
    except ValueError:
        choices = ", ".join(e.value for e in Engine)
        raise ModelplanError(f"--to: unknown engine '{name}' (choose {choices})") from None


def to_json(
    model: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    predictions: dict[str, Any] | None = None,
) -> EngineExport:
    """The versioned plan document itself (2-space indented JSON)."""
    document = plan_document_dict(model, training, plan, cluster, predictions)
    return EngineExport(
        engine=Engine.json, text=json.dumps(document, indent=2) + "\n", filename="plan.json"
    )


def export_plan(
    engine: Engine | str,
    model: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    predictions: dict[str, Any] | None = None,
) -> EngineExport:
    """The launch config of `plan` for `engine` (megatron, deepspeed, torchtitan or json)."""
    engine = parse_engine(engine) if isinstance(engine, str) else engine
    try:
        plan.num_microbatches(training.global_batch)
    except ValueError as exc:
        raise ModelplanError(f"plan: {exc}") from None
    if engine is Engine.json:
        return to_json(model, training, plan, cluster, predictions)
    builder = {
        Engine.megatron: to_megatron,
        Engine.deepspeed: to_deepspeed,
        Engine.torchtitan: to_torchtitan,
    }[engine]
    return builder(model, training, plan, cluster)
