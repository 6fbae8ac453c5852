"""Classic search speed of this tree against an older commit, measured alternately in one run.

Problems (`CASES`): Narayanan et al. 2021's Table 1 runs (tests/data/calibration_runs.json) on
A100 (dgx-a100) with their GPU counts and batches, GPT-1T (3,072 GPUs, batch 3072 x 2048), 530B
(105 layers: uneven pipeline splits), 145B and 18B, each over the classic space: tp, cp, pp, dp, ep,
micro-batch, SP, recompute, ZeRO, schedule and vpp (a tree whose `SearchSpace` has the wider
dimensions gets them pinned to one value each, as bench_planner.py's CLASSIC does; an older one
searches its default space, which was the classic one).

The old commit is extracted with `git archive` into a temporary folder (no worktree, nothing
written to the repository) and each tree runs in its own long-lived Python worker with
PYTHONPATH set to it; the workers take turns, one search each, --runs times, so load on a shared
machine falls on both alike. Each search builds a fresh Evaluator; the first (cold) run of each
is shown apart (it fills module-level caches such as the schedule simulations). The cold figure
a user feels (`modelplan plan` is one search per process) is measured apart, --cold-runs times
per tree and case, each search the first of a fresh worker (imports not timed). Figures: CPU
seconds (time.process_time) median and min of the warm runs, candidates, candidates/s and CPU
microseconds per candidate per case, and the evaluator's rate on every valid classic plan of the
1T case (each priced in full from a fresh Evaluator, as bench_planner.py's "evaluations" line).
Ratios are new / old (< 1: this tree is faster): of the medians, and the median of the ratios
of the runs paired in time (the steadier figure on a loaded machine).

    python benchmarks/bench_search_regression.py [--commit 39201f1] [--runs 7] [--cold-runs 3] [--cases 1T,530B]
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

records = json.loads(Path("tests/data/calibration_runs.json").read_text())
cluster = load_cluster("dgx-a100")


def problem_of(index):
    case = megatron_gpt(records[index])
    return case.spec, case.training, cluster, case.gpus

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
    what, index = line.split()
    problem = problem_of(int(index))
    if what == "search":
        cpu = time.process_time()
        result = S.search_plans(*problem) if space is None else S.search_plans(*problem, space)
        cpu = time.process_time() - cpu
        best = [(e.plan.tp, e.plan.pp, e.plan.dp, e.plan.vpp, e.plan.micro_batch, e.step.step_time_s)
                for e in result.best]
        out = {"cpu": cpu, "candidates": result.candidates, "best": best}
    else:
        ev = E.Evaluator(*problem[:3])
        cpu = time.process_time()
        n = sum(1 for a in every_valid_plan(ev, problem[3])
                if (ev.evaluate(point(*a)) if point is not None else ev.evaluate(*a)) is not None)
        out = {"cpu": time.process_time() - cpu, "plans": n}
    print(json.dumps(out), flush=True)
'''


def extract_commit(commit: str, folder: Path) -> Path | None:
    """The commit's tree extracted with `git archive` under `folder`, or None (error printed)."""
    tree = folder / "old"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=False)
    if archive.returncode:
        print(f"error: commit: git archive {commit} failed: {archive.stderr.decode().strip()}")
        return None
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True)
    return tree


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


CASES = {"1T": (9, "GPT-1T / 3,072 A100"), "530B": (8, "GPT-530B / 2,520 A100"),
         "145B": (6, "GPT-145B / 1,536 A100"), "18B": (3, "GPT-18B / 256 A100")}
