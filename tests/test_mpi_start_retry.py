"""A launch that mpiexec could not start (its runtime failed, no rank ran) is tried again; any
other failure is not. The fake launcher prints Open MPI 5's own message (seen in a loaded CI run:
"The PMIx server's listener thread failed to start. We cannot continue.") on its first call."""

from __future__ import annotations

import sys

from modelplan.execute.mpilaunch import START_TRIES, failed_to_start, run_mpi_job

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


def launch(tmp_path, failures: int, message: str):
    count = tmp_path / "count"
    end = run_mpi_job([sys.executable, "-c", FAKE, str(count), str(failures), message], {}, 1,
                      capture_stdout=True)
    return end, int(count.read_text())


def test_start_failure_is_launched_again(tmp_path):
    end, calls = launch(tmp_path, 1, PMIX)
    assert (end.returncode, end.stdout.strip(), calls) == (0, "ran", 2)


def test_tries_are_bounded(tmp_path):
    end, calls = launch(tmp_path, 10, PMIX)
    assert end.returncode == 1 and calls == START_TRIES


def test_other_failures_are_not_retried(tmp_path):
    end, calls = launch(tmp_path, 1, "error: rank 1 failed: RuntimeError: boom")
    assert end.returncode == 1 and calls == 1


def test_marker():
    assert failed_to_start("----\n" + PMIX + "\n----") and not failed_to_start("error: world_size (8)")
