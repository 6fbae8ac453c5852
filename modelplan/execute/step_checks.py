"""What verify checks after the run for every family, step by step (`verify.run_and_check`):
the loss curve, gradients and updated parameters against the
oracle, the executed order and timeline, the run's failure row, and the steps and optimizer a
verify uses by default.

The oracle is anchored to the sharded run (`sharded_starts`): step t > 1 starts from the sharded
run's weights after step t - 1, so each step's loss, gradients and update are compared from the
same weights. Two free-running float64 trajectories part: rounding differences of ~1e-16 grow
step by step (measured on ResNet-50 scaled down, tp 2 pp 2: 1e-11 after step 1, 1e-8 after step
2, 6e-5 after step 3, also under plain SGD), so a free-running comparison fails a correct run
from step 2 on, whatever its tolerance at step 1."""

from __future__ import annotations

from typing import Callable, NamedTuple

import numpy as np

from modelplan.comm.ops import Axis
from modelplan.errors import ModelplanError
from modelplan.execute.checks import REL_TOL, check_bubble, check_schedule, compare_tensors, reassemble, tensor_scales
from modelplan.execute.optim import OptimizerConfig, optimizer_step, update_sensitivity
from modelplan.execute.oracle import OracleKind, OracleStep, OracleUnavailable, run_oracle
from modelplan.execute.oracle.result import Params
from modelplan.execute.params import ParamDef
from modelplan.execute.pipeline import stage_map
from modelplan.execute.report import TimelineStep, VerifyRow
from modelplan.execute.schedule_check import check_executed_schedule
from modelplan.execute.spmd import SpmdDeadlock, SpmdError, SpmdTimeout
from modelplan.execute.timeline import lamport_spans
from modelplan.plan.dims import ParallelDims
from modelplan.plan.pipeline import PipelineSchedule, schedule_layout
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

Progress = Callable[[str], None]
"""A callback that prints what verify does next."""

DEFAULT_STEPS = 3
"""Optimizer steps verify runs by default: enough for Adam's state, momentum, ZeRO re-gathers and
the LR schedule to matter (a single step cannot see optimizer state thrown away)."""


def check_steps(steps: int) -> None:
    """At least one step (one-line error otherwise)."""
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ModelplanError(f"steps ({steps!r}) must be an integer >= 1")


def default_optimizer(training: TrainingSpec, steps: int) -> OptimizerConfig:
    """The training spec's optimizer with a schedule that moves within `steps`: linear warm-up over
    the first two steps, cosine decay over the rest (one step: constant lr)."""
    warmup = min(2, steps)
    return OptimizerConfig(kind=training.optimizer, warmup_steps=warmup, decay_steps=steps - warmup)


def execution_row(exc: SpmdError, plan: Plan) -> VerifyRow:
    """The failed 'execution' row of a run that did not finish: the failing rank and the step it
    ran, or, for a deadlock or timeout, what each rank waited for and where every stage runs."""
    detail = str(exc)
    if isinstance(exc, (SpmdDeadlock, SpmdTimeout)) and plan.pp > 1:
        detail += f"; stages: {stage_map(schedule_layout(plan.schedule, plan.pp, plan.vpp))}"
    return VerifyRow(name="execution", passed=False, detail=detail)


def oracle_steps(oracle: OracleKind, spec, params, batches, optimizer: OptimizerConfig, **kwargs
                 ) -> list[OracleStep] | str:
    """The oracle's steps, or the one-line reason it cannot build this model."""
    try:
        return list(run_oracle(oracle, spec, params, batches, optimizer, **kwargs).steps)
    except OracleUnavailable as exc:
        return str(exc)


class StepView(NamedTuple):
    """One rank's view of one optimizer step (what the loss and tensor checks read)."""

    rank: int
    coords: object
    layouts: dict
    losses: tuple[float, ...]
    grads: tuple
    params: tuple


def step_views(results, step: int) -> list[StepView]:
    """Every rank's state after optimizer step `step` (0-based)."""
    return [StepView(r.rank, r.coords, r.layouts, h.losses, h.grads, h.params)
            for r in results for h in (r.history[step],)]


def sharded_starts(results, defs: list[ParamDef], steps: int) -> list[Params | None]:
    """The weights each step of the anchored oracle starts from (`oracle.result.Starts`): step 1
    from its own initial weights (the same seed), step t > 1 from the sharded run's weights after
    step t - 1, reassembled from the shards; None (its own update) where they do not reassemble,
    a step whose 'updated parameters' row fails anyway."""
    out: list[Params | None] = [None]
    for t in range(steps - 1):
        params, problems = reassemble(step_views(results, t), defs, "params")
        out.append(None if problems else params)
    return out


