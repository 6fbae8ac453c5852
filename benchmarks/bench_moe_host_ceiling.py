"""The host cost per op each published MoE run allows (issue 13, n17moe): a probe, not a model.

A rank issues its kernels one after another from one host thread, so a run's step can never be
shorter than its host issue time: host ops per step x cost per op <= published step. With the op
count of `bench_host_dispatch.py` (`moe_segment_ops`: Megatron-core's router and all-to-all
dispatcher, TransformerEngine v2.9's GroupedLinear per local expert, the planner's attention-side
kernels), every published run of a layout caps the per-op host cost at published step / ops per
step. The token-drop twin of a dropless run (same model, layout and expert op count, no host sync)
therefore bounds the cost the dropless run may be charged if both ran on the same host stack; the
dropless run would need published step / ops per step to be wholly host-bound.

    python benchmarks/bench_moe_host_ceiling.py [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_host_dispatch as hd  # noqa: E402
import bench_published_runs as bench  # noqa: E402
from modelplan.plan.evaluator import Evaluator, PlanPoint  # noqa: E402
from modelplan.specs.load import load_model, model_from_dict  # noqa: E402


def host_ceiling(run: dict) -> tuple[float, float, float] | None:
    """(host ops per step on the critical rank, published step s, the per-op cost in us at which
    the step would be wholly host-bound) of an MoE run, or None."""
    if "spec" not in run and "model" not in run:
        return None
    spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
    if spec.moe is None:
        return None
    training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
    ev = Evaluator(spec, training, cluster)
    point = PlanPoint.of(plan, training)
    stage, bubble, m, _ = ev.context(point)
    rb = stage.blocks[stage.terms.critical_rank]
    fwd, bwd = hd.moe_segment_ops(ev, point)
    ops = (fwd + bwd) * rb.moe_run * (m + bubble)  # MoE blocks only: a lower bound on the rank's ops
    published = bench.published_step_s(run, ev.spec, training)
    return ops, published, published / ops * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mbridge25", help="run ids containing this")
    args = parser.parse_args()
    print(f"{'run':44} {'dropless':>8} {'ops/step':>9} {'published s':>11} {'ceiling us/op':>13}")
    for run in bench.load_runs():
        if args.only not in run["id"]:
            continue
        row = host_ceiling(run)
        if row is None:
            continue
        spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
        dropless = spec.moe.capacity_factor is None
        ops, published, ceiling = row
        print(f"{run['id']:44} {'yes' if dropless else 'no':>8} {ops:9.0f} {published:11.2f} {ceiling:13.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
