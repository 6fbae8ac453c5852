"""Pick an SPMD backend by name: the one place that knows both `simcomm` and `mpicomm` (which
import the shared types of `spmd.py`, never the other way round)."""

from __future__ import annotations

from typing import Callable

from modelplan.execute.spmd import SpmdBackend, SpmdResult


def spmd_runner(backend: SpmdBackend | str) -> Callable[..., SpmdResult | None]:
    """The `run_spmd`-compatible function of a backend (imported lazily: MPI is optional)."""
    backend = SpmdBackend(backend)
    if backend is SpmdBackend.MPI:
        from modelplan.execute.mpicomm import run_spmd_mpi

        return run_spmd_mpi
    from modelplan.execute.simcomm import run_spmd

    return run_spmd
