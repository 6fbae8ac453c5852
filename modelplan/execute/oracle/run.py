"""Pick and run an oracle for a spec: transformer or network, numpy or torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from modelplan.execute.optim import OptimizerConfig
from modelplan.execute.oracle.result import OracleKind, OracleRun, require_torch


def check_oracle(kind: OracleKind | str) -> OracleKind:
    """The oracle kind, after checking that what it needs is installed (one-line error if not)."""
    kind = OracleKind(kind)
    if kind is OracleKind.TORCH:
        require_torch()
    return kind


def run_oracle(kind: OracleKind | str, spec, params: dict[str, np.ndarray], batches: Sequence[Any],
               optimizer: OptimizerConfig, *, micro_batch: int = 1, seed: int = 0) -> OracleRun:
    """One single-device optimizer step per batch from the initial weights `params`.

    Networks need `micro_batch` (BatchNorm statistics are per micro-batch) and `seed` (dropout
    masks); transformers ignore both."""
    kind = OracleKind(kind)
    network = getattr(spec, "kind", None) == "network"
    if kind is OracleKind.TORCH:
        if network:
            from modelplan.execute.oracle.torch_network import torch_network_run

            return torch_network_run(spec, params, batches, optimizer, micro_batch, seed)
        from modelplan.execute.oracle.torch_transformer import torch_transformer_run

        return torch_transformer_run(spec, params, batches, optimizer)
    from modelplan.execute.oracle.numpy_ref import numpy_network_run, numpy_transformer_run

    if network:
        return numpy_network_run(spec, params, batches, optimizer, micro_batch, seed)
    return numpy_transformer_run(spec, params, batches, optimizer)
