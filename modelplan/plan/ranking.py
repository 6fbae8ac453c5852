"""What every family's search keeps while it walks its space (`search.py`): the plans rejected,
counted by reason with one example each, the top-k plans by predicted step time, and the
`SearchResult` they make. A family's search supplies only its space and its evaluator."""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter
from typing import Any, Callable

from modelplan.plan.problems import Problem
from modelplan.plan.results import PlanEstimate, SearchResult


class Ranking:
    """Rejections by reason and the `top_k` fastest plans (a min-heap on -step time: its head is
    the slowest plan kept)."""

    def __init__(self, top_k: int) -> None:
        self.top_k = top_k
        self.start = time.perf_counter()
        self.heap: list[tuple] = []
        """(-step_time_s, tie-breaks..., item): larger is better; heap[0] is the worst kept."""
        self.rejected: Counter[str] = Counter()
        self.examples: dict[str, str] = {}
        self._closest_need = math.inf
        self.evaluated = 0
        """Plans priced (timed); a plan that does not fit counts under its reason instead."""
        self.bounded = 0
        """Plans dropped by a step-time bound without being priced."""

    def reject(self, problem: Problem, count: int = 1, need_bytes: float = 0.0) -> None:
        """Count `count` plans under the problem's reason; keep one example per reason (for
        memory: the plan that came closest to fitting)."""
        if count:
            reason = problem.reason.value
            self.rejected[reason] += count
            if reason not in self.examples or (need_bytes and need_bytes < self._closest_need):
                self.examples[reason] = problem.message
                if need_bytes:
                    self._closest_need = need_bytes

    def worst_s(self) -> float:
        """The step time a plan must beat to enter the top-k (inf while it is not full)."""
        return -self.heap[0][0] if len(self.heap) == self.top_k else math.inf

    def offer(self, item: tuple) -> None:
        """Keep `item` (-step_time_s, tie-breaks..., plan) if it is among the top-k so far."""
        if len(self.heap) < self.top_k:
            heapq.heappush(self.heap, item)
        elif item > self.heap[0]:
            heapq.heapreplace(self.heap, item)

    @property
    def full(self) -> bool:
        """Whether the top-k is full (a plan must then beat `worst_s` to enter)."""
        return len(self.heap) == self.top_k

    def best_first(self, frontier: list[tuple], visit: Callable[[tuple], tuple | None], waiting: int,
                   beyond: Callable[[float], bool]) -> None:
        """The bounded loop of every family's search: pop the entry of `frontier` with the least
        step-time floor, `(floor_s, seq, leaves, ...)` (`leaves`: the plans under it, `seq`
        unique), and `visit` it: it prices the entry's plans (offering, rejecting and counting
        them here) and returns None, or returns the entry again with a tighter floor to push back.
        Once `beyond(floor_s)` says no plan at or above that floor can change the result, every
        plan still waiting (`waiting` of them, in the entries' `leaves`) counts as bounded."""
        heapq.heapify(frontier)
        while frontier:
            entry = heapq.heappop(frontier)
            if beyond(entry[0]):
                self.bounded += waiting
                return
            again = visit(entry)
            if again is not None:
                heapq.heappush(frontier, again)
            else:
                waiting -= entry[2]

    def ranked(self) -> list[Any]:
        """The kept items' last field, fastest first."""
        return [item[-1] for item in sorted(self.heap, reverse=True)]

    def result(self, gpus: int, best: list[PlanEstimate]) -> SearchResult:
        """The search's result: the ranked plans and what was tried, rejected and bounded."""
        return SearchResult(gpus=gpus, best=best, evaluated=self.evaluated, bounded=self.bounded,
                            candidates=self.evaluated + self.bounded + sum(self.rejected.values()),
                            rejected=dict(self.rejected.most_common()), examples=self.examples,
                            wall_s=time.perf_counter() - self.start)
