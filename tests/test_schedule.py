"""Pipeline schedules as data: action orders, the bubble fractions of Narayanan et al. SC'21, and
the planner's profile (a few simulated micro-batches, extended by the steady period) against the
full simulation."""

from fractions import Fraction

import pytest

from modelplan.plan.pipeline import Action, ActionKind, PipelineSchedule, pipeline_schedule, schedule_problem
from modelplan.plan.pipeline.actions import strided_layout
from modelplan.plan.pipeline.profile import bubble_microbatches, held_peak, inflight_microbatches, simulate
from modelplan.specs.plan import Schedule

F, B = ActionKind.F, ActionKind.B


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("pp,m", [(2, 2), (4, 8), (4, 3), (8, 16)])
def test_bubble_fraction_is_p_minus_1_over_m(schedule, pp, m):
    """GPipe and 1F1B idle (p-1)/m of the ideal time (Narayanan et al. 2021, sec. 2.2.1)."""
    tl = simulate(pipeline_schedule(schedule, pp, m), t_forward=1.0, t_input_grad=1.0, t_weight_grad=1.0)
    assert tl.bubble_fraction() == pytest.approx((pp - 1) / m)


@pytest.mark.parametrize("pp,m,vpp", [(2, 4, 2), (4, 8, 2), (4, 4, 3), (4, 12, 4)])
def test_interleaved_bubble_is_divided_by_v(pp, m, vpp):
    """Interleaving v chunks divides the bubble by v: (p-1)/(v*m) (Narayanan et al. 2021, sec. 2.2.2)."""
    tl = simulate(pipeline_schedule("interleaved", pp, m, vpp))
    assert tl.bubble_fraction() == pytest.approx((pp - 1) / (vpp * m))


def test_1f1b_first_stage_has_p_minus_1_warmup_forwards():
    """Stage 0 of a 4-stage 1F1B pipeline runs 3 warmup forwards before F3 then B0 (PipeDream-Flush)."""
    steps = pipeline_schedule("1f1b", 4, 6).actions[0]
    assert [str(s) for s in steps[:5]] == ["F0", "F1", "F2", "F3", "B0"]
    assert steps[-1] == Action(B, 5)


def test_1f1b_last_stage_alternates():
    """The last stage has no warmup: F0 B0 F1 B1 ..."""
    steps = pipeline_schedule("1f1b", 4, 3).actions[3]
    assert [str(s) for s in steps] == ["F0", "B0", "F1", "B1", "F2", "B2"]


