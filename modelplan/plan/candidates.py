"""The values a search tries on each plan axis, and the one walk over them every model family's
search runs (`walk`): tp, cp, pp, dp, ep, micro-batch, sequence parallelism, recompute and
(schedule, vpp), each the user's choice (`SearchSpace`) or the default that can be valid on `gpus`
GPUs, each level checked by the grid's, batch's and schedule's rules and the family's own. The
family supplies what differs (`FamilyAxes`): which axes beyond tp, pp and dp it takes, its
divisibility rules as `Problem`s, how many pipeline units it has and its default vpps. What a
search does at a point (a network's ZeRO stages and step floor; a transformer's memory and
step-time floors over its wider dimensions) and what a pruned subtree counts for are the hooks of
the family's search program (`protocol.SearchProgram`), run by the one search (`search.py`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable, Iterator, NamedTuple, Protocol

from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.flush import flush_problem
from modelplan.plan.problems import Problem, Reason
from modelplan.plan.space import SearchSpace, _choose, divisors
from modelplan.plan.validate import batch_problem, grid_problems, tp_node_problem
from modelplan.specs.plan import Plan, Schedule


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
    pp_flush_microbatches: int | None = None
    """Micro-batches per schedule call (`TrainingSpec.pp_flush_microbatches`): each flush must
    meet the schedule's rule (`pipeline/flush.py`); None: one flush of the step's m."""

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


class FamilyAxes:
    """The axes a family's plans take beyond tp, pp and dp, with their rules. This base takes none
    (cp 1, ep 1, no sequence parallelism, one recompute setting): a network's plans."""

    recomputes: tuple[str, ...] = ("none",)
    """Recompute settings tried."""

    def cps(self, tp: int) -> list[int]:
        """Context-parallel sizes tried at this tp."""
        return [1]

    def cp_problems(self, tp: int, cp: int) -> list[Problem]:
        """The family's rules for a context-parallel size (at this tp)."""
        return []

    def eps(self, dp: int, tp: int = 1, cp: int = 1) -> list[int]:
        """Expert-parallel sizes tried at this dp (expert parallelism lives inside dp, or with an
        expert tensor-parallel size inside tp x dp x cp)."""
        return [1]

    def ep_problem(self, dp: int, ep: int, tp: int = 1, cp: int = 1) -> Problem | None:
        """The family's rule for an expert-parallel size (at this tp and cp)."""
        return None

    def sps(self, tp: int) -> list[bool]:
        """Sequence-parallel settings tried at this tp."""
        return [False]

    def schedule_problem(self, schedule: str, pp: int) -> Problem | None:
        """The engine's rule for a pipeline schedule at this pp (None: it runs every schedule)."""
        return None


class WalkFamily(Protocol):
    """What `walk` asks of a family: its axes (`FamilyAxes`) and its `PlanEvaluator` rules."""

    recomputes: tuple[str, ...]

    def cps(self, tp: int) -> list[int]: ...
    def cp_problems(self, tp: int, cp: int) -> list[Problem]: ...
    def eps(self, dp: int, tp: int = 1, cp: int = 1) -> list[int]: ...
    def ep_problem(self, dp: int, ep: int, tp: int = 1, cp: int = 1) -> Problem | None: ...
    def sps(self, tp: int) -> list[bool]: ...
    def tp_problems(self, tp: int) -> list[Problem]: ...
    def stage_problem(self, pp: int, vpp: int, num_stages: int) -> Problem | None: ...
    def schedule_problem(self, schedule: str, pp: int) -> Problem | None: ...
    def vpp_default(self, pp: int) -> list[int]: ...


class Subtree(NamedTuple):
    """Where a rule pruned the walk: the axes fixed so far (None: not yet), `mbs` the micro-batch
    sizes under it (None: every one of dp's), `ctx` what the search's `prepare` gave its grid."""

    tp: int
    cp: int
    pp: int | None = None
    dp: int | None = None
    ep: int | None = None
    mbs: list[int] | None = None
    sp: bool | None = None
    recompute: str | None = None
    ctx: Any = None


