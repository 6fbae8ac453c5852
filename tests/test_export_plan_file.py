"""The versioned plan document: round trip, schema version check, one-line errors."""

import json

import pytest

from modelplan.errors import SpecError
from modelplan.export.plan_file import SCHEMA_VERSION, parse_plan_document, plan_document_dict
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

MODEL = TransformerSpec(name="tiny", layers=4, hidden=64, heads=4, ffn_hidden=256, vocab=1000)
TRAINING = TrainingSpec(global_batch=16, seq_len=128, precision="bf16", recompute="selective")
PLAN = Plan(dp=2, tp=2, pp=2, vpp=2, schedule="interleaved", micro_batch=2, zero=1)


def _document(**changes):
    data = plan_document_dict(MODEL, TRAINING, PLAN, predictions={"step_time_s": 1.5})
    data.update(changes)
    return data


def test_round_trip_through_json_gives_the_same_plan():
    """dict -> JSON text -> dict -> PlanDocument returns equal specs and predictions."""
    doc = parse_plan_document(json.loads(json.dumps(_document())))
    assert (doc.model, doc.training, doc.plan) == (MODEL, TRAINING, PLAN)
    assert doc.predictions == {"step_time_s": 1.5}
    assert doc.cluster is None


def test_newer_schema_is_refused_with_both_versions():
    """A document from a newer modelplan names its version and the one this one reads."""
    with pytest.raises(SpecError) as err:
        parse_plan_document(_document(schema_version=SCHEMA_VERSION + 1), "p.json")
    message = str(err.value)
    assert f"({SCHEMA_VERSION + 1})" in message and f"({SCHEMA_VERSION})" in message
    assert "\n" not in message


def test_dotted_version_string_reads_its_major():
    """schema_version "1.3" is major 1, readable by a version-1 reader."""
    doc = parse_plan_document(_document(schema_version=f"{SCHEMA_VERSION}.3"))
    assert doc.schema_version == SCHEMA_VERSION


def test_missing_keys_are_named():
    """A JSON object without `plan` and `training` is not a plan document; both are named."""
    data = _document()
    del data["plan"], data["training"]
    with pytest.raises(SpecError, match="missing training, plan"):
        parse_plan_document(data, "p.json")


def test_invalid_plan_field_is_one_line():
    """tp = 0 fails validation with the field path in one line."""
    data = _document()
    data["plan"]["tp"] = 0
    with pytest.raises(SpecError) as err:
        parse_plan_document(data, "p.json")
    assert "plan.tp" in str(err.value) and "\n" not in str(err.value)


def test_unknown_top_level_keys_are_ignored():
    """Additions by newer writers of the same major version (e.g. 'generator') do not break."""
    doc = parse_plan_document(_document(generator="modelplan 0.2"))
    assert doc.plan == PLAN
