"""Starting a command's MPI job from the command line (`verify --backend mpi`, `calibrate --np`).

Outside an MPI job, a command re-runs itself as `mpiexec -n N python -m mpi4py -m modelplan
<the same arguments>`, with the environment of `mpilaunch.mpi_env` and a bounded job time, and
exits with the job's status. The arguments are rebuilt from what click parsed (only those given
on the command line), so this works the same from a shell and from a test's CliRunner.
"""

from __future__ import annotations

import os
import shutil
import sys
from enum import StrEnum
from typing import Any, Iterable

from modelplan.errors import ModelplanError


class BackendChoice(StrEnum):
    """Where verify's rank programs run (the values of `modelplan.execute.spmd.SpmdBackend`)."""

    sim = "sim"
    mpi = "mpi"


def require_mpi4py() -> None:
    """A one-line error when mpi4py is not installed (checked without starting MPI)."""
    from modelplan.execute.mpilaunch import MPI_MISSING

    try:
        import mpi4py  # noqa: F401 - only the package; mpi4py.MPI would initialise MPI
    except ImportError:
        raise ModelplanError(MPI_MISSING) from None


def command_args(ctx: Any, drop: Iterable[str] = ()) -> list[str]:
    """The subcommand and the arguments the user gave (defaults left out), as an argv list.

    `ctx` is the command's `typer.Context`. Typer ships its own copy of click, so parameters are
    told apart by their attributes rather than by click's classes.
    """
    args = [ctx.info_name or ""]
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name)
        if param.name in drop or source is None or source.name == "DEFAULT":
            continue
        value = ctx.params[param.name]
        if param.param_type_name == "argument":
            args.append(str(value))
        elif getattr(param, "is_flag", False):
            if param.secondary_opts:
                args.append(param.opts[0] if value else param.secondary_opts[0])
            elif value:
                args.append(param.opts[0])
        elif getattr(param, "multiple", False):
            for item in value or ():
                args += [param.opts[0], str(item)]
        elif value is not None:
            args += [param.opts[0], str(value)]
    return args


def _job(num_ranks: int, args: list[str], timeout_s: float, capture_stdout: bool = False) -> Any:
    """Run the job to its end (`mpilaunch.run_mpi_job`); print the one line of an abnormal end."""
    from modelplan.execute.mpilaunch import mpi_env, mpiexec_command, run_mpi_job

    require_mpi4py()
    command = mpiexec_command(num_ranks, ["-m", "modelplan", *args])
    env = mpi_env(num_ranks, timeout_s=timeout_s + 60)
    # Open MPI gives each rank a pseudo-terminal: tell rich what our own stdout really is
    tty = sys.stdout.isatty() and not capture_stdout
    env.setdefault("TTY_COMPATIBLE", "1" if tty else "0")
    if tty:
        env.setdefault("COLUMNS", str(shutil.get_terminal_size().columns))
    end = run_mpi_job(command, env, num_ranks, capture_stdout=capture_stdout)
    if end.error is not None:
        print(f"error: {end.error}", file=sys.stderr)
    return end


def run_job(num_ranks: int, args: list[str], timeout_s: float) -> int:
    """Run `modelplan <args>` on `num_ranks` MPI processes; the job's exit status.

    mpiexec's MPIEXEC_TIMEOUT ends the job `timeout_s` + 60 s after it starts (the ranks' own
    watchdog fires first and says which rank waited for what). A job that ends abnormally (a
    killed rank or mpiexec, Ctrl-C) ends with one `error:` line and no processes or /dev/shm
    segments left behind.
    """
    return _job(num_ranks, args, timeout_s).returncode


def run_job_output(num_ranks: int, args: list[str], timeout_s: float) -> str:
    """`run_job`, returning what the job printed on stdout (its stderr goes to ours); a failed
    job is a one-line error."""
    end = _job(num_ranks, args, timeout_s, capture_stdout=True)
    if end.returncode != 0:
        if end.error is not None:  # already printed
            raise JobFailed(end.returncode)
        raise ModelplanError(f"the job `modelplan {' '.join(args)}` on {num_ranks} ranks failed "
                             f"(exit code {end.returncode})")
    return end.stdout or ""


class JobFailed(Exception):
    """A job that ended abnormally and whose one-line reason is already printed."""

    def __init__(self, returncode: int) -> None:
        super().__init__(returncode)
        self.returncode = returncode


def rank_is_terminal() -> bool:
    """Whether a rank of an MPI job should print for a terminal (colours, box drawing).

    A rank's stdout is a pseudo-terminal under Open MPI whatever mpiexec's own stdout is, so
    only the launcher's `TTY_COMPATIBLE=1` (rich's convention) says it is one.
    """
    return os.environ.get("TTY_COMPATIBLE") == "1"
