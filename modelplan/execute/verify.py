"""`verify`: execute a plan's real sharded math and prove it matches a single-device run, for
every model family by the same steps (`run_and_check`; the family supplies its rank program and
the plan's data as a `FamilyRun`, `specs/family.py`):

1. Scale the model down so every split of the plan is exact (`scale_down`), unless asked not to.
2. Run one training step on one device (`reference_step`): loss, gradients, updated weights.
3. Run the same step on dp*tp*pp ranks (`train_step`, SPMD over a communicator that keeps a
   ledger of every byte it moves) from the same seed.
4. Compare, step by step, the oracle starting each step from the sharded run's weights
   (`step_checks.sharded_starts`): loss; every gradient and updated parameter reassembled from
   its shards; each rank's ledger against the communication list (`plan/commlist.py`); the elements each rank holds
   against `plan/shard.py`; the memory each rank measured against the planner's memory model;
   the family's own checks (networks: kept activations); the executed step order against the schedule; the bubble of the
   executed timeline against (p-1)/m or (p-1)/(v*m).
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

from modelplan.comm.communicator import Ledger
from modelplan.errors import ModelplanError
from modelplan.execute.backends import spmd_runner
from modelplan.execute.checks import check_ledgers, check_memory
from modelplan.execute.engine import Job, train_step
from modelplan.execute.family_run import FamilyRun
from modelplan.execute.memory_check import check_measured_memory, planned_stage_memory
from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle import OracleKind, check_oracle, oracle_note
from modelplan.execute.params import init_params, param_defs
from modelplan.execute.recompute import chunk_blocks_for, recompute_notes, recompute_of
from modelplan.execute.report import VerifyReport
from modelplan.execute.scale import check_executable, scale_down
from modelplan.execute.spmd import SpmdBackend, SpmdError
from modelplan.execute.step_checks import (
    DEFAULT_STEPS,
    Progress,
    check_against_oracle,
    check_step_order,
    check_steps,
    default_optimizer,
    execution_row,
    oracle_steps,
    plan_factors,
    sharded_starts,
)
from modelplan.execute.support import check_supported, text_only_notes
from modelplan.plan.commlist import communication_list
from modelplan.specs.family import family_of
from modelplan.plan.pipeline import schedule_layout
from modelplan.plan.pipeline.flush import flush_sizes, flushed_schedule
from modelplan.plan.shard import rank_elements
from modelplan.plan.stages import split_layers
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

__all__ = ["DEFAULT_STEPS", "Verified", "check_rank_count", "run_and_check", "transformer_run", "verify", "verify_run"]


ANCHORED_NOTE = ("oracle anchored: from step 2 on it starts each step from the sharded run's weights after the "
                 "step before, with its own optimizer state, so every step is compared from the same weights "
                 "(free-running float64 runs part as rounding grows step by step)")
"""The report's line on how steps after the first are compared (`step_checks` module docstring)."""


def _notes(spec: TransformerSpec, training: TrainingSpec, plan: Plan) -> list[str]:
    notes = ["executed in float64: the communication list is sized at 8 bytes per element for the comparison"]
    notes += text_only_notes(spec)
    if spec.dropout:
        notes.append("dropout off: the executed step is deterministic")
    if spec.moe is not None and spec.moe.capacity_factor is not None:
        notes.append(f"capacity_factor {spec.moe.capacity_factor:g} not applied: dispatch is dropless")
    if spec.moe is not None and plan.ep > 1 and training.moe_flex_dispatcher == "deepep":  # plan/deepep.py
        notes.append("DeepEP's deduplicated exchange is priced by the plan, not executed: the executor runs the "
                     "AllToAll dispatcher and its ledger is checked against that dispatcher's list")
    return notes


def _executed_training(training: TrainingSpec) -> TrainingSpec:
    """The settings the executor runs: its AllToAll dispatcher in place of DeepEP's exchange."""
    if training.moe_flex_dispatcher != "deepep":
        return training
    return training.model_copy(update={"moe_flex_dispatcher": None})


