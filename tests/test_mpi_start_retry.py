"""A launch that mpiexec could not start (its runtime failed, no rank ran) is tried again; any
other failure is not. One rule, `mpilaunch.retry_start`, used by `run_mpi_job` and by the tests'
`run_bounded`. The fake launchers print Open MPI 5's own message (seen in a loaded CI run:
"The PMIx server's listener thread failed to start. We cannot continue.") on their first calls."""

from __future__ import annotations

import sys
from pathlib import Path

from modelplan.execute.mpilaunch import START_TRIES, failed_to_start, retry_start, run_mpi_job

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mpi_support import run_bounded  # noqa: E402

FAKE = r'''
import sys
from pathlib import Path
count = Path(sys.argv[1])
n = int(count.read_text()) if count.exists() else 0
count.write_text(str(n + 1))
if n < int(sys.argv[2]):
    sys.stderr.write(sys.argv[3] + "\n")
    sys.exit(1)
print("ran")
'''

PMIX = "The PMIx server's listener thread failed to start. We cannot continue."


class FakeLaunch:
    """A launcher whose first `failures` calls end with (returncode, stderr), then (0, 'ran')."""

    def __init__(self, failures: int, returncode: int, stderr: str) -> None:
        self.failures, self.returncode, self.stderr, self.calls = failures, returncode, stderr, 0

    def __call__(self) -> tuple[int, str]:
        self.calls += 1
        return (self.returncode, self.stderr) if self.calls <= self.failures else (0, "ran")


def test_retry_start_launches_again_after_a_start_failure():
    """One start failure, then a run: two launches, the run's result returned."""
    fake = FakeLaunch(1, 1, PMIX)
    assert retry_start(fake, lambda r: r) == (0, "ran") and fake.calls == 2


def test_retry_start_is_bounded():
    """mpiexec that never starts is launched START_TRIES times and its last failure returned."""
    fake = FakeLaunch(10, 1, PMIX)
    assert retry_start(fake, lambda r: r) == (1, PMIX) and fake.calls == START_TRIES


def test_retry_start_does_not_retry_other_failures():
    """A rank's own error is the job's answer: one launch."""
    fake = FakeLaunch(1, 1, "error: rank 1 failed: RuntimeError: boom")
    assert retry_start(fake, lambda r: r)[0] == 1 and fake.calls == 1


def test_retry_start_does_not_retry_a_stopped_job():
    """Exit code 130 (128 + SIGINT): the user stopped it, even if the message is a start failure."""
    fake = FakeLaunch(1, 130, PMIX)
    assert retry_start(fake, lambda r: r)[0] == 130 and fake.calls == 1


def test_retry_start_retries_mpiexecs_own_exit_code():
    """Exit code 213 is what Open MPI 5's mpiexec returned with the PMIx listener message
    (mpi_repeat at 1a843e4, kept output): above 128 but no signal, so it is launched again."""
    fake = FakeLaunch(1, 213, PMIX)
    assert retry_start(fake, lambda r: r) == (0, "ran") and fake.calls == 2


def _fake_command(tmp_path, failures: int, message: str) -> tuple[list[str], Path]:
    count = tmp_path / "count"
    return [sys.executable, "-c", FAKE, str(count), str(failures), message], count


def test_run_mpi_job_launches_again_after_a_start_failure(tmp_path):
    """The library's launcher: a process that fails to start once runs on the second launch."""
    command, count = _fake_command(tmp_path, 1, PMIX)
    end = run_mpi_job(command, {}, 1, capture_stdout=True)
    assert (end.returncode, end.stdout.strip(), int(count.read_text())) == (0, "ran", 2)


def test_run_mpi_job_does_not_retry_other_failures(tmp_path):
    command, count = _fake_command(tmp_path, 1, "error: rank 1 failed: RuntimeError: boom")
    end = run_mpi_job(command, {}, 1)
    assert end.returncode == 1 and int(count.read_text()) == 1


def test_run_bounded_uses_the_same_rule(tmp_path):
    """The tests' launcher: start failures are tried again up to START_TRIES launches."""
    command, count = _fake_command(tmp_path, 10, PMIX)
    proc = run_bounded(command, {}, timeout_s=60)
    assert proc.returncode == 1 and int(count.read_text()) == START_TRIES


def test_marker():
    assert failed_to_start("----\n" + PMIX + "\n----") and not failed_to_start("error: world_size (8)")
