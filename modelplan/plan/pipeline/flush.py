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
al. 2021 sec. 2.2), and a rank holds at most one flush's micro-batches in flight.
"""

from __future__ import annotations

from fractions import Fraction

from modelplan.plan.pipeline import schedule_problem
from modelplan.plan.pipeline.profile import bubble_microbatches, inflight_microbatches
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
    (`profile.bubble_microbatches`), summed (1F1B: (pp - 1) per flush)."""
    sizes = flush_sizes(num_microbatches, per_flush)
    return sum((bubble_microbatches(Schedule(kind), pp, n, vpp) * sizes.count(n) for n in set(sizes)),
               Fraction(0))


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
