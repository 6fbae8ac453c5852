"""Shared by the MPI tests: is MPI here, and how to start a bounded mpiexec job from a test.

Never run pytest itself under mpiexec and never import mpi4py.MPI in the pytest process (that
starts a singleton MPI that leaves a segment in /dev/shm): every job is a subprocess with a
timeout (shared/reference/distributed_backend.md, section 5).
"""

from __future__ import annotations

import functools
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SHM = Path("/dev/shm")


@functools.cache
def mpi_available() -> bool:
    """mpi4py, its MPI library and mpiexec are there (probed in a subprocess without MPI_Init)."""
    if importlib.util.find_spec("mpi4py") is None:
        return False
    try:
        from modelplan.execute.mpilaunch import mpiexec_path

        mpiexec_path()
    except Exception:  # noqa: BLE001 - no mpiexec
        return False
    probe = ("import mpi4py; mpi4py.rc.initialize = False; from mpi4py import MPI; "
             "MPI.Get_library_version()")
    return subprocess.run([sys.executable, "-c", probe], capture_output=True,
                          timeout=60).returncode == 0


if os.environ.get("MODELPLAN_REQUIRE_MPI") == "1" and not mpi_available():
    raise RuntimeError("MODELPLAN_REQUIRE_MPI=1 (CI) but mpi4py, its MPI library or mpiexec is "
                       "missing: pip install '.[mpi]'")  # CI must run the MPI tests, not skip them
needs_mpi = [
    pytest.mark.mpi,
    pytest.mark.skipif(not mpi_available(), reason="mpi4py / an MPI library not installed"),
]
"""`pytestmark = needs_mpi` for a module of MPI tests."""


def _segments() -> set[Path]:
    return set(SHM.glob("sm_segment.*")) if SHM.is_dir() else set()


def _mapped_anywhere(seg: Path) -> bool:
    """Some live process still maps the segment (another MPI job running right now)."""
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            if str(seg) in maps.read_text():
                return True
        except OSError:
            continue
    return False


def env_for(num_ranks: int, timeout_s: float | None = None) -> dict[str, str]:
    """mpi_env for the ranks, oversubscription allowed, this checkout first on PYTHONPATH."""
    from modelplan.execute.mpilaunch import mpi_env

    env = mpi_env(num_ranks, timeout_s=timeout_s)
    env["PRTE_MCA_rmaps_default_mapping_policy"] = ":oversubscribe"  # 8 ranks on 2 cores
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    env.pop("TTY_COMPATIBLE", None)
    return env


def run_bounded(command: list[str], env: dict[str, str], timeout_s: float
                ) -> subprocess.CompletedProcess:
    """Run a command that starts MPI jobs (again when mpiexec could not start its runtime:
    `mpilaunch.retry_start`); afterwards remove the shared-memory segments that appeared
    meanwhile and that no live process maps (an aborted Open MPI job leaves its 16 MiB segments
    in /dev/shm)."""
    from modelplan.execute.mpilaunch import retry_start

    before = _segments()
    try:
        return retry_start(lambda: subprocess.run(command, env=env, capture_output=True, text=True,
                                                  timeout=timeout_s, cwd=ROOT),
                           lambda proc: (proc.returncode, proc.stderr + proc.stdout))
    finally:
        for seg in _segments() - before:
            if not _mapped_anywhere(seg):  # never pull a segment from under a running job
                seg.unlink(missing_ok=True)


def mpiexec(num_ranks: int, args: list[str], timeout_s: float = 60
            ) -> subprocess.CompletedProcess:
    """`mpiexec -n N python -m mpi4py ARGS`, the job bounded by MPIEXEC_TIMEOUT and the
    subprocess by timeout_s + 30."""
    from modelplan.execute.mpilaunch import mpiexec_command

    return run_bounded(mpiexec_command(num_ranks, args), env_for(num_ranks, timeout_s),
                       timeout_s + 30)
