"""The planner against the ten published Megatron-LM runs (Narayanan et al. SC'21, Table 1).

For each run: the exact published plan (t, p, d, v, b, B, full recompute, fp16) on DGX A100
80 GB (`dgx-a100` preset) with the default cost model (ONE set of constants for the whole
table), the published TFLOP/s per GPU, the predicted one in the paper's convention (their FLOP
count 96 B s l h^2 (1 + s/6h + V/16lh) includes the recompute forward and equals the planner's
hardware FLOPs exactly for these models), the error, and the mean absolute error. Then the
planner's own search over the same GPUs and batch: its best plan must be predicted at least as
fast as the published one and fit in memory.

    python benchmarks/bench_calibration.py [--no-search]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.plan.calibration import calibrate, megatron_gpt  # noqa: E402
from modelplan.plan.search import search_plans  # noqa: E402

DATA = ROOT / "tests" / "data" / "calibration_runs.json"
TOLERANCE = 0.15


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-search", action="store_true", help="skip the planner's own search")
    args = parser.parse_args()
    cluster = load_cluster("dgx-a100")
    cases = [megatron_gpt(r) for r in json.loads(DATA.read_text())]
    print(f"cluster {cluster.name}: {cluster.accelerator.name}, default CostModel\n")
    head = f"{'run':<8} {'t':>2} {'p':>3} {'d':>3} {'v':>2} {'b':>3} {'B':>5}  {'published':>9} {'predicted':>9} {'error':>7}  {'memory':>8}"
    print(head)
    print("-" * len(head))
    errors, ok = [], True
    for case in cases:
        row = calibrate(case, cluster)
        p, est = case.plan, row.estimate
        errors.append(row.error)
        flag = "" if abs(row.error) <= TOLERANCE and est.fits else "  <-- FAIL"
        ok &= not flag
        print(f"{case.id.rsplit('_', 1)[-1]:<8} {p.tp:>2} {p.pp:>3} {p.dp:>3} {p.vpp:>2} {p.micro_batch:>3} "
              f"{case.training.global_batch:>5}  {case.reported_tflops_per_gpu:>9.0f} {row.predicted_tflops_per_gpu:>9.1f} "
              f"{100 * row.error:>+6.1f}%  {est.peak_memory_bytes / 1e9:>6.1f}GB{flag}")
    mae = sum(abs(e) for e in errors) / len(errors)
    print(f"\nmean absolute error {100 * mae:.1f}%, max {100 * max(abs(e) for e in errors):.1f}% "
          f"(tolerance {100 * TOLERANCE:.0f}% per row)")
    if not args.no_search:
        print("\nplanner's own best plan for the same GPUs and batch:")
        for case in cases:
            published = calibrate(case, cluster).estimate
            start = time.perf_counter()
            best = search_plans(case.spec, case.training, cluster, case.gpus, top_k=1).best[0]
            wall = time.perf_counter() - start
            p = best.plan
            faster = best.step.step_time_s <= published.step.step_time_s * (1 + 1e-9)
            ok &= faster and best.fits
            print(f"  {case.id.rsplit('_', 1)[-1]:<6} tp{p.tp} pp{p.pp} dp{p.dp} vpp{p.vpp} mb{p.micro_batch} "
                  f"sp={'on' if p.sequence_parallel else 'off'} recompute={p.recompute} zero={p.zero}: "
                  f"{best.step.step_time_s:.2f} s vs published {published.step.step_time_s:.2f} s "
                  f"(x{published.step.step_time_s / best.step.step_time_s:.2f}), MFU {100 * best.mfu:.1f}%, "
                  f"{best.peak_memory_bytes / 1e9:.1f} GB  [{wall:.2f} s]{'' if faster and best.fits else '  <-- FAIL'}")
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