def _merge_steps(name: str, per_step: list[VerifyRow]) -> VerifyRow:
    """One row for a check made after every step: the first failing step's, else the worst."""
    n = len(per_step)
    bad = [(t, row) for t, row in enumerate(per_step, 1) if not row.passed]
    if bad:
        t, row = bad[0]
        return row.model_copy(update={"name": name, "detail": f"step {t} of {n}: {row.detail}"})
    t, row = max(enumerate(per_step, 1), key=lambda tr: tr[1].measured if isinstance(tr[1].measured, float) else 0)
    return row.model_copy(update={"name": name, "detail": f"{n} steps; worst at step {t}: {row.detail}"})


def _loss_curve_row(per_step: list[VerifyRow]) -> VerifyRow:
    sharded = " -> ".join(f"{r.measured:.6g}" for r in per_step)
    worst = max(range(len(per_step)), key=lambda t: abs(per_step[t].measured - per_step[t].expected)
                / abs(per_step[t].expected))
    bad = [t for t, r in enumerate(per_step, 1) if not r.passed]
    w = per_step[worst]
    err = abs(w.measured - w.expected) / abs(w.expected)
    if bad:
        t = bad[0]
        r = per_step[t - 1]
        detail = (f"step {t} of {len(per_step)}: {r.measured:.9g} against the oracle's {r.expected:.9g} "
                  f"({r.detail}); sharded curve {sharded}, oracle {' -> '.join(f'{x.expected:.6g}' for x in per_step)}")
    else:
        detail = f"curve {sharded} over {len(per_step)} steps; worst relative error {err:.1e} (step {worst + 1}, < 1e-09)"
    last = per_step[-1]
    return VerifyRow(name="loss", passed=not bad, detail=detail, measured=last.measured, expected=last.expected)


def update_allowances(optimizer: OptimizerConfig, ref: list[OracleStep]) -> list[dict[str, np.ndarray]]:
    """Per step, per parameter element: how far the updated weights may differ from the oracle's
    given that the gradient passed its check, |d w_new / d g| (`optim.update_sensitivity`, at the
    oracle's optimizer state, replayed from its gradients) x the gradient's allowed error (REL_TOL
    x its tensor's scale, as `compare_tensors` checks it). Adam divides a near-zero gradient's
    rounding by eps in its first update (lr / eps: 1e4 at lr 1e-2, eps 1e-6); the allowance is that
    amplification, element by element, not a wider global tolerance. (Adam's L2 term uses the
    oracle's weights after the step before, or after step 1 at step 1: within one update of the
    start weights, which only shifts v by weight_decay x that much.)"""
    state = {n: optimizer.init_state(g.size) for n, g in ref[0].grads.items()}
    out = []
    for t, step in enumerate(ref, 1):
        scales = tensor_scales(step.grads)
        weights = ref[t - 2].params if t > 1 else step.params
        allow = {}
        for n, g in step.grads.items():
            flat, w = g.ravel(), weights[n].ravel()
            optimizer_step(optimizer, w, flat, state[n], t)  # the oracle's moments after step t
            used = flat + optimizer.weight_decay * w if optimizer.kind == "adam" else flat
            allow[n] = (update_sensitivity(optimizer, used, state[n], t) * REL_TOL * scales[n]).reshape(g.shape)
        out.append(allow)
    return out


def check_against_oracle(results, defs: list[ParamDef], ref: list[OracleStep] | str,
                         factors: dict[str, int] | None = None, optimizer: OptimizerConfig | None = None
                         ) -> tuple[list[VerifyRow], dict[str, dict[str, np.ndarray]]]:
    """Loss, gradient and updated-parameter rows against the oracle, step by step (one failed
    'oracle' row when the oracle could not build the model); the last step's reassembled tensors.
    With the run's `optimizer`, an updated weight may also differ by what the gradient's
    tolerance moves it (`update_allowances`)."""
    if isinstance(ref, str):
        return [VerifyRow(name="oracle", passed=False, detail=ref)], {}
    allowances = update_allowances(optimizer, ref) if optimizer is not None else [None] * len(ref)
    losses, grads, params, tensors = [], [], [], {}
    for t, expected in enumerate(ref):
        views = step_views(results, t)
        losses.append(check_loss(views, expected.loss))
        (g, p), tensors = compare_state(views, defs, expected.grads, expected.params, factors, allowances[t])
        grads.append(g)
        params.append(p)
    return [_loss_curve_row(losses), _merge_steps("gradients", grads), _merge_steps("updated parameters", params)], tensors


