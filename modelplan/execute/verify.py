"""`verify`: execute a plan's real sharded math and prove it matches a single-device run.

1. Scale the model down so every split of the plan is exact (`scale_down`), unless asked not to.
2. Run one training step on one device (`reference_step`): loss, gradients, updated weights.
3. Run the same step on dp*tp*pp ranks (`train_step`, SPMD over a communicator that keeps a
   ledger of every byte it moves) from the same seed.
4. Compare: loss; every gradient and updated parameter reassembled from its shards; each rank's
   ledger against the communication list (`plan/commlist.py`); the elements each rank holds
   against `plan/shard.py`; the executed step order against the schedule; the bubble of the
   executed timeline against (p-1)/m or (p-1)/(v*m).
"""

from __future__ import annotations

import time
from typing import Callable, NamedTuple

import numpy as np

from modelplan.comm.communicator import Ledger
from modelplan.comm.ops import Axis
from modelplan.errors import ModelplanError
from modelplan.execute.checks import (
    check_bubble,
    check_ledgers,
    check_memory,
    check_schedule,
    compare_tensors,
    reassemble,
)
from modelplan.execute.engine import Job, train_step
from modelplan.execute.memory_check import check_measured_memory, planned_stage_memory
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle import OracleKind, OracleStep, OracleUnavailable, check_oracle, oracle_note, run_oracle
from modelplan.execute.params import ParamDef, init_params, param_defs
from modelplan.execute.report import TimelineStep, VerifyReport, VerifyRow
from modelplan.execute.scale import check_executable, scale_down
from modelplan.execute.schedule_check import check_executed_schedule
from modelplan.execute.pipeline import stage_map
from modelplan.execute.spmd import SpmdBackend, SpmdDeadlock, SpmdError, SpmdTimeout, spmd_runner
from modelplan.execute.support import check_supported
from modelplan.execute.timeline import lamport_spans
from modelplan.plan.commlist import communication_list
from modelplan.plan.dims import ParallelDims
from modelplan.plan.pipeline import PipelineSchedule, pipeline_schedule, schedule_layout
from modelplan.plan.shard import rank_elements
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

Progress = Callable[[str], None]

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


def _notes(spec: TransformerSpec, training: TrainingSpec, plan: Plan) -> list[str]:
    notes = ["executed in float64: the communication list is sized at 8 bytes per element for the comparison"]
    if spec.dropout:
        notes.append("dropout off: the executed step is deterministic")
    if spec.moe is not None and spec.moe.capacity_factor is not None:
        notes.append(f"capacity_factor {spec.moe.capacity_factor:g} not applied: dispatch is dropless")
    if (plan.recompute or training.recompute) == "selective":
        notes.append("selective recompute executed as no recompute (same math, same communication)")
    return notes


class Verified(NamedTuple):
    """A verify report with what the sharded run produced (on MPI: rank 0 only)."""

    report: VerifyReport
    ledgers: tuple[Ledger, ...]
    """Each rank's ledger, by global rank (empty when the sharded step failed)."""
    grads: dict[str, np.ndarray]
    """Gradients reassembled from every rank's shards, full shape, by parameter name."""
    params: dict[str, np.ndarray]
    """Updated parameters reassembled the same way."""


def verify(spec: TransformerSpec, training: TrainingSpec, plan: Plan, backend: str = "sim", *, seed: int = 0,
           scale: bool = True, layers_per_stage: int = 1, optimizer: OptimizerConfig | None = None,
           timeout_s: float = 120.0, max_ranks: int = 256, progress: Progress | None = None,
           oracle: OracleKind | str = OracleKind.NUMPY, steps: int = DEFAULT_STEPS) -> VerifyReport | None:
    """Run `plan` on a (scaled-down) copy of `spec` and check it; None on MPI ranks other than 0."""
    out = verify_run(spec, training, plan, backend, seed=seed, scale=scale, layers_per_stage=layers_per_stage,
                     optimizer=optimizer, timeout_s=timeout_s, max_ranks=max_ranks, progress=progress,
                     oracle=oracle, steps=steps)
    return None if out is None else out.report


