"""What a model family hands `verify` (`execute/verify.py`, the one orchestration): the job its
rank program runs on every rank and the plan's own data the run is checked against.

Each family builds one (`specs/family.py` names the builder: transformers in `execute/verify.py`,
networks in `execute/net/verify.py`); the orchestration runs the sharded steps, the oracle and
every check the same way for all of them. The plan's data are callables so that nothing is
derived when the sharded run fails."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from modelplan.plan.parallel.calls import CommItem
from modelplan.execute.oracle import OracleKind, OracleStep
from modelplan.execute.oracle.result import Starts
from modelplan.execute.params import ParamDef
from modelplan.execute.report import VerifyRow
from modelplan.plan.pipeline import PipelineSchedule
from modelplan.plan.shard import RankElements
from modelplan.specs.training import TrainingSpec


@dataclass(frozen=True)
class FamilyRun:
    """One plan of one family, ready to run and check."""

    spec: Any
    """The (scaled-down) model the ranks run."""
    training: TrainingSpec
    job: Any
    """What every rank receives: `.dims` (the rank grid), `.num_microbatches`, `.optimizer`."""
    step: Callable[..., Any]
    """The rank program: (comm, job) -> RankResult, run SPMD on every rank."""
    notes: list[str]
    param_defs: list[ParamDef]
    """Every parameter with its unit and split dims (reassembles gradients and updates)."""
    reference: Callable[[OracleKind, Starts], list[OracleStep] | str]
    """The single-device run of the same batches (`step_checks.oracle_steps`), each step from
    the weights the second argument gives it (`oracle.result.Starts`)."""
    comm_items: Callable[[], list[CommItem]]
    """The plan's communication list at 8 bytes per element (what the ledgers must match)."""
    rank_elements: Callable[[], list[RankElements]]
    """Weights, gradients and optimizer-state elements each rank holds."""
    planned_memory: Callable[[PipelineSchedule], list[dict[str, float]]]
    """The planner's memory model per rank, compared with the arrays each rank measured."""
    extra_rows: Callable[[list, PipelineSchedule], list[VerifyRow]] = field(default=lambda results, schedule: [])
    """Checks only this family has (networks: the activations each rank kept)."""
