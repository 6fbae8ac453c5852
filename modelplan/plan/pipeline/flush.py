"""Pipeline flushes: a step's micro-batches split over several calls of the pipeline schedule.

Megatron-LM runs all of a step's m micro-batches through one schedule call (one flush). Engines
that accumulate gradients OUTSIDE the schedule call it once per accumulation step with only
`per_flush` micro-batches: NeMo AutoModel's benchmark / train recipes call
`schedule.step(...)` once per GA step, each with n_microbatches = local_batch_size //
pp_microbatch_size (nemo_automodel/components/distributed/pipelining/functional.py
`build_pipeline_schedule`), GA steps = global_batch_size // (local_batch_size * dp_size)
(nemo_automodel/recipes/llm/benchmark.py); torchtitan the same (local_batch_size //
pipeline_parallel_microbatch_size per call). Each flush fills and drains the pipeline: the
bubble is paid once per flush ((p-1)/v micro-batch times for 1F1B / interleaved, Narayanan et
al. 2021 sec. 2.2), less what a flush's fill overlaps of the one before's drain (nothing when
stage 0's last backward ends the flush, as in 1F1B and interleaved; ZB-V's trailing weight
gradients can overlap the next flush), and a rank holds at most one flush's micro-batches in flight. As data
(`flushed_schedule`): each flush's schedule, one after the other, its micro-batches numbered on
from the flushes before; the executor runs that list and verify checks what ran against it.
"""

from __future__ import annotations

from dataclasses import replace
from fractions import Fraction
from functools import lru_cache

from modelplan.plan.pipeline import pipeline_schedule, schedule_module, schedule_problem
from modelplan.plan.pipeline.actions import PipelineSchedule
from modelplan.plan.pipeline.profile import bubble_microbatches, inflight_microbatches, simulate
from modelplan.plan.problems import Problem
from modelplan.specs.plan import Schedule


def flush_sizes(num_microbatches: int, per_flush: int | None) -> tuple[int, ...]:
    """Micro-batches of each schedule call of a step: m in one flush when `per_flush` is None or
    >= m, else full flushes of `per_flush` and one of the remainder."""
    m = num_microbatches
    if per_flush is None or per_flush >= m:
        return (m,)
    full, rest = divmod(m, per_flush)
    return (per_flush,) * full + ((rest,) if rest else ())


def step_bubble_microbatches(kind: Schedule | str, pp: int, num_microbatches: int, vpp: int = 1,
                             per_flush: int | None = None) -> Fraction:
    """Idle time of the busiest rank over the step, in micro-batch times: each flush's bubble
    (`profile.bubble_microbatches`), summed (1F1B: (pp - 1) per flush), less the overlap of each
    pair of consecutive flushes (`flush_overlap`)."""
    kind = Schedule(kind)
    sizes = flush_sizes(num_microbatches, per_flush)
    paid = sum((bubble_microbatches(kind, pp, n, vpp) * sizes.count(n) for n in set(sizes)), Fraction(0))
    return paid - sum((flush_overlap(kind, pp, a, b, vpp) for a, b in zip(sizes, sizes[1:])), Fraction(0))


@lru_cache(maxsize=1024)
def flush_overlap(kind: Schedule, pp: int, first: int, second: int, vpp: int = 1) -> Fraction:
    """Idle micro-batch times two consecutive flushes (`first` then `second` micro-batches) save
    against paying both bubbles: the second's fill running beside the first's drain. 0 for the
    schedules with a closed-form bubble (1F1B, interleaved): stage 0's backward of the flush's
    last micro-batch waits for every other stage's and ends the flush on rank 0, which then starts
    the next flush's first forward, so no stage can start it earlier; else read off the two
    flushes' action lists on the profile's unit clock (`profile.simulate`)."""
    if getattr(schedule_module(kind), "bubble", None) is not None:
        return Fraction(0)
    n = first + second
    timeline = simulate(flushed_schedule(kind, pp, n, vpp, first))
    busy = max(timeline.busy(r) for r in range(pp))
    pair = Fraction(timeline.makespan - busy) * n / Fraction(busy)  # profile.bubble_microbatches' units
    return bubble_microbatches(kind, pp, first, vpp) + bubble_microbatches(kind, pp, second, vpp) - pair


def flush_microbatches(num_microbatches: int, per_flush: int | None) -> int:
    """Micro-batches of the largest flush: what a rank's schedule holds at once."""
    return flush_sizes(num_microbatches, per_flush)[0]


def step_inflight_microbatches(kind: Schedule | str, pp: int, pp_rank: int, num_microbatches: int, vpp: int = 1,
                               per_flush: int | None = None) -> int | Fraction:
    """Peak held activations of rank `pp_rank` over the step: the largest flush's
    (`profile.inflight_microbatches`; a flush ends with every backward done, so nothing carries
    over to the next)."""
    return inflight_microbatches(Schedule(kind), pp, pp_rank, flush_microbatches(num_microbatches, per_flush), vpp)


def flush_problem(kind: Schedule | str, pp: int, num_microbatches: int, vpp: int = 1,
                  per_flush: int | None = None) -> Problem | None:
    """The rule `kind` breaks for one of the step's flushes (None: every flush can run)."""
    for n in sorted(set(flush_sizes(num_microbatches, per_flush)), reverse=True):
        problem = schedule_problem(kind, pp, n, vpp)
        if problem is not None:
            return problem
    return None


def flushed_schedule(kind: Schedule | str, pp: int, num_microbatches: int, vpp: int = 1,
                     per_flush: int | None = None) -> PipelineSchedule:
    """Every pipeline rank's actions over the step's flushes (`flush_sizes`): flush k's own
    schedule (`pipeline_schedule` of its micro-batches) after flush k-1's, micro-batch i of flush
    k numbered i + the micro-batches of the flushes before. One flush: `pipeline_schedule`."""
    sizes = flush_sizes(num_microbatches, per_flush)
    if len(sizes) == 1:
        return pipeline_schedule(kind, pp, num_microbatches, vpp)
    parts, start = [], 0
    for n in sizes:
        parts.append((start, pipeline_schedule(kind, pp, n, vpp)))
        start += n
    actions = tuple(tuple(a._replace(microbatch=a.microbatch + first) for first, part in parts for a in part.actions[r])
                    for r in range(pp))
    routes = tuple(part.route(i) for _, part in parts for i in range(part.num_microbatches)) \
        if parts[0][1].route_of else ()
    return replace(parts[0][1], num_microbatches=num_microbatches, actions=actions, route_of=routes)
