"""The plan document: a versioned JSON file that `modelplan plan -o` writes and `verify`,
`--explain` and the exporters read back.

Top level (schema_version 1): `schema_version`, `kind` ("modelplan.plan"), `model`, `training`,
`plan`, `cluster`, `cost_model`, `predictions` (step-time terms in seconds, throughput, memory
per stage in bytes, notes). Only `schema_version`, `model`, `training` and `plan` are required,
so a hand-written minimal file is a valid document. Fields are only ever added within a schema
version; a reader refuses a newer major version with a one-line error.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from modelplan.errors import SpecError, validate_model
from modelplan.plan.results import PlanEstimate
from modelplan.specs.costmodel import CostModel
from modelplan.specs.hardware import Cluster
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.network import NetworkSpec
from modelplan.specs.transformer import TransformerSpec

SCHEMA_VERSION = 1
"""The plan-document schema this modelplan writes and the newest it reads."""
KIND = "modelplan.plan"
REQUIRED_KEYS = ("schema_version", "model", "training", "plan")


class PlanDocument(BaseModel):
    """A plan with what it needs to be re-evaluated, launched or verified, and its predictions."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    schema_version: int
    """Document schema version (bumped on incompatible changes)."""
    model: TransformerSpec | NetworkSpec
    """The model the plan splits."""
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
    spec: TransformerSpec | NetworkSpec,
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


def parse_plan_document(data: object, source: str = "plan") -> PlanDocument:
    """Validate a parsed JSON object as a plan document; every problem is one line."""
    if not isinstance(data, dict):
        raise SpecError(f"{source}: expected a JSON object, got {type(data).__name__}")
    missing = [key for key in REQUIRED_KEYS if key not in data]
    if missing:
        raise SpecError(f"{source}: not a plan document: missing {', '.join(missing)}")
    version = data["schema_version"]
    if isinstance(version, bool) or not isinstance(version, int):
        raise SpecError(f"{source}: schema_version: expected an integer, got {version!r}")
    if version > SCHEMA_VERSION:
        raise SpecError(
            f"{source}: schema_version ({version}) is newer than this modelplan reads "
            f"({SCHEMA_VERSION}); upgrade modelplan"
        )
    if version < 1:
        raise SpecError(f"{source}: schema_version ({version}) must be >= 1")
    return validate_model(PlanDocument, data, source)


def _unclosed(text: str) -> bool:
    """Whether the text ends inside a string or with brackets still open (a cut-off file)."""
    depth, in_string, escaped = 0, False, False
    for ch in text:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return in_string or depth > 0


def read_plan_document(path: str | Path) -> PlanDocument:
    """Read and validate a plan document file; a truncated or malformed file is one line."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        what = "truncated" if _unclosed(text) else "malformed"
        raise SpecError(
            f"{path.name}: {what} JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
        ) from None
    return parse_plan_document(data, path.name)
