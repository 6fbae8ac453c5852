"""The merged-1F1B EP overlap's host cost per op, calibrated on one published twin (issue 13, n19epoverlap).

Megatron-Bridge PR #1760 (2025-12-17, commit a6e92de5f, "Improving Qwen3-235B-A22B B200
performance"): "Disable `moe_a2a_overlap` due to CPU overhead for BF16 and MXFP8 ... BF16 step time
improved from 17.2s to 16s". Its BF16 recipe change is that flag alone
(`scripts/performance/configs/qwen/qwen3_workload_base_configs.py`
QWEN3_235B_A22B_PRETRAIN_CONFIG_B200_BF16: 64 GPUs, tp 1, pp 8, vp 4, ep 8, etp 1, GBS 1024, MBS 1,
seq 4096, all-to-all dispatcher, no CUDA graphs), so the pair isolates the overlap. (MXFP8 also
drops VP: not used.) This probe prices both as variants of the 25.11 H100 Qwen3-235B row (same
model and recipe splits) on dgx-b200 in bf16, then:

- calibrates `CostModel.ep_overlap_host_op_us` (plan/host_issue.py) by bisection so that the
  overlap twin is priced at its 17.2 s (in-sample: the only figure the constant sees), and, as a
  sensitivity, on the pair's difference (+1.2 s over the twin without the overlap, which cancels
  the device error both twins share);
- prints, at the calibrated cost, the twins and every bench row the host term moves (out of
  sample: the H100 EP-overlap rows), and the per-file means.

    python benchmarks/bench_ep_overlap_host.py
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.plan import host_issue  # noqa: E402
from modelplan.specs.costmodel import CostModel  # noqa: E402

PR1760_BF16_S = {True: 17.2, False: 16.0}
"""Step seconds with and without moe_a2a_overlap (Megatron-Bridge PR #1760's description)."""
TWIN_OF = "mbridge2511_qwen3_235b_a22b_h100_fp8"
PLAIN = host_issue.merged_host_s


def b200_twin(runs: dict, overlap: bool) -> dict:
    """PR #1760's B200 BF16 recipe as a run dict (the 235B H100 row's model and splits)."""
    r = copy.deepcopy(runs[TWIN_OF])
    step = PR1760_BF16_S[overlap]
    r.update(id=f"pr1760_qwen3_235b_b200_bf16_overlap_{overlap}", cluster="dgx-b200", gpus=64, tp=1, dp=8, ep=8,
             sequence_parallel=False, global_batch=1024, precision="bf16", features={"ep_comm_overlap": overlap},
             reported={"tokens_per_s_per_gpu": 1024 * 4096 / (step * 64)})
    for key in ("fp8_recipe", "fp8_param_gather"):
        r.pop(key, None)
    return r


def at_cost(c_us: float) -> None:
    """Price every plan at c_us per host op (the evaluator reads `host_issue.merged_host_s`)."""
    host_issue.merged_host_s = lambda ops, op_s, device_s, slots: PLAIN(ops, c_us * 1e-6, device_s, slots)


def solve(target, lo: float = 0.0, hi: float = 200.0) -> float:
    """The cost per op at which target(c) crosses zero (increasing in c), by bisection."""
    for _ in range(50):
        mid = (lo + hi) / 2
        at_cost(mid)
        lo, hi = (mid, hi) if target(mid) < 0 else (lo, mid)
    return (lo + hi) / 2


def main() -> int:
    runs = {r["id"]: r for r in bench.load_runs()}
    on, off = b200_twin(runs, True), b200_twin(runs, False)
    c_abs = solve(lambda c: bench.price(on)["predicted_s"] - PR1760_BF16_S[True])
    c_diff = solve(lambda c: bench.price(on)["predicted_s"] - bench.price(off)["predicted_s"]
                   - (PR1760_BF16_S[True] - PR1760_BF16_S[False]))
    default = CostModel().ep_overlap_host_op_us
    print(f"calibrated on the overlap twin's 17.2 s: {c_abs:.2f} us per host op; on the pair's +1.2 s: "
          f"{c_diff:.2f} us; CostModel default {default:g} us")
    at_cost(0.0)
    base = {r["id"]: bench.price(r) for r in list(runs.values()) + [on, off]}
    for c in (default, c_diff):
        at_cost(c)
        print(f"\n== {c:.2f} us per host op")
        for twin in (on, off):
            p = bench.price(twin)
            print(f"  {twin['id']:50} published {p['published_s']:6.2f} s  no host term "
                  f"{base[twin['id']]['predicted_s']:6.2f} s  now {p['predicted_s']:6.2f} s ({p['time_error']:+.1%})")
        rows = [bench.price(r) for r in runs.values()]
        for r in rows:
            b = base[r["id"]]
            if "predicted_s" in r and abs(r["predicted_s"] - b["predicted_s"]) > 1e-9:
                print(f"  {r['id']:50} {r['split']:8} {b['time_error']:+7.1%} -> {r['time_error']:+7.1%}")
        for f in sorted({r["file"] for r in rows}):
            e0 = [abs(base[r["id"]]["time_error"]) for r in rows if r["file"] == f and "time_error" in r]
            e1 = [abs(r["time_error"]) for r in rows if r["file"] == f and "time_error" in r]
            print(f"  {f:30} n={len(e1):3}  mean {sum(e0) / len(e0):6.2%} -> {sum(e1) / len(e1):6.2%}  "
                  f"max {max(e0):6.1%} -> {max(e1):6.1%}")
    host_issue.merged_host_s = PLAIN
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
