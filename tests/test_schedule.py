"""Pipeline schedules: step orders and the bubble fractions of Narayanan et al. SC'21."""

import pytest

from modelplan.plan.schedule import Step, pipeline_schedule, simulate


@pytest.mark.parametrize("schedule", ["gpipe", "1f1b"])
@pytest.mark.parametrize("pp,m", [(2, 2), (4, 8), (4, 3), (8, 16)])
def test_bubble_fraction_is_p_minus_1_over_m(schedule, pp, m):
    """GPipe and 1F1B idle (p-1)/m of the ideal time (Narayanan et al. 2021, sec. 2.2.1)."""
    tl = simulate(pipeline_schedule(schedule, pp, m), pp, 1, t_forward=1.0, t_backward=2.0)
    assert tl.bubble_fraction() == pytest.approx((pp - 1) / m)


@pytest.mark.parametrize("pp,m,vpp", [(2, 4, 2), (4, 8, 2), (4, 4, 3), (4, 12, 4)])
def test_interleaved_bubble_is_divided_by_v(pp, m, vpp):
    """Interleaving v chunks divides the bubble by v: (p-1)/(v*m) (Narayanan et al. 2021, sec. 2.2.2)."""
    tl = simulate(pipeline_schedule("interleaved", pp, m, vpp), pp, vpp, 1.0, 2.0)
    assert tl.bubble_fraction() == pytest.approx((pp - 1) / (vpp * m))


def test_1f1b_first_stage_has_p_minus_1_warmup_forwards():
    """Stage 0 of a 4-stage 1F1B pipeline runs 3 warmup forwards before F3 then B0 (PipeDream-Flush)."""
    steps = pipeline_schedule("1f1b", 4, 6)[0]
    assert [str(s) for s in steps[:5]] == ["F0", "F1", "F2", "F3", "B0"]
    assert steps[-1] == Step("B", 5)


def test_1f1b_last_stage_alternates():
    """The last stage has no warmup: F0 B0 F1 B1 ..."""
    steps = pipeline_schedule("1f1b", 4, 3)[3]
    assert [str(s) for s in steps] == ["F0", "B0", "F1", "B1", "F2", "B2"]


@pytest.mark.parametrize("schedule,vpp", [("gpipe", 1), ("1f1b", 1), ("interleaved", 2)])
def test_every_microbatch_runs_forward_and_backward_once_per_chunk(schedule, vpp):
    """Each rank runs F and B of every (micro-batch, chunk) exactly once."""
    pp, m = 4, 8
    for steps in pipeline_schedule(schedule, pp, m, vpp):
        expected = {(k, i, c) for k in "FB" for i in range(m) for c in range(vpp)}
        assert sorted((s.kind, s.microbatch, s.chunk) for s in steps) == sorted(expected)


def test_interleaved_needs_m_divisible_by_pp():
    """Megatron's interleaved schedule requires num_microbatches % pp == 0."""
    with pytest.raises(ValueError, match="divisible by pp"):
        pipeline_schedule("interleaved", 4, 6, 2)


def test_deadlocking_order_is_reported():
    """A rank that waits for a backward before sending its forward deadlocks the simulation."""
    bad = [[Step("F", 0), Step("B", 0)], [Step("B", 0), Step("F", 0)]]
    with pytest.raises(ValueError, match="deadlocks"):
        simulate(bad, 2, 1, 1.0, 2.0)
