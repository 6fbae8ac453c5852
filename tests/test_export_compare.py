"""Comparing two plan documents term by term (hand-made predictions, hand-computed differences)."""

import json

import pytest

from modelplan.errors import ModelplanError
from modelplan.export.compare import compare_documents, compare_predictions, flatten_numbers
from modelplan.export.engines import export_plan
from modelplan.plan.document import parse_plan_document
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

MODEL = TransformerSpec(name="tiny", layers=4, hidden=64, heads=4, ffn_hidden=256, vocab=1000)
TRAINING = TrainingSpec(global_batch=16)


def _doc(plan, predictions):
    text = export_plan("json", MODEL, TRAINING, plan, None, predictions).text
    return parse_plan_document(json.loads(text))


def test_flatten_makes_slash_paths_and_skips_bools():
    """Nested tables become slash paths; lists are indexed; booleans are not numbers."""
    table = {"time": {"compute_s": 1, "stages": [2.0, 3]}, "fits": True, "name": "x"}
    assert flatten_numbers(table) == {"time/compute_s": 1.0, "time/stages/0": 2.0,
                                      "time/stages/1": 3.0}


def test_difference_relative_change_and_winner():
    """step 5.2 s vs 5.6 s: diff 0.4 s, +0.4/5.2 = +7.69 %, lower time wins -> A better."""
    (row,) = compare_predictions({"step_time_s": 5.2}, {"step_time_s": 5.6})
    assert row.diff == pytest.approx(0.4)
    assert row.rel == pytest.approx(0.4 / 5.2)
    assert (row.unit, row.better) == ("s", "a")


def test_higher_mfu_is_better():
    """MFU 0.42 vs 0.45: B is better (higher utilisation), unit ratio."""
    (row,) = compare_predictions({"mfu": 0.42}, {"mfu": 0.45})
    assert (row.unit, row.better) == ("ratio", "b")


def test_less_memory_is_better():
    """71e9 vs 52e9 bytes: B better; unit bytes from the `_bytes` suffix."""
    (row,) = compare_predictions({"memory": {"peak_bytes": 71e9}}, {"memory": {"peak_bytes": 52e9}})
    assert (row.term, row.unit, row.better) == ("memory/peak_bytes", "bytes", "b")


def test_terms_in_reading_order():
    """compute, bubble, tp comm, dp comm, optimizer, step time, memory, MFU: that order."""
    pred = {"mfu": 0.4, "memory_bytes": 1, "step_time_s": 1, "optimizer_s": 1, "dp_comm_s": 1,
            "tp_comm_s": 1, "bubble_s": 1, "compute_s": 1}
    rows = compare_predictions(pred, pred)
    assert [r.term for r in rows] == ["compute_s", "bubble_s", "tp_comm_s", "dp_comm_s",
                                      "optimizer_s", "step_time_s", "memory_bytes", "mfu"]


def test_term_missing_on_one_side_has_no_difference():
    """A term only B predicts shows B's value and no difference."""
    (row,) = compare_predictions({}, {"cp_comm_s": 0.1})
    assert (row.a, row.b, row.diff, row.better) == (None, 0.1, None, None)


def test_documents_side_by_side():
    """Settings list both plans (world size first) and the terms carry both values."""
    a = _doc(Plan(dp=8), {"step_time_s": 2.0})
    b = _doc(Plan(dp=4, tp=2), {"step_time_s": 1.5})
    comparison = compare_documents(a, b, "a.json", "b.json")
    settings = {row.field: (row.a, row.b) for row in comparison.settings}
    assert settings["world_size"] == ("8", "8")
    assert settings["dp"] == ("8", "4") and settings["tp"] == ("1", "2")
    assert comparison.terms[0].diff == pytest.approx(-0.5)


def test_missing_predictions_without_planner_is_an_error():
    """No predictions and no evaluate function: a one-line error naming the document."""
    a = _doc(Plan(dp=8), None)
    with pytest.raises(ModelplanError, match="a.json: the document has no predictions"):
        compare_documents(a, a, "a.json", "b.json")


def test_missing_predictions_use_the_evaluate_hook():
    """A document without predictions is priced by the given evaluate function."""
    a = _doc(Plan(dp=8), None)
    b = _doc(Plan(dp=8), {"step_time_s": 3.0})
    comparison = compare_documents(a, b, evaluate=lambda doc: {"step_time_s": 1.0})
    assert (comparison.terms[0].a, comparison.terms[0].b) == (1.0, 3.0)


@pytest.mark.parametrize("path, unit", [
    ("step/compute_s", "s"),
    ("tokens_per_s", ""),
    ("model_tflops_per_gpu", ""),
    ("memory/0/weights", "bytes"),
    ("memory/0/stage", ""),
    ("peak_memory_bytes", "bytes"),
    ("bubble_fraction", "ratio"),
    ("mfu", "ratio"),
])
def test_units_from_names(path, unit):
    """Suffix rules: _s seconds (but _per_ is a rate), _bytes, _fraction/mfu ratios, and
    unitless byte counts inside a memory table (the stage index is not bytes)."""
    from modelplan.export.compare import unit_of

    assert unit_of(path) == unit


def test_nested_step_terms_follow_compute():
    """In a nested `step` table, recompute and the comm terms sort by their own names."""
    pred = {"step": {"step_time_s": 3, "optimizer_s": 1, "tp_comm_s": 1, "recompute_s": 1,
                     "compute_s": 1}}
    rows = compare_predictions(pred, pred)
    assert [r.term for r in rows] == ["step/compute_s", "step/recompute_s", "step/tp_comm_s",
                                      "step/optimizer_s", "step/step_time_s"]


def test_plan_subtree_is_not_a_term():
    """A top-level `plan` table inside predictions (the planner's estimate) is skipped."""
    assert compare_predictions({"plan": {"dp": 8}, "mfu": 0.4}, {"mfu": 0.4})[0].term == "mfu"


def test_counts_and_budgets_have_no_winner():
    """num_microbatches, memory budgets and FLOP totals are settings-like: no better side."""
    rows = compare_predictions({"num_microbatches": 8, "budget_bytes": 80e9, "model_flops": 1e16},
                               {"num_microbatches": 16, "budget_bytes": 70e9, "model_flops": 2e16})
    assert [r.better for r in rows] == [None, None, None]


def test_memory_stages_before_peak_and_time_before_memory():
    """Planner layout: step-time terms, then memory per stage (stage 0, 1), then peak."""
    pred = {"memory": {"peak_bytes": 3, "stages": [{"stage": 0, "total_bytes": 1},
                                                  {"stage": 1, "total_bytes": 2}]},
            "step_time": {"step_time_s": 1.0, "compute_s": 0.9}}
    rows = compare_predictions(pred, pred)
    assert [r.term for r in rows] == ["step_time/compute_s", "step_time/step_time_s",
                                      "memory/stages/0/total_bytes",
                                      "memory/stages/1/total_bytes", "memory/peak_bytes"]


def test_predicted_fit_is_a_setting_row():
    """memory.fits of each document shows as the 'fits (predicted)' settings row."""
    a = _doc(Plan(dp=8), {"memory": {"fits": False, "peak_bytes": 90e9}})
    b = _doc(Plan(dp=8, zero=3), {"memory": {"fits": True, "peak_bytes": 60e9}})
    settings = {row.field: (row.a, row.b) for row in compare_documents(a, b).settings}
    assert settings["fits (predicted)"] == ("false", "true")
