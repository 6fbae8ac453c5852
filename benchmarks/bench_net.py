"""Networks in verify and plan: wall time of each verify case and of the planner's search, and the
planner's ResNet-50 prediction. Run: python benchmarks/bench_net.py"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout, not an installed copy

from modelplan.comm.clusters import load_cluster
from modelplan.execute.verify import verify
from modelplan.plan.search import search_plans
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

CASES = [
    ("mlp", dict(tp=3), 2),
    ("mlp", dict(dp=2), 4),
    ("small-cnn", dict(dp=2, pp=2), 8),
    ("small-cnn", dict(tp=2, pp=2, dp=2, zero=3), 8),
    ("resnet-18", dict(dp=2, pp=2, micro_batch=2), 8),
    ("resnet-50", dict(tp=2, pp=2, micro_batch=2), 8),
    ("lstm-lm", dict(dp=2, pp=2), 8),
]


def main() -> None:
    print(f"{'model':<10} {'plan':<34} {'passed':>6} {'wall s':>7} {'sharded s':>9} {'reference s':>11}")
    for name, plan, batch in CASES:
        t0 = time.perf_counter()
        report = verify(load_model(name), TrainingSpec(global_batch=batch), Plan(**plan))
        wall = time.perf_counter() - t0
        label = " ".join(f"{k}={v}" for k, v in plan.items())
        print(f"{name:<10} {label:<34} {str(report.passed):>6} {wall:7.2f} {report.sharded_s:9.2f} "
              f"{report.reference_s:11.2f}")
    for name, gpus, cluster, batch in (("resnet-50", 8, "dgx-a100", 256), ("resnet-50", 8, "dgx-a100", 1024),
                                       ("lstm-lm", 8, "dgx-h100", 256), ("resnet-50", 64, "dgx-a100", 2048)):
        t0 = time.perf_counter()
        result = search_plans(load_model(name), TrainingSpec(global_batch=batch, precision="bf16"),
                              load_cluster(cluster), gpus)
        wall = time.perf_counter() - t0
        best = result.best[0]
        p = best.plan
        print(f"plan {name} on {gpus} x {cluster}, batch {batch}: {result.candidates} plans ({result.evaluated} "
              f"priced, {result.bounded} bounded) in {wall:.2f} s; best "
              f"tp{p.tp} pp{p.pp} dp{p.dp} mb{p.micro_batch} zero{p.zero}: {best.step.step_time_s * 1e3:.1f} ms/step, "
              f"{best.throughput_per_s / gpus:,.0f} samples/s/GPU, MFU {100 * best.mfu:.1f}%")


if __name__ == "__main__":
    main()
