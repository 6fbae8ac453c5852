"""One calibrate job's printed document read back (`modelplan calibrate --np N --jobs K`): the
parent starts K MPI jobs, each prints its measurements as the calibrate JSON document, and the
parent fits the median over jobs. A job's output is input like any file: anything that is not such
a document (not JSON, a missing key, a time that is negative or not finite) is one ModelplanError
naming the job and the field, never a traceback or a profile fitted to NaN."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from modelplan.errors import ModelplanError, format_validation_error
from modelplan.execute.calibrate import Measurement

REQUIRED = ("measurements", "world_size", "scope", "library")
"""The keys of the calibrate document the parent reads."""


def read_job_output(text: str, where: str) -> tuple[tuple[Measurement, ...], int, str, str]:
    """The measurements, ranks, scope and library a job printed; one-line ModelplanError otherwise."""
    try:
        doc: Any = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        first = text.strip().splitlines()[:1]
        raise ModelplanError(f"{where}: its output is not the calibrate JSON document ({exc.__class__.__name__}; "
                             f"it began {first[0][:60]!r})" if first else f"{where}: it printed nothing") from None
    if not isinstance(doc, dict):
        raise ModelplanError(f"{where}: expected a JSON object, got {type(doc).__name__}")
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ModelplanError(f"{where}: {missing[0]}: missing from the job's document")
    if not isinstance(doc["measurements"], list) or not doc["measurements"]:
        raise ModelplanError(f"{where}: measurements: expected a non-empty list")
    world, scope, library = doc["world_size"], doc["scope"], doc["library"]
    if not isinstance(world, int) or isinstance(world, bool) or world < 2:
        raise ModelplanError(f"{where}: world_size: expected an integer >= 2, got {json.dumps(world)[:40]}")
    if scope not in ("intra", "inter"):
        raise ModelplanError(f"{where}: scope: expected 'intra' or 'inter', got {json.dumps(scope)[:40]}")
    if not isinstance(library, str):
        raise ModelplanError(f"{where}: library: expected a string, got {type(library).__name__}")
    out = []
    for i, m in enumerate(doc["measurements"]):
        if not isinstance(m, dict):
            raise ModelplanError(f"{where}: measurements[{i}]: expected an object, got {type(m).__name__}")
        try:
            out.append(Measurement(**m))
        except ValidationError as exc:
            raise ModelplanError(format_validation_error(exc, f"{where}: measurements[{i}]")) from None
    return tuple(out), world, scope, library
