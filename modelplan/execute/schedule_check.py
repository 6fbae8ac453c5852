"""Properties of the executed pipeline trace, derived without the schedule generator.

`verify` also compares each rank's executed steps with the schedule that drove it; that cannot
see a wrong schedule. These checks read only what ran (each rank's compute steps with their
stage and their times on the Lamport clock of `timeline.py`) and the plan's pp, vpp and number
of micro-batches, and compare with closed forms from the papers:

- coverage: every micro-batch runs one forward and one backward (and at most one weight-gradient
  step W) on every virtual stage of its pipeline;
- forward before backward on each stage, W after its B; across stages the forward of stage s
  starts after stage s-1's forward ended and the backward of stage s after stage s+1's backward;
- warm-up: forwards a rank runs before its first backward: the warm-up forwards plus the first
  steady-state one (GPipe all m; 1F1B pp - r, capped at m: Narayanan et al. SC'21 sec. 2.2.1,
  PipeDream-Flush; interleaved (pp - r - 1) * 2 + (vpp - 1) * pp + 1, capped at m * vpp: Megatron-LM
  `schedules.py` `get_num_warmup_microbatches` + 1);
- in flight: micro-batch chunks whose forward ran and whose last backward step has not, never
  above that same count (pp - r for 1F1B, the activation bound of Narayanan et al.);
- bubble: (makespan - busy) / busy of the busiest rank from the executed times, against
  (p - 1) / m, or (p - 1) / (v * m) interleaved (Narayanan et al. SC'21 sec. 2.2.1 and 2.2.2).

Schedules without a closed form here get the coverage and dependency rows only.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from modelplan.execute.report import VerifyRow
from modelplan.execute.timeline import Span
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.flush import flush_sizes
from modelplan.specs.plan import Plan


@dataclass(frozen=True)
class Ran:
    """One executed compute step as the trace shows it."""

    kind: str
    """F, B (input gradient, or the whole backward) or W (weight gradient)."""
    microbatch: int
    stage: int
    start: int
    end: int


def executed(spans: list[Span]) -> list[Ran]:
    """A rank's spans as (kind, micro-batch, stage, start, end), in executed order."""
    out = []
    for s in spans:
        kind = s.record.step.kind
        out.append(Ran(str(getattr(kind, "value", kind)), s.record.step.microbatch, s.record.stage, s.start, s.end))
    return out


def warmup_closed_form(schedule: str, pp: int, pp_rank: int, m: int, vpp: int) -> int | None:
    """Forwards before the first backward on `pp_rank`, which is also the most micro-batch chunks
    it may hold in flight (None: no closed form for the schedule)."""
    if schedule == "gpipe":
        return m
    if schedule == "1f1b":
        return min(pp - pp_rank, m)  # PipeDream-Flush: pp - r - 1 warm-up + 1 (Narayanan et al. SC'21, fig. 4)
    if schedule == "interleaved":  # Megatron-LM get_num_warmup_microbatches + 1
        return min((pp - pp_rank - 1) * 2 + (vpp - 1) * pp + 1, m * vpp)
    return None


def bubble_closed_form(schedule: str, pp: int, m: int, vpp: int) -> tuple[float, str] | None:
    """(bubble fraction, formula) of the schedule, or None."""
    if schedule in ("gpipe", "1f1b"):
        return (pp - 1) / m, f"(p-1)/m = {pp - 1}/{m}"  # Narayanan et al. SC'21, sec. 2.2.1
    if schedule == "interleaved":
        return (pp - 1) / (vpp * m), f"(p-1)/(v*m) = {pp - 1}/({vpp}*{m})"  # sec. 2.2.2
    return None


def _row(name: str, problems: list[str], ok_detail: str, measured=None, expected=None) -> VerifyRow:
    detail = ok_detail if not problems else f"{len(problems)} problem(s): " + "; ".join(problems[:3])
    return VerifyRow(name=name, passed=not problems, detail=detail, measured=measured, expected=expected)


def _coverage(traces: dict[int, list[Ran]], pipeline: tuple[int, ...], m: int, stages: int) -> list[str]:
    seen = Counter((r.kind, r.microbatch, r.stage) for rank in pipeline for r in traces[rank])
    problems = []
    for i in range(m):
        for s in range(stages):
            for kind in ("F", "B"):
                if seen[(kind, i, s)] != 1:
                    problems.append(f"pipeline {pipeline}: {kind} of micro-batch {i} on stage {s} ran "
                                    f"{seen[(kind, i, s)]} times")
            if seen[("W", i, s)] > 1:
                problems.append(f"pipeline {pipeline}: W of micro-batch {i} on stage {s} ran {seen[('W', i, s)]} times")
    extra = [k for k in seen if not (0 <= k[1] < m and 0 <= k[2] < stages)]
    problems += [f"pipeline {pipeline}: {k[0]} of micro-batch {k[1]} on stage {k[2]} is outside the plan"
                 for k in extra]
    return problems


