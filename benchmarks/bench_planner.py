"""Planner speed over the widened search space, and the soundness of its step-time bound.

Problems (issue 17's floors):
- GPT-1T (Narayanan et al. 2021's largest run) on 3,072 A100 (dgx-a100), batch 3072 x 2048;
- Llama-3.1-405B on 16,384 H100 (dgx-h100), batch 2048 x 8192 (16M tokens, Llama 3 paper).
For each: the full search over the wide space (tp, cp, pp, dp, ep, micro-batch, SP, recompute,
ZeRO, schedule, vpp, and TP overlap, DP overlap, activation / optimizer offload, HSDP shard
groups, ZeRO++, rank order) in CPU seconds on one core (target < 1 s, median of --runs; the
first, cold run is shown too), its candidate count against the classic space (the wider
dimensions pinned to one value each; target >= 10x), and the same search with the bound off
(every plan priced) to show that the bound drops no top plan. Also the evaluation rate of the
cost model on every valid classic plan of the 1T problem, each priced in full from a fresh
evaluator (target >= 10,000 plans/s).

    python benchmarks/bench_planner.py [--runs 3] [--no-exhaustive]
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
from modelplan.plan.search import SearchSpace, divisors, search_plans, search_transformer_plans  # noqa: E402
from modelplan.plan.validate import tp_problems  # noqa: E402
from modelplan.specs.load import load_model  # noqa: E402
from modelplan.specs.training import TrainingSpec  # noqa: E402

CLASSIC = SearchSpace(tp_overlap=["none"], dp_overlap=[True], offload_optimizer=["none"], offload_activations=[False],
                      fsdp_shard_size=[], zeropp=[False], rank_order=["tp-cp-dp-pp"])
"""The wider dimensions pinned: the classic search's space."""


def problems():
    record = json.loads((ROOT / "tests" / "data" / "calibration_runs.json").read_text())[-1]
    case = megatron_gpt(record)
    yield "GPT-1T / 3,072 A100", (case.spec, case.training, load_cluster("dgx-a100"), case.gpus)
    llama = load_model("llama-3-405b")
    training = TrainingSpec(global_batch=2048, seq_len=8192, precision="bf16", optimizer="adamw")
    yield "Llama-3.1-405B / 16,384 H100", (llama, training, load_cluster("dgx-h100"), 16384)


def every_valid_plan(ev: Evaluator, gpus: int):
    """(tp, pp, dp, vpp, mb, schedule, sp, recompute, zero) of every valid classic plan, memory aside."""
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


def label(est) -> str:
    p = est.plan
    from modelplan.cli.plan_render import mechanism_tags

    return (f"tp{p.tp} pp{p.pp} dp{p.dp} vpp{p.vpp} mb{p.micro_batch} {p.recompute} zero{p.zero} "
            f"{' '.join(mechanism_tags(p))} {est.step.step_time_s:.2f} s/step")


def bench(name: str, args: tuple, runs: int, exhaustive: bool) -> bool:
    spec, training, cluster, gpus = args
    print(f"{name}: {spec.name}, global batch {training.global_batch} x seq {training.seq_len}")
    cpus = []
    for _ in range(runs):
        cpu = time.process_time()
        result = search_plans(*args)
        cpus.append(time.process_time() - cpu)
    classic = search_plans(*args, CLASSIC)
    growth = result.candidates / classic.candidates
    median = statistics.median(cpus)
    print(f"  wide search: {median:.2f} s CPU median of {runs} (cold first run {cpus[0]:.2f} s; target < 1 s); "
          f"{result.candidates:,} candidates = {growth:.0f}x the classic space's {classic.candidates:,} "
          f"(target >= 10x); {result.evaluated:,} timed, {result.bounded:,} bounded")
    print(f"  best (wide):    {label(result.best[0])}")
    print(f"  best (classic): {label(classic.best[0])}")
    ok = median < 1.0 and growth >= 10
    if exhaustive:
        cpu = time.process_time()
        every = search_transformer_plans(*args, use_bound=False)
        same = [e.step.step_time_s for e in every.best] == [e.step.step_time_s for e in result.best]
        print(f"  bound off: {every.evaluated:,} plans timed in {time.process_time() - cpu:.1f} s CPU; top "
              f"{len(every.best)} {'identical' if same else 'DIFFERENT'} to the bounded search's")
        ok = ok and same
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-exhaustive", action="store_true", help="skip the bound-off comparison")
    args = parser.parse_args()
    ok = all([bench(name, a, args.runs, not args.no_exhaustive) for name, a in problems()])
    name, (spec, training, cluster, gpus) = next(problems())
    rates = []
    for _ in range(args.runs):
        ev = Evaluator(spec, training, cluster)
        cpu = time.process_time()
        n = sum(1 for args_ in every_valid_plan(ev, gpus) if ev.evaluate(PlanPoint(*args_)) is not None)
        rates.append(n / (time.process_time() - cpu))
    print(f"evaluations ({name}): {n:,} valid classic plans priced in full (time + memory), median "
          f"{statistics.median(rates):,.0f} plans/s CPU (target >= 10,000)")
    ok = ok and statistics.median(rates) >= 10_000
    print("PASS" if ok else "FAIL (on a loaded machine, rerun)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
