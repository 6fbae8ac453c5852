"""TEST-ONLY hooks around the `modelplan` command line, for tests/test_cli_verify_mpi.py. Never
imported by the package. Run as

    mpiexec -n N python -m mpi4py tests/mpi_cli_hooks.py [HOOK ...] -- ARGS [-- ARGS ...]

Each `-- ARGS` group is one `modelplan ARGS` command, run in order in this same MPI job (several
small plans share one job start-up); rank 0 prints `=== command K` on stdout before each.
Hooks:
- `kill=R:N`: rank R kills itself with SIGKILL at its N-th message receive (a dying process);
- `break-tp`: the row-parallel layers skip their tensor-parallel all-reduce (a check must fail);
- `report-exit`: every rank writes `rank R exit C` to stderr when it ends.
"""

from __future__ import annotations

import os
import signal
import sys


def _rank() -> int:
    for var in ("OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK"):
        if var in os.environ:
            return int(os.environ[var])
    return 0


def _install_kill(rank: int, nth: int) -> None:
    from modelplan.execute.mpicomm import MPICommunicator

    take, seen = MPICommunicator._take, [0]

    def _take(self, *args, **kwargs):
        if self.rank == rank:
            seen[0] += 1
            if seen[0] == nth:
                os.kill(os.getpid(), signal.SIGKILL)
        return take(self, *args, **kwargs)

    MPICommunicator._take = _take


def _install_break_tp() -> None:
    from modelplan.execute import mappings

    mappings.reduce_from_tensor_model_parallel_region = lambda tp, x, label: x


def _install_report_exit() -> None:
    from modelplan.execute import mpicomm

    exit_rank = mpicomm.exit_rank

    def _exit_rank(status: int):
        sys.stderr.write(f"rank {_rank()} exit {status}\n")
        exit_rank(status)

    mpicomm.exit_rank = _exit_rank


def main(argv: list[str]) -> None:
    hooks, commands = [], []
    for token in argv:
        if token == "--":
            commands.append([])
        elif commands:
            commands[-1].append(token)
        else:
            hooks.append(token)
    for hook in hooks:
        if hook.startswith("kill="):
            rank, nth = hook.removeprefix("kill=").split(":")
            _install_kill(int(rank), int(nth))
        elif hook == "break-tp":
            _install_break_tp()
        elif hook == "report-exit":
            _install_report_exit()
        else:
            raise SystemExit(f"unknown hook {hook}")

    from modelplan.cli import app

    for k, args in enumerate(commands):
        if _rank() == 0:
            print(f"=== command {k}", flush=True)
        try:
            app(args, prog_name="modelplan")
        except SystemExit as exc:
            if exc.code not in (0, None):
                raise
    if "report-exit" in hooks:
        sys.stderr.write(f"rank {_rank()} exit 0\n")


if __name__ == "__main__":
    main(sys.argv[1:])
