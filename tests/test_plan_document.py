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


def test_one_bad_model_field_is_one_short_message():
    """The model is chosen by its `kind`: a bad field of a transformer is one message about that
    field (not one per member of the transformer | network union)."""
    doc = _doc()
    doc["model"] = {**doc["model"], "heads": "many"}
    with pytest.raises(SpecError) as exc:
        parse_plan_document(doc, "plan.json")
    assert str(exc.value) == "plan.json: model: heads: expected a number, got str 'many'"  # Spec: no str -> int coercion


@pytest.mark.parametrize("version", [0, 2, "1", True, None])
def test_only_schema_version_1_is_read(version):
    """0, 2, "1", true and null are refused in one line; a missing version reads as 1."""
    with pytest.raises(SpecError, match="schema_version"):
        parse_plan_document({**_doc(), "schema_version": version}, "plan.json")
    doc = {k: v for k, v in _doc().items() if k != "schema_version"}
    assert parse_plan_document(doc).schema_version == 1


def test_other_kinds_of_document_are_refused():
    """A `modelplan count --json` document is not a plan document, and says so."""
    with pytest.raises(SpecError, match="'modelplan.count' document is not a plan document"):
        parse_plan_document({**_doc(), "kind": "modelplan.count"}, "count.json")


def test_search_document_reads_as_its_best_plan():
    """`modelplan plan --json` (kind modelplan.search) gives the document of plans[0]."""
    doc = _doc()
    search = {"schema_version": 1, "kind": "modelplan.search", "model": doc["model"],
              "training": doc["training"], "cluster": doc["cluster"],
              "plans": [{"plan": doc["plan"], "predictions": doc["predictions"]},
                        {"plan": {**doc["plan"], "dp": 8}, "predictions": None}]}
    assert parse_plan_document(search).plan == PLAN


def test_model_may_name_a_preset():
    """A hand-written document can say "model": "gpt2"."""
    doc = {"model": "gpt2", "training": {"global_batch": 8}, "plan": {"dp": 8}}
    assert parse_plan_document(doc).model == SPEC


def test_document_on_standard_input(monkeypatch):
    """`-` reads the document from standard input."""
    import io
    import sys

    from modelplan.inputs import forget_stdin

    forget_stdin()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(dumps_plan_document(_doc()).encode())))
    assert read_plan_document("-").plan == PLAN
    forget_stdin()
