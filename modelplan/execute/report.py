"""The verify report: one row per check, the executed pipeline timeline, and what was run."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from modelplan.specs.network import NetworkSpec
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

Value = float | int | str | None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class VerifyRow(_Frozen):
    """One check: what was measured on the executed run against what was expected."""

    name: str
    passed: bool
    detail: str = ""
    measured: Value = None
    expected: Value = None


class TimelineStep(_Frozen):
    """One executed compute step on the logical clock (1 per chunk forward, 2 per backward)."""

    kind: str
    microbatch: int
    chunk: int
    start: int
    end: int


class VerifyReport(_Frozen):
    """Result of `verify`: the checks and the run they were made on."""

    model: TransformerSpec | NetworkSpec
    """The (scaled-down) model that was executed."""
    training: TrainingSpec
    plan: Plan
    seed: int
    backend: str
    rows: list[VerifyRow]
    oracle: str = "numpy"
    """The single-device run the sharded one was compared with: numpy (the executor's own
    reference, same layer functions) or torch (PyTorch float64, autograd, torch.optim)."""
    timeline: list[list[TimelineStep]] = Field(default_factory=list)
    """Per pipeline rank of the first pipeline (dp 0, tp 0): its steps in executed order."""
    notes: list[str] = Field(default_factory=list)
    """What the executed model changes against the requested one (dropout off, dropless MoE...)."""
    reference_s: float = 0.0
    """Wall time of the single-device reference step."""
    sharded_s: float = 0.0
    """Wall time of the sharded step over all ranks (start-up included)."""

    @property
    def passed(self) -> bool:
        """Every check passed."""
        return all(r.passed for r in self.rows)
