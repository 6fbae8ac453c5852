"""What an oracle returns, and the check that PyTorch is there when the torch oracle is asked for."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from types import ModuleType

import numpy as np

from modelplan.errors import ModelplanError

Params = dict[str, np.ndarray]

Starts = Sequence[Params | None] | None
"""The weights each step starts from, by step (0-based): an anchored oracle computes step t's loss
and gradients at `starts[t - 1]` and updates those weights with its own optimizer state (carried
from its own earlier gradients); None, or a None entry: from its own previous update
(free-running). `verify` anchors the oracle to the sharded run's reassembled weights."""


def start_of(starts: Starts, step: int) -> Params | None:
    """The weights step `step` (counted from 1) starts from, or None for the oracle's own."""
    return starts[step - 1] if starts is not None and step - 1 < len(starts) else None


class OracleKind(StrEnum):
    """Which single-device computation the sharded run is compared with."""

    NUMPY = "numpy"
    """The executor's own reference (shares the layer math with the sharded run)."""
    TORCH = "torch"
    """PyTorch float64 with autograd and torch.optim (shares nothing but weights and data)."""


class OracleUnavailable(ModelplanError):
    """The oracle cannot build this model or is not installed (one line, says which and why)."""


@dataclass(frozen=True)
class OracleStep:
    """One optimizer step on one device."""

    loss: float
    grads: Params = field(repr=False)
    """Gradient of the step's mean loss for every parameter, executor layout."""
    params: Params = field(repr=False)
    """Every parameter after the step's update, executor layout."""


@dataclass(frozen=True)
class OracleRun:
    """Every step of the run, in order, and which oracle computed it."""

    kind: OracleKind
    steps: tuple[OracleStep, ...]

    @property
    def losses(self) -> list[float]:
        return [s.loss for s in self.steps]


def require_torch() -> ModuleType:
    """torch, or a one-line error saying how to install it."""
    try:
        import torch
    except ImportError:
        raise OracleUnavailable("--oracle torch needs PyTorch: pip install 'modelplan[torch]' "
                                "(or use --oracle numpy)") from None
    return torch


def oracle_note(kind: OracleKind) -> str:
    """The report's line saying what the sharded run was compared with."""
    if kind is OracleKind.TORCH:
        return "oracle torch: PyTorch float64 built from the spec (torch functions, autograd, torch.optim)"
    return ("oracle numpy: the executor's single-device reference, which shares the layer math with the "
            "sharded run (--oracle torch also checks the math)")
