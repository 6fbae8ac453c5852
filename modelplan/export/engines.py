"""One entry point for every export target: `export_plan(engine, model, training, plan, ...)`."""

from __future__ import annotations

from typing import Any

from modelplan.errors import ModelplanError
from modelplan.export.deepspeed import to_deepspeed
from modelplan.export.megatron import to_megatron
from modelplan.export.result import Engine, EngineExport
from modelplan.export.torchtitan import to_torchtitan
from modelplan.plan.document import KIND, SCHEMA_VERSION, PlanDocument, dumps_plan_document
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


def document_dict(doc: PlanDocument) -> dict[str, Any]:
    """The document in the planner's layout (`modelplan.plan.document`), current schema."""
    body = doc.model_dump(mode="json", exclude={"schema_version"})
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, **body}


def to_json(doc: PlanDocument) -> EngineExport:
    """The versioned plan document itself (2-space indented JSON)."""
    return EngineExport(
        engine=Engine.json, text=dumps_plan_document(document_dict(doc)), filename="plan.json"
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
        doc = PlanDocument(schema_version=SCHEMA_VERSION, model=model, training=training,
                           plan=plan, cluster=cluster, predictions=predictions)
        return to_json(doc)
    builder = {
        Engine.megatron: to_megatron,
        Engine.deepspeed: to_deepspeed,
        Engine.torchtitan: to_torchtitan,
    }[engine]
    return builder(model, training, plan, cluster)


def export_document(engine: Engine | str, doc: PlanDocument) -> EngineExport:
    """`export_plan` for a plan document; json keeps its cost model and predictions."""
    engine = parse_engine(engine) if isinstance(engine, str) else engine
    if engine is Engine.json:
        return to_json(doc)
    return export_plan(engine, doc.model, doc.training, doc.plan, doc.cluster)
