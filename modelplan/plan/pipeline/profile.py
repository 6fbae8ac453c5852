"""Run a schedule's action lists on an idealised clock: the bubble and the held activations the
planner prices, read off the same lists the executor runs.

Clock: a forward takes `t_forward` per chunk, B `t_input_grad`, W `t_weight_grad`, and a B that
leaves no W (the fused backward of 1F1B) both. An action starts when its rank is free and its
inputs exist: F needs the previous stage's F of the micro-batch, B its own F and the next stage's
B, W its own B (Qi et al. 2024, sec. 2: W depends only on B). The planner's unit clock is
t_f = t_b = t_w = 1, so a fused backward is 2 forwards (Narayanan et al. 2021's t_b = 2 t_f) and a
split one the zero-bubble papers' T_F = T_B = T_W.

Activations: a micro-batch's activations on a chunk are held from its F until its weight
gradient is done (its W, or its fused B); a rank's peak, over its chunks, is the in-flight memory.

The search prices hundreds of (pp, m) pipelines with up to thousands of micro-batches, so the
profile simulates the fewest micro-batches of the schedule's steady regime (`Steady`): from there
each `period` more micro-batches add the same busy time to every rank and no idle time, and
change each rank's peak by a fixed amount, so the numbers for m follow exactly (tests compare the
two against the full simulation of every schedule). A schedule module may also state the two
numbers in closed form (`bubble`, `held_peak`: 1F1B's and Megatron's interleaved, the default
search's schedules), which the planner then reads without building its lists; a test checks each
closed form against the simulation of the module's own lists over a grid of (pp, vpp, m), so
the two cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache

from modelplan.plan.pipeline import pipeline_schedule, schedule_layout, schedule_module
from modelplan.plan.pipeline.actions import Action, ActionKind, PipelineSchedule
from modelplan.specs.plan import Schedule

F, B, W = ActionKind.F, ActionKind.B, ActionKind.W


@dataclass(frozen=True)
class Timeline:
    """Start and end time of every compute action of every pipeline rank, and the makespan."""

    starts: list[list[float]]
    ends: list[list[float]]
    makespan: float

    def busy(self, pp_rank: int) -> float:
        """Compute time of one rank."""
        return sum(e - s for s, e in zip(self.starts[pp_rank], self.ends[pp_rank]))

    def bubble_fraction(self) -> float:
        """Idle time over busy time of the busiest rank: (p-1)/m for GPipe/1F1B (Narayanan et al.)."""
        busy = max(self.busy(r) for r in range(len(self.starts)))
        return (self.makespan - busy) / busy


def simulate(schedule: PipelineSchedule, t_forward: float = 1, t_input_grad: float = 1,
             t_weight_grad: float = 1, t_p2p: float = 0) -> Timeline:
    """Run the compute actions on the clock of the module docstring (per chunk times; a message
    between two ranks adds `t_p2p`). Raises ValueError on an order that deadlocks."""
    pp, m, S = schedule.pp, schedule.num_microbatches, schedule.num_stages
    last, MS = S - 1, m * S
    split = schedule.split_backward
    # per rank, flat lists: the key each action completes, the (up to two) keys it needs, its cost;
    # key = kind * m * S + microbatch * S + stage (kind 0 F, 1 B, 2 W)
    enc = []
    for r, acts in enumerate(schedule.actions):
        stages = schedule.layout.rank_stages[r]
        keys, need1, need2, costs = [], [], [], []
        for kind, i, c, _, _ in acts:
            s = stages[c]
            base = i * S + s
            if kind is F:
                keys.append(base), need1.append(base - 1 if s else -1), need2.append(-1), costs.append(t_forward)
            elif kind is B:
                keys.append(MS + base), need1.append(base), need2.append(MS + base + 1 if s < last else -1)
                costs.append(t_input_grad if (r, c, i) in split else t_input_grad + t_weight_grad)
            else:
                keys.append(2 * MS + base), need1.append(MS + base), need2.append(-1), costs.append(t_weight_grad)
        enc.append((keys, need1, need2, costs, [a.overlap for a in acts]))
    owner = [[schedule.where(k // S % m, k % S)[0] for k in range(MS)]] if t_p2p else None
    done = [-1.0] * (3 * MS)
    waiting: dict[int, list[int]] = {}  # key -> ranks blocked on it
    starts = [[0.0] * len(e[0]) for e in enc]
    ends = [[0.0] * len(e[0]) for e in enc]
    cursor, clock = [0] * pp, [0.0] * pp
    ready = list(range(pp))
    while ready:
        r = ready.pop()
        keys, need1, need2, costs, overlap = enc[r]
        c, t, n, rs, re = cursor[r], clock[r], len(keys), starts[r], ends[r]
        while c < n:
            group = 2 if overlap[c] else 1  # an overlapped pair starts when both have their inputs
            start, blocked = t, None
            for k in range(c, c + group):
                for dep in (need1[k], need2[k]):
                    if dep < 0 or dep in keys[c:k]:
                        continue
                    end = done[dep]
                    if end < 0:
                        blocked = dep
                        break
                    if owner is not None and owner[0][dep % MS] != r:
                        end += t_p2p
                    if end > start:
                        start = end
                if blocked is not None:
                    break
            if blocked is not None:
                waiting.setdefault(blocked, []).append(r)
                break
            for k in range(c, c + group):
                t = start + costs[k]
                key = keys[k]
                rs[k], re[k], done[key] = start, t, t
                start = t
                if key in waiting:
                    ready.extend(waiting.pop(key))
            c += group
        cursor[r], clock[r] = c, t
    if any(cursor[r] < len(enc[r][0]) for r in range(pp)):
        stuck = {r: str(schedule.actions[r][cursor[r]]) for r in range(pp) if cursor[r] < len(enc[r][0])}
        raise ValueError(f"schedule deadlocks: ranks waiting at {stuck}")
    return Timeline(starts, ends, max((max(e) for e in ends if e), default=0.0))


def held_peak(actions: Sequence[Action]) -> int:
    """Most (micro-batch, chunk) activations one rank's actions hold at once (module docstring)."""
    split = {(a.microbatch, a.chunk) for a in actions if a.kind is W}
    held = peak = 0
    for a in actions:
        if a.kind is F:
            held += 1
            peak = max(peak, held)
        elif a.kind is W or (a.microbatch, a.chunk) not in split:
            held -= 1
    return peak


