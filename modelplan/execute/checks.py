"""The checks of `verify`: the executed run against the reference and against the plan's data.

Each function returns report rows. Tensors are reassembled from the pieces every rank reports
(its shard of each unit's flat buffer), replicas must agree bit for bit, and every element of
every parameter must be covered. Relative error of a tensor is max|x - ref| / max|ref|, where
max|ref| is floored at 1e-6 of the largest value of that kind in the model (a key bias has an
exactly-zero gradient under softmax, computed as float64 noise).
"""

from __future__ import annotations

from collections import defaultdict

import numpy as np

from modelplan.comm.communicator import Ledger
from modelplan.comm.exact import bytes_per_rank
from modelplan.comm.ops import Axis, Collective
from modelplan.execute.engine import RankResult
from modelplan.execute.params import ParamDef
from modelplan.execute.report import VerifyRow
from modelplan.execute.timeline import Span, bubble_fraction
from modelplan.plan.commlist import EXECUTOR_ALGO, CommItem
from modelplan.plan.dims import ParallelDims
from modelplan.plan.pipeline import PipelineSchedule, schedule_module
from modelplan.plan.pipeline.flush import flush_sizes, step_bubble_microbatches
from modelplan.plan.shard import RankElements
from modelplan.specs.plan import Plan

REL_TOL = 1e-9
ITEMSIZE = 8  # float64
SCALE_FLOOR = 1e-4
"""Smallest scale a tensor is compared at, as a share of the largest tensor's magnitude. A small
tensor that is a sum with cancellation (a BatchNorm bias gradient: the sum of dy over batch and
space, whose terms are far larger than the sum) keeps the rounding of its terms, which a sharded
run reorders: a few float64 ulps of those terms (2.2e-16 each) is above 1e-9 of the sum. At 1e-4 the
absolute bar is 1e-13 of the largest tensor (about 450 ulps), still far below any real fault, which
moves a tensor by a share of its own size (EfficientNet-B7 at tp 2 failed at 1e-6: 1.2e-15 of the
largest tensor on one BatchNorm bias)."""


def reassemble(results: list[RankResult], defs: list[ParamDef], kind: str) -> tuple[dict[str, np.ndarray], list[str]]:
    """Full tensors from every rank's pieces (`kind` 'grads' or 'params'), and the problems found."""
    full = {d.name: np.full(d.shape, np.nan) for d in defs}
    problems = []
    for r in results:
        for piece in getattr(r, kind):
            lo, hi = piece.start, piece.start + piece.values.size
            for e in r.layouts[piece.unit]:
                a, b = max(lo, e.offset), min(hi, e.offset + e.numel)
                if a >= b:
                    continue
                target = full[e.name]
                where = np.arange(target.size).reshape(target.shape)[tuple(slice(x, y) for x, y in e.index)]
                idx = where.reshape(-1)[a - e.offset : b - e.offset]
                vals = piece.values[a - lo : b - lo]
                old = target.flat[idx]
                seen = ~np.isnan(old)
                if np.any(old[seen] != vals[seen]):
                    problems.append(f"{e.name}: rank {r.rank} differs from another replica by "
                                    f"{np.max(np.abs(old[seen] - vals[seen])):.1e}")
                target.flat[idx] = vals
    for name, t in full.items():
        missing = int(np.isnan(t).sum())
        if missing:
            problems.append(f"{name}: {missing} of {t.size} elements held by no rank")
    return full, problems


def _fraction(r: float) -> str:
    """x2, x1/4, x0.731: a ratio as a user reads it."""
    for n in range(1, 65):
        if abs(r - n) <= 1e-9 * n:
            return f"x{n}"
        if abs(r - 1 / n) <= 1e-9 / n:
            return f"x1/{n}"
        if abs(r + n) <= 1e-9 * n:
            return f"x-{n}"
    return f"x{r:.4g}"


def scale_ratio(got: np.ndarray, ref: np.ndarray) -> float | None:
    """r when got equals r * ref to 1e-9 (least squares over the finite elements), else None."""
    ok = np.isfinite(got)
    g, e = got[ok], ref[ok]
    denom = float(np.dot(e, e))
    if not g.size or denom == 0.0:
        return None
    r = float(np.dot(g, e)) / denom
    return r if float(np.max(np.abs(g - r * e))) <= REL_TOL * float(np.max(np.abs(e))) else None