def check_loss(results, ref_loss: float) -> VerifyRow:
    """Mean over data-parallel (and context-parallel: equal token shares) ranks of the mean
    micro-batch loss (each micro-batch's from the rank that ran its last stage: one rank, or
    DualPipe's two ends)."""
    per_dp: dict[tuple[int, int], dict[int, float]] = {}
    for r in results:
        if r.losses and r.coords.tp_rank == 0:
            per_dp.setdefault((r.coords.dp_rank, r.coords.cp_rank), {}).update(r.losses)
    means = {d: sum(v for _, v in sorted(got.items())) / len(got) for d, got in per_dp.items()}
    loss = sum(means[d] for d in sorted(means)) / len(means)
    err = abs(loss - ref_loss) / abs(ref_loss)
    return VerifyRow(name="loss", passed=err < 1e-9, detail=f"relative error {err:.1e} (< 1e-09)",
                     measured=loss, expected=ref_loss)


def compare_state(results, defs: list[ParamDef], ref_grads: dict[str, np.ndarray], ref_params: dict[str, np.ndarray],
                  factors: dict[str, int] | None = None, param_allowance: dict[str, np.ndarray] | None = None
                  ) -> tuple[list[VerifyRow], dict[str, dict[str, np.ndarray]]]:
    """Rows comparing the gradients and updated parameters reassembled from the ranks' shards with
    the reference's (the parameters within `param_allowance` more, by element), and the
    reassembled tensors by kind ('grads', 'params')."""
    rows, tensors = [], {}
    for kind, label, expected, allowance in (("grads", "gradients", ref_grads, None),
                                             ("params", "updated parameters", ref_params, param_allowance)):
        got, problems = reassemble(results, defs, kind)
        tensors[kind] = got
        rows.append(compare_tensors(label, got, expected, problems, factors, allowance))
    return rows, tensors


def plan_factors(plan: Plan, num_microbatches: int) -> dict[str, int]:
    """The plan's sizes a wrongly scaled gradient is usually off by, by name."""
    return {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "num_microbatches": num_microbatches}


class TraceView(NamedTuple):
    """One rank's executed steps of one optimizer step (what the schedule checks read)."""

    rank: int
    coords: object
    trace: tuple

    @property
    def executed(self):
        return [r.step for r in self.trace]


def _order_rows(results, schedule: PipelineSchedule, dims: ParallelDims, plan: Plan, num_microbatches: int,
                per_flush: int | None = None):
    rows = [check_schedule(results, schedule)]
    spans = lamport_spans({r.rank: list(r.trace) for r in results})
    rows.append(check_bubble(spans, dims.groups(Axis.PP), plan, num_microbatches, per_flush))
    rows += check_executed_schedule(spans, dims.groups(Axis.PP), plan, num_microbatches, per_flush)
    return rows, spans


def check_step_order(results, schedule: PipelineSchedule, dims: ParallelDims, plan: Plan, num_microbatches: int,
                     per_flush: int | None = None) -> tuple[list[VerifyRow], list[list[TimelineStep]]]:
    """Rows for the executed step order against the schedule and for the executed timeline's
    properties, every optimizer step checked (the first failing one reported), and the timeline
    of the first pipeline group's ranks in the first step (`per_flush`: micro-batches per
    pipeline flush, `plan/pipeline/flush.py`)."""
    steps = max((len(r.history) for r in results), default=0)
    per_step = [[TraceView(r.rank, r.coords, r.history[t].trace) for r in results] for t in range(steps)] or [results]
    checked = [_order_rows(views, schedule, dims, plan, num_microbatches, per_flush) for views in per_step]
    rows = checked[0][0]
    if len(checked) > 1:
        rows = [_first_failing([c[0][k] for c in checked]) for k in range(len(rows))]
    spans = checked[0][1]
    timeline = [[TimelineStep(kind=s.record.step.kind.value, microbatch=s.record.step.microbatch, chunk=s.record.step.chunk,
                              start=s.start, end=s.end) for s in spans[r]] for r in dims.group(Axis.PP, 0)]
    return rows, timeline


def _first_failing(per_step: list[VerifyRow]) -> VerifyRow:
    """The row of the first optimizer step where the check failed, else the first step's."""
    for t, row in enumerate(per_step, 1):
        if not row.passed:
            return row.model_copy(update={"detail": f"step {t} of {len(per_step)}: {row.detail}"})
    return per_step[0]
