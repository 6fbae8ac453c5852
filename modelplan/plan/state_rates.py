"""Bytes per parameter of one training setup: weights, gradients, optimizer states, the optimizer step.

Shared by the transformer `Evaluator` and the `NetworkEvaluator` (the same training settings give
the same per-parameter rates whatever the model family).
"""

from __future__ import annotations

from typing import NamedTuple

from modelplan.plan.parallel.dp_zero import optimizer_bytes_per_param, state_bytes_per_param
from modelplan.specs.training import TrainingSpec


class StateRates(NamedTuple):
    """Per-parameter byte rates (`parallel/dp_zero.py`)."""

    dtype_bytes: int
    """One weight in the training dtype."""
    grad_bytes: int
    """One gradient element as kept."""
    state_bytes: float
    """Optimizer states (and master weights) per parameter."""
    opt_bytes: float
    """Bytes the optimizer step streams through HBM per parameter."""


def state_rates(training: TrainingSpec) -> StateRates:
    """The byte rates of `training`'s precision, optimizer states and master weights."""
    state = state_bytes_per_param(training.optimizer_states, training.uses_master_weights, training.optimizer_state_bytes)
    opt = optimizer_bytes_per_param(training.grad_bytes, state, training.dtype_bytes, training.uses_master_weights)
    return StateRates(training.dtype_bytes, training.grad_bytes, state, opt)
