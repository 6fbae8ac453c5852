"""The executed pipeline timeline: a Lamport clock rebuilt from every rank's step trace.

Each rank's clock advances by the cost of each step it ran (1 per chunk forward, 2 per chunk
backward); a step that consumed a message cannot start before the step that sent it ended on the
sender's clock (Lamport 1978, the clock condition). The clocks are logical: the bubble they show
comes from the order the ranks really ran and the messages they really exchanged, not from
compute speed.
"""

from __future__ import annotations

from dataclasses import dataclass

from modelplan.execute.pipeline import StepRecord


@dataclass(frozen=True)
class Span:
    """When one executed step ran on the logical clock."""

    record: StepRecord
    start: int
    end: int


def lamport_spans(traces: dict[int, list[StepRecord]]) -> dict[int, list[Span]]:
    """Per global rank, its steps with logical start and end times."""
    sent_at: dict[tuple[int, int, int], int] = {}  # (src, dst, number) -> sender's clock at send
    spans: dict[int, list[Span]] = {r: [] for r in traces}
    clock = {r: 0 for r in traces}
    cursor = {r: 0 for r in traces}
    remaining = sum(len(t) for t in traces.values())
    while remaining:
        progressed = False
        for rank, trace in traces.items():
            while cursor[rank] < len(trace):
                rec = trace[cursor[rank]]
                keys = [(src, rank, n) for src, n in rec.received]
                if any(k not in sent_at for k in keys):
                    break
                start = max([clock[rank]] + [sent_at[k] for k in keys])
                end = start + rec.cost
                for dst, n in rec.sent:
                    sent_at[(rank, dst, n)] = end
                spans[rank].append(Span(rec, start, end))
                clock[rank] = end
                cursor[rank] += 1
                remaining -= 1
                progressed = True
        if not progressed:
            raise ValueError("trace is inconsistent: a step consumed a message that no step sent")
    return spans


def bubble_fraction(spans: dict[int, list[Span]], pipeline: tuple[int, ...]) -> float:
    """Idle over busy time of one pipeline's busiest rank: (makespan - busy) / busy.

    The measure Narayanan et al. (SC'21, sec. 2.2) give as (p-1)/m for GPipe and 1F1B."""
    makespan = max((s.end for r in pipeline for s in spans[r]), default=0)
    busy = max(sum(s.end - s.start for s in spans[r]) for r in pipeline)
    return (makespan - busy) / busy if busy else 0.0