def scale_hint(got: dict[str, np.ndarray], ref: dict[str, np.ndarray], bad: list[str],
               factors: dict[str, int] | None = None) -> str:
    """'all N failing tensors are the expected ones x2 (= dp)' when one ratio explains them all,
    else the ratio of each that is a clean multiple; '' when none is."""
    ratios = {n: scale_ratio(got[n].reshape(-1), ref[n].reshape(-1)) for n in bad}
    scaled = {n: r for n, r in ratios.items() if r is not None}
    if not scaled:
        return ""

    def named(r: float) -> str:
        text = _fraction(r)
        names = [f"{k}" for k, v in (factors or {}).items() if v > 1 and abs(r - v) <= 1e-9 * v]
        names += [f"1/{k}" for k, v in (factors or {}).items() if v > 1 and abs(r - 1 / v) <= 1e-9 / v]
        return text + (f" (= {' or '.join(names)})" if names else "")

    values = list(scaled.values())
    if len(scaled) == len(bad) and all(abs(v - values[0]) <= 1e-9 * abs(values[0]) for v in values):
        return f"all {len(bad)} failing tensors are the expected ones {named(values[0])}"
    return "scaled: " + ", ".join(f"{n} {named(r)}" for n, r in list(scaled.items())[:3])


def tensor_scales(ref: dict[str, np.ndarray]) -> dict[str, float]:
    """What `compare_tensors` divides each tensor's error by: its largest magnitude, at least
    SCALE_FLOOR of the largest of all (a tensor of zeros is compared at the others' scale)."""
    floor = SCALE_FLOOR * max(float(np.max(np.abs(v))) for v in ref.values())
    return {n: max(float(np.max(np.abs(v))), floor) for n, v in ref.items()}


def compare_tensors(name: str, got: dict[str, np.ndarray], ref: dict[str, np.ndarray], problems: list[str],
                    factors: dict[str, int] | None = None, allowance: dict[str, np.ndarray] | None = None) -> VerifyRow:
    """Worst relative error over all tensors; fails on any reassembly problem. An element passes
    within REL_TOL of its tensor's scale (`tensor_scales`) plus its `allowance` (absolute, by
    element: what an upstream tolerance lets it move, `step_checks.update_allowances`). A failure
    that is a uniform scaling is named as a ratio (x2, x1/dp), `factors` naming the plan's sizes."""
    scales = tensor_scales(ref)
    diffs = {n: np.abs(got[n] - ref[n]) for n in ref}
    errors = {n: float(np.nanmax(d)) / scales[n] for n, d in diffs.items()}
    worst = max(errors, key=errors.get)
    err = errors[worst]
    if allowance is None:
        bad = [n for n, e in errors.items() if not e < REL_TOL]
    else:
        bad = [n for n, d in diffs.items() if not np.all(d <= REL_TOL * scales[n] + allowance[n])]
    detail = f"{len(ref)} tensors; worst {worst} ({err:.1e})"
    if bad:
        detail += f"; {len(bad)} over {REL_TOL:g}{' + allowance' if allowance is not None else ''}: {', '.join(bad[:3])}"
        hint = scale_hint(got, ref, bad, factors)
        if hint:
            detail += f"; {hint}"
    elif allowance is not None:
        within = sum(1 for e in errors.values() if not e < REL_TOL)
        if within:
            detail += (f"; {within} over {REL_TOL:g} within the optimizer's amplification of the gradient "
                       "tolerance (|d update / d gradient| x the gradient's allowed error, by element)")
    if problems:
        detail += "; " + "; ".join(problems[:3])
    expected = f"< {REL_TOL:g}" + (" + allowance" if allowance is not None else "")
    return VerifyRow(name=name, passed=not bad and not problems, detail=detail, measured=err, expected=expected)


def expected_traffic(items: list[CommItem], dims: ParallelDims, rank: int, steps: int = 1
                     ) -> dict[tuple[Collective, Axis], list[int]]:
    """(op, axis) -> [bytes sent, bytes received, calls] this rank should show in its ledger after
    `steps` training steps (start-up items once)."""
    out: dict[tuple[Collective, Axis], list[int]] = defaultdict(lambda: [0, 0, 0])
    c = dims.coords(rank)
    for it in items:
        if c.pp_rank not in it.pp_ranks:
            continue
        if it.op is Collective.SEND_RECV:
            sent, recv = (it.nbytes, 0) if it.role == "send" else (0, it.nbytes)
        else:
            gr = dims.group_index(it.axis, rank, it.group_size)
            sent, recv = bytes_per_rank(it.op, EXECUTOR_ALGO[it.op], it.nbytes, it.group_size, gr, it.root or 0, ITEMSIZE)
        count = it.count * (1 if it.startup else steps)
        row = out[(it.op, it.axis)]
        row[0] += sent * count
        row[1] += recv * count
        row[2] += count
    return out


def measured_traffic(ledger: Ledger) -> dict[tuple[Collective, Axis], list[int]]:
    """(op, axis) -> [bytes sent, bytes received, calls] from one rank's ledger."""
    out: dict[tuple[Collective, Axis], list[int]] = defaultdict(lambda: [0, 0, 0])
    for e in ledger.entries:
        row = out[(e.op, e.axis)]
        row[0] += e.bytes_sent
        row[1] += e.bytes_received
        row[2] += 1
    return out


