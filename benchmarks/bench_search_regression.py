"""Classic search speed of this tree against an older commit, measured alternately in one run.

Problem: GPT-1T (Narayanan et al. 2021's largest run, tests/data/calibration_runs.json) on
3,072 A100 (dgx-a100), batch 3072 x 2048, over the classic space: tp, cp, pp, dp, ep,
micro-batch, SP, recompute, ZeRO, schedule and vpp (a tree whose `SearchSpace` has the wider
dimensions gets them pinned to one value each, as bench_planner.py's CLASSIC does; an older one
searches its default space, which was the classic one).

The old commit is extracted with `git archive` into a temporary folder (no worktree, nothing
written to the repository) and each tree runs in its own long-lived Python worker with
PYTHONPATH set to it; the workers take turns, one search each, --runs times, so load on a shared
machine falls on both alike. Each search builds a fresh Evaluator; the first (cold) run of each
is shown apart (it fills module-level caches such as the schedule simulations). Figures: CPU
seconds (time.process_time) median and min of the warm runs, candidates, candidates/s and CPU
microseconds per candidate, and the evaluator's rate on every valid classic plan (each priced
in full from a fresh Evaluator, as bench_planner.py's "evaluations" line). Ratios are new / old
(< 1: this tree is faster).

    python benchmarks/bench_search_regression.py [--commit 39201f1] [--runs 7]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRE_REDESIGN = "39201f1"
"""The parent of 2f9ee07 (ParallelDims), the first commit of issue 12's redesign."""

WORKER = r'''
import json, sys, time
from pathlib import Path
from modelplan.comm.clusters import load_cluster
from modelplan.plan import evaluator as E
from modelplan.plan import search as S
from modelplan.plan.calibration import megatron_gpt
from modelplan.plan.validate import tp_problems

record = json.loads(Path("tests/data/calibration_runs.json").read_text())[-1]
case = megatron_gpt(record)
cluster = load_cluster("dgx-a100")
problem = (case.spec, case.training, cluster, case.gpus)
space = None
if "tp_overlap" in S.SearchSpace.model_fields:  # the wider dimensions pinned: the classic space
    space = S.SearchSpace(tp_overlap=["none"], dp_overlap=[True], offload_optimizer=["none"],
                          offload_activations=[False], fsdp_shard_size=[], zeropp=[False],
                          rank_order=["tp-cp-dp-pp"])
point = getattr(E, "PlanPoint", None)


def every_valid_plan(ev, gpus):
    spec, batch = ev.spec, ev.training.global_batch
    for tp in [t for t in S.divisors(gpus) if t <= ev.cluster.gpus_per_node and not tp_problems(spec, t)]:
        for pp in [p for p in S.divisors(gpus // tp) if spec.layers % p == 0]:
            dp = gpus // (tp * pp)
            if batch % dp:
                continue
            for mb in S.divisors(batch // dp):
                m = batch // (mb * dp)
                svs = [("1f1b", 1)] + [("interleaved", v) for v in S.divisors(spec.layers // pp)
                                       if v >= 2 and pp > 1 and m % pp == 0]
                for sp in ([False, True] if tp > 1 else [False]):
                    for rc in ("none", "selective", "full"):
                        for zero in (0, 1, 2, 3):
                            for sched, vpp in svs:
                                yield tp, pp, dp, vpp, mb, sched, sp, rc, zero


for line in sys.stdin:
    if line.strip() == "search":
        cpu = time.process_time()
        result = S.search_plans(*problem) if space is None else S.search_plans(*problem, space)
        cpu = time.process_time() - cpu
        best = [(e.plan.tp, e.plan.pp, e.plan.dp, e.plan.vpp, e.plan.micro_batch, e.step.step_time_s)
                for e in result.best]
        out = {"cpu": cpu, "candidates": result.candidates, "best": best}
    else:
        ev = E.Evaluator(*problem[:3])
        cpu = time.process_time()
        n = sum(1 for a in every_valid_plan(ev, case.gpus)
                if (ev.evaluate(point(*a)) if point is not None else ev.evaluate(*a)) is not None)
        out = {"cpu": time.process_time() - cpu, "plans": n}
    print(json.dumps(out), flush=True)
'''


class Worker:
    """One tree's Python process answering 'search' / 'rate' requests."""

    def __init__(self, tree: Path) -> None:
        env = {"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
        self.proc = subprocess.Popen([sys.executable, "-c", WORKER], cwd=tree, env=env, text=True,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)

    def ask(self, what: str) -> dict:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(what + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"error: the worker exited (rc {self.proc.wait()})")
        return json.loads(line)

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default=PRE_REDESIGN, help=f"the older commit (default {PRE_REDESIGN}, "
                        "the last before the redesign)")
    parser.add_argument("--runs", type=int, default=7, help="warm searches per tree (after one cold one)")
    parser.add_argument("--rate-runs", type=int, default=3, help="evaluator-rate passes per tree")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        old_tree = Path(tmp) / "old"
        old_tree.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.commit], capture_output=True, check=False)
        if archive.returncode:
            print(f"error: commit: git archive {args.commit} failed: {archive.stderr.decode().strip()}")
            return 2
        subprocess.run(["tar", "-x", "-C", str(old_tree)], input=archive.stdout, check=True)
        names = {"old": f"old ({args.commit})", "new": "this tree"}
        workers = {"old": Worker(old_tree), "new": Worker(ROOT)}
        runs: dict[str, list[dict]] = {"old": [], "new": []}
        rates: dict[str, list[float]] = {"old": [], "new": []}
        try:
            for i in range(args.runs + 1):
                for key in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    runs[key].append(workers[key].ask("search"))
            for i in range(args.rate_runs):
                for key in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    r = workers[key].ask("rate")
                    rates[key].append(r["plans"] / r["cpu"])
        finally:
            for w in workers.values():
                w.close()
    figures = {}
    print(f"GPT-1T / 3,072 A100, classic space; {args.runs} warm searches per tree, alternating")
    for key in ("old", "new"):
        cold, warm = runs[key][0], runs[key][1:]
        cpus = [r["cpu"] for r in warm]
        n = warm[0]["candidates"]
        med = statistics.median(cpus)
        figures[key] = (med, med / n, statistics.median(rates[key]))
        print(f"  {names[key]:>16}: {n:,} candidates, CPU median {med:.3f} s, min {min(cpus):.3f} s "
              f"(cold {cold['cpu']:.3f} s); {n / med:,.0f} candidates/s, {1e6 * med / n:.2f} us/candidate; "
              f"evaluator {figures[key][2]:,.0f} plans/s")
        print(f"  {'':>16}  best {warm[0]['best'][0]}")
    (t0, c0, r0), (t1, c1, r1) = figures["old"], figures["new"]
    print(f"  ratio new/old: total CPU {t1 / t0:.2f}, per candidate {c1 / c0:.2f}, evaluator rate {r1 / r0:.2f} "
          f"(search no slower: {'yes' if t1 <= t0 and c1 <= c0 else 'NO'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