def flush_note(training: TrainingSpec, plan: Plan) -> list[str]:
    """The executed step's pipeline flushes (`plan/pipeline/flush.py flush_sizes`), when more than one."""
    sizes = flush_sizes(plan.num_microbatches(training.global_batch), training.pp_flush_microbatches)
    if plan.pp == 1 or len(sizes) == 1:
        return []
    return [f"pipeline flushes of {' + '.join(map(str, sizes))} micro-batches: the schedule runs once per flush, "
            "gradients accumulated across the flushes, one optimizer step"]


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
    Each model family supplies its rank program and the plan's data (`specs/family.py`:
    `transformer_run` here, `network_run` in `modelplan.execute.net.verify`); `run_and_check` runs and
    checks every family the same way.
    `oracle`: the single-device run compared with (numpy: the executor's reference; torch: PyTorch);
    `steps`: optimizer steps run and compared one by one."""
    check_supported(spec)
    check_rank_count(plan, max_ranks)
    check_steps(steps)
    oracle = check_oracle(oracle)
    if SpmdBackend(backend) is SpmdBackend.MPI:
        _require_mpi_world(plan.world_size, plan)
    run = family_of(spec).call("verify", spec, training, plan, seed=seed, scale=scale,
                               layers_per_stage=layers_per_stage, optimizer=optimizer, oracle=oracle, steps=steps)
    return run_and_check(run, plan, backend, seed=seed, timeout_s=timeout_s, progress=progress, oracle=oracle,
                         steps=steps)


def run_and_check(run: FamilyRun, plan: Plan, backend: str, *, seed: int, timeout_s: float,
                  progress: Progress | None, oracle: OracleKind, steps: int) -> Verified | None:
    """Run a family's rank program on every rank and its single-device oracle, then check the
    loss, gradients and updates, the ledgers, the held elements and measured memory, the step
    order and the bubble (the module docstring); None on MPI ranks other than 0."""
    say = progress or (lambda _msg: None)
    spec, training, job, notes = run.spec, run.training, run.job, run.notes
    dims, m = job.dims, job.num_microbatches

    say(f"sharded step on {dims.world_size} ranks ({steps} optimizer steps)")
    t0 = time.perf_counter()
    try:
        out = spmd_runner(backend)(dims.world_size, run.step, job, timeout_s=timeout_s)
    except SpmdError as exc:
        report = VerifyReport(model=spec, training=training, plan=plan, seed=seed, backend=backend,
                              rows=[execution_row(exc, plan)], notes=notes, oracle=oracle.value)
        return Verified(report, (), {}, {})
    if out is None:
        return None
    sharded_s = time.perf_counter() - t0

    if steps > 1:
        notes = notes + [ANCHORED_NOTE]
    say(f"single-device reference step ({oracle.value})")
    t0 = time.perf_counter()
    results = list(out.results)
    ref = run.reference(oracle, sharded_starts(results, run.param_defs, steps))
    reference_s = time.perf_counter() - t0

    say("checks")
    rows, tensors = check_against_oracle(results, run.param_defs, ref, plan_factors(plan, m), job.optimizer)
    rows += check_ledgers(results, list(out.ledgers), run.comm_items(), plan, steps)
    rows += check_memory(results, run.rank_elements())
    per_flush = training.pp_flush_microbatches
    schedule = flushed_schedule(plan.schedule, plan.pp, m, plan.vpp, per_flush)  # not the executor's copy
    rows += run.extra_rows(results, schedule)
    rows += check_measured_memory(results, run.planned_memory(schedule))
    order_rows, timeline = check_step_order(results, schedule, dims, plan, m, per_flush)
    rows += order_rows
    report = VerifyReport(model=spec, training=training, plan=plan, seed=seed, backend=backend, rows=rows,
                          timeline=timeline, notes=notes, reference_s=reference_s, sharded_s=sharded_s,
                          oracle=oracle.value)
    return Verified(report, tuple(out.ledgers), tensors.get("grads", {}), tensors.get("params", {}))


def transformer_run(spec: TransformerSpec, training: TrainingSpec, plan: Plan, *, seed: int = 0, scale: bool = True,
                    layers_per_stage: int = 1, optimizer: OptimizerConfig | None = None,
                    oracle: OracleKind = OracleKind.NUMPY, steps: int = DEFAULT_STEPS) -> FamilyRun:
    """A transformer's `FamilyRun`: scaled down, its rank program (`engine.train_step`), its
    communication list, held elements and stage memory."""
    notes = _notes(spec, training, plan) + [oracle_note(oracle)]
    if scale:  # enough blocks per chunk for a full-recompute method's groups (`recompute.py`)
        blocks = chunk_blocks_for(recompute_of(training, plan), layers_per_stage)
        if blocks != layers_per_stage:
            notes.append(f"{blocks} blocks per pipeline chunk (not {layers_per_stage}): the recompute method's "
                         "groups are executed whole")
        full_split = _split_text(spec.num_blocks, plan)
        spec, training = scale_down(spec, plan, training, layers_per_stage=blocks)
        if full_split is not None:
            notes.append(f"uneven pipeline stages: blocks per virtual stage {_split_text(spec.num_blocks, plan)} "
                         f"executed (the plan's {full_split} scaled down; a fixed first / last stage keeps its blocks)")
    check_executable(spec, training, plan)
    notes = notes + flush_note(training, plan) + recompute_notes(training, plan, spec.layers // (plan.pp * plan.vpp))
    job = Job(spec, training, plan, seed, optimizer or default_optimizer(training, steps), steps)
    return FamilyRun(
        spec=spec, training=training, job=job, step=train_step, notes=notes, param_defs=param_defs(spec),
        reference=lambda kind, starts: oracle_steps(kind, spec, init_params(spec, job.rngs()[0]), job.batches(),
                                                    job.optimizer, starts=starts),
        comm_items=lambda: communication_list(spec, _executed_training(training), plan, element_bytes=8),
        rank_elements=lambda: rank_elements(spec, plan, training),
        planned_memory=lambda _schedule: planned_stage_memory(spec, training, plan, job.num_microbatches, job.recompute))


def _split_text(num_blocks: int, plan: Plan) -> str | None:
    """Blocks per virtual stage as 'a+b+...' (`plan.stages.split_layers`) when they differ, else None."""
    if plan.pp == 1:
        return None
    try:
        counts = split_layers(num_blocks, schedule_layout(plan.schedule, plan.pp, plan.vpp).num_stages,
                              plan.stage_split)
    except ValueError:
        return None  # the executor's own check names the problem
    return "+".join(map(str, counts)) if len(set(counts)) > 1 else None
