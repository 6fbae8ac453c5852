"""The tensor-core rate an engine's step keeps on one accelerator, as a factor on the priced GEMM and
fused-attention rates (`Roofline.of`).

The run's own figure (`TrainingSpec.tensor_rate`, `modelplan plan --tensor-rate`) wins; else the
engine's figure for the accelerator's architecture (`EngineProfile.tensor_rate_by_arch`, keyed by
`Accelerator.architecture`); else 1. Element-wise (HBM-bound) kernels are not scaled.
"""

from __future__ import annotations

from typing import Literal, NamedTuple

from modelplan.specs.engine import EngineProfile
from modelplan.specs.hardware import Accelerator
from modelplan.specs.training import TrainingSpec


class TensorRate(NamedTuple):
    """One run's tensor-rate factor and where it comes from."""

    factor: float
    """Multiplies every tensor-core rate (1.0: as priced)."""
    origin: Literal["run", "engine", "none"]
    """run: `TrainingSpec.tensor_rate`; engine: the profile's figure for the architecture; none."""
    source: str = ""
    """What an engine figure was fitted to (`EngineProfile.tensor_rate_source`)."""


def tensor_rate(training: TrainingSpec, profile: EngineProfile, accelerator: Accelerator) -> TensorRate:
    """The run's tensor-rate factor on `accelerator` under `profile`."""
    if training.tensor_rate is not None:
        return TensorRate(training.tensor_rate, "run")
    arch = accelerator.architecture
    if arch is not None and arch in profile.tensor_rate_by_arch:
        return TensorRate(profile.tensor_rate_by_arch[arch], "engine", profile.tensor_rate_source)
    return TensorRate(1.0, "none")


def tensor_rate_note(rate: TensorRate, framework: str, accelerator: Accelerator) -> str | None:
    """One line for the plan's assumptions, or None when nothing is applied."""
    if rate.origin == "run":
        return f"tensor-core rate x{rate.factor:g} (the run's --tensor-rate), GEMMs and fused attention"
    if rate.origin == "engine":
        return (f"tensor-core rate x{rate.factor:g} on {accelerator.architecture} ({accelerator.name}): engine "
                f"{framework}'s figure, FITTED to {rate.source}; --tensor-rate 1 turns it off")
    return None


def clock_note(accelerator: Accelerator) -> str | None:
    """One line when the part's own sustained clock (`Accelerator.sustained_clock_fraction`) is below 1."""
    if accelerator.sustained_clock_fraction == 1.0:
        return None
    return (f"{accelerator.name} keeps x{accelerator.sustained_clock_fraction:g} of its tensor-core rate "
            "(the part's sustained_clock_fraction; its preset says what it was fitted to)")
