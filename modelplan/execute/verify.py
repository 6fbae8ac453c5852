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
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.params import ParamDef, init_params, make_batch, param_defs
from modelplan.execute.reference import reference_step
from modelplan.execute.report import TimelineStep, VerifyReport, VerifyRow
from modelplan.execute.scale import check_executable, scale_down
from modelplan.execute.spmd import SpmdBackend, SpmdError, spmd_runner
from modelplan.execute.timeline import lamport_spans
from modelplan.plan.commlist import communication_list
from modelplan.plan.dims import ParallelDims
from modelplan.plan.pipeline import PipelineSchedule, pipeline_schedule
from modelplan.plan.shard import rank_elements
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

Progress = Callable[[str], None]


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
           timeout_s: float = 120.0, max_ranks: int = 256, progress: Progress | None = None
           ) -> VerifyReport | None:
    """Run `plan` on a (scaled-down) copy of `spec` and check it; None on MPI ranks other than 0."""
    out = verify_run(spec, training, plan, backend, seed=seed, scale=scale, layers_per_stage=layers_per_stage,
                     optimizer=optimizer, timeout_s=timeout_s, max_ranks=max_ranks, progress=progress)
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
               timeout_s: float = 120.0, max_ranks: int = 256, progress: Progress | None = None
               ) -> Verified | None:
    """`verify`, also returning the ledgers and the reassembled tensors; None on MPI ranks other than 0.
    Network specs (MLP / CNN / RNN) run in `modelplan.execute.net` and return the report alone."""
    check_rank_count(plan, max_ranks)
    if SpmdBackend(backend) is SpmdBackend.MPI:
        _require_mpi_world(plan.world_size, plan)
    if getattr(spec, "kind", None) == "network":
        from modelplan.execute.net.verify import verify_network

        report = verify_network(spec, training, plan, backend, seed=seed, scale=scale, optimizer=optimizer,
                                timeout_s=timeout_s, progress=progress)
        return None if report is None else Verified(report, (), {}, {})
    say = progress or (lambda _msg: None)
    notes = _notes(spec, training, plan)
    if scale:
        spec, training = scale_down(spec, plan, training, layers_per_stage=layers_per_stage)
    check_executable(spec, training, plan)
    job = Job(spec, training, plan, seed, optimizer or OptimizerConfig(kind=training.optimizer))
    dims = job.dims

    say(f"sharded step on {dims.world_size} ranks")
    t0 = time.perf_counter()
    try:
        run = spmd_runner(backend)(dims.world_size, train_step, job, timeout_s=timeout_s)
    except SpmdError as exc:
        row = VerifyRow(name="execution", passed=False, detail=str(exc))
        report = VerifyReport(model=spec, training=training, plan=plan, seed=seed, backend=backend, rows=[row],
                              notes=notes)
        return Verified(report, (), {}, {})
    if run is None:
        return None
    sharded_s = time.perf_counter() - t0

    say("single-device reference step")
    t0 = time.perf_counter()
    rng_params, rng_data = job.rngs()
    ref = reference_step(spec, init_params(spec, rng_params), make_batch(spec, training, rng_data), job.optimizer)
    reference_s = time.perf_counter() - t0

    say("checks")
    results = list(run.results)
    rows = [check_loss(results, ref.loss)]
    tensor_rows, tensors = compare_state(results, param_defs(spec), ref.grads, ref.params)
    rows += tensor_rows
    items = communication_list(spec, training, plan, element_bytes=8)
    rows += check_ledgers(results, list(run.ledgers), items, plan)
    rows += check_memory(results, rank_elements(spec, plan, training))
    schedule = pipeline_schedule(plan.schedule, plan.pp, job.num_microbatches, plan.vpp)  # not the executor's copy
    order_rows, timeline = check_step_order(results, schedule, dims, plan, job.num_microbatches)
    rows += order_rows
    report = VerifyReport(model=spec, training=training, plan=plan, seed=seed, backend=backend, rows=rows,
                          timeline=timeline, notes=notes, reference_s=reference_s, sharded_s=sharded_s)
    return Verified(report, tuple(run.ledgers), tensors["grads"], tensors["params"])


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


def compare_state(results, defs: list[ParamDef], ref_grads: dict[str, np.ndarray], ref_params: dict[str, np.ndarray]
                  ) -> tuple[list[VerifyRow], dict[str, dict[str, np.ndarray]]]:
    """Rows comparing the gradients and updated parameters reassembled from the ranks' shards with
    the reference's, and the reassembled tensors by kind ('grads', 'params')."""
    rows, tensors = [], {}
    for kind, label, expected in (("grads", "gradients", ref_grads), ("params", "updated parameters", ref_params)):
        got, problems = reassemble(results, defs, kind)
        tensors[kind] = got
        rows.append(compare_tensors(label, got, expected, problems))
    return rows, tensors


def check_step_order(results, schedule: PipelineSchedule, dims: ParallelDims, plan: Plan, num_microbatches: int
                     ) -> tuple[list[VerifyRow], list[list[TimelineStep]]]:
    """Rows for the executed step order against the schedule and for the executed timeline's bubble,
    and the timeline of the first pipeline group's ranks."""
    rows = [check_schedule(results, schedule)]
    spans = lamport_spans({r.rank: list(r.trace) for r in results})
    rows.append(check_bubble(spans, dims.groups(Axis.PP), plan, num_microbatches))
    timeline = [[TimelineStep(kind=s.record.step.kind.value, microbatch=s.record.step.microbatch, chunk=s.record.step.chunk,
                              start=s.start, end=s.end) for s in spans[r]] for r in dims.group(Axis.PP, 0)]
    return rows, timeline
