"""The executed-trace schedule checks, on hand-written traces (no generator involved).

Expected values: 1F1B's warm-up of pp - r forwards before the first backward and its bubble
(p-1)/m (Narayanan et al. SC'21, sec. 2.2.1), worked by hand for pp = 2, m = 2 with t_f = 1,
t_b = 2: rank 0 runs F0 0-1, F1 1-2, waits, B0 4-6, B1 7-9; rank 1 F0 1-2, B0 2-4, F1 4-5,
B1 5-7. Makespan 9, busy 6: bubble 3/6 = 1/2 = (p-1)/m.
"""

from __future__ import annotations

from modelplan.execute.pipeline import StepRecord
from modelplan.execute.schedule_check import check_executed_schedule, warmup_closed_form
from modelplan.execute.timeline import Span
from modelplan.plan.pipeline import Action, ActionKind
from modelplan.specs.plan import Plan

PLAN = Plan(pp=2)


def span(kind, i, stage, start):
    cost = 1 if kind == "F" else 2
    return Span(StepRecord(Action(ActionKind(kind), i), stage, cost, (), ()), start, start + cost)


def one_f_one_b(last_start: int = 7):
    """The module docstring's trace (rank 0's last backward may start later: slack)."""
    r0 = [span("F", 0, 0, 0), span("F", 1, 0, 1), span("B", 0, 0, 4), span("B", 1, 0, last_start)]
    r1 = [span("F", 0, 1, 1), span("B", 0, 1, 2), span("F", 1, 1, 4), span("B", 1, 1, 5)]
    return {0: r0, 1: r1}


def rows(spans):
    return {r.name: r for r in check_executed_schedule(spans, [(0, 1)], PLAN, 2)}


def test_a_correct_1f1b_trace_passes_every_property():
    """Warm-up 2 and 1 forwards (pp - r), bubble 1/2."""
    got = rows(one_f_one_b())
    assert all(r.passed for r in got.values()), got
    assert got["measured bubble"].measured == 0.5
    assert [warmup_closed_form("1f1b", 2, r, 2, 1) for r in (0, 1)] == [2, 1]


def test_the_bubble_is_measured_from_the_executed_times():
    """Rank 0's last backward one unit late: makespan 10, bubble (10 - 6) / 6, not 1/2."""
    bubble = rows(one_f_one_b(last_start=8))["measured bubble"]
    assert not bubble.passed and abs(bubble.measured - 4 / 6) < 1e-12 and bubble.expected == 0.5


def test_a_missing_backward_fails_coverage():
    spans = one_f_one_b()
    spans[1] = spans[1][:-1]
    assert "B of micro-batch 1 on stage 1 ran 0 times" in rows(spans)["pipeline coverage"].detail


def test_a_backward_before_its_forward_fails():
    spans = one_f_one_b()
    spans[1] = [span("B", 0, 1, 0), span("F", 0, 1, 2)] + spans[1][2:]
    assert not rows(spans)["forward before backward"].passed


def test_a_forward_before_the_previous_stage_fails_the_dependencies():
    spans = one_f_one_b()
    spans[1] = [span("F", 0, 1, 0)] + spans[1][1:]  # starts at 0, stage 0's F0 ends at 1
    assert "before F on stage 0 ends at 1" in rows(spans)["stage dependencies"].detail


def test_one_forward_too_many_in_warm_up_fails_warm_up_and_in_flight():
    """Rank 1 running F0 F1 before B0: warm-up 2 where 1F1B needs pp - 1 = 1, 2 in flight."""
    spans = one_f_one_b()
    spans[1] = [span("F", 0, 1, 1), span("F", 1, 1, 2), span("B", 0, 1, 3), span("B", 1, 1, 5)]
    got = rows(spans)
    assert "ran 2 forwards before its first backward, 1f1b needs 1" in got["warm-up forwards"].detail
    assert not got["in-flight micro-batches"].passed
