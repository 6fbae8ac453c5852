"""The fused-attention rate each long-sequence published run implies (issue 13, branch n22dense).

A probe, not a model: nothing in modelplan uses it. For each run it prices the step twice through
bench_published_runs' own pricing, once as is and once with both fused-attention rates halved
(`Roofline.flash_fwd_flops_per_s`, `flash_bwd_flops_per_s`). The step is linear in the attention's
time, so the two prices split it into attention seconds `a` and the rest `o`; the rate the
published step implies, all else priced as the planner prices it, is then the planner's rate times
a / (published - o). Printed per run: the kernel the engine profile picks, the attention share of
the priced step, the implied rate as a fraction of the 16-bit dense peak and of the planner's
in-run rate (isolated rate x sustained fraction x clock x engine tensor rate).

`--te-cp FWD BWD` also prices Transformer Engine's ring-attention per-step passes (the bytes per
query-side element and ring step of `AttnFuncWithCPAndKVP2P`, published_runs_model.md n22dense) on
Megatron p2p context-parallel runs and prints the per-file means before and after.

    python benchmarks/bench_attention_rate.py [--rows SUBSTRING ...] [--te-cp 7.5 24.5]
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
import modelplan.plan.compute as compute  # noqa: E402
from modelplan.plan.kernels import Elementwise, LayerKernels  # noqa: E402

DEFAULT_ROWS = ("foundry_mpt1b_a100_32k", "foundry_mpt3b_a100_64k", "foundry_mpt7b_a100_32k", "foundry_mpt13b_a100_32k",
                "foundry_mpt30b_a100_8k_8gpu_n17", "foundry_mpt3b_h100_32k", "foundry_mpt7b_h100_32k",
                "foundry_mpt13b_h100_32k", "foundry_mpt3b_h100_fp8_32k", "nemo2403_", "llama3_405b_16k_gpus_cp16",
                "torchtitan_llama31_8b_h100_cp", "torchtitan_llama31_405b_h100_4d_cp")
_state = {"scale": 1.0, "te_cp": None}
_roofline_of = compute.Roofline.of.__func__
_layer_kernels = compute.layer_kernels


def _scaled_of(cls, *args, **kwargs):
    """Roofline.of with the fused-attention rates times the probe's scale."""
    r = _roofline_of(cls, *args, **kwargs)
    s = _state["scale"]
    return cls(**{**r.__dict__, "flash_fwd_flops_per_s": r.flash_fwd_flops_per_s * s,
                  "flash_bwd_flops_per_s": r.flash_bwd_flops_per_s * s})


def _with_te_cp(spec, tp, micro_batch, seq_len, d, sp, **kw) -> LayerKernels:
    """layer_kernels plus TE's per-step ring passes (cp - 1 steps) on each fused attention call."""
    k = _layer_kernels(spec, tp, micro_batch, seq_len, d, sp, **kw)
    cp, te = kw.get("cp", 1), _state["te_cp"]
    if te is None or cp == 1 or not k.fused:
        return k
    steps = cp - 1
    extra = tuple(Elementwise(f"{a.name}/te_cp_steps", a.batch * a.s_q * a.head_dim, steps * te[0], steps * te[1],
                              (3 * steps, 5 * steps)) for a in k.fused)
    return LayerKernels(k.gemms, k.elementwise + extra, k.attention_core_gemms, k.attention_core_elementwise + extra,
                        k.fused)


compute.Roofline.of = classmethod(_scaled_of)
compute.layer_kernels = _with_te_cp


def _price(run: dict, scale: float) -> float:
    _state["scale"] = scale
    try:
        return bench.price(run).get("predicted_s", float("nan"))
    finally:
        _state["scale"] = 1.0


def implied(run: dict) -> tuple[float, float, float, float]:
    """(published s, priced s, attention seconds of the priced step, implied / priced rate)."""
    t1, t_half = _price(run, 1.0), _price(run, 0.5)
    attention = t_half - t1
    published = bench.price(run)["published_s"]
    return published, t1, attention, attention / (published - (t1 - attention))


def _te_cp_means(fwd: float, bwd: float) -> None:
    runs = bench.load_runs()
    before = [bench.price(r) for r in runs]
    after = []
    for r in runs:
        on = r.get("engine") == "megatron" and r.get("cp", 1) > 1 and r.get("cp_comm_type", "p2p") == "p2p"
        _state["te_cp"] = (fwd, bwd) if on else None
        after.append(bench.price(r))
    _state["te_cp"] = None
    means = defaultdict(lambda: [[], []])
    for a, b in zip(before, after):
        if "time_error" in a and "unpriced" not in a:
            means[a["file"]][0].append(abs(a["time_error"]))
            means[a["file"]][1].append(abs(b["time_error"]))
            if abs(a["time_error"] - b["time_error"]) > 0.005:
                print(f"  {a['id']:<55} {100 * a['time_error']:+6.1f} -> {100 * b['time_error']:+6.1f} %")
    for name, (x, y) in sorted(means.items()):
        print(f"{name:<30} n={len(x):<4} {100 * sum(x) / len(x):6.3f} -> {100 * sum(y) / len(y):6.3f} %")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="*", default=DEFAULT_ROWS, help="run id substrings")
    parser.add_argument("--te-cp", nargs=2, type=float, metavar=("FWD", "BWD"),
                        help="price TE's ring per-step passes at these bytes per query element and step")
    args = parser.parse_args()
    if args.te_cp:
        _te_cp_means(*args.te_cp)
        return 0
    print(f"{'run':<52} {'error':>7} {'attn share':>10} {'implied/priced':>14}")
    for run in bench.load_runs():
        if "case" in run or not any(s in run["id"] for s in args.rows) or "reported" not in run:
            continue
        published, t1, attention, ratio = implied(run)
        print(f"{run['id']:<52} {100 * (t1 / published - 1):+6.1f}% {100 * attention / t1:9.1f}% {ratio:14.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