def check_rank_count(plan: Plan, max_ranks: int) -> None:
    """Refuse plans with more ranks than `max_ranks` (each rank is a thread or a process)."""
    if plan.world_size > max_ranks:
        raise ModelplanError(
            f"the plan needs {plan.world_size} ranks (dp {plan.dp} x tp {plan.tp} x pp {plan.pp} x cp {plan.cp}); "
            f"verify runs at most max_ranks ({max_ranks}): verify a smaller dp (its code path is the same "
            "from dp = 2) or raise max_ranks")


def _require_mpi_world(world_size: int, plan: Plan) -> None:
    """Every rank of the job raises the same one-line error when the job has the wrong size."""
    from modelplan.execute.mpicomm import load_mpi

    ranks = load_mpi().COMM_WORLD.Get_size()
    if ranks != world_size:
        raise SpmdError(f"the plan needs {world_size} ranks (dp {plan.dp} x tp {plan.tp} x pp {plan.pp} x "
                        f"cp {plan.cp}) but the MPI job has {ranks}: launch with mpiexec -n {world_size}")


def verify_run(spec: TransformerSpec, training: TrainingSpec, plan: Plan, backend: str = "sim", *, seed: int = 0,
               scale: bool = True, layers_per_stage: int = 1, optimizer: OptimizerConfig | None = None,
               timeout_s: float = 120.0, max_ranks: int = 256, progress: Progress | None = None,
               oracle: OracleKind | str = OracleKind.NUMPY, steps: int = DEFAULT_STEPS) -> Verified | None:
    """`verify`, also returning the ledgers and the reassembled tensors; None on MPI ranks other than 0.
    Network specs (MLP / CNN / RNN) run in `modelplan.execute.net` and return the report alone.
    `oracle`: the single-device run compared with (numpy: the executor's reference; torch: PyTorch);
    `steps`: optimizer steps run and compared one by one."""
    check_supported(spec)
    check_rank_count(plan, max_ranks)
    check_steps(steps)
    oracle = check_oracle(oracle)
    if SpmdBackend(backend) is SpmdBackend.MPI:
        _require_mpi_world(plan.world_size, plan)
    if getattr(spec, "kind", None) == "network":
        from modelplan.execute.net.verify import verify_network

        report = verify_network(spec, training, plan, backend, seed=seed, scale=scale, optimizer=optimizer,
                                timeout_s=timeout_s, progress=progress, oracle=oracle, steps=steps)
        return None if report is None else Verified(report, (), {}, {})
    say = progress or (lambda _msg: None)
    notes = _notes(spec, training, plan) + [oracle_note(oracle)]
    if scale:
        spec, training = scale_down(spec, plan, training, layers_per_stage=layers_per_stage)
    check_executable(spec, training, plan)
    job = Job(spec, training, plan, seed, optimizer or default_optimizer(training, steps), steps)
    dims = job.dims

    say(f"sharded step on {dims.world_size} ranks ({steps} optimizer steps)")
    t0 = time.perf_counter()
    try:
        run = spmd_runner(backend)(dims.world_size, train_step, job, timeout_s=timeout_s)
    except SpmdError as exc:
        row = execution_row(exc, plan)
        report = VerifyReport(model=spec, training=training, plan=plan, seed=seed, backend=backend, rows=[row],
                              notes=notes, oracle=oracle.value)
        return Verified(report, (), {}, {})
    if run is None:
        return None
    sharded_s = time.perf_counter() - t0

    say(f"single-device reference step ({oracle.value})")
    t0 = time.perf_counter()
    ref = oracle_steps(oracle, spec, init_params(spec, job.rngs()[0]), job.batches(), job.optimizer)
    reference_s = time.perf_counter() - t0

    say("checks")
    results = list(run.results)
    rows, tensors = check_against_oracle(results, param_defs(spec), ref, plan_factors(plan, job.num_microbatches))
    items = communication_list(spec, training, plan, element_bytes=8)
    rows += check_ledgers(results, list(run.ledgers), items, plan, steps)
    rows += check_memory(results, rank_elements(spec, plan, training))
    recompute = "full" if job.recompute_full else "none"
    rows += check_measured_memory(results, planned_stage_memory(spec, training, plan, job.num_microbatches, recompute))
    schedule = pipeline_schedule(plan.schedule, plan.pp, job.num_microbatches, plan.vpp)  # not the executor's copy
    order_rows, timeline = check_step_order(results, schedule, dims, plan, job.num_microbatches)
    rows += order_rows
    report = VerifyReport(model=spec, training=training, plan=plan, seed=seed, backend=backend, rows=rows,
                          timeline=timeline, notes=notes, reference_s=reference_s, sharded_s=sharded_s,
                          oracle=oracle.value)
    return Verified(report, tuple(run.ledgers), tensors.get("grads", {}), tensors.get("params", {}))


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


