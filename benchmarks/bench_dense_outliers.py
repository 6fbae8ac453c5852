"""Three checks on the dense runs priced beyond 25 % too fast (issue 13, branch n15dense).

A probe, not a model: nothing in modelplan uses it. Each part reruns bench_published_runs' pricing
(or modelplan's collective cost) with one input replaced by a published figure and prints the rows
before and after, so the section "Dense outliers, second pass" of published_runs_model.md can be
reproduced.

1. `--llama3`: Meta's Llama 3 405B rows (Dubey et al. 2024, Table 4) priced with the engine profile's
   kernel (megatron -> cuDNN, 0.53 / 0.52 of the H100 peak) and with FlashAttention-2's rates
   (0.34 / 0.32): Meta's stack is PyTorch, not Transformer Engine, and its attention kernel is not
   published, so which rate applies is open.
2. `--foundry`: the llm-foundry benchmark README rows with attention at FlashAttention-2's rate and
   at a FlashAttention-1-class rate. The README tables were added in llm-foundry b2a43a147
   (2023-10-19), whose scripts/train/benchmarking/submit_benchmarks.py defaults `--attn_impl` to
   'triton' (sweep.sh never passes it; 'flash' from 7f0fdae66, 2024-03-26) and installs `.[gpu]` (flash-attn 1.0.9): the rows ran
   llm-foundry's Triton FlashAttention (llmfoundry/models/layers/flash_attn_triton.py: "Overall
   Triton forward + backward is slightly slower than CUDA forward + backward", i.e. FlashAttention-1).
   FlashAttention-2 README figures (Dao-AILab/flash-attention assets/flash2_a100_fwd_bwd_benchmark.png,
   flash2_h100_fwd_bwd_benchmark.png; causal, head dim 128, seq 8k, forward + backward TFLOP/s):
   A100 FlashAttention Triton 78 vs FlashAttention-2 182; H100 FlashAttention 135 vs FA2 308.
3. `--allreduce`: vTrain's own nccl-tests AllReduce table of its A100 node (VIA-Research/vTrain
   f8dda84, trace/a100/AR_GPU{2,4,8}_1M_1024M_LUT, out-of-place time) against modelplan's
   alpha-beta AllReduce on dgx-a100 at the TP messages (b s h x 2 B, fp16) of the vTrain outliers,
   and what the difference adds to a step: 6 TP AllReduces per layer per micro-batch (2 forward,
   2 recomputed forward, 2 backward: Shoeybi et al. 2019 sec. 3; full recompute in every vTrain
   config) x layers per stage x micro-batches.

    python benchmarks/bench_dense_outliers.py [--llama3] [--foundry] [--allreduce]   (all without flags)
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.comm.cost import collective_time_s  # noqa: E402

FA1_CLASS_OF_FA2 = {"A100-SXM4-80GB": 78 / 182, "H100-SXM5-80GB": 135 / 308}
"""FlashAttention-1-class / FlashAttention-2 forward + backward rate, causal, head dim 128, seq 8k
(FlashAttention-2 README figures, see the module docstring); other parts: the A100 figure."""

VTRAIN_ALLREDUCE_US = {  # vTrain trace/a100/AR_GPU<n>_1M_1024M_LUT (f8dda84), out-of-place time (us)
    2: {12582912: 109.1, 25165824: 176.5, 50331648: 313.0, 67108864: 404.7, 100663296: 572.0},
    4: {12582912: 139.2, 25165824: 220.2, 50331648: 396.4, 67108864: 543.8, 100663296: 762.7},
    8: {12582912: 175.7, 25165824: 265.3, 50331648: 439.4, 67108864: 579.9, 100663296: 828.5},
}

VTRAIN_ROWS = ("vtrain_3p6b_g64_t8_d8_p1_mb2", "vtrain_3p6b_g64_t8_d8_p1_mb4", "vtrain_3p6b_g64_t4_d16_p1_mb2",
               "vtrain_3p6b_g64_t4_d16_p1_mb4", "vtrain_39p1b_g512_t2_d32_p8_mb2", "vtrain_39p1b_g512_t2_d16_p16_mb2",
               "vtrain_39p1b_g512_t4_d16_p8_mb2")


def _with_attention(scale_of: dict[str, float] | None = None, cudnn_as_fa2: bool = False):
    """bench_published_runs._cluster with the accelerator's fused-attention rates replaced."""
    original = bench._cluster

    def cluster(run: dict):
        c = original(run)
        acc = c.accelerator
        rates = dict(acc.attention_efficiency)
        if cudnn_as_fa2 and "fa2" in rates:
            rates["cudnn"] = rates["fa2"]
        if scale_of is not None:
            f = scale_of.get(acc.name, scale_of["A100-SXM4-80GB"])
            rates = {k: tuple(x * f for x in v) for k, v in rates.items()}
        return c.model_copy(update={"accelerator": acc.model_copy(update={"attention_efficiency": rates})})

    return original, cluster


