"""Calibration accuracy: fit on one MPI job, predict a second, independent job (sizes >= 1 MiB).

Run: python benchmarks/bench_calibrate.py [--np N] [--smoke]
1. `modelplan calibrate --np N -b 1K -e 16M -o PROFILE` fits alpha and bandwidth per collective.
2. `modelplan calibrate --np N -b 1M -e 16M --json` measures again in two fresh jobs (not
   fitted on); their difference is the machine's noise floor.
3. Each row: the profile's prediction, time = steps*alpha + volume*size/bandwidth (the
   `[fitted.<collective>]` table), beside the new medians; target |error| <= 25% against their
   mean.
N defaults to min(4, cores): timing runs should not oversubscribe (distributed_backend.md §4.7).
--smoke: a 1K..1M sweep, 3 repeats, never fails (CI checks that the script runs).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET = 0.25


def calibrate(args: list[str]) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    env = dict(os.environ, PYTHONPATH=path)
    proc = subprocess.run([sys.executable, "-m", "modelplan", "calibrate", *args], env=env,
                          capture_output=True, text=True, timeout=900, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"modelplan calibrate {' '.join(args)} failed:\n{proc.stdout}{proc.stderr}")
    return proc


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--np", type=int, default=min(4, os.cpu_count() or 2))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    top, iters = ("1M", "3") if args.smoke else ("16M", "20")
    with tempfile.TemporaryDirectory() as tmp:
        profile_path = Path(tmp) / "profile.toml"
        calibrate(["--np", str(args.np), "-b", "1K", "-e", top, "-n", iters if args.smoke else "10",
                   "-o", str(profile_path)])
        profile = tomllib.loads(profile_path.read_text())
    check = ["--np", str(args.np), "-b", "1M", "-e", top, "-n", iters, "-w", "3", "--json"]
    runs = [json.loads(calibrate(check).stdout)["measurements"] for _ in range(2)]
    print(f"# {profile['source']}")
    print(f"# fit: 1K..{top}; checked: two more jobs, median of {iters}, sizes >= 1 MiB; "
          "spread = job-to-job difference, the machine's noise floor")
    print(f"{'collective':<15} {'size(B)':>10} {'predicted(ms)':>14} {'job 1(ms)':>10} "
          f"{'job 2(ms)':>10} {'error':>7} {'spread':>7}  within {TARGET:.0%}")
    worst, worst_spread, failures = 0.0, 0.0, 0
    for m, m2 in zip(*runs):
        if m["size_bytes"] < 1 << 20:
            continue
        fit = profile["fitted"][m["op"]]
        # the profile's model: steps * alpha + volume_factor * size / bandwidth
        predicted_s = (fit["steps"] * fit["alpha_us"] * 1e-6
                       + fit["volume_factor"] * m["size_bytes"] / (fit["bandwidth_gbps"] * 1e9))
        measured_s = (m["time_s"] + m2["time_s"]) / 2
        err = predicted_s / measured_s - 1
        spread = abs(m["time_s"] - m2["time_s"]) / measured_s
        worst, worst_spread = max(worst, abs(err)), max(worst_spread, spread)
        ok = abs(err) <= TARGET
        failures += not ok
        print(f"{m['op']:<15} {m['size_bytes']:>10} {predicted_s * 1e3:>14.3f} "
              f"{m['time_s'] * 1e3:>10.3f} {m2['time_s'] * 1e3:>10.3f} {err:>+7.1%} "
              f"{spread:>7.1%}  {'yes' if ok else 'NO'}")
    print(f"# worst |error| {worst:.1%}; {failures} row(s) outside {TARGET:.0%}; "
          f"worst job-to-job spread {worst_spread:.1%}; load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    if worst_spread > TARGET:
        print("# the same measurement moved more than the target between two jobs: the machine "
              "is too busy for this check; rerun it on an idle machine")
    if failures and not args.smoke:
        sys.exit(1)


if __name__ == "__main__":
    main()
