"""Planner speed: the full search for the 1T-parameter GPT (Narayanan et al. 2021's largest run)
on 3072 A100s, and how many plans per second the cost model prices.

Targets: the search under 2 s wall on 2 cores; >= 10,000 plan evaluations per second. The
evaluation rate is measured on every valid candidate plan of the same search space (all tp, pp,
micro-batch, sequence parallel, recompute, ZeRO, schedule and vpp choices; no memory pruning,
no step-time bound), each priced in full (step time and memory), from a fresh evaluator, so
building its caches (communication lists, block terms) is part of the time.

    python benchmarks/bench_planner.py [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.plan.calibration import megatron_gpt  # noqa: E402
from modelplan.plan.evaluator import Evaluator, PlanPoint  # noqa: E402
from modelplan.plan.search import divisors, search_plans  # noqa: E402
from modelplan.plan.validate import tp_problems  # noqa: E402


def every_valid_plan(ev: Evaluator, gpus: int):
    """(tp, pp, dp, vpp, mb, schedule, sp, recompute, zero) of every valid plan, memory aside."""
    spec, batch = ev.spec, ev.training.global_batch
    for tp in [t for t in divisors(gpus) if t <= ev.cluster.gpus_per_node and not tp_problems(spec, t)]:
        for pp in [p for p in divisors(gpus // tp) if spec.layers % p == 0]:
            dp = gpus // (tp * pp)
            if batch % dp:
                continue
            for mb in divisors(batch // dp):
                m = batch // (mb * dp)
                svs = [("1f1b", 1)] + [("interleaved", v) for v in divisors(spec.layers // pp)
                                       if v >= 2 and pp > 1 and m % pp == 0]
                for sp in ([False, True] if tp > 1 else [False]):
                    for rc in ("none", "selective", "full"):
                        for zero in (0, 1, 2, 3):
                            for sched, vpp in svs:
                                yield tp, pp, dp, vpp, mb, sched, sp, rc, zero


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    record = json.loads((ROOT / "tests" / "data" / "calibration_runs.json").read_text())[-1]
    case = megatron_gpt(record)
    cluster = load_cluster("dgx-a100")
    print(f"{case.spec.name} on {case.gpus} x {cluster.accelerator.name}, global batch "
          f"{case.training.global_batch} x seq {case.training.seq_len}")
    walls, cpus = [], []
    for _ in range(args.runs):
        start, cpu = time.perf_counter(), time.process_time()
        result = search_plans(case.spec, case.training, cluster, case.gpus)
        walls.append(time.perf_counter() - start)
        cpus.append(time.process_time() - cpu)
    best = result.best[0].plan
    print(f"full search: median {statistics.median(walls):.2f} s, min {min(walls):.2f} s wall over {args.runs} runs "
          f"(CPU {statistics.median(cpus):.2f} s; target < 2 s); {result.candidates:,} candidates, {result.evaluated:,} timed, "
          f"{result.bounded:,} bounded; best tp{best.tp} pp{best.pp} dp{best.dp} vpp{best.vpp} "
          f"mb{best.micro_batch} {result.best[0].step.step_time_s:.1f} s/step")
    rates, cpu_rates = [], []
    for _ in range(args.runs):
        ev = Evaluator(case.spec, case.training, cluster)
        start, cpu = time.perf_counter(), time.process_time()
        n = sum(1 for args_ in every_valid_plan(ev, case.gpus) if ev.evaluate(PlanPoint(*args_)) is not None)
        rates.append(n / (time.perf_counter() - start))
        cpu_rates.append(n / (time.process_time() - cpu))
    print(f"evaluations: {n:,} valid plans priced in full (time + memory), median "
          f"{statistics.median(rates):,.0f} plans/s wall, {statistics.median(cpu_rates):,.0f} plans/s CPU, "
          f"best {max(rates):,.0f} (target >= 10,000)")
    ok = statistics.median(walls) < 2.0 and statistics.median(rates) >= 10_000
    print("PASS" if ok else "FAIL (on a loaded machine, rerun)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
