"""Pipeline messaging and the Lamport timeline rebuilt from the executed trace."""

from __future__ import annotations

import pytest

from modelplan.execute.pipeline import StepRecord, _messages_to
from modelplan.execute.timeline import bubble_fraction, lamport_spans
from modelplan.plan.schedule import Step, pipeline_schedule, stage_index


def test_interleaved_pp2_shares_one_link_for_both_directions():
    """pp = 2, vpp = 2: rank 1 posts to rank 0 both activations (chunk 0 -> chunk 1 wrap-around)
    and gradients, so the receiver needs the keyed mailbox rather than FIFO order."""
    schedules = pipeline_schedule("interleaved", 2, 4, 2)
    kinds = {k[0] for k in _messages_to(schedules, 1, 0, 2, 2)}
    assert kinds == {"F", "B"}


@pytest.mark.parametrize("schedule,pp,m,vpp", [("1f1b", 4, 8, 1), ("gpipe", 3, 2, 1), ("interleaved", 2, 4, 3)])
def test_every_needed_message_is_posted(schedule, pp, m, vpp):
    """For each rank pair, the keys the receiver's steps consume are exactly the keys the sender posts."""
    schedules = pipeline_schedule(schedule, pp, m, vpp)
    last = pp * vpp - 1
    for dst in range(pp):
        needed = []
        for step in schedules[dst]:
            v = stage_index(dst, step.chunk, pp)
            if step.kind == "F" and v > 0:
                needed.append(((v - 1) % pp, ("F", step.microbatch, v)))
            if step.kind == "B" and v < last:
                needed.append(((v + 1) % pp, ("B", step.microbatch, v)))
        for src in range(pp):
            assert sorted(k for s, k in needed if s == src) == sorted(_messages_to(schedules, src, dst, pp, vpp))


def test_lamport_clock_of_a_two_stage_1f1b_trace():
    """Hand-worked: rank 0 F0[0,1] F1[1,2] B0[4,6] B1[7,9]; rank 1 F0[1,2] B0[2,4] F1[4,5] B1[5,7].

    Makespan 9, busy 6 per rank: bubble 3/6 = (p-1)/m = 1/2."""
    r0 = [StepRecord(Step("F", 0), 0, 1, (), ((1, 1),)), StepRecord(Step("F", 1), 0, 1, (), ((1, 2),)),
          StepRecord(Step("B", 0), 0, 2, ((1, 1),), ()), StepRecord(Step("B", 1), 0, 2, ((1, 2),), ())]
    r1 = [StepRecord(Step("F", 0), 1, 1, ((0, 1),), ()), StepRecord(Step("B", 0), 1, 2, (), ((0, 1),)),
          StepRecord(Step("F", 1), 1, 1, ((0, 2),), ()), StepRecord(Step("B", 1), 1, 2, (), ((0, 2),))]
    spans = lamport_spans({0: r0, 1: r1})
    assert [(s.start, s.end) for s in spans[0]] == [(0, 1), (1, 2), (4, 6), (7, 9)]
    assert [(s.start, s.end) for s in spans[1]] == [(1, 2), (2, 4), (4, 5), (5, 7)]
    assert bubble_fraction(spans, (0, 1)) == 0.5


def test_a_message_nobody_sent_is_reported():
    """A step that consumed a message with no sender cannot be placed on the clock."""
    with pytest.raises(ValueError, match="no step sent"):
        lamport_spans({0: [StepRecord(Step("F", 0), 0, 1, ((1, 1),), ())]})
