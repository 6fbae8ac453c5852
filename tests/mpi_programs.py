"""Rank programs that tests/test_mpi.py launches with `mpiexec -n N python -m mpi4py THIS SCENARIO`.

Scenarios:
- `workload OUT.pkl`: every collective on tp/dp/pp groups and the world; rank 0 pickles the
  results and ledgers (test_mpi runs the same `workload` in the simulator and compares).
- `crash`: rank 1 raises while the others wait in an all_reduce.
- `kill`: rank 1 kills itself with SIGKILL while the others wait in an all_reduce.
- `wrong_world N`: asks for N ranks; reports the error as the CLI does (`error: ...`, exit 2).
- `hang T`: every rank receives first (a deadlock); the watchdog must end it after T seconds.
"""

from __future__ import annotations

import os
import pickle
import signal
import sys

import numpy as np

from modelplan.comm.communicator import Group
from modelplan.comm.ops import Axis
from modelplan.plan.dims import ParallelDims


def grid_for(world_size: int) -> ParallelDims:
    """tp=2, pp=2 and the rest dp (4 ranks: dp=1; 8 ranks: dp=2)."""
    return ParallelDims(tp=2, pp=2, dp=world_size // 4)


def workload(comm, world_size: int) -> dict:
    """All collectives; arrays of 64x64 float64 (32 KiB) exceed Open MPI's eager limit."""
    grid = grid_for(world_size)
    r = comm.rank
    tp = Group(Axis.TP, grid.group(Axis.TP, r))
    dp = Group(Axis.DP, grid.group(Axis.DP, r))
    pp = Group(Axis.PP, grid.group(Axis.PP, r))
    world = Group(Axis.WORLD, tuple(range(world_size)))
    rng = np.random.default_rng([7, r])
    x = rng.standard_normal((64, 64))
    out = {
        "all_reduce_tp": comm.all_reduce(x, tp, label="tp/ar"),
        "all_reduce_world_ragged": comm.all_reduce(rng.standard_normal(37), world),
        "all_gather_dp": comm.all_gather(x[:8], dp, axis=1),
        "reduce_scatter_world": comm.reduce_scatter(x, world, axis=0),
        "broadcast_world": comm.broadcast(x, world, root=world_size - 1),
        "reduce_dp": comm.reduce(x, dp, root=dp.ranks[-1]),
        "all_to_all_world": comm.all_to_all(
            [np.full((j + r + 1, 3), 100.0 * r + j) for j in range(world_size)], world),
    }
    stage, last = grid.coords(r).pp_rank, grid.pp - 1
    # pipeline: both stages send first, then receive (blocking sends would deadlock here)
    peer = pp.ranks[1 - stage] if last == 1 else pp.ranks[(stage + 1) % grid.pp]
    comm.send(x * (stage + 1), peer, pp, label="pp/act")
    comm.send(np.arange(5) + r, peer, pp, label="pp/small")
    # a world collective while those sends are outstanding (MPI must not wait for the peer here)
    out["all_reduce_between"] = comm.all_reduce(x[0], world)
    out["recv_pp"] = [comm.recv(peer, pp), comm.recv(peer, pp)]
    comm.barrier(world)
    return out


def _crash(comm, kill: bool) -> None:
    world = Group(Axis.WORLD, tuple(range(comm.world_size)))
    comm.all_reduce(np.ones(4), world)
    if comm.rank == 1:
        if kill:
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError("simulated failure on rank 1")
    comm.all_reduce(np.ones(4), world)


def _hang(comm) -> None:
    world = Group(Axis.WORLD, tuple(range(comm.world_size)))
    comm.recv((comm.rank + 1) % comm.world_size, world)


def main(argv: list[str]) -> None:
    from mpi4py import MPI

    from modelplan.errors import ModelplanError
    from modelplan.execute.mpicomm import exit_rank, run_spmd_mpi

    size = MPI.COMM_WORLD.Get_size()
    scenario = argv[0]
    if scenario == "workload":
        run = run_spmd_mpi(size, workload, size, timeout_s=60)
        if run is not None:
            with open(argv[1], "wb") as fh:
                pickle.dump((run.results, run.ledgers), fh)
    elif scenario in ("crash", "kill"):
        run_spmd_mpi(size, _crash, scenario == "kill", timeout_s=60)
    elif scenario == "hang":
        run_spmd_mpi(size, _hang, timeout_s=float(argv[1]))
    elif scenario == "wrong_world":
        try:
            run_spmd_mpi(int(argv[1]), workload, int(argv[1]))
        except ModelplanError as exc:  # what modelplan.cli.verify does on each rank of a job
            print(f"error: {exc}", file=sys.stderr)
            exit_rank(2)  # not sys.exit: under `python -m mpi4py` that aborts the other ranks
    else:
        raise SystemExit(f"unknown scenario {scenario}")


if __name__ == "__main__":
    main(sys.argv[1:])