def check_ledgers(results: list[RankResult], ledgers: list[Ledger], items: list[CommItem], plan: Plan,
                  steps: int = 1) -> list[VerifyRow]:
    """One row per (operation, axis): every rank's ledger equals the communication list (its
    per-step items `steps` times, its start-up items once)."""
    measured = [measured_traffic(led) for led in ledgers]
    dims = ParallelDims.from_plan(plan)
    expected = [expected_traffic(items, dims, r.rank, steps) for r in results]
    keys = sorted({k for per in measured + expected for k in per}, key=lambda k: (k[1].value, k[0].value))
    rows = []
    for op, axis in keys:
        got = [m.get((op, axis), [0, 0, 0]) for m in measured]
        want = [e.get((op, axis), [0, 0, 0]) for e in expected]
        wrong = [r for r in range(len(got)) if got[r] != want[r]]
        detail = f"{sum(g[2] for g in got)} calls on {len(got)} ranks"
        if wrong:
            r = wrong[0]
            detail = (f"{len(wrong)} rank(s) differ; rank {r}: ledger {got[r][0]} B sent, {got[r][1]} B received "
                      f"in {got[r][2]} calls, list {want[r][0]} B, {want[r][1]} B in {want[r][2]} calls")
        rows.append(VerifyRow(name=f"bytes {op.value}/{axis.value}", passed=not wrong, detail=detail,
                              measured=sum(g[0] for g in got), expected=sum(w[0] for w in want)))
    return rows


def check_memory(results: list[RankResult], expected: list[RankElements]) -> list[VerifyRow]:
    """Weights, gradients and optimizer-state elements held per rank against plan/shard.py."""
    rows = []
    for field, label in (("weights", "weights"), ("gradients", "gradients"), ("optimizer", "optimizer state")):
        got = [getattr(r.held, field) for r in results]
        want = [getattr(expected[r.coords.pp_rank], field) for r in results]
        wrong = [i for i in range(len(got)) if got[i] != want[i]]
        detail = f"per rank {min(got)}..{max(got)} elements"
        if wrong:
            i = wrong[0]
            detail = f"{len(wrong)} rank(s) differ; rank {results[i].rank} holds {got[i]}, shard.py says {want[i]}"
        rows.append(VerifyRow(name=f"held {label}", passed=not wrong, detail=detail, measured=sum(got), expected=sum(want)))
    return rows


def check_schedule(results: list[RankResult], schedule: PipelineSchedule) -> VerifyRow:
    """Every rank ran exactly its pipeline rank's compute actions, in order."""
    wanted = schedule.actions
    wrong = [r for r in results if tuple(r.executed) != wanted[r.coords.pp_rank]]
    detail = f"{len(results)} ranks ran their {len(wanted[0])} steps in schedule order"
    if wrong:
        r = wrong[0]
        got = " ".join(map(str, r.executed))
        want = " ".join(map(str, wanted[r.coords.pp_rank]))
        detail = f"rank {r.rank} ran [{got}], schedule says [{want}]"
    return VerifyRow(name="schedule order", passed=not wrong, detail=detail,
                     measured=len(results) - len(wrong), expected=len(results))


def check_bubble(spans: dict[int, list[Span]], pipelines: list[tuple[int, ...]], plan: Plan, m: int,
                 per_flush: int | None = None) -> VerifyRow:
    """Measured bubble of every pipeline against the planner's: the schedule's action list on its
    idealised clock (`pipeline.profile`; (p-1)/m for 1F1B, (p-1)/(v*m) interleaved, Narayanan et
    al. SC'21, sec. 2.2.1 and 2.2.2), each pipeline flush's summed (`flush.step_bubble_microbatches`)."""
    expected = float(step_bubble_microbatches(plan.schedule, plan.pp, m, plan.vpp, per_flush) / m)
    measured = [bubble_fraction(spans, p) for p in pipelines]
    worst = max(measured, key=lambda b: abs(b - expected))
    ok = all(abs(b - expected) <= 1e-12 for b in measured)
    sizes = flush_sizes(m, per_flush)
    formula = schedule_module(plan.schedule).bubble_formula(plan.pp, m, plan.vpp) if len(sizes) == 1 else \
        "flushes " + " + ".join(schedule_module(plan.schedule).bubble_formula(plan.pp, n, plan.vpp) + f" x {n}/{m}"
                                for n in sizes)
    return VerifyRow(name="bubble fraction", passed=ok, detail=f"{len(pipelines)} pipelines; {formula}",
                     measured=worst, expected=expected)
