"""The numpy executor: a single-device reference model, the same model sharded over ranks
(tensor, sequence, pipeline, data, ZeRO and expert parallelism) and `verify`, which checks that
both agree and that the plan's communication and memory figures match what was done.

Rank programs are SPMD over a communicator that keeps a byte ledger:
`run_spmd(world_size, fn, *args)` runs one thread per rank in this process (the default);
`run_spmd_mpi` (in `modelplan.execute.mpicomm`, needs the `mpi` extra) runs the same `fn` as one
MPI process per rank. Both return an `SpmdResult`. numpy lives here (and only here); every array
is float64 unless a caller asks otherwise.
"""

from modelplan.execute.backends import spmd_runner
from modelplan.execute.simcomm import SimCommunicator, run_spmd
from modelplan.execute.spmd import (
    CommError,
    RankAborted,
    SpmdBackend,
    SpmdDeadlock,
    SpmdError,
    SpmdResult,
    SpmdTimeout,
)

__all__ = [
    "CommError",
    "RankAborted",
    "SimCommunicator",
    "SpmdBackend",
    "SpmdDeadlock",
    "SpmdError",
    "SpmdResult",
    "SpmdTimeout",
    "run_spmd",
    "spmd_runner",
]