def _dependencies(traces: dict[int, list[Ran]], pipeline: tuple[int, ...], stages: int) -> tuple[list[str], list[str]]:
    """(forward-before-backward problems, cross-stage problems)."""
    at = {(r.kind, r.microbatch, r.stage): r for rank in pipeline for r in traces[rank]}
    order, cross = [], []
    for (kind, i, s), r in at.items():
        f = at.get(("F", i, s))
        if kind == "B" and f is not None and r.start < f.end:
            order.append(f"B of micro-batch {i} on stage {s} starts at {r.start} before its forward ends at {f.end}")
        if kind == "W" and ("B", i, s) in at and r.start < at[("B", i, s)].end:
            order.append(f"W of micro-batch {i} on stage {s} starts before its B ends")
        before = ("F", i, s - 1) if kind == "F" and s > 0 else ("B", i, s + 1) if kind == "B" and s < stages - 1 else None
        if before is not None and before in at and r.start < at[before].end:
            cross.append(f"{kind} of micro-batch {i} on stage {s} starts at {r.start} before {before[0]} on stage "
                         f"{before[2]} ends at {at[before].end}")
    return order, cross


def _warmup_and_inflight(trace: list[Ran]) -> tuple[int, int]:
    """(forwards before the first backward, peak chunks in flight) of one rank."""
    warmup = next((k for k, r in enumerate(trace) if r.kind != "F"), len(trace))
    has_w = {(r.microbatch, r.stage) for r in trace if r.kind == "W"}
    live = peak = 0
    for r in trace:
        if r.kind == "F":
            live += 1
            peak = max(peak, live)
        elif r.kind == ("W" if (r.microbatch, r.stage) in has_w else "B"):
            live -= 1
    return warmup, peak


def check_executed_schedule(spans: dict[int, list[Span]], pipelines: list[tuple[int, ...]], plan: Plan,
                            num_microbatches: int, per_flush: int | None = None) -> list[VerifyRow]:
    """Rows for the properties in the module docstring, over every pipeline of the run; with
    pipeline flushes (`per_flush`, `plan/pipeline/flush.py flush_sizes`) the warm-up and in-flight
    bounds are the first (largest) flush's and the bubble each flush's closed form, weighted by
    its share of the step's micro-batches (the flushes run one after the other)."""
    m, pp, vpp, kind = num_microbatches, plan.pp, plan.vpp, plan.schedule
    sizes = flush_sizes(m, per_flush)
    stages = schedule_layout(kind, pp, vpp).num_stages  # pp * vpp; 2 pp for ZB-V and DualPipe
    traces = {rank: executed(s) for rank, s in spans.items()}
    coverage, order, cross = [], [], []
    for p in pipelines:
        coverage += _coverage(traces, p, m, stages)
        o, c = _dependencies(traces, p, stages)
        order, cross = order + o, cross + c
    rows = [_row("pipeline coverage", coverage, f"{len(pipelines)} pipelines: every micro-batch's F and B once "
                 f"on each of {stages} stages"),
            _row("forward before backward", order, "on every stage of every pipeline"),
            _row("stage dependencies", cross, "F after the previous stage's F, B after the next stage's B")]
    if warmup_closed_form(kind, pp, 0, m, vpp) is None:
        return rows
    warm, flight, worst = [], [], 0
    for p in pipelines:
        for r, rank in enumerate(p):
            want = warmup_closed_form(kind, pp, r, sizes[0], vpp)
            got, peak = _warmup_and_inflight(traces[rank])
            worst = max(worst, peak)
            if got != want:
                warm.append(f"rank {rank} (pp rank {r}) ran {got} forwards before its first backward, {kind} needs {want}")
            if peak > want:
                flight.append(f"rank {rank} (pp rank {r}) held {peak} micro-batch chunks in flight, {kind} allows {want}")
    rows.append(_row("warm-up forwards", warm, f"{kind}: pp rank r warms up with the closed-form count"))
    rows.append(_row("in-flight micro-batches", flight, f"peak {worst} chunks in flight on a rank (bound per pp "
                     "rank r: its forwards before the first backward, pp - r for 1F1B)", measured=worst))
    closed = bubble_closed_form(kind, pp, m, vpp)
    if closed is not None:
        expected, formula = closed
        if len(sizes) > 1:
            per = [bubble_closed_form(kind, pp, n, vpp) for n in sizes]
            expected = sum(b * n for (b, _), n in zip(per, sizes)) / m
            formula = " + ".join(f"{f} x {n}/{m}" for (_, f), n in zip(per, sizes))
        measured = [_bubble(traces, p) for p in pipelines]
        bad = [f"pipeline {p}: {b:.4g}" for p, b in zip(pipelines, measured) if abs(b - expected) > 1e-12]
        worst_b = max(measured, key=lambda b: abs(b - expected))
        rows.append(_row("measured bubble", bad, f"{len(pipelines)} pipelines from executed times; {formula}",
                         measured=worst_b, expected=expected))
    return rows


def _bubble(traces: dict[int, list[Ran]], pipeline: tuple[int, ...]) -> float:
    """(makespan - busy) / busy of the pipeline's busiest rank, from the executed times."""
    makespan = max((r.end for rank in pipeline for r in traces[rank]), default=0)
    busy = max(sum(r.end - r.start for r in traces[rank]) for rank in pipeline)
    return (makespan - busy) / busy if busy else 0.0
