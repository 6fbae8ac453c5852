"""One entry point for every export target: `export_plan(engine, model, training, plan, ...)`."""

from __future__ import annotations

from typing import Any

from modelplan.errors import ModelplanError
from modelplan.export.ddp import to_ddp
from modelplan.export.deepspeed import to_deepspeed
from modelplan.export.megatron import to_megatron
from modelplan.export.result import Engine, EngineExport
from modelplan.export.torchtitan import to_torchtitan
from modelplan.plan.document import KIND, SCHEMA_VERSION, PlanDocument, dumps_plan_document
from modelplan.specs.costmodel import CostModel
from modelplan.specs.family import family_of
from modelplan.specs.hardware import Cluster
from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.recompute import MEGATRON_ONLY
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec


def parse_engine(name: str) -> Engine:
    """An engine name; an unknown one is a one-line error listing the choices."""
    try:
        return Engine(name.lower())
    except ValueError:
        choices = ", ".join(e.value for e in Engine)
        raise ModelplanError(f"--to: unknown engine '{name}' (choose {choices})") from None


ENGINE_TARGETS = {"megatron": Engine.megatron, "deepspeed": Engine.deepspeed, "torchtitan": Engine.torchtitan,
                  "fsdp": Engine.ddp}
"""`TrainingSpec.framework` -> the export target that launches it (fsdp: PyTorch FSDP under
torchrun, the ddp target); llm-foundry and NeMo AutoModel have no exporter here."""


def default_engine(doc: PlanDocument) -> Engine:
    """The export target of a plan whose `--to` is not given: its engine's
    (`TrainingSpec.framework`, `ENGINE_TARGETS`), ddp for a network (MLP / CNN / RNN) plan; an
    engine without an exporter is a one-line error naming the choices."""
    if not family_of(doc.model).blocks:
        return Engine.ddp
    framework = doc.training.framework
    target = ENGINE_TARGETS.get(framework)
    if target is None:
        choices = ", ".join(e.value for e in Engine)
        raise ModelplanError(f"--to: the plan's engine ({framework}) has no exporter here; name a target "
                             f"({choices})")
    return target


def document_dict(doc: PlanDocument) -> dict[str, Any]:
    """The document in the planner's layout (`modelplan.plan.document`), current schema."""
    body = doc.model_dump(mode="json", exclude={"schema_version"})
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, **body}


def to_json(doc: PlanDocument) -> EngineExport:
    """The versioned plan document itself (2-space indented JSON)."""
    return EngineExport(
        engine=Engine.json, text=dumps_plan_document(document_dict(doc)), filename="plan.json"
    )


BUILDERS = {
    Engine.megatron: to_megatron,
    Engine.deepspeed: to_deepspeed,
    Engine.torchtitan: to_torchtitan,
    Engine.ddp: to_ddp,
}
"""Engine -> exporter(model, training, plan, cluster, version)."""


def export_plan(
    engine: Engine | str,
    model: TransformerSpec | NetworkSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    predictions: dict[str, Any] | None = None,
    version: str | None = None,
    cost: CostModel | None = None,
) -> EngineExport:
    """The launch config of `plan` for `engine` (megatron, deepspeed, torchtitan, ddp or json),
    written for the engine release `version` (`modelplan.export.versions`; None: the newest);
    `cost` is the cost model the plan was priced with (Megatron pads the vocabulary as it says)."""
    engine = parse_engine(engine) if isinstance(engine, str) else engine
    ft = training.finetune
    if ft is not None and ft.uses_adapters and engine is not Engine.json:
        raise ModelplanError(f"training.finetune: {engine.value} launch configs are written for full training; a "
                             f"{ft.method} fine-tuning plan exports as json only")
    try:
        plan.num_microbatches(training.global_batch)
    except ValueError as exc:
        raise ModelplanError(f"plan: {exc}") from None
    megatron_only = next((f for f in MEGATRON_ONLY if getattr(training, f) is not None), None)
    if megatron_only and engine not in (Engine.json, Engine.megatron):
        raise ModelplanError(f"training.{megatron_only}: a Megatron-core setting; {engine.value} has none")
    if engine is Engine.json:
        if version is not None:
            raise ModelplanError("--engine-version: the json plan document has no engine version")
        doc = PlanDocument(schema_version=SCHEMA_VERSION, model=model, training=training,
                           plan=plan, cluster=cluster, predictions=predictions)
        return to_json(doc)
    if getattr(model, "inputs", None) is not None:  # specs/encoder_inputs.py: no engine here reads images / audio
        raise ModelplanError(f"--to {engine.value}: '{model.name}' reads images or audio (inputs), which the "
                             f"{engine.value} launch configs do not build (they train token models): export it as json")
    if not family_of(model).blocks and engine is not Engine.ddp:
        raise ModelplanError(
            f"--to {engine.value}: '{model.name}' is a network (MLP/CNN/RNN) plan; "
            f"{engine.value} trains transformers only: export it with --to ddp"
        )
    if engine is Engine.megatron:
        return to_megatron(model, training, plan, cluster, version, cost)
    return BUILDERS[engine](model, training, plan, cluster, version)


def export_document(
    engine: Engine | str, doc: PlanDocument, version: str | None = None
) -> EngineExport:
    """`export_plan` for a plan document; json keeps its cost model and predictions."""
    engine = parse_engine(engine) if isinstance(engine, str) else engine
    if engine is Engine.json and version is None:
        return to_json(doc)
    return export_plan(engine, doc.model, doc.training, doc.plan, doc.cluster, version=version,
                       cost=doc.cost_model)
