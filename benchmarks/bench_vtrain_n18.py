"""The vTrain and long-context rows priced beyond 20 % too fast: the mechanisms issue 13's n18 brief
names, checked one by one against the sources (n18vtrain). A probe: nothing in modelplan uses it.

1. `--cluster`: how the bench builds the vTrain cluster against vTrain's own configs
   (VIA-Research/vTrain f8dda84 config/validation/multi/*.json: node_size 8,
   inter_node_bandwidth 800 Gb/s per node, intra_node_bandwidth 150 GB/s): GPUs per node, which
   TP groups leave a node, NIC rate per GPU; and vTrain's own p2p gap (src/predictor.py
   `_compute_p2p_latency`: 2 x the full feature map b s h x 2 B over a quarter of the node's
   800 Gb/s, on every forward and backward slot) against the p2p modelplan prices.
2. `--schedule`: DeepSpeed's TrainSchedule with blocking paired p2p (`deepspeed_lockstep.py`)
   against the 1F1B critical path modelplan prices, on every vTrain row's (m, pp).
3. `--microbatches`: the micro-batches each outlier runs and its published time per slot.
4. `--flops`: the long-context rows whose published time is derived from a TFLOP/s figure: the
   attention share of the FLOPs the derivation counts, and the row's error if the figure counted
   causal (halved) attention instead.

    python benchmarks/bench_vtrain_n18.py [--cluster] [--schedule] [--microbatches] [--flops]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from bench_vtrain_outliers import OUTLIERS  # noqa: E402
from deepspeed_lockstep import one_f_one_b_time_s, schedule_time_s  # noqa: E402

LONG_CONTEXT = ("llama3_405b_16k_gpus_cp16_128k", "llama3_405b_16k_gpus", "nemo2403_llama2_7b_h100_fp8_seq16k_cp1",
                "nemo2403_llama2_7b_h100_fp8_seq64k_cp2", "nemo2403_llama2_7b_h100_fp8_seq256k_cp8",
                "nemo2403_llama2_7b_h100_fp8_seq1024k_cp32")
VTRAIN_NODE_GBPS = 800  # config/validation/multi/*.json inter_node_bandwidth (Gb/s per node)
VTRAIN_NODE_SIZE = 8  # config/validation/multi/*.json node_size


def vtrain_p2p_gap_s(micro_batch: int, seq: int, hidden: int) -> float:
    """vTrain src/predictor.py `_compute_p2p_latency(2 * feature_map_size, inter_node_bandwidth)`:
    bytes / (Gb/s x 2^30 / 8 / 4), feature map b s h x 2 B."""
    nbytes = 2 * micro_batch * seq * hidden * 2
    return nbytes / (VTRAIN_NODE_GBPS * 2**30 / 8 / 4)


def micro_batches(run: dict) -> int:
    """Micro-batches per pipeline in one step: global batch / (dp x micro-batch)."""
    return run["global_batch"] // (run["dp"] * run["micro_batch"])


def _runs() -> dict[str, dict]:
    return {r["id"]: r for r in bench.load_runs()}


def _estimate(run: dict):
    spec = bench.model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else bench.load_model(run["model"])
    training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
    tp_span = plan.tp > cluster.gpus_per_node or cluster.gpus_per_node % plan.tp != 0
    if run.get("schedule") == "interleaved" and "vpp" not in run:
        return spec, training, cluster, bench._search_vpp(spec, training, plan, cluster, run["gpus"], tp_span)
    est = bench.estimate_split(spec, training, plan, cluster, world_size=run["gpus"], allow_tp_across_nodes=tp_span)
    return spec, training, cluster, est


def cluster_check(runs: dict[str, dict]) -> None:
    print("1. cluster: bench dgx-a100 with hardware.inter_gbps vs vTrain's configs")
    r = runs[OUTLIERS[0]]
    cluster = bench._cluster(r)
    print(f"   GPUs per node: bench {cluster.gpus_per_node}, vTrain node_size {VTRAIN_NODE_SIZE}; NIC per GPU: bench "
          f"{cluster.inter.bandwidth_gbps:.1f} GB/s (x {cluster.inter.efficiency}), vTrain {VTRAIN_NODE_GBPS} Gb/s / "
          f"{VTRAIN_NODE_SIZE} = {VTRAIN_NODE_GBPS / 8 / VTRAIN_NODE_SIZE:.1f} GB/s")
    tps = sorted({x["tp"] for x in runs.values() if x["id"].startswith("vtrain_")})
    print(f"   TP sizes in the set {tps}: only tp 16 leaves a node (3.6B tp 16 rows, -10 .. +0 %; 18.4B tp 16 -0.1 %)")
    for rid in OUTLIERS:
        r = runs[rid]
        if r["pp"] == 1:
            continue
        _, _, _, est = _estimate(r)
        slots = micro_batches(r) + r["pp"] - 1
        gaps = 2 * slots * vtrain_p2p_gap_s(r["micro_batch"], r["seq"], r["spec"]["hidden"])
        print(f"   {rid:36s} p2p priced {est.step.pp_comm_s:5.2f} s; vTrain's gap model {gaps:5.2f} s; "
              f"missing {r['reported']['iteration_time_s'] - est.step.step_time_s:5.2f} s")


def schedule_check(runs: dict[str, dict]) -> None:
    print("2. DeepSpeed TrainSchedule (blocking paired p2p) vs 1F1B, t_b = 3 t_f (full recompute)")
    worst = 0.0
    shapes = sorted({(micro_batches(r), r["pp"]) for r in runs.values() if r["id"].startswith("vtrain_")})
    for m, pp in shapes:
        ds, ofob = schedule_time_s(m, pp, 1.0, 3.0), one_f_one_b_time_s(m, pp, 1.0, 3.0)
        worst = max(worst, abs(ds / ofob - 1))
    print(f"   {len(shapes)} (m, pp) shapes of the vTrain set: largest |TrainSchedule / 1F1B - 1| = {worst:.2e}")


def microbatch_check(runs: dict[str, dict]) -> None:
    print("3. micro-batches per step and published time per 1F1B slot (m + pp - 1)")
    for rid in OUTLIERS:
        r = runs[rid]
        m = micro_batches(r)
        slot = r["reported"]["iteration_time_s"] / (m + r["pp"] - 1)
        print(f"   {rid:36s} m {m:3d}  pp {r['pp']:2d}  {slot * 1e3:6.0f} ms per slot")


def flops_check(runs: dict[str, dict]) -> None:
    print("4. long-context rows: attention share of the counted FLOPs; error if the figure halved causal attention")
    for rid in LONG_CONTEXT:
        r = runs[rid]
        spec, training, _, est = _estimate(r)
        published = bench.published_step_s(r, spec, training)
        tokens = training.global_batch * training.seq_len
        # full-square attention score and context matmuls, forward + backward: 12 l h s per token
        # (Megatron-core num_floating_point_operations' s / h term; Narayanan et al. 2021 eq. 3)
        width = (spec.head_dim or spec.hidden // spec.heads) * spec.heads
        attn = 12 * spec.layers * width * training.seq_len * tokens
        counted = published * r["reported"]["tflops_per_gpu"] * 1e12 * r["gpus"]
        share = attn / counted
        causal = published * (1 - share / 2)
        print(f"   {rid:42s} attention {share:5.1%} of counted; error {est.step.step_time_s / published - 1:+6.1%} "
              f"(as counted), {est.step.step_time_s / causal - 1:+6.1%} (causal-halved)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    flags = ("cluster", "schedule", "microbatches", "flops")
    for flag in flags:
        parser.add_argument(f"--{flag}", action="store_true")
    args = parser.parse_args()
    every = not any(getattr(args, f) for f in flags)
    runs = _runs()
    for flag, check in zip(flags, (cluster_check, schedule_check, microbatch_check, flops_check)):
        if every or getattr(args, flag):
            check(runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
