"""Pick and run an oracle for a spec: transformer or network, numpy or torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle.result import OracleKind, OracleRun, Starts, require_torch
from modelplan.specs.family import family_of


def check_oracle(kind: OracleKind | str) -> OracleKind:
    """The oracle kind, after checking that what it needs is installed (one-line error if not)."""
    kind = OracleKind(kind)
    if kind is OracleKind.TORCH:
        require_torch()
    return kind


def run_oracle(kind: OracleKind | str, spec, params: dict[str, np.ndarray], batches: Sequence[Any],
               optimizer: OptimizerConfig, *, micro_batch: int = 1, seed: int = 0, starts: Starts = None) -> OracleRun:
    """One single-device optimizer step per batch from the initial weights `params`, or anchored:
    step t from `starts[t - 1]` (`result.Starts`).

    The model's family names its oracles (`specs/family.py`). Networks need `micro_batch`
    (BatchNorm statistics are per micro-batch) and `seed` (dropout masks); transformers ignore both."""
    kind = OracleKind(kind)
    return family_of(spec).oracle(kind.value)(spec, params, batches, optimizer, micro_batch, seed, starts)