def _reduced(m: int, start: int, period: int) -> int:
    """The smallest micro-batch count >= start in m's residue class modulo period."""
    return start + (m - start) % period


@lru_cache(maxsize=1024)
def _idle(kind: Schedule, pp: int, m: int, vpp: int) -> tuple[int | float, int | float]:
    """(idle time, busy time) of the busiest rank on the unit clock."""
    timeline = simulate(pipeline_schedule(kind, pp, m, vpp))
    busy = max(timeline.busy(r) for r in range(pp))
    return timeline.makespan - busy, busy


@lru_cache(maxsize=4096)
def bubble_microbatches(kind: Schedule, pp: int, num_microbatches: int, vpp: int = 1) -> Fraction:
    """Idle time of the busiest rank in units of its time per micro-batch: the pipeline takes
    (m + this) micro-batch times ((p-1)/v for Megatron's schedules, Narayanan et al. 2021)."""
    module, m = schedule_module(kind), num_microbatches
    exact = getattr(module, "bubble", None)
    if exact is not None:
        _check(module, pp, m, vpp)
        return exact(pp, m, vpp)
    steady = module.steady(pp, vpp)
    if m > steady.timing_from:
        m = _reduced(m, steady.timing_from, steady.period)
    idle, busy = _idle(Schedule(kind), pp, m, vpp)
    return Fraction(idle) * m / Fraction(busy)


@lru_cache(maxsize=4096)
def inflight_microbatches(kind: Schedule, pp: int, pp_rank: int, num_microbatches: int, vpp: int = 1
                          ) -> int | Fraction:
    """Peak held activations of rank `pp_rank` in units of one micro-batch through all its chunks
    (1F1B: min(pp - r, m); GPipe: m; Megatron's interleaved: its warmup + 1 chunks / vpp)."""
    module, m = schedule_module(kind), num_microbatches
    chunks = schedule_layout(kind, pp, vpp).chunks(pp_rank)
    exact = getattr(module, "held_peak", None)
    if exact is not None:
        _check(module, pp, m, vpp)
        return _ratio(exact(pp, m, vpp, pp_rank), chunks)
    steady = module.steady(pp, vpp)

    def peak(n: int) -> int:  # one rank's list is enough (pipeline_schedule checks the rule for m)
        return held_peak(module.rank_actions(pp, n, vpp, pp_rank))

    if m <= steady.memory_from + 2 * steady.period:
        _check(module, pp, m, vpp)
        return Fraction(peak(m), chunks)
    m1 = _reduced(m, steady.memory_from, steady.period)
    p1, p2 = peak(m1), peak(m1 + steady.period)
    return Fraction(p1 + (p2 - p1) * ((m - m1) // steady.period), chunks)


def _check(module, pp: int, m: int, vpp: int) -> None:
    """ValueError with the schedule's rule when it cannot run this pipeline (as `pipeline_schedule`)."""
    problem = module.problem(pp, m, vpp)
    if problem is not None:
        raise ValueError(problem.message)


@lru_cache(maxsize=1024)
def chunk_shares(kind: Schedule, pp: int, vpp: int = 1) -> tuple[tuple[int | Fraction, ...], ...]:
    """Per pipeline rank and chunk, the fraction of a step's micro-batches that run through it
    (1 for Megatron's schedules; DualPipe's two chunks each see one direction, half of them): the
    routes of the layout weighted by the micro-batches `route_of` sends along each (tests check it
    against the forwards each chunk's list runs)."""
    module, m = schedule_module(kind), schedule_module(kind).steady(pp, vpp).timing_from
    layout = schedule_layout(kind, pp, vpp)
    route_of = getattr(module, "route_of", None)
    per_route = [0] * len(layout.routes)
    for route in (route_of(pp, m) if route_of is not None else [0] * m):
        per_route[route] += 1
    runs = {}
    for route, n in zip(layout.routes, per_route):
        for where in route:
            runs[where] = runs.get(where, 0) + n
    return tuple(tuple(_ratio(runs.get((r, c), 0), m) for c in range(layout.chunks(r))) for r in range(pp))


def _ratio(n: int, d: int) -> int | Fraction:
    """n / d exactly: an int when d divides n (the planner's common case, cheaper to build and add)."""
    return n // d if n % d == 0 else Fraction(n, d)


@lru_cache(maxsize=1024)
def boundary_messages(kind: Schedule, pp: int, vpp: int = 1) -> int | Fraction:
    """Stage-boundary messages per micro-batch on a rank's critical path: one per direction for
    each chunk a micro-batch passes on the rank (2 vpp for Megatron's schedules)."""
    hops = 2 * max(sum(shares) for shares in chunk_shares(kind, pp, vpp))
    return int(hops) if hops.denominator == 1 else hops