@pytest.mark.parametrize("schedule,vpp", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_every_microbatch_runs_forward_and_backward_once_per_chunk(schedule, vpp):
    """Each rank runs F and B of every (micro-batch, chunk) exactly once."""
    pp, m = 4, 8
    for steps in pipeline_schedule(schedule, pp, m, vpp).actions:
        expected = {(k, i, c) for k in (F, B) for i in range(m) for c in range(vpp)}
        assert sorted((s.kind, s.microbatch, s.chunk) for s in steps) == sorted(expected)


def test_interleaved_needs_m_divisible_by_pp():
    """Megatron's interleaved schedule requires num_microbatches % pp == 0."""
    assert "divisible by pp" in schedule_problem("interleaved", 4, 6, 2).message
    with pytest.raises(ValueError, match="divisible by pp"):
        pipeline_schedule("interleaved", 4, 6, 2)


def test_every_schedule_has_its_module():
    """Each Schedule member names a module with the functions the planner and executor call."""
    for kind in Schedule:
        sched = pipeline_schedule(kind, 2, 4, 2 if kind is Schedule.INTERLEAVED else 1)
        assert sched.kind is kind and len(sched.actions) == 2


def test_deadlocking_order_is_reported():
    """A rank that waits for a backward before sending its forward deadlocks the simulation."""
    bad = PipelineSchedule(Schedule.ONE_F_ONE_B, 2, 1, 1, strided_layout(2, 1),
                           ((Action(F, 0), Action(B, 0)), (Action(B, 0), Action(F, 0))))
    with pytest.raises(ValueError, match="deadlocks"):
        simulate(bad)


CASES = [(k, pp, v) for k in Schedule if k is not Schedule.INTERLEAVED for pp in (1, 2, 3, 4, 6) for v in (1,)] + \
    [(Schedule.INTERLEAVED, pp, v) for pp in (2, 3, 4) for v in (2, 3, 4)]
"""Every schedule (new ones included, by the enum) on small pipelines."""


@pytest.mark.parametrize("kind,pp,vpp", CASES)
def test_profile_equals_the_full_simulation(kind, pp, vpp):
    """The planner's profile (the steady regime's few micro-batches, extended) equals the full
    simulation of every micro-batch count up to 6 pp: bubble and every rank's peak."""
    for m in range(1, 6 * pp + 1):
        if schedule_problem(kind, pp, m, vpp):
            continue
        sched = pipeline_schedule(kind, pp, m, vpp)
        tl = simulate(sched)
        busy = max(tl.busy(r) for r in range(pp))
        assert bubble_microbatches(kind, pp, m, vpp) == Fraction(tl.makespan - busy) * m / Fraction(busy)
        for r in range(pp):
            chunks = sched.layout.chunks(r)
            assert inflight_microbatches(kind, pp, r, m, vpp) == Fraction(held_peak(sched.actions[r]), chunks)


@pytest.mark.parametrize("kind", list(Schedule))
def test_every_action_runs_once_and_in_dependency_order(kind):
    """Each (micro-batch, stage) runs F once, B once and W at most once, W after its B; the
    lowered list's sends and receives pair up between ranks (schedule data every kind must obey)."""
    pp, vpp = 4, 2 if kind is Schedule.INTERLEAVED else 1
    m = next(n for n in range(8, 64) if schedule_problem(kind, pp, n, vpp) is None)
    sched = pipeline_schedule(kind, pp, m, vpp)
    seen = {}
    for r, acts in enumerate(sched.actions):
        for k, a in enumerate(acts):
            key = (a.kind, a.microbatch, sched.stage(r, a.chunk))
            assert key not in seen
            seen[key] = k
    for i in range(m):
        for s in range(sched.num_stages):
            assert ("F", i, s) in seen and ("B", i, s) in seen
            if ("W", i, s) in seen:
                assert seen[("W", i, s)] > seen[("B", i, s)]
    sends = sorted((r, a.peer, a.kind.value[-1], a.microbatch) for r, acts in enumerate(sched.lowered)
                   for a in acts if a.kind.value.startswith("SEND"))
    recvs = sorted((a.peer, r, a.kind.value[-1], a.microbatch) for r, acts in enumerate(sched.lowered)
                   for a in acts if a.kind.value.startswith("RECV"))
    assert sends == recvs


@pytest.mark.parametrize("kind,pp,vpp", [("1f1b", 4, 1), ("interleaved", 4, 2), ("gpipe", 3, 1)])
def test_profile_of_many_microbatches_is_the_closed_form(kind, pp, vpp):
    """Far into the steady regime (m = 512) the profile keeps Narayanan et al.'s (p-1)/v bubble, and
    1F1B's min(pp - r, m) / GPipe's m in-flight micro-batches."""
    m = 512
    assert bubble_microbatches(kind, pp, m, vpp) == Fraction(pp - 1, vpp)
    if kind == "1f1b":
        assert [inflight_microbatches(kind, pp, r, m) for r in range(pp)] == [pp - r for r in range(pp)]
    if kind == "gpipe":
        assert inflight_microbatches(kind, pp, 0, m) == m


def test_an_overlapped_pair_starts_when_both_inputs_are_there():
    """Rank 0 runs F0, then F1 overlapped with B0 (an F&B chunk): F1 could start at t=1 but waits
    for B0's gradient from rank 1 (rank 1: F0 [1,2], B0 [2,4]), so the pair runs [4,5] + [5,7]
    instead of F1 [1,2], B0 [4,6]; hand-worked on the unit clock (t_b = 2 t_f)."""
    plain = ((Action(F, 0), Action(F, 1), Action(B, 0), Action(B, 1)), (Action(F, 0), Action(B, 0), Action(F, 1), Action(B, 1)))
    paired = ((Action(F, 0), Action(F, 1, overlap=True), Action(B, 0), Action(B, 1)), plain[1])
    times = []
    for acts in (plain, paired):
        t = simulate(PipelineSchedule(Schedule.ONE_F_ONE_B, 2, 2, 1, strided_layout(2, 1), acts))
        times.append((t.starts[0][1], t.ends[0][2]))
    assert times == [(1.0, 6.0), (4.0, 7.0)]
    lowered = PipelineSchedule(Schedule.ONE_F_ONE_B, 2, 2, 1, strided_layout(2, 1), paired).lowered[0]
    assert [str(a) for a in lowered[:6]] == ["F0", "SEND_F0->1", "RECV_B0<-1", "F1&", "B0", "SEND_F1->1"]


def test_plan_and_verify_take_the_new_schedules_by_name():
    """`plan --schedule zb-h1,zb-v,dualpipe` ranks only those; `verify --schedule dualpipe` runs it."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli import app

    runner = CliRunner()
    out = runner.invoke(app, ["plan", "llama-3-8b", "--gpus", "16", "--pp", "4", "--batch", "64",
                              "--schedule", "zb-h1,zb-v,dualpipe", "--top", "20", "--json"])
    assert out.exit_code == 0, out.output
    assert {p["plan"]["schedule"] for p in json.loads(out.output)["plans"]} <= {"zb-h1", "zb-v", "dualpipe"}
    out = runner.invoke(app, ["verify", "gpt2", "--pp", "2", "--schedule", "dualpipe", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["passed"]
