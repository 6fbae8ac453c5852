"""`plan/ranking.py`, the bookkeeping every family's search shares. Expected values are worked by
hand from the offered step times and rejections."""

from __future__ import annotations

import math

from modelplan.plan.problems import Problem, Reason
from modelplan.plan.ranking import Ranking


def test_top_k_keeps_the_fastest_fastest_first():
    """Offer 5, 3, 9, 1, 4 s with k = 3: 1, 3, 4 stay; the bar to enter is then 4 s."""
    rank = Ranking(3)
    assert rank.worst_s() == math.inf  # not full: anything enters
    for seq, t in enumerate([5.0, 3.0, 9.0, 1.0, 4.0]):
        rank.offer((-t, -seq, f"plan {t:g}"))
    assert rank.ranked() == ["plan 1", "plan 3", "plan 4"]
    assert rank.worst_s() == 4.0


def test_equal_times_keep_the_first_offered():
    """Ties broken by -sequence: the earlier plan ranks first and a later equal one cannot enter."""
    rank = Ranking(1)
    rank.offer((-2.0, 0, "first"))
    rank.offer((-2.0, -1, "second"))
    assert rank.ranked() == ["first"]


def test_rejections_counted_by_reason_with_the_closest_memory_example():
    """3 + 1 memory rejections, 2 batch ones: counts per reason; the memory example is the plan
    needing the fewest bytes (90 < 120), the batch example the first seen; candidates add up."""
    rank = Ranking(2)
    rank.reject(Problem(Reason.MEMORY, "needs 120"), 3, need_bytes=120.0)
    rank.reject(Problem(Reason.BATCH, "batch a"), 2)
    rank.reject(Problem(Reason.MEMORY, "needs 90"), 1, need_bytes=90.0)
    rank.reject(Problem(Reason.BATCH, "batch b"), 1)
    rank.reject(Problem(Reason.BATCH, "never counted"), 0)
    rank.evaluated, rank.bounded = 7, 4
    result = rank.result(8, [])
    assert result.rejected == {"out of memory": 4, "batch divisibility": 3}
    assert result.examples == {"out of memory": "needs 90", "batch divisibility": "batch a"}
    assert result.candidates == 7 + 4 + 4 + 3


def test_best_first_stops_at_the_first_floor_the_top_k_beats():
    """Floors 0, 5, 1, 10 (2 plans each, each plan 0.5 s above its floor), top 1: the floor-0
    entry is priced (0.5 s), the next floor (1) cannot beat it, so the 3 entries left (6 plans)
    count as bounded and nothing else is visited."""
    rank = Ranking(1)
    frontier = [(f, i, 2, f + 0.5) for i, f in enumerate([0.0, 5.0, 1.0, 10.0])]
    seen = []

    def visit(entry):
        seen.append(entry[0])
        rank.offer((-entry[3], -entry[1], entry[3]))

    rank.best_first(frontier, visit, 8, lambda floor: rank.full and floor >= rank.worst_s())
    assert seen == [0.0] and rank.bounded == 6 and rank.ranked() == [0.5]


def test_best_first_pushes_a_refined_entry_back():
    """An entry whose visit returns it with a tighter floor (3) is visited again after the entry of
    floor 2, in floor order."""
    rank = Ranking(5)
    frontier = [(0.0, 0, 1, "refine"), (2.0, 1, 1, "b")]
    seen = []

    def visit(entry):
        seen.append((entry[0], entry[3]))
        if entry[3] == "refine":
            return (3.0, entry[1], 1, "a")
        return None

    rank.best_first(frontier, visit, 2, lambda floor: False)
    assert seen == [(0.0, "refine"), (2.0, "b"), (3.0, "a")] and rank.bounded == 0
