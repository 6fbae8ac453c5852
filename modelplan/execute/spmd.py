"""What every SPMD backend shares: its result type, its errors and the backend names.

`run_spmd` (threads, `simcomm.py`) and `run_spmd_mpi` (processes, `mpicomm.py`) take the same
arguments `(world_size, fn, *args, timeout_s=...)`, call `fn(comm, *args)` once per rank and
return an `SpmdResult`, so a caller picks a backend with `backends.spmd_runner(backend)` and
nothing else changes.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Iterator

from modelplan.comm.communicator import Ledger
from modelplan.errors import ModelplanError


class SpmdBackend(StrEnum):
    """Where the rank programs run."""

    SIM = "sim"
    """One thread per rank in this process (`modelplan.execute.simcomm.run_spmd`)."""
    MPI = "mpi"
    """One MPI process per rank (`modelplan.execute.mpicomm.run_spmd_mpi`, under mpiexec)."""


@dataclass(frozen=True)
class SpmdResult:
    """Each rank's return value and ledger, indexed by global rank."""

    results: tuple[Any, ...]
    ledgers: tuple[Ledger, ...]

    @property
    def world_size(self) -> int:
        """Ranks that ran."""
        return len(self.results)


class CommError(ModelplanError):
    """A communicator call that cannot be performed (rank not in group, shape mismatch, ...)."""


class SpmdError(ModelplanError):
    """A rank program failed; names the first failing rank and its exception."""

    def __init__(self, message: str, rank: int | None = None, cause: BaseException | None = None,
                 rank_traceback: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        """Global rank that failed first (None for a deadlock or timeout)."""
        self.cause = cause
        """The exception that rank raised."""
        self.rank_traceback = rank_traceback
        """That rank's formatted traceback, for debugging."""


class SpmdDeadlock(SpmdError):
    """Every live rank waits for a message that no live rank can send any more."""


class SpmdTimeout(SpmdError):
    """The run did not finish within `timeout_s`."""


class RankAborted(Exception):
    """Raised inside a rank that was blocked when another rank failed (not a root cause)."""


class RankStepError(Exception):
    """A rank's compute step raised (a shape error in the math, a bad message): says which step."""


@contextmanager
def named_step(where: str) -> Iterator[None]:
    """Re-raise what a rank's step raises as a RankStepError naming `where` (stage, micro-batch,
    optimizer step); another rank's failure passes through unchanged."""
    try:
        yield
    except (RankAborted, RankStepError):
        raise
    except Exception as exc:  # noqa: BLE001 - named and re-raised for the report
        raise RankStepError(f"{where}: {type(exc).__name__}: {exc}") from exc


def check_world_size(world_size: int) -> None:
    """Reject a world size below 1 with a one-line error."""
    if not isinstance(world_size, int) or isinstance(world_size, bool) or world_size < 1:
        raise SpmdError(f"world_size ({world_size!r}) must be an integer >= 1")
