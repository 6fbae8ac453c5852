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
from typing import NamedTuple

import numpy as np

from modelplan.comm.communicator import Ledger
from modelplan.errors import ModelplanError
from modelplan.execute.checks import (
    Progress,
    check_ledgers,
    check_loss,
    check_memory,
    check_step_order,
    compare_state,
)
from modelplan.execute.backends import spmd_runner
from modelplan.execute.engine import Job, train_step
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.params import init_params, make_batch, param_defs
from modelplan.execute.reference import reference_step
from modelplan.execute.report import VerifyReport, VerifyRow
from modelplan.execute.scale import check_executable, scale_down
from modelplan.execute.spmd import SpmdBackend, SpmdError
from modelplan.plan.commlist import communication_list
from modelplan.plan.dims import ParallelDims
from modelplan.plan.family import family_of
from modelplan.plan.pipeline import pipeline_schedule
from modelplan.plan.shard import rank_elements
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

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
    Each model family runs its own (`plan/family.py`: transformers here, networks in
    `modelplan.execute.net`, which return the report alone)."""
    check_rank_count(plan, max_ranks)
    if SpmdBackend(backend) is SpmdBackend.MPI:
        _require_mpi_world(plan.world_size, plan)
    out = family_of(spec).call("verify", spec, training, plan, backend, seed=seed, scale=scale,
                               layers_per_stage=layers_per_stage, optimizer=optimizer, timeout_s=timeout_s,
                               progress=progress)
    if out is None or isinstance(out, Verified):
        return out
    return Verified(out, (), {}, {})  # a family whose verify gives the report alone


def verify_transformer(spec: TransformerSpec, training: TrainingSpec, plan: Plan, backend: str = "sim", *,
                       seed: int = 0, scale: bool = True, layers_per_stage: int = 1,
                       optimizer: OptimizerConfig | None = None, timeout_s: float = 120.0,
                       progress: Progress | None = None) -> Verified | None:
    """`verify_run` of a transformer: scale down, run the sharded step and the reference, check."""
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
