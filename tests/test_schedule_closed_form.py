"""The schedules' closed forms (`bubble`, `held_peak` of 1F1B and Megatron's interleaved), which
the planner reads instead of simulating, against the simulation of the same modules' action
lists over a grid of (pp, vpp, m), and against the papers' formulas; chunk shares against the
forwards each chunk's list runs."""

from fractions import Fraction

import pytest

from modelplan.plan.pipeline import pipeline_schedule, schedule_module, schedule_problem
from modelplan.plan.pipeline.profile import bubble_microbatches, chunk_shares, held_peak, inflight_microbatches, simulate
from modelplan.specs.plan import Schedule

CLOSED = [Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED]
"""The schedules whose modules state the profile in closed form."""


def _simulated_bubble(sched) -> Fraction:
    """Idle time of the busiest rank over its time per micro-batch, read off the unit-clock run."""
    tl = simulate(sched)
    busy = max(tl.busy(r) for r in range(sched.pp))
    return Fraction(tl.makespan - busy) * sched.num_microbatches / Fraction(busy)


def _grid():
    for pp in range(1, 9):
        for m in range(1, 4 * pp + 3):
            yield Schedule.ONE_F_ONE_B, pp, m, 1
    for pp in range(2, 9):
        for vpp in range(2, 6):
            for m in range(pp, 5 * pp + 1, pp):
                yield Schedule.INTERLEAVED, pp, m, vpp
    # the search's deep pipelines (1T: pp 64 with vpp 2, pp 32 with vpp 4), at the fewest micro-batches
    yield from [(Schedule.INTERLEAVED, 16, 16, 8), (Schedule.INTERLEAVED, 24, 48, 5), (Schedule.INTERLEAVED, 32, 32, 4),
                (Schedule.INTERLEAVED, 64, 64, 2), (Schedule.ONE_F_ONE_B, 64, 200, 1)]


GRID = list(_grid())


@pytest.mark.parametrize("kind", CLOSED)
def test_closed_forms_equal_the_simulation_on_a_grid(kind):
    """Every rank's peak of held activations and the busiest rank's idle time, as the module states
    them, equal what its own action lists give (held_peak of each rank's list, the unit clock)."""
    module = schedule_module(kind)
    checked = 0
    for k, pp, m, vpp in GRID:
        if k is not kind:
            continue
        sched = pipeline_schedule(kind, pp, m, vpp)
        assert module.bubble(pp, m, vpp) == _simulated_bubble(sched), (pp, m, vpp)
        for r in range(pp):
            assert module.held_peak(pp, m, vpp, r) == held_peak(sched.actions[r]), (pp, m, vpp, r)
        checked += 1
    assert checked > 50


@pytest.mark.parametrize("pp,m", [(2, 1), (4, 8), (8, 3), (8, 64)])
def test_1f1b_bubble_is_the_textbook_fraction(pp, m):
    """1F1B idles (p-1)/(m+p-1) of the step (Narayanan et al. 2021, sec. 2.2.1) and its first rank
    holds min(p, m) micro-batches (PipeDream-Flush: at most p in flight)."""
    b = bubble_microbatches(Schedule.ONE_F_ONE_B, pp, m)
    assert b / (m + b) == Fraction(pp - 1, m + pp - 1)
    assert inflight_microbatches(Schedule.ONE_F_ONE_B, pp, 0, m) == min(pp, m)
    assert inflight_microbatches(Schedule.ONE_F_ONE_B, pp, pp - 1, m) == 1


@pytest.mark.parametrize("pp,m,vpp", [(2, 4, 2), (4, 8, 2), (4, 4, 3), (8, 64, 4), (64, 128, 2)])
def test_interleaved_bubble_and_first_rank_memory_are_the_papers(pp, m, vpp):
    """Interleaved 1F1B idles (p-1)/(vm) of the ideal time (Narayanan et al. 2021, sec. 2.2.2); its
    first rank holds 1F1B's p micro-batches times 1 + (p-1)/(pv) (Korthikanti et al. 2022, sec.
    4.2.3; Megatron's memory estimator), all m when the warmup covers every forward."""
    b = bubble_microbatches(Schedule.INTERLEAVED, pp, m, vpp)
    assert b / m == Fraction(pp - 1, vpp * m)
    first = inflight_microbatches(Schedule.INTERLEAVED, pp, 0, m, vpp)
    assert first == min(pp * (1 + Fraction(pp - 1, pp * vpp)), m)


def test_a_closed_form_still_applies_the_schedules_rule():
    """The interleaved closed forms refuse what the schedule refuses (m not divisible by pp)."""
    with pytest.raises(ValueError, match="divisible by pp"):
        bubble_microbatches(Schedule.INTERLEAVED, 4, 6, 2)
    with pytest.raises(ValueError, match="divisible by pp"):
        inflight_microbatches(Schedule.INTERLEAVED, 4, 0, 6, 2)


@pytest.mark.parametrize("kind", list(Schedule))
def test_chunk_shares_are_the_forwards_each_chunk_runs(kind):
    """Each chunk's share of the micro-batches (from the layout's routes) is the count of its F
    actions in the schedule's lists over m (DualPipe: each chunk one direction, half of them)."""
    for pp in (2, 4):
        vpp = 2 if kind is Schedule.INTERLEAVED else 1
        m = next(n for n in range(2 * pp, 8 * pp) if schedule_problem(kind, pp, n, vpp) is None)
        sched = pipeline_schedule(kind, pp, m, vpp)
        shares = chunk_shares(kind, pp, vpp)
        assert shares == tuple(tuple(Fraction(sched.microbatches(r, c), m) for c in range(sched.layout.chunks(r)))
                               for r in range(pp))
        expected = Fraction(1, 2) if kind is Schedule.DUALPIPE else Fraction(1)
        assert all(s == expected for row in shares for s in row)
