"""The versioned plan document: top-level `schema_version`, `model`, `training`, `plan`,
`cluster`, `predictions`.

This is the export side's own small reader, kept to one function (`parse_plan_document`) so it
can be swapped for the planner's loader once that lands; the layout follows the planner's
document (top-level keys above; `predictions` is kept as a free-form table of numbers).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from modelplan.errors import SpecError, format_validation_error
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

SCHEMA_VERSION = 1
"""The newest plan-document schema this modelplan reads and the one it writes."""

REQUIRED_KEYS = ("schema_version", "model", "training", "plan")


class PlanDocument(BaseModel):
    """A plan with everything needed to launch it and, optionally, its predicted costs."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: int
    """Document schema version (an integer, bumped on incompatible changes)."""
    model: TransformerSpec
    """The model the plan splits."""
    training: TrainingSpec
    """Batch, sequence length, precision, optimizer."""
    plan: Plan
    """The parallel degrees and per-step settings."""
    cluster: Cluster | None = None
    """Where the plan runs (sets GPUs per node for launch lines)."""
    predictions: dict[str, Any] | None = None
    """The planner's predicted step time and memory breakdown (numbers, nested tables)."""


def _schema_major(value: object, source: str) -> int:
    """`1`, `"1"` and `"1.2"` all have major version 1."""
    if isinstance(value, bool):
        raise SpecError(f"{source}: schema_version: expected an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        head = value.split(".", 1)[0]
        if head.isdigit():
            return int(head)
    raise SpecError(f"{source}: schema_version: expected an integer, got {value!r}")


def parse_plan_document(data: object, source: str = "plan") -> PlanDocument:
    """Validate a parsed JSON object as a plan document; every problem is one line naming it."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a JSON object, got {type(data).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise SpecError(f"{source}: not a plan document: missing {', '.join(missing)}")
    version = _schema_major(data["schema_version"], source)
    if version > SCHEMA_VERSION:
        raise SpecError(
            f"{source}: schema_version ({data['schema_version']}) is newer than this modelplan "
            f"reads ({SCHEMA_VERSION}); upgrade modelplan"
        )
    if version < 1:
        raise SpecError(f"{source}: schema_version ({data['schema_version']}) must be >= 1")
    try:
        return PlanDocument.model_validate({**data, "schema_version": version})
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source)) from None


def plan_document_dict(
    model: TransformerSpec,
    training: TrainingSpec,
    plan: Plan,
    cluster: Cluster | None = None,
    predictions: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The document as a JSON-ready dict (specs dumped field by field, defaults included)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "model": model.model_dump(mode="json"),
        "training": training.model_dump(mode="json"),
        "plan": plan.model_dump(mode="json"),
        "cluster": None if cluster is None else cluster.model_dump(mode="json"),
        "predictions": predictions,
    }