"""Benchmark cases: Narayanan et al. 2021 Table 1 runs (their index in calibration_runs.json)."""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default=PRE_REDESIGN, help=f"the older commit (default {PRE_REDESIGN}, "
                        "the last before the redesign)")
    parser.add_argument("--runs", type=int, default=7, help="warm searches per tree and case (after one cold one)")
    parser.add_argument("--cold-runs", type=int, default=3, help="searches per tree and case, each the first of "
                        "a fresh process")
    parser.add_argument("--rate-runs", type=int, default=3, help="evaluator-rate passes per tree (1T case)")
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma list of {', '.join(CASES)}")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = [c for c in cases if c not in CASES]
    if unknown:
        print(f"error: cases: unknown {', '.join(unknown)} (known: {', '.join(CASES)})")
        return 2
    with tempfile.TemporaryDirectory(prefix="bench-search-") as tmp:
        old_tree = extract_commit(args.commit, Path(tmp))
        if old_tree is None:
            return 2
        names = {"old": f"old ({args.commit})", "new": "this tree"}
        trees = {"old": old_tree, "new": ROOT}
        workers = {key: Worker(tree) for key, tree in trees.items()}
        runs = {(key, c): [] for key in workers for c in cases}
        colds = {(key, c): [] for key in workers for c in cases}
        rates: dict[str, list[float]] = {"old": [], "new": []}
        try:
            # rounds over every case, the trees taking turns (alternating who goes first)
            for i in range(args.runs + 1):
                for c in cases:
                    for key in (("old", "new") if i % 2 == 0 else ("new", "old")):
                        runs[key, c].append(workers[key].ask(f"search {CASES[c][0]}"))
            for i in range(args.rate_runs):
                for key in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    r = workers[key].ask(f"rate {CASES['1T'][0]}")
                    rates[key].append(r["plans"] / r["cpu"])
        finally:
            for w in workers.values():
                w.close()
        for i in range(args.cold_runs):  # each search the first of a fresh process
            for c in cases:
                for key in (("old", "new") if i % 2 == 0 else ("new", "old")):
                    fresh = Worker(trees[key])
                    try:
                        colds[key, c].append(fresh.ask(f"search {CASES[c][0]}")["cpu"])
                    finally:
                        fresh.close()
    print(f"classic space; {args.runs} warm searches per tree and case, the trees alternating; CPU seconds")
    totals = {"old": 0.0, "new": 0.0}
    cold_totals = {"old": 0.0, "new": 0.0}
    verdicts, cold_verdicts = [], []
    for c in cases:
        print(f"{CASES[c][1]}:")
        figures = {}
        for key in ("old", "new"):
            cold, warm = runs[key, c][0], runs[key, c][1:]
            cpus = [r["cpu"] for r in warm]
            n = warm[0]["candidates"]
            med = statistics.median(cpus)
            totals[key] += med
            figures[key] = (med, med / n)
            print(f"  {names[key]:>16}: {n:,} candidates, CPU median {med:.3f} s, min {min(cpus):.3f} s "
                  f"(cold {cold['cpu']:.3f} s); {n / med:,.0f} candidates/s, {1e6 * med / n:.2f} us/candidate")
            print(f"  {'':>16}  best {warm[0]['best'][0]}")
        paired = statistics.median(b["cpu"] / a["cpu"] for a, b in zip(runs["old", c][1:], runs["new", c][1:]))
        (t0, c0), (t1, c1) = figures["old"], figures["new"]
        verdicts.append(t1 <= t0)
        print(f"  ratio new/old: total CPU {t1 / t0:.2f} (median of the {args.runs} paired runs' ratios "
              f"{paired:.2f}), per candidate {c1 / c0:.2f}")
        if args.cold_runs:
            k0, k1 = (statistics.median(colds[key, c]) for key in ("old", "new"))
            cold_totals["old"] += k0
            cold_totals["new"] += k1
            cold_verdicts.append(k1 <= k0)
            print(f"  cold (first search of a fresh process, median of {args.cold_runs}): old {k0:.3f} s, "
                  f"new {k1:.3f} s, ratio {k1 / k0:.2f}")
    if args.rate_runs:
        r0, r1 = statistics.median(rates["old"]), statistics.median(rates["new"])
        print(f"evaluator rate (1T, every valid classic plan priced in full): old {r0:,.0f} plans/s, "
              f"new {r1:,.0f} plans/s, ratio {r1 / r0:.2f}")
    print(f"all cases: CPU medians summed old {totals['old']:.3f} s, new {totals['new']:.3f} s, ratio "
          f"{totals['new'] / totals['old']:.2f} (search no slower in every case: {'yes' if all(verdicts) else 'NO'})")
    if args.cold_runs:
        print(f"all cases cold: CPU medians summed old {cold_totals['old']:.3f} s, new {cold_totals['new']:.3f} s, "
              f"ratio {cold_totals['new'] / cold_totals['old']:.2f} (cold search no slower in every case: "
              f"{'yes' if all(cold_verdicts) else 'NO'})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
