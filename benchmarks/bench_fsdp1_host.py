"""FSDP1's host side, rate limiter and NCCL latency against the H100 llm-foundry / fms-fsdp rows'
missing time per FSDP unit and micro-batch (issue 13, n18fsdp1). A probe; nothing in modelplan
uses it.

    python benchmarks/bench_fsdp1_host.py            # per row, then the summaries
    python benchmarks/bench_fsdp1_host.py --only h100

Per foundry / fsdp row, per unit (block) and micro-batch: the planner's device time (forward +
backward, recompute included), the published time (published step / (layers x micro-batches)),
the residue (published - predicted step, per unit and micro-batch), the listed host ops (`bench_host_dispatch.host_ops_per_step`), the per-op host cost
the published time needs, the generous host upper bound (`fsdp1_host.host_upper_s`), the limiter's
exposure (`limiter_exposed_s`) and every collective's priced latency exposed (`latency_bound_s`).
Helpers: benchmarks/fsdp1_host.py, tested in tests/test_fsdp1_host.py.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_host_dispatch as hd  # noqa: E402
import bench_published_runs as bench  # noqa: E402
from fsdp1_host import (host_upper_s, latency_bound_s, limiter_exposed_s, needed_per_op_s,  # noqa: E402
                        unit_bound_step_s)
from modelplan.comm.ops import Axis, Collective  # noqa: E402
from modelplan.plan.estimate import estimate_split  # noqa: E402
from modelplan.plan.parallel import dp_zero  # noqa: E402

PER_OP_S = 125e-6
"""Host seconds per op the planner lists, generous: 5-25 us per dispatcher op (J. Ansel,
dev-discuss.pytorch.org/t/1836: eager `x + 1` 4.5 us; pytorch/pytorch#32194: `split` 3.3 us on CUDA
tensors; 15-42 us measured on this loaded machine, n13host) x ~5 dispatcher ops per listed kernel
(`bench_host_dispatch.py --measure`, Hugging Face GPT2Block: 64 / 13 forward, 96 / 19 backward)."""
LIMITER_GAP_S = 235e-6
"""From the limiter's `event.synchronize()` being met to the next AllGather's launch (pytorch/
pytorch#108234, kwen2501's trace: "an 235 us overhead ... would turn into GPU utilization gap")."""
HOOK_S = 1e-3
"""CPU seconds per FSDP hook call, generous: FSDP2's `pre_forward` at ~1 ms on a Xeon (pytorch/
pytorch#173680, torch 2.10: "1 ms launches"); FSDP1 handles one flat parameter per unit."""
COLLECTIVES_PER_UNIT = 3
"""AllGather before forward and before backward, ReduceScatter after backward (FULL_SHARD)."""


def _syncs_and_hooks(recompute: bool) -> tuple[int, int]:
    """(limiter syncs, hook calls) per unit and micro-batch: an unshard before forward and before
    backward (one more for the recompute's forward, counted though the unit is then already
    unsharded); pre-forward, post-forward, pre-backward, post-backward hooks (the recompute's
    forward runs pre- and post-forward again)."""
    return (3, 6) if recompute else (2, 4)


class _Spy:
    """Captures the DP exposure inputs and one tiny-message collective time of a priced run."""

    def __init__(self):
        self.seen: dict = {}
        self.real_exposure, self.real_seconds = dp_zero.dp_exposure, dp_zero.dp_seconds

    def __enter__(self):
        def exposure(zero, times, m, t_fwd, t_bwd, *a, **k):
            self.seen["exposure"] = (times, m, t_fwd, t_bwd)
            return self.real_exposure(zero, times, m, t_fwd, t_bwd, *a, **k)

        def seconds(calls, time_of, zero):
            sizes = [key[2] for key in calls.counts if key[1] is Axis.DP]
            if sizes:  # latency: an AllGather of 2 bytes per rank over the DP group
                size = max(sizes)
                self.seen["latency"] = time_of(Collective.ALL_GATHER, Axis.DP, size, 2 * size)
            return self.real_seconds(calls, time_of, zero)

        dp_zero.dp_exposure, dp_zero.dp_seconds = exposure, seconds
        return self

    def __exit__(self, *exc):
        dp_zero.dp_exposure, dp_zero.dp_seconds = self.real_exposure, self.real_seconds


def unit_rows(only: str = "") -> list[dict]:
    rows = []
    with _Spy() as spy:
        for run in bench.load_runs():
            if run.get("engine") not in ("foundry", "fsdp") or "case" in run or only not in run["id"]:
                continue
            spy.seen.clear()
            spec = (bench.model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run
                    else bench.load_model(run["model"]))
            training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
            est = estimate_split(spec, training, plan, cluster, world_size=run["gpus"])
            times, m, t_fwd, t_bwd = spy.seen["exposure"]
            layers, ops_step = spec.layers, hd.host_ops_per_step(run)
            ops = ops_step[0] / (layers * ops_step[1])
            syncs, hooks = _syncs_and_hooks(plan.recompute == "full")
            ag, rs = times.all_gather_block, times.reduce_scatter / (layers + 1)
            fwd, bwd = t_fwd / layers, t_bwd / layers
            published, predicted = bench.published_step_s(run, spec, training), est.step.step_time_s
            host = host_upper_s(ops, PER_OP_S, syncs, LIMITER_GAP_S, hooks, HOOK_S)
            limiter = limiter_exposed_s(LIMITER_GAP_S, ag, fwd) + limiter_exposed_s(LIMITER_GAP_S, ag + rs, bwd)
            latency = latency_bound_s(spy.seen.get("latency", 0.0), COLLECTIVES_PER_UNIT)
            extra = limiter + latency
            rows.append({
                "id": run["id"], "engine": run["engine"], "gpus": run["gpus"], "h100": "h100" in run["cluster"],
                "file": run["file"], "split": run["split"], "m": m, "layers": layers, "ops": ops,
                "device_ms": 1e3 * (fwd + bwd), "published_ms": 1e3 * published / (layers * m),
                "host_ms": 1e3 * host, "limiter_ms": 1e3 * limiter, "latency_ms": 1e3 * latency,
                "residue_ms": 1e3 * (published - predicted) / (layers * m), "published_s": published, "predicted_s": predicted,
                "bound_s": unit_bound_step_s(predicted, layers, m, fwd + bwd, host),
                "limiter_latency_s": predicted + layers * m * extra,
            })
    return rows


def _mean(rows: list[dict], key: str) -> str:
    errs = [r[key] / r["published_s"] - 1 for r in rows]
    return (f"n={len(errs):2d} mean |err| {100 * sum(abs(e) for e in errs) / len(errs):5.1f}%"
            f" signed {100 * sum(errs) / len(errs):+6.1f}%") if errs else "n= 0"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="row ids containing this")
    rows = unit_rows(ap.parse_args().only)
    print(f"{'run':<42} {'gpus':>4} {'err':>6} {'ops':>4} {'device':>7} {'publ.':>7} {'resid':>6} "
          f"{'us/op needed':>12} {'host<=':>6} {'limiter':>7} {'latency':>7}   (ms per unit and micro-batch)")
    for r in rows:
        need = needed_per_op_s(r["published_ms"] / 1e3, r["ops"])
        print(f"{r['id'][:42]:<42} {r['gpus']:4d} {r['predicted_s'] / r['published_s'] - 1:+6.1%} {r['ops']:4.0f}"
              f" {r['device_ms']:7.2f} {r['published_ms']:7.2f} {r['residue_ms']:6.2f}"
              f" {1e6 * need:12.0f} {r['host_ms']:6.2f} {r['limiter_ms']:7.3f} {r['latency_ms']:7.3f}")
    print(f"rows whose host upper bound exceeds their device time: "
          f"{sum(r['host_ms'] > r['device_ms'] for r in rows)} of {len(rows)}; largest host / device "
          f"{max(r['host_ms'] / r['device_ms'] for r in rows):.2f}; least needed us per listed op (H100) "
          f"{min(1e3 * r['published_ms'] / r['ops'] for r in rows if r['h100']):.0f}; rows with a limiter gap "
          f"{sum(r['limiter_ms'] > 0 for r in rows)}")
    groups = defaultdict(list)
    for r in rows:
        groups[f"{r['engine']} {'H100' if r['h100'] else 'A100'}"].append(r)
        groups[r["file"]].append(r)
        groups[f"split {r['split']}"].append(r)
    for name, rs in sorted(groups.items()):
        print(f"{name:<28} today {_mean(rs, 'predicted_s')} | max(device, host<=) {_mean(rs, 'bound_s')}"
              f" | + limiter gap + all latency exposed {_mean(rs, 'limiter_latency_s')}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
