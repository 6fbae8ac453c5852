"""The versioned plan document (modelplan.plan.document): round trip and one-line errors."""

from __future__ import annotations

import json

import pytest

from modelplan.comm.clusters import load_cluster
from modelplan.errors import SpecError
from modelplan.plan.document import (
    SCHEMA_VERSION,
    dumps_plan_document,
    parse_plan_document,
    plan_document,
    read_plan_document,
)
from modelplan.plan.estimate import estimate_plan
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

SPEC = load_model("gpt2")
TRAIN = TrainingSpec(global_batch=32, seq_len=1024)
CLUSTER = load_cluster("dgx-a100")
PLAN = Plan(dp=4, tp=2, micro_batch=2, recompute="selective", sequence_parallel=True, zero=1)


def _doc() -> dict:
    est = estimate_plan(SPEC, TRAIN, PLAN, CLUSTER)
    return plan_document(SPEC, TRAIN, est, CLUSTER)


def test_round_trip(tmp_path):
    """Written then read back: the same model, training, plan, cluster and predicted step time."""
    doc = _doc()
    path = tmp_path / "plan.json"
    path.write_text(dumps_plan_document(doc))
    back = read_plan_document(path)
    assert (back.model, back.training, back.plan, back.cluster) == (SPEC, TRAIN, PLAN, CLUSTER)
    assert back.predictions["step_time"]["step_time_s"] == doc["predictions"]["step_time"]["step_time_s"]


def test_top_level_keys_for_verify():
    """verify reads `model`, `training`, `plan` at the top level, next to `schema_version`."""
    assert {"schema_version", "model", "training", "plan"} <= set(_doc())
    assert _doc()["schema_version"] == SCHEMA_VERSION


def test_minimal_hand_written_document():
    """Only schema_version, model, training and plan are required."""
    doc = {"schema_version": 1, "model": SPEC.model_dump(), "training": {"global_batch": 8},
           "plan": {"dp": 8}}
    assert parse_plan_document(doc).plan == Plan(dp=8)


def test_newer_schema_is_refused_in_one_line():
    """A document from a newer modelplan names both versions."""
    with pytest.raises(SpecError, match=r"schema_version \(2\) is newer than this modelplan reads \(1\)"):
        parse_plan_document({**_doc(), "schema_version": 2}, "plan.json")


def test_truncated_file_is_one_line(tmp_path):
    """A file cut in the middle is reported as truncated JSON with its position."""
    path = tmp_path / "plan.json"
    path.write_text(dumps_plan_document(_doc())[:200])
    with pytest.raises(SpecError) as exc:
        read_plan_document(path)
    assert str(exc.value).startswith("plan.json: truncated JSON at line") and "\n" not in str(exc.value)


def test_missing_keys_are_named():
    """A JSON object without a plan is not a plan document."""
    with pytest.raises(SpecError, match="not a plan document: missing plan"):
        parse_plan_document({"schema_version": 1, "model": {}, "training": {}})


def test_memory_is_reported_in_bytes_per_stage():
    """predictions.memory.stages[i] carries `<term>_bytes` for every memory term."""
    stage = _doc()["predictions"]["memory"]["stages"][0]
    assert stage["stage"] == 0 and stage["total_bytes"] > stage["weights_bytes"] > 0
    json.dumps(_doc())  # plain JSON
