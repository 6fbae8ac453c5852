"""Pipeline messaging and the Lamport timeline rebuilt from the executed trace."""

from __future__ import annotations

import pytest

from modelplan.execute.pipeline import StepRecord, messages_to
from modelplan.execute.timeline import bubble_fraction, lamport_spans
from modelplan.plan.pipeline import Action, ActionKind, pipeline_schedule

F, B = ActionKind.F, ActionKind.B


def test_interleaved_pp2_shares_one_link_for_both_directions():
    """pp = 2, vpp = 2: rank 1 posts to rank 0 both activations (chunk 0 -> chunk 1 wrap-around)
    and gradients, so the receiver needs the keyed mailbox rather than FIFO order."""
    schedule = pipeline_schedule("interleaved", 2, 4, 2)
    kinds = {k[0] for k in messages_to(schedule, 1, 0)}
    assert kinds == {"F", "B"}


@pytest.mark.parametrize("schedule,pp,m,vpp", [("1f1b", 4, 8, 1), ("gpipe", 3, 2, 1), ("interleaved", 2, 4, 3)])
def test_every_needed_message_is_posted(schedule, pp, m, vpp):
    """For each rank pair, the keys the receiver's compute actions consume from another rank
    (stage v - 1 for F, v + 1 for B, where stage v runs on rank v % pp) are exactly the keys the
    sender's lowered list posts."""
    sched = pipeline_schedule(schedule, pp, m, vpp)
    last = pp * vpp - 1
    for dst in range(pp):
        needed = []
        for a in sched.actions[dst]:
            v = a.chunk * pp + dst
            if a.kind is F and v > 0:
                needed.append(((v - 1) % pp, ("F", a.microbatch, v)))
            if a.kind is B and v < last:
                needed.append(((v + 1) % pp, ("B", a.microbatch, v)))
        for src in range(pp):
            assert sorted(k for s, k in needed if s == src) == sorted(messages_to(sched, src, dst))


def test_lowered_list_receives_before_and_sends_after():
    """1F1B on 2 ranks, m 2: rank 0 runs F0 SEND F1 SEND RECV B0 RECV B1 (Megatron's
    send_forward after each forward, recv_backward before each backward)."""
    lowered = pipeline_schedule("1f1b", 2, 2).lowered
    assert [str(a) for a in lowered[0]] == ["F0", "SEND_F0->1", "F1", "SEND_F1->1", "RECV_B0<-1", "B0",
                                             "RECV_B1<-1", "B1"]
    assert [str(a) for a in lowered[1]] == ["RECV_F0<-0", "F0", "B0", "SEND_B0->0", "RECV_F1<-0", "F1", "B1",
                                             "SEND_B1->0"]


def test_lamport_clock_of_a_two_stage_1f1b_trace():
    """Hand-worked: rank 0 F0[0,1] F1[1,2] B0[4,6] B1[7,9]; rank 1 F0[1,2] B0[2,4] F1[4,5] B1[5,7].

    Makespan 9, busy 6 per rank: bubble 3/6 = (p-1)/m = 1/2."""
    r0 = [StepRecord(Action(F, 0), 0, 1, (), ((1, 1),)), StepRecord(Action(F, 1), 0, 1, (), ((1, 2),)),
          StepRecord(Action(B, 0), 0, 2, ((1, 1),), ()), StepRecord(Action(B, 1), 0, 2, ((1, 2),), ())]
    r1 = [StepRecord(Action(F, 0), 1, 1, ((0, 1),), ()), StepRecord(Action(B, 0), 1, 2, (), ((0, 1),)),
          StepRecord(Action(F, 1), 1, 1, ((0, 2),), ()), StepRecord(Action(B, 1), 1, 2, (), ((0, 2),))]
    spans = lamport_spans({0: r0, 1: r1})
    assert [(s.start, s.end) for s in spans[0]] == [(0, 1), (1, 2), (4, 6), (7, 9)]
    assert [(s.start, s.end) for s in spans[1]] == [(1, 2), (2, 4), (4, 5), (5, 7)]
    assert bubble_fraction(spans, (0, 1)) == 0.5


def test_a_message_nobody_sent_is_reported():
    """A step that consumed a message with no sender cannot be placed on the clock."""
    with pytest.raises(ValueError, match="no step sent"):
        lamport_spans({0: [StepRecord(Action(F, 0), 0, 1, ((1, 1),), ())]})
