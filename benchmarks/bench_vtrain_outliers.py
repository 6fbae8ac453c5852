"""The vTrain rows priced beyond 25 % too fast, against what Megatron-DeepSpeed does (issue 13, n17vtrain).

A probe, not a model: nothing in modelplan uses it. It reprices the vTrain runs with
bench_published_runs' own pricing and prints the figures of the section "vTrain outliers at the
source" of published_runs_model.md:

1. `--softmax`: Megatron's fused scale-mask-softmax eligibility of every vTrain row: the rule of
   microsoft/Megatron-DeepSpeed megatron/model/fused_softmax.py `is_kernel_available`, as
   modelplan prices it (`modelplan.plan.fused_softmax.kernel_available`); and the older rule vTrain copied into
   its simulator (VIA-Research/vTrain f8dda84 src/model/fused_softmax.py: 16 < sk <= 2048,
   sq % 4 == 0, b np % 4 == 0). A row that fails runs the fp32 torch softmax (priced since n17vtrain).
2. `--excess`: the 3.6B pp-1 series by tp and micro-batch: (published - predicted) / micro-batches,
   and the published time per micro-batch, to test a host floor (the same host work per micro-batch
   at every tp: Megatron-DeepSpeed issues the same ops per layer at tp 2, 4, 8).
3. `--pairs`: the 39.1B rows as published time per sample and per stage-FLOP (slots = m + pp - 1 of
   synchronous 1F1B, DeepSpeed TrainSchedule; layers per stage x width 1/tp), and the 3.6B mb-64 row
   against twice the large-micro-batch time.
4. `--partition`: what DeepSpeed's partitioned activation checkpoints would add if a run set
   `--partition-activations` (vTrain does not say): DeepSpeed
   runtime/activation_checkpointing/checkpointing.py `gather_partitioned_activations`, one
   `all_gather_into_tensor` of the layer input (b s h x 2 B) over the TP group per checkpointed
   layer per micro-batch in backward, priced with modelplan's own collective cost.

    python benchmarks/bench_vtrain_outliers.py [--softmax] [--excess] [--pairs] [--partition]   (all without flags)
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
from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.comm.cost import collective_time_s  # noqa: E402
from modelplan.plan.fused_softmax import batch_per_block, kernel_available  # noqa: E402

OUTLIERS = ("vtrain_3p6b_g64_t8_d8_p1_mb64", "vtrain_3p6b_g64_t8_d8_p1_mb2", "vtrain_39p1b_g512_t2_d16_p16_mb2",
            "vtrain_39p1b_g512_t2_d16_p16_mb3", "vtrain_39p1b_g512_t2_d32_p8_mb2", "vtrain_3p6b_g64_t4_d16_p1_mb2")


def fused_softmax_available_v1(b: int, local_heads: int, sq: int, sk: int) -> bool:
    """The older constraint vTrain's simulator copied (src/model/fused_softmax.py)."""
    return 16 < sk <= 2048 and sq % 4 == 0 and (b * local_heads) % 4 == 0


def _vtrain_runs() -> list[dict]:
    return [r for r in bench.load_runs() if r["id"].startswith("vtrain_")]


def _priced(runs: list[dict]) -> dict[str, dict]:
    return {r["id"]: {**bench.price(r), "run": r} for r in runs}


