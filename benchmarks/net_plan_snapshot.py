"""Network plans as JSON, for a before/after check of a planner change: every network preset
(mlp, small-cnn, resnet-18, resnet-50, lstm-lm) searched at a few GPU counts (the ranked plans
with every step-time term, memory per rank, counts of plans tried and rejected) and a few plans
estimated one by one; search wall time printed to stderr. Run:
python benchmarks/net_plan_snapshot.py > after.json, then diff it with the before file
(`--check before.json` prints the differences and exits 1 when there are any)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout, not an installed copy

from modelplan.comm.clusters import load_cluster
from modelplan.plan.estimate import estimate_plan
from modelplan.plan.search import search_plans
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec

SEARCHES = [("mlp", 1, 256), ("mlp", 8, 256), ("small-cnn", 8, 256), ("resnet-18", 16, 512),
            ("resnet-50", 8, 256), ("resnet-50", 64, 2048), ("lstm-lm", 8, 256), ("lstm-lm", 32, 1024),
            ("gpt2", 8, 256)]
PLANS = [("resnet-50", dict(tp=2, pp=2, dp=2, micro_batch=8), 256),
         ("lstm-lm", dict(pp=2, dp=4, vpp=2, schedule="interleaved", micro_batch=4), 256),
         ("mlp", dict(dp=4, zero=3, micro_batch=16), 256),
         ("small-cnn", dict(dp=2, pp=4, schedule="zb-h1", micro_batch=8), 256)]
"""(preset, plan, global batch) estimated one by one."""


def _estimate(est) -> dict:
    out = est.model_dump(mode="json")
    return out


def snapshot() -> dict:
    cluster = load_cluster("dgx-h100")
    out: dict = {"search": {}, "plan": {}}
    for name, gpus, batch in SEARCHES:
        t0 = time.perf_counter()
        seq = {"seq_len": 1024} if name == "gpt2" else {}  # GPT-2's learned positions stop at 1024
        res = search_plans(load_model(name), TrainingSpec(global_batch=batch, **seq), cluster, gpus)
        print(f"search {name} {gpus} GPUs: {time.perf_counter() - t0:.3f} s", file=sys.stderr)
        data = res.model_dump(mode="json")
        data.pop("wall_s", None)
        out["search"][f"{name}/{gpus}"] = data
    for name, plan, batch in PLANS:
        p = Plan(**plan)
        est = estimate_plan(load_model(name), TrainingSpec(global_batch=batch), p, cluster, world_size=p.world_size)
        out["plan"][f"{name}/{p.tp}x{p.pp}x{p.dp}/{p.schedule}"] = _estimate(est)
    return out


def _diff(a, b, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            _diff(a.get(k), b.get(k), f"{path}/{k}", out)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} -> {b!r}")


def main() -> None:
    snap = snapshot()
    if len(sys.argv) == 3 and sys.argv[1] == "--check":
        before = json.loads(Path(sys.argv[2]).read_text())
        diffs: list[str] = []
        _diff(before, snap, "", diffs)
        print("\n".join(diffs) if diffs else "identical")
        sys.exit(1 if diffs else 0)
    print(json.dumps(snap, indent=1, sort_keys=True))


if __name__ == "__main__":
    main()
