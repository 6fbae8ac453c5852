"""Wall time of `modelplan count llama-3-8b` as a subprocess, and the import time of `modelplan`.

Target: the command finishes in under 0.5 s on 2 cores. Prints the median (and min) of several
runs next to a bare `python -c pass` baseline, so interpreter start-up on the machine at hand can
be told apart from modelplan's own cost.

    python benchmarks/bench_count.py [--runs 9] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def command_prefix() -> list[str]:
    """The installed `modelplan` script if it is on PATH, else `python -m modelplan`."""
    script = shutil.which("modelplan")
    return [script] if script else [sys.executable, "-m", "modelplan"]


def wall_times_s(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    """(wall-clock, CPU user+sys) seconds of `runs` executions of argv (must exit 0).

    CPU time is what the process itself consumed, so it is robust to other load on a shared
    machine; on an idle machine wall time is CPU time plus a little I/O.
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    wall, cpu = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, cwd=ROOT, env=env)
        wall.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall, cpu


def report(label: str, times: tuple[list[float], list[float]]) -> None:
    wall, cpu = times
    print(
        f"{label:46s} wall median {statistics.median(wall):6.3f} s  min {min(wall):6.3f} s"
        f"   cpu median {statistics.median(cpu):6.3f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9, help="runs per measurement (median reported)")
    parser.add_argument("--smoke", action="store_true", help="2 runs each (CI smoke mode)")
    args = parser.parse_args()
    runs = 2 if args.smoke else args.runs

    print(f"cpus: {os.cpu_count()}, load average: {os.getloadavg()[0]:.2f}, runs: {runs}")
    report("python -c pass (interpreter baseline)", wall_times_s([sys.executable, "-c", "pass"], runs))
    report("python -c 'import modelplan'", wall_times_s([sys.executable, "-c", "import modelplan"], runs))
    report(
        "python -c 'import modelplan.cli' (typer app)",
        wall_times_s([sys.executable, "-c", "import modelplan.cli"], runs),
    )
    prefix = command_prefix()
    report("modelplan count llama-3-8b --json", wall_times_s([*prefix, "count", "llama-3-8b", "--json"], runs))
    count = wall_times_s([*prefix, "count", "llama-3-8b"], runs)
    report("modelplan count llama-3-8b", count)
    verdict = "meets" if statistics.median(count[0]) < 0.5 else "misses"
    print(f"target < 0.5 s for `modelplan count llama-3-8b`: {verdict}")


if __name__ == "__main__":
    main()