class Group(NamedTuple):
    """The points of the walk that pass every rule under one grid, micro-batch (m of them per
    step), sequence parallelism and recompute: one per (schedule, vpp) of `schedules`, with the
    search's `ctx` for its grid."""

    tp: int
    cp: int
    pp: int
    dp: int
    ep: int
    micro_batch: int
    num_microbatches: int
    sp: bool
    recompute: str
    schedules: list[tuple[str, int]]
    ctx: Any


def walk(family: WalkFamily, cands: Candidates, pruned: Callable[[Problem, Subtree], None],
         prepare: Callable[[int, int, int, int, int, list[int], list[tuple[str, int]]], Any] | None = None,
         ) -> Iterator[Group]:
    """Every point the candidates hold, in the order tp -> cp -> pp -> dp -> ep -> micro_batch ->
    sp -> recompute -> (schedule, vpp), grouped by all but the last. A level that breaks a rule
    is handed to `pruned` once with the subtree it drops: tp (the family's rules, then the
    node's, then cp's), the grid's size and the first stage (`stage_problem` at vpp 1), a batch
    with no micro-batch size, ep, the micro-batch's batch rule, the schedule's stages and rule
    (cached per (schedule, pp, vpp, m); handed over before the group's points, once per sp and
    recompute). `prepare(tp, cp, pp, dp, ep, mbs, schedules)`, once per grid, gives the `ctx`
    its points carry, or None to drop the grid (the search counted it)."""
    n, gb = cands.gpus, cands.global_batch
    rules: dict[tuple, Problem | None] = {}
    """The pipeline rules' verdict per (schedule, pp, vpp, num_microbatches)."""
    recomputes = family.recomputes
    for tp in cands.tps:
        sps = family.sps(tp)
        for cp in family.cps(tp):
            node = cands.tp_node_problem(tp)
            problems = family.tp_problems(tp) + ([node] if node else []) + family.cp_problems(tp, cp)
            if problems:
                pruned(problems[0], Subtree(tp, cp))
                continue
            for pp in cands.pps(tp * cp):
                svs = cands.schedules(pp, family.vpp_default(pp))
                stages = None  # the schedules' stage counts, read once a grid of pp passes its rules
                for dp in cands.dps(tp * cp, pp):
                    problem = (grid_problems(Plan(dp=dp, tp=tp, pp=pp, cp=cp), world_size=n)[0]
                               if tp * cp * pp * dp != n else family.stage_problem(pp, 1, pp))
                    if problem:
                        pruned(problem, Subtree(tp, cp, pp, dp))
                        continue
                    mbs = cands.microbatches(dp)
                    if not mbs:
                        pruned(cands.batch_problem(1, dp), Subtree(tp, cp, pp, dp))
                        continue
                    for ep in family.eps(dp, tp, cp):
                        problem = family.ep_problem(dp, ep, tp, cp)
                        if problem:
                            pruned(problem, Subtree(tp, cp, pp, dp, ep, mbs))
                            continue
                        ctx = prepare(tp, cp, pp, dp, ep, mbs, svs) if prepare is not None else ()
                        if ctx is None:
                            continue
                        if stages is None:
                            stages = [schedule_layout(sched, pp, vpp).num_stages for sched, vpp in svs]
                        # the grid's groups: micro_batch -> sp -> recompute, each with its valid schedules
                        for mb in mbs:
                            problem = cands.batch_problem(mb, dp)
                            if problem:
                                pruned(problem, Subtree(tp, cp, pp, dp, ep, [mb]))
                                continue
                            m = gb // (mb * dp)
                            valid, broken = [], []
                            for (sched, vpp), num_stages in zip(svs, stages):
                                rule = (sched, pp, vpp, m)
                                problem = rules.get(rule, False)
                                if problem is False:
                                    problem = rules[rule] = (family.stage_problem(pp, vpp, num_stages)
                                                             or family.schedule_problem(sched, pp)
                                                             or flush_problem(sched, pp, m, vpp, cands.pp_flush_microbatches))
                                if problem:
                                    broken.append(problem)
                                else:
                                    valid.append((sched, vpp))
                            for sp in sps:
                                for rc in recomputes:
                                    if broken:
                                        at = Subtree(tp, cp, pp, dp, ep, [mb], sp, rc, ctx)
                                        for problem in broken:
                                            pruned(problem, at)
                                    if valid:
                                        yield Group(tp, cp, pp, dp, ep, mb, m, sp, rc, valid, ctx)
