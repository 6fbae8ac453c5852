"""Run the MPI tests many times in a row and print how often each test passed (a flake finder).

    python benchmarks/mpi_repeat.py              # 20 runs of every MPI test, slow ones included
    python benchmarks/mpi_repeat.py --runs 50 -k wrong_world

Each run is one `pytest -m mpi` process over the MPI test files (so every run starts its own
mpiexec jobs, as CI does). Prints one line per run (passed/failed counts, seconds), then the tally
per test and `MPI tests: N of N runs passed`; exits 1 when any run failed. Afterwards no Open MPI
segment this script's runs created is left in /dev/shm (checked and printed).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FILES = ("tests/test_mpi.py", "tests/test_cli_verify_mpi.py", "tests/test_mpi_endings.py")
RESULT = re.compile(r"^(tests/\S+::\S+) (PASSED|FAILED|ERROR|SKIPPED)", re.M)


def shm_segments() -> set[str]:
    shm = Path("/dev/shm")
    return {p.name for p in shm.glob("sm_segment.*")} if shm.is_dir() else set()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("-k", default=None, help="pytest -k expression (default: every MPI test)")
    parser.add_argument("--keep", type=Path, default=Path("mpi_repeat_failures"),
                        help="folder for each failing run's whole pytest output (default: %(default)s)")
    args = parser.parse_args()
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMP_NUM_THREADS="1", MODELPLAN_REQUIRE_MPI="1")
    files = [f for f in FILES if (ROOT / f).is_file()]
    command = [sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-m", "mpi",
               *files] + (["-k", args.k] if args.k else [])
    before = shm_segments()
    tally: Counter[tuple[str, str]] = Counter()
    runs_passed = 0
    for run in range(1, args.runs + 1):
        start = time.perf_counter()
        proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
        # -rA's short summary: "PASSED tests/x.py::test" lines
        found = re.findall(r"^(PASSED|FAILED|ERROR) (tests/\S+)", proc.stdout, re.M)
        for outcome, test in found:
            tally[test, outcome] += 1
        failed = [t for o, t in found if o != "PASSED"]
        ok = proc.returncode == 0
        runs_passed += ok
        print(f"run {run:>2}: {'ok  ' if ok else 'FAIL'} {len(found) - len(failed)} passed, "
              f"{len(failed)} failed, {seconds:.0f} s" + (f"  ({', '.join(failed)})" if failed else ""),
              flush=True)
        if not found and not ok:
            print(proc.stdout[-2000:], proc.stderr[-2000:], sep="\n")
        for line in re.findall(r"^(?:FAILED|ERROR) tests/\S+ - .*$", proc.stdout, re.M):
            print(f"         {line[:400]}")  # the failure's short message (-rA)
        if not ok:  # the whole output (Open MPI's own message included) for the post-mortem
            args.keep.mkdir(parents=True, exist_ok=True)
            kept = args.keep / f"run{run:02d}.txt"
            kept.write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
            print(f"         whole output: {kept}")
    print()
    for test in sorted({t for t, _ in tally}):
        print(f"{tally[test, 'PASSED']:>3}/{args.runs}  {test}")
    left = shm_segments() - before
    print(f"\nMPI tests: {runs_passed} of {args.runs} runs passed; "
          f"/dev/shm segments left by these runs: {len(left)}")
    return 0 if runs_passed == args.runs and not left else 1


if __name__ == "__main__":
    sys.exit(main())
