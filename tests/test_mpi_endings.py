"""How an MPI job that modelplan starts itself ends when something kills part of it.

`modelplan calibrate --np 2` (a sweep long enough to be caught mid-run) is started as a real
subprocess; once both ranks are inside MPI (they map their shared-memory segment) one process is
signalled. Each ending must be one `error:` line from modelplan, no traceback, no process of the
job still running, and no /dev/shm segment left (skipped without mpi4py and an MPI library).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mpi_support import ROOT, env_for, needs_mpi  # noqa: E402

pytestmark = needs_mpi
LONG_SWEEP = ["calibrate", "--np", "2", "-b", "1M", "-e", "16M", "-f", "2", "-n", "400", "-w", "1",
              "--timeout-s", "60"]


def children(pid: int) -> list[int]:
    """Every descendant of `pid` (from /proc), children before grandchildren."""
    out, todo = [], [pid]
    while todo:
        parent = todo.pop(0)
        for task in Path(f"/proc/{parent}/task").glob("*"):
            try:
                kids = [int(k) for k in (task / "children").read_text().split()]
            except OSError:
                continue
            out += kids
            todo += kids
    return out


def mapped_segments(pid: int) -> set[Path]:
    """The /dev/shm files process `pid` maps (its MPI shared-memory segments)."""
    try:
        lines = Path(f"/proc/{pid}/maps").read_text().splitlines()
    except OSError:
        return set()
    fields = (ln.split(maxsplit=5) for ln in lines)  # address perms offset dev inode path
    return {Path(f[5]) for f in fields if len(f) == 6 and f[5].startswith("/dev/shm/")}


def maps_segment(pid: int) -> bool:
    return any("sm_segment" in p.name for p in mapped_segments(pid))


def _interactive_signals() -> None:
    """SIGINT as a terminal's foreground job gets it (a test runner started in the background,
    e.g. under nohup, passes SIGINT down ignored, and Python then never raises KeyboardInterrupt)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def start_job() -> tuple[subprocess.Popen, int, list[int], set[Path]]:
    """The launcher, its mpiexec, the 2 ranks and the segments they map, once both ranks are
    inside MPI (the job's own segments: other MPI jobs on the machine may come and go)."""
    launcher = subprocess.Popen([sys.executable, "-m", "modelplan", *LONG_SWEEP], cwd=ROOT,
                                env=env_for(2), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=_interactive_signals)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        procs = children(launcher.pid)
        ranks = [p for p in procs if maps_segment(p)]
        # mpiexec: the launcher's child that the ranks descend from (the other is its reaper)
        mpiexec = [p for p in procs if p not in ranks and set(ranks) <= set(children(p))]
        if mpiexec and len(ranks) == 2:
            return launcher, mpiexec[0], ranks, set().union(*map(mapped_segments, ranks))
        time.sleep(0.05)
    launcher.kill()
    pytest.fail("the 2-rank job did not start within 60 s")


def finish(launcher: subprocess.Popen, pids: list[int]) -> tuple[int, list[str], str]:
    """(exit code, error lines, stderr) once the launcher ended; asserts nothing is left over."""
    _, stderr = launcher.communicate(timeout=60)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() for p in pids):
        time.sleep(0.1)
    alive = [p for p in pids if Path(f"/proc/{p}").exists()
             and "zombie" not in Path(f"/proc/{p}/status").read_text().lower()]
    assert alive == [], f"processes of the job still running: {alive}"
    assert "Traceback" not in stderr, stderr
    return launcher.returncode, [ln for ln in stderr.splitlines() if ln.startswith("error:")], stderr


def left(segments: set[Path]) -> set[Path]:
    """The job's segments still in /dev/shm once clean-up had 10 s (after a SIGKILLed launcher a
    detached reaper removes them, asynchronously)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(p.exists() for p in segments):
        time.sleep(0.1)
    return {p for p in segments if p.exists()}


def test_killed_rank_is_one_line_naming_it():
    """SIGKILL of rank 1: mpiexec ends rank 0, modelplan says which rank died of what."""
    launcher, mpiexec, ranks, segments = start_job()
    os.kill(ranks[1], signal.SIGKILL)
    code, errors, stderr = finish(launcher, [mpiexec, *ranks])
    assert code == 128 + 9
    assert errors == ["error: rank 1 of the MPI job of 2 ranks died from SIGKILL; "
                      "mpiexec ended the other ranks"], stderr
    assert segments and left(segments) == set()


def test_killed_mpiexec_is_one_line_and_ends_the_ranks():
    """SIGKILL of mpiexec orphans the ranks: the launcher ends them and says what happened
    (before: exit 247 and nothing printed, ranks running on)."""
    launcher, mpiexec, ranks, segments = start_job()
    os.kill(mpiexec, signal.SIGKILL)
    code, errors, stderr = finish(launcher, [mpiexec, *ranks])
    assert code == 128 + 9
    assert errors == ["error: mpiexec was killed by SIGKILL: ended the MPI job of 2 ranks"], stderr
    assert segments and left(segments) == set()


def test_ctrl_c_stops_the_job_and_leaves_no_segments():
    """SIGINT to the launcher (Ctrl-C): the whole job stops, exit 130, one line."""
    launcher, mpiexec, ranks, segments = start_job()
    os.kill(launcher.pid, signal.SIGINT)
    code, errors, stderr = finish(launcher, [mpiexec, *ranks])
    assert code == 130
    assert errors == ["error: interrupted (SIGINT): stopped the MPI job of 2 ranks"], stderr
    assert segments and left(segments) == set()


def test_killed_launcher_takes_the_job_with_it():
    """SIGKILL of the launcher (no chance to clean up): mpiexec gets SIGTERM from the kernel
    (PR_SET_PDEATHSIG) and ends its ranks; no process or segment stays behind."""
    launcher, mpiexec, ranks, segments = start_job()
    os.kill(launcher.pid, signal.SIGKILL)
    code, _, _ = finish(launcher, [mpiexec, *ranks])
    assert code == -9
    assert segments and left(segments) == set()