def check_against_oracle(results, defs: list[ParamDef], ref: list[OracleStep] | str,
                         factors: dict[str, int] | None = None
                         ) -> tuple[list[VerifyRow], dict[str, dict[str, np.ndarray]]]:
    """Loss, gradient and updated-parameter rows against the oracle, step by step (one failed
    'oracle' row when the oracle could not build the model); the last step's reassembled tensors."""
    if isinstance(ref, str):
        return [VerifyRow(name="oracle", passed=False, detail=ref)], {}
    losses, grads, params, tensors = [], [], [], {}
    for t, expected in enumerate(ref):
        views = step_views(results, t)
        losses.append(check_loss(views, expected.loss))
        (g, p), tensors = compare_state(views, defs, expected.grads, expected.params, factors)
        grads.append(g)
        params.append(p)
    return [_loss_curve_row(losses), _merge_steps("gradients", grads), _merge_steps("updated parameters", params)], tensors


def check_loss(results, ref_loss: float) -> VerifyRow:
    """Mean over data-parallel ranks of the mean micro-batch loss (each micro-batch's from the
    rank that ran its last stage: one rank, or DualPipe's two ends)."""
    per_dp: dict[int, dict[int, float]] = {}
    for r in results:
        if r.losses and r.coords.tp_rank == 0:
            per_dp.setdefault(r.coords.dp_rank, {}).update(r.losses)
    means = {d: sum(v for _, v in sorted(got.items())) / len(got) for d, got in per_dp.items()}
    loss = sum(means[d] for d in sorted(means)) / len(means)
    err = abs(loss - ref_loss) / abs(ref_loss)
    return VerifyRow(name="loss", passed=err < 1e-9, detail=f"relative error {err:.1e} (< 1e-09)",
                     measured=loss, expected=ref_loss)


def compare_state(results, defs: list[ParamDef], ref_grads: dict[str, np.ndarray], ref_params: dict[str, np.ndarray],
                  factors: dict[str, int] | None = None) -> tuple[list[VerifyRow], dict[str, dict[str, np.ndarray]]]:
    """Rows comparing the gradients and updated parameters reassembled from the ranks' shards with
    the reference's, and the reassembled tensors by kind ('grads', 'params')."""
    rows, tensors = [], {}
    for kind, label, expected in (("grads", "gradients", ref_grads), ("params", "updated parameters", ref_params)):
        got, problems = reassemble(results, defs, kind)
        tensors[kind] = got
        rows.append(compare_tensors(label, got, expected, problems, factors))
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


def _order_rows(results, schedule: PipelineSchedule, dims: ParallelDims, plan: Plan, num_microbatches: int):
    rows = [check_schedule(results, schedule)]
    spans = lamport_spans({r.rank: list(r.trace) for r in results})
    rows.append(check_bubble(spans, dims.groups(Axis.PP), plan, num_microbatches))
    rows += check_executed_schedule(spans, dims.groups(Axis.PP), plan, num_microbatches)
    return rows, spans


def check_step_order(results, schedule: PipelineSchedule, dims: ParallelDims, plan: Plan, num_microbatches: int
                     ) -> tuple[list[VerifyRow], list[list[TimelineStep]]]:
    """Rows for the executed step order against the schedule and for the executed timeline's
    properties, every optimizer step checked (the first failing one reported), and the timeline
    of the first pipeline group's ranks in the first step."""
    steps = max((len(r.history) for r in results), default=0)
    per_step = [[TraceView(r.rank, r.coords, r.history[t].trace) for r in results] for t in range(steps)] or [results]
    checked = [_order_rows(views, schedule, dims, plan, num_microbatches) for views in per_step]
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