def _price_with(runs: list[dict], cluster_fn) -> list[dict]:
    original = bench._cluster
    bench._cluster = cluster_fn
    try:
        return [bench.price(r) for r in runs]
    finally:
        bench._cluster = original


def _split_line(label: str, rows: list[dict]) -> None:
    for split in ("fit", "holdout"):
        errs = [abs(r["time_error"]) for r in rows if r["split"] == split and "time_error" in r]
        if errs:
            print(f"  {label:28s} {split:7s} n={len(errs):3d} mean {100 * sum(errs) / len(errs):5.1f} %  "
                  f"max {100 * max(errs):5.1f} %  beyond 25 %: {sum(e > 0.25 for e in errs)}")


def llama3(runs: list[dict]) -> None:
    rows = [r for r in runs if r["id"].startswith("llama3_")]
    original, fa2 = _with_attention(cudnn_as_fa2=True)
    before, after = _price_with(rows, original), _price_with(rows, fa2)
    print("Llama 3 405B (Table 4): engine kernel (cuDNN) vs FlashAttention-2 rates")
    for r, b, a in zip(rows, before, after):
        print(f"  {r['id']:36s} {r['split']:7s} {100 * b['time_error']:+6.1f} % -> {100 * a['time_error']:+6.1f} %")


def foundry(runs: list[dict]) -> None:
    rows = [r for r in runs if r["engine"] == "foundry"]
    original, fa1 = _with_attention(scale_of=FA1_CLASS_OF_FA2)
    before, after = _price_with(rows, original), _price_with(rows, fa1)
    print("llm-foundry README rows: attention at FlashAttention-2 rates vs FlashAttention-1-class rates")
    for r, b, a in zip(rows, before, after):
        print(f"  {r['id']:36s} {r['split']:7s} {100 * b['time_error']:+6.1f} % -> {100 * a['time_error']:+6.1f} %")
    _split_line("FA2 rates (today)", before)
    _split_line("FA1-class rates", after)


def allreduce(runs: list[dict]) -> None:
    cluster = load_cluster("dgx-a100")
    by_id = {r["id"]: r for r in runs}
    print("vTrain A100 node: measured AllReduce (nccl-tests LUT) vs modelplan alpha-beta, TP messages")
    for rid in VTRAIN_ROWS:
        run = by_id[rid]
        tp, pp, dp, mb = run["tp"], run["pp"], run["dp"], run["micro_batch"]
        spec = run["spec"]
        nbytes = mb * run["seq"] * spec["hidden"] * 2  # one [s, b, h] fp16 activation
        measured_us = VTRAIN_ALLREDUCE_US[tp].get(nbytes)
        model_us = collective_time_s("all_reduce", nbytes, tp, tp, cluster) * 1e6
        calls = 6 * (spec["layers"] // pp) * (run["global_batch"] // (dp * mb))
        added_s = calls * (measured_us - model_us) * 1e-6 if measured_us else float("nan")
        row = bench.price(run)
        missing_s = row["published_s"] - row["predicted_s"]
        print(f"  {rid:36s} tp {tp} {nbytes / 2**20:5.0f} MiB: measured {measured_us:6.1f} us, model {model_us:6.1f} us; "
              f"{calls} calls add {added_s:5.2f} s of the {missing_s:5.2f} s missing ({100 * row['time_error']:+.1f} %)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--llama3", action="store_true")
    parser.add_argument("--foundry", action="store_true")
    parser.add_argument("--allreduce", action="store_true")
    args = parser.parse_args()
    every = not (args.llama3 or args.foundry or args.allreduce)
    runs = bench.load_runs()
    if args.llama3 or every:
        llama3(runs)
    if args.foundry or every:
        foundry(runs)
    if args.allreduce or every:
        allreduce(runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