def softmax(runs: list[dict]) -> None:
    print("1. fused scale-mask-softmax eligibility (b np = micro-batch x heads / tp)")
    fails = []
    seen = set()
    for r in runs:
        b, heads, s, tp = r["micro_batch"], r["spec"]["heads"], r["seq"], r["tp"]
        key = (b, heads // tp, s)
        ok = kernel_available(b, heads // tp, s, s, float16=True, causal=True)
        ok_v1 = fused_softmax_available_v1(b, heads // tp, s, s)
        if not (ok and ok_v1):
            fails.append(r["id"])
        if r["id"] in OUTLIERS and key not in seen:
            seen.add(key)
            print(f"   {r['id']:36s} b np = {b} x {heads // tp} = {b * heads // tp:4d}, sk {s}: "
                  f"batch_per_block {batch_per_block(s)}, fused {ok} (older rule {ok_v1})")
    print(f"   rows falling back to the torch softmax: {len(fails)} of {len(runs)} {fails if fails else ''}")


def excess(priced: dict[str, dict]) -> None:
    print("2. 3.6B pp 1: published time per micro-batch (ms) and excess over the prediction per micro-batch (ms)")
    table = defaultdict(dict)
    for row in priced.values():
        r = row["run"]
        if not r["id"].startswith("vtrain_3p6b") or r["pp"] != 1:
            continue
        m = r["global_batch"] // (r["dp"] * r["micro_batch"])
        table[r["tp"]][r["micro_batch"]] = (row["published_s"] / m * 1e3, (row["published_s"] - row["predicted_s"]) / m * 1e3)
    for tp in sorted(table):
        cells = "  ".join(f"mb {mb:2d}: {t:6.0f} / {e:+6.0f}" for mb, (t, e) in sorted(table[tp].items()))
        print(f"   tp {tp:2d}  {cells}")


def pairs(priced: dict[str, dict]) -> None:
    print("3. 39.1B: published ms per sample, and per sample x (layers per stage / tp) (same FLOPs per GPU)")
    for rid in sorted(k for k in priced if k.startswith("vtrain_39p1b")):
        row, r = priced[rid], priced[rid]["run"]
        m = r["global_batch"] // (r["dp"] * r["micro_batch"])
        slots = m + r["pp"] - 1
        per_sample = row["published_s"] / slots / r["micro_batch"] * 1e3
        norm = per_sample / (r["spec"]["layers"] / r["pp"] / r["tp"])
        print(f"   {rid:36s} slots {slots:3d}  {per_sample:6.1f} ms/sample  {norm:6.1f} ms per sample-layer/tp  "
              f"error {row['time_error']:+.1%}")
    series = {mb: priced[f"vtrain_3p6b_g64_t8_d8_p1_mb{mb}"]["published_s"] for mb in (8, 16, 32, 64)}
    print(f"   3.6B tp 8 dp 8: mb 64 {series[64]:.3f} s = {series[64] / series[32]:.3f} x mb 32; "
          f"2 x mean(mb 16, mb 32) = {series[16] + series[32]:.3f} s ({series[64] / (series[16] + series[32]) - 1:+.1%})")


def partition(priced: dict[str, dict]) -> None:
    print("4. partitioned activation checkpoints: one TP AllGather of b s h x 2 B per layer per micro-batch (backward)")
    cluster = load_cluster("dgx-a100")
    for rid in OUTLIERS + ("vtrain_3p6b_g64_t8_d8_p1_mb4", "vtrain_39p1b_g512_t4_d16_p8_mb2"):
        row, r = priced[rid], priced[rid]["run"]
        m = r["global_batch"] // (r["dp"] * r["micro_batch"])
        slots = m + r["pp"] - 1  # the critical stage's micro-batch slots
        nbytes = r["micro_batch"] * r["seq"] * r["spec"]["hidden"] * 2
        added = slots * (r["spec"]["layers"] // r["pp"]) * collective_time_s("all_gather", nbytes, r["tp"], r["tp"], cluster)
        missing = row["published_s"] - row["predicted_s"]
        print(f"   {rid:36s} adds {added:5.2f} s of {missing:+6.2f} s missing")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    for flag in ("softmax", "excess", "pairs", "partition"):
        parser.add_argument(f"--{flag}", action="store_true")
    args = parser.parse_args()
    every = not (args.softmax or args.excess or args.pairs or args.partition)
    runs = _vtrain_runs()
    if every or args.softmax:
        softmax(runs)
    if every or args.excess or args.pairs or args.partition:
        priced = _priced(runs)
        if every or args.excess:
            excess(priced)
        if every or args.pairs:
            pairs(priced)
        if every or args.partition:
            partition(priced)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
