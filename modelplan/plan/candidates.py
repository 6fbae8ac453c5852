"""The values a search tries on each plan axis, for every model family: tp, pp, dp, micro-batch,
(schedule, vpp) and ZeRO stage, each the user's choice (`SearchSpace`) or the default that can be
valid on `gpus` GPUs. The family supplies what only it knows through its evaluator
(`plan/protocol.py`): how many pipeline units it has, its default vpps, its own rules as
`Problem`s. The transformer search (`search.py`) walks these axes with its memory and step-time
bounds in between; `walk` is the plain walk every other family's search uses."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Iterator

from modelplan.plan.pipeline import schedule_layout, schedule_problem
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.space import SearchSpace, _choose, divisors
from modelplan.plan.validate import batch_problem, grid_problems, tp_node_problem
from modelplan.specs.plan import Plan, Schedule

if TYPE_CHECKING:
    from modelplan.plan.protocol import PlanEvaluator


@dataclass(frozen=True)
class Candidates:
    """Per-axis values of a search of `gpus` GPUs (nodes of `gpus_per_node`) for a global batch."""

    space: SearchSpace
    gpus: int
    gpus_per_node: int
    global_batch: int
    units: int
    """What pp * vpp may not exceed (a transformer's layers, a network's units): the cap of a vpp range."""
    max_microbatches: int | None = None
    """Default micro-batch sizes give at most this many micro-batches per step (None: no cap)."""

    @cached_property
    def zeros(self) -> list[int]:
        return self.space.zero if self.space.zero is not None else [0, 1, 2, 3]

    @cached_property
    def schedule_kinds(self) -> list[str]:
        """Default 1f1b and interleaved (`SearchSpace.schedule`)."""
        return self.space.schedule or [Schedule.ONE_F_ONE_B, Schedule.INTERLEAVED]

    @cached_property
    def tps(self) -> list[int]:
        """Divisors of the GPU count within a node (any, with `allow_tp_across_nodes`), at most `max_tp`."""
        n, gpn, space = self.gpus, self.gpus_per_node, self.space
        default = [t for t in divisors(n) if space.allow_tp_across_nodes or t <= gpn]
        return [t for t in _choose(space.tp, default, n) if space.max_tp is None or t <= space.max_tp]

    def tp_node_problem(self, tp: int) -> Problem | None:
        """tp larger than a node, unless the space allows it."""
        return None if self.space.allow_tp_across_nodes else tp_node_problem(tp, self.gpus_per_node)

    def pps(self, tp: int) -> list[int]:
        """Divisors of gpus / tp (`tp`: every axis but pp and dp, tp * cp), or those a fixed dp leaves."""
        n, space = self.gpus, self.space
        if isinstance(space.dp, list):
            default = sorted({n // (tp * d) for d in space.dp if n % (tp * d) == 0})
        else:
            default = divisors(n // tp) if n % tp == 0 else []
        return _choose(space.pp, default, n)

    def dps(self, tp: int, pp: int) -> list[int]:
        """The dp that fills the GPUs (or the user's, checked by the grid rules)."""
        n = self.gpus
        return _choose(self.space.dp, [n // (tp * pp)] if n % (tp * pp) == 0 else [], n)

    @cached_property
    def batch_split(self) -> int:
        """Every batch a plan runs (global and ramp-up) is a multiple of dp x micro_batch iff this is."""
        return math.gcd(self.global_batch, *(self.space.batch_splits or []))

    def microbatches(self, dp: int) -> list[int]:
        """Divisors of batch_split / dp (at most `max_microbatches` micro-batches each), or the user's."""
        split, gb, cap = self.batch_split, self.global_batch, self.max_microbatches
        default = divisors(split // dp) if split % dp == 0 else []
        if cap is not None:
            default = [b for b in default if gb // (dp * b) <= cap]
        return _choose(self.space.micro_batch, default, gb)

    def batch_problem(self, micro_batch: int, dp: int) -> Problem | None:
        """The global batch's rule, then each ramp-up batch's."""
        problem = batch_problem(self.global_batch, micro_batch, dp)
        for other in self.space.batch_splits or []:
            if problem is None and other % (micro_batch * dp):
                problem = Problem(Reason.BATCH, f"micro_batch * dp ({micro_batch} * {dp} = {micro_batch * dp}) "
                                  f"must divide the ramp-up batch ({other})")
        return problem

    def schedules(self, pp: int, vpp_default: list[int]) -> list[tuple[str, int]]:
        """(schedule, vpp): every schedule asked for with vpp 1, interleaved with the family's
        default vpps (`vpp_default`; pp 1 has none: only a vpp the user asked for is tried, and
        rejected) or the user's; a user's vpp keeps only the pairs with that vpp."""
        kinds, space = self.schedule_kinds, self.space
        out = [(s, 1) for s in kinds if s != Schedule.INTERLEAVED]
        if Schedule.INTERLEAVED in kinds:
            out += [(Schedule.INTERLEAVED, v) for v in _choose(space.vpp, vpp_default if pp > 1 else [], self.units)
                    if v >= 2]
        if space.vpp is not None:
            allowed = set(_choose(space.vpp, [], self.units))
            out = [(s, v) for s, v in out if v in allowed]
        return out


def walk(ev: PlanEvaluator, cands: Candidates) -> Iterator[Plan | Problem]:
    """Every plan the candidates hold, in the order tp -> pp -> dp -> micro_batch -> (schedule,
    vpp) -> zero; a point that breaks a rule comes as its Problem instead (once for the subtree it
    prunes), the family's rules from its evaluator, the grid's, batch's and schedule's shared."""
    n = cands.gpus
    for tp in cands.tps:
        problems = [p for p in [cands.tp_node_problem(tp)] if p] or ev.tp_problems(tp)
        if problems:
            yield problems[0]
            continue
        for pp in cands.pps(tp):
            problem = ev.stage_problem(pp, 1, pp)
            if problem:
                yield problem
                continue
            for dp in cands.dps(tp, pp):
                grid = grid_problems(Plan(dp=dp, tp=tp, pp=pp), world_size=n)
                if grid:
                    yield grid[0]
                    continue
                mbs = cands.microbatches(dp)
                if not mbs:
                    yield cands.batch_problem(1, dp)
                    continue
                svs = cands.schedules(pp, ev.vpp_default(pp))
                for mb in mbs:
                    problem = cands.batch_problem(mb, dp)
                    if problem:
                        yield problem
                        continue
                    m = cands.global_batch // (mb * dp)
                    for sched, vpp in svs:
                        problem = (ev.stage_problem(pp, vpp, schedule_layout(sched, pp, vpp).num_stages)
                                   or schedule_problem(sched, pp, m, vpp))
                        if problem:
                            yield problem
                            continue
                        for zero in cands.zeros:
                            yield Plan(dp=dp, tp=tp, pp=pp, vpp=vpp, micro_batch=mb, schedule=sched, zero=zero)
