"""The plan document: a versioned JSON file that `modelplan plan -o` writes and `verify`,
`--explain` and the exporters read back.

Top level (schema_version 1): `schema_version`, `kind` ("modelplan.plan"), `model`, `training`,
`plan`, `cluster`, `cost_model`, `predictions` (step-time terms in seconds, throughput, memory
per stage in bytes, notes). Only `model`, `training` and `plan` are required, so a hand-written
minimal file is a valid document (without `schema_version` it is read as version 1; `model` may
name a preset). Fields are only ever added within a schema version; a reader refuses any other
version, and any other `kind`, with a one-line error. `modelplan plan --json` output (kind
"modelplan.search") reads as the document of its best plan.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, SerializeAsAny, field_validator

from modelplan.errors import SpecError, validate_model
from modelplan.plan.results import PlanEstimate
from modelplan.specs.base import Spec
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

SCHEMA_VERSION = 1
"""The plan-document schema this modelplan writes and the newest it reads."""
KIND = "modelplan.plan"
REQUIRED_KEYS = ("model", "training", "plan")


class PlanDocument(BaseModel):
    """A plan with what it needs to be re-evaluated, launched or verified, and its predictions."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: int
    """Document schema version (bumped on incompatible changes)."""
    model: SerializeAsAny[Spec]
    """The model the plan splits: a spec of the family its `kind` names (`specs/family.py`), dumped
    with its own fields."""
    training: TrainingSpec
    """Batch, sequence length, precision, optimizer, recompute."""
    plan: Plan
    """The parallel degrees and per-step settings."""
    cluster: Cluster | None = None
    """Where the plan runs."""
    cost_model: CostModel | None = None
    """The cost-model constants the predictions used."""
    predictions: dict[str, Any] | None = None
    """Predicted step-time terms, throughput and memory (see `predictions_dict`)."""

    @field_validator("model", mode="before")
    @classmethod
    def _model_of_its_family(cls, value: object) -> Spec:
        """A raw table or preset name read as its family's spec (`specs/load.py`, the registry)."""
        if isinstance(value, Spec):
            return value
        from modelplan.specs.load import model_from_data

        return model_from_data({"model": value}, "plan document")


def predictions_dict(est: PlanEstimate) -> dict[str, Any]:
    """The estimate as plain JSON: times in seconds, memory in bytes (unit in every name)."""
    return {
        "step_time": est.step.model_dump(),
        "throughput": {
            f"{est.throughput_unit}_per_s": est.throughput_per_s,
            "model_tflops_per_gpu": est.model_tflops_per_gpu,
            "hardware_tflops_per_gpu": est.hardware_tflops_per_gpu,
            "mfu": est.mfu,
            "hfu": est.hfu,
            "bubble_fraction": est.bubble_fraction,
            "num_microbatches": est.num_microbatches,
            "model_flops": est.model_flops,
            "hardware_flops": est.hardware_flops,
        },
        "memory": {
            "fits": est.fits,
            "peak_bytes": est.peak_memory_bytes,
            "budget_bytes": est.memory_budget_bytes,
            "stages": [
                {"stage": s.stage, **{f"{k}_bytes": v for k, v in s._asdict().items() if k != "stage"}}
                for s in est.memory
            ],
        },
        "notes": list(est.notes),
    }


def plan_document(
    spec: Spec,
    training: TrainingSpec,
    estimate: PlanEstimate,
    cluster: Cluster | None = None,
    cost: CostModel | None = None,
) -> dict[str, Any]:
    """The JSON-ready document of one evaluated plan."""
    return {
        "schema_version": SCHEMA_VERSION,
        "kind": KIND,
        "model": spec.model_dump(mode="json"),
        "training": training.model_dump(mode="json"),
        "plan": estimate.plan.model_dump(mode="json"),
        "cluster": None if cluster is None else cluster.model_dump(mode="json"),
        "cost_model": (cost or CostModel()).model_dump(mode="json"),
        "predictions": predictions_dict(estimate),
    }


def dumps_plan_document(doc: dict[str, Any]) -> str:
    """Indented JSON text with a trailing newline."""
    return json.dumps(doc, indent=2) + "\n"


SEARCH_KIND = "modelplan.search"
"""`modelplan plan --json`: a search whose best plan the reader takes as the document."""


def _from_search(data: dict, source: str) -> dict:
    """A search document's best plan, as a plan document."""
    plans = data.get("plans")
    if not isinstance(plans, list) or not plans or not isinstance(plans[0], dict):
        raise SpecError(f"{source}: a search document (modelplan plan --json) without plans: "
                        "the search found none that fits")
    best = plans[0]
    return {**{k: v for k, v in data.items() if k not in ("plans", "search", "kind")},
            "kind": KIND, "plan": best.get("plan"), "predictions": best.get("predictions")}


def check_document_header(data: object, source: str = "plan") -> dict:
    """The raw document, its kind and schema version checked (a search document becomes its best
    plan). A hand-written document may leave out `kind` and `schema_version` (read as 1)."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a JSON object, got {type(data).__name__}")
    kind = data.get("kind", KIND)
    if kind == SEARCH_KIND:
        data = _from_search(data, source)
    elif kind != KIND:
        raise SpecError(f"{source}: kind: a {str(kind)[:40]!r} document is not a plan document "
                        f"('{KIND}', written by modelplan plan -o)")
    version = data.get("schema_version", SCHEMA_VERSION)
    if isinstance(version, bool) or not isinstance(version, int):
        raise SpecError(f"{source}: schema_version: expected an integer, got {str(version)[:40]!r}")
    if version > SCHEMA_VERSION:
        raise SpecError(
            f"{source}: schema_version ({version}) is newer than this modelplan reads "
            f"({SCHEMA_VERSION}); upgrade modelplan"
        )
    if version < 1:
        raise SpecError(f"{source}: schema_version ({version}) must be >= 1")
    return data


def parse_plan_document(data: object, source: str = "plan") -> PlanDocument:
    """Validate a parsed JSON object as a plan document; every problem is one line.

    The model is read by its `kind` (transformer, the default, or network) or named as a preset,
    so one bad model field is one message about that field, not one per union member."""
    from modelplan.specs.load import model_from_data

    data = check_document_header(data, source)
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise SpecError(f"{source}: not a plan document: missing {', '.join(missing)}")
    model = model_from_data({"model": data["model"]}, source)
    return validate_model(PlanDocument, {**data, "schema_version": data.get("schema_version", 1),
                                         "model": model}, source)


def read_plan_document_data(ref: str | Path) -> tuple[dict, str]:
    """(raw document with its header checked, its name) from a file or `-` (standard input)."""
    from modelplan.inputs import parse_json, read_text, source_name

    name = source_name(ref)
    return check_document_header(parse_json(read_text(ref), name), name), name


def read_plan_document(ref: str | Path) -> PlanDocument:
    """Read and validate a plan document (a file, or `-` for standard input); a truncated,
    malformed or invalid document is one line."""
    data, name = read_plan_document_data(ref)
    return parse_plan_document(data, name)
