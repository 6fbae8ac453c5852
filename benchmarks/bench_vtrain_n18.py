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
4. `--consistency`: the published set against itself: per layout (model, tp, dp, pp), the
   published time per sample-slot c(mb) = T / ((m + pp - 1) mb) of each micro-batch size; a larger
   micro-batch runs every GEMM on more rows, so c should not grow with mb (it may fall). Pairs where
   it grows by more than 10 % are listed: no per-micro-batch cost model can follow them.
5. `--host`: an upper bound on the host time per layer and micro-batch of vTrain's own stack,
   from its single-node runs (data/ground_truth_single.csv, pp 1, dp 1, 24 layers, global batch
   16, micro-batch 1 and 2: the runs with the least device work per kernel), against the least
   device time per layer and 1F1B slot modelplan prices for any multi-node row. A run is host-bound
   only where the host time exceeds its device time.
6. `--attention`: Transformer Engine's backend order for the NeMo 24.03.01 long-context rows. TE
   v1.4-v1.7 transformer_engine/pytorch/attention.py: "The priority for attention backends ... is:
   FlashAttention > FusedAttention (cuDNN) > UnfusedDotProductAttention"; only v1.8 (2024-07-24)
   adds "Disabling FlashAttention to give FusedAttention preference on Hopper+". NeMo 24.03.01
   predates TE 1.8, so its attention ran FlashAttention-2 (TE 1.4 setup.py installs flash-attn
   <= 2.4.2). Each row repriced with the accelerator listing FlashAttention-2's rate only (the
   megatron profile's ["cudnn", "fa2"] then falls to fa2).
7. `--flops`: the long-context rows whose published time is derived from a TFLOP/s figure: the
   attention share of the FLOPs the derivation counts, and the row's error if the figure counted
   causal (halved) attention instead.

    python benchmarks/bench_vtrain_n18.py [--cluster] [--schedule] [--microbatches] [--consistency] [--host] [--attention] [--flops]
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


def slot_cost_s(run: dict) -> float:
    """Published time per micro-batch slot and sample: T / ((m + pp - 1) x micro-batch)."""
    return run["reported"]["iteration_time_s"] / ((micro_batches(run) + run["pp"] - 1) * run["micro_batch"])


def rising_pairs(runs: dict[str, dict], threshold: float = 0.10) -> list[tuple[str, str, float]]:
    """(smaller-mb id, larger-mb id, c ratio - 1) for same-layout vTrain rows whose cost per
    sample-slot rises by more than `threshold` with the micro-batch."""
    layouts: dict[tuple, list[dict]] = {}
    for r in runs.values():
        if r["id"].startswith("vtrain_"):
            layouts.setdefault((r["spec"]["hidden"], r["tp"], r["dp"], r["pp"]), []).append(r)
    out = []
    for rows in layouts.values():
        rows = sorted(rows, key=lambda r: (r["micro_batch"], r["id"]))
        for i, a in enumerate(rows):
            for b in rows[i + 1:]:
                if b["micro_batch"] > a["micro_batch"] and slot_cost_s(b) / slot_cost_s(a) - 1 > threshold:
                    out.append((a["id"], b["id"], slot_cost_s(b) / slot_cost_s(a) - 1))
    return sorted(out, key=lambda p: -p[2])


def consistency_check(runs: dict[str, dict]) -> None:
    print("4. published cost per sample-slot rising > 10 % with the micro-batch (same model, tp, dp, pp)")
    pairs = rising_pairs(runs)
    for a, b, rise in pairs:
        print(f"   {a:36s} -> {b:38s} {rise:+6.1%}")
    print(f"   {len(pairs)} pairs")


# VIA-Research/vTrain f8dda84 data/ground_truth_single.csv: (tp, hidden, micro-batch, iteration ms)
# of its single-node rows with pp 1, dp 1, 24 layers, 16 heads, seq 1024, global batch 16.
SINGLE_NODE_24_LAYERS = (
    (2, 1024, 1, 1339.712062), (2, 1024, 2, 724.150414), (2, 2048, 1, 1384.10905), (2, 2048, 2, 946.671428),
    (4, 1024, 1, 1372.023243), (4, 1024, 2, 669.524427), (4, 2048, 1, 1208.107121), (4, 2048, 2, 572.073594),
    (8, 1024, 1, 1949.864466), (8, 1024, 2, 801.888202), (8, 2048, 1, 1883.691016), (8, 2048, 2, 775.623297),
)


def host_bound_per_layer_s(tp: int, rows=SINGLE_NODE_24_LAYERS, layers: int = 24, global_batch: int = 16) -> float:
    """Least measured time per layer and micro-batch at this tp: an upper bound on the host's share
    (a step is never shorter than the host's issue time)."""
    return min(ms / 1e3 / (global_batch // mb) / layers for t, _, mb, ms in rows if t == tp)


def host_check(runs: dict[str, dict]) -> None:
    print("5. host time per layer and micro-batch: vTrain single-node upper bound vs priced multi-node device time")
    for tp in (2, 4, 8):
        print(f"   tp {tp}: host <= {host_bound_per_layer_s(tp) * 1e3:5.2f} ms per layer and micro-batch")
    least = None
    for r in runs.values():
        if not r["id"].startswith("vtrain_"):
            continue
        _, _, _, est = _estimate(r)
        per = est.step.step_time_s / (micro_batches(r) + r["pp"] - 1) / (r["spec"]["layers"] / r["pp"])
        least = min(least or (per, r["id"]), (per, r["id"]))
    print(f"   least priced device time of the 109 multi-node rows: {least[0] * 1e3:5.2f} ms per layer and slot ({least[1]})")


NEMO_2403 = tuple(r for r in LONG_CONTEXT if r.startswith("nemo2403_"))


def attention_check(runs: dict[str, dict]) -> None:
    print("6. NeMo 24.03.01 (Transformer Engine < 1.8: FlashAttention-2 before cuDNN on Hopper)")
    before, after = [], []
    for rid in NEMO_2403 + ("llama3_405b_16k_gpus_cp16_128k",):
        r = runs[rid]
        spec, training, cluster, est = _estimate(r)
        acc = cluster.accelerator
        fa2_only = cluster.model_copy(update={"accelerator": acc.model_copy(
            update={"attention_efficiency": {"fa2": acc.attention_efficiency["fa2"]}})})
        plan = bench._plan(r)
        est_fa2 = bench.estimate_split(spec, training, plan, fa2_only, world_size=r["gpus"]) if r.get("vpp", 1) == 1 \
            and r.get("schedule") != "interleaved" else bench._search_vpp(spec, training, plan, fa2_only, r["gpus"], False)
        published = bench.published_step_s(r, spec, training)
        e0, e1 = est.step.step_time_s / published - 1, est_fa2.step.step_time_s / published - 1
        if rid in NEMO_2403:
            before.append(abs(e0))
            after.append(abs(e1))
        print(f"   {rid:42s} cudnn {e0:+6.1%}  fa2 {e1:+6.1%}")
    print(f"   NeMo 24.03.01 rows: mean |error| {sum(before) / len(before):.1%} (cudnn) -> {sum(after) / len(after):.1%} (fa2)")


def flops_check(runs: dict[str, dict]) -> None:
    print("7. long-context rows: attention share of the counted FLOPs; error if the figure halved causal attention")
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
    flags = ("cluster", "schedule", "microbatches", "consistency", "host", "attention", "flops")
    for flag in flags:
        parser.add_argument(f"--{flag}", action="store_true")
    args = parser.parse_args()
    every = not any(getattr(args, f) for f in flags)
    runs = _runs()
    for flag, check in zip(flags, (cluster_check, schedule_check, microbatch_check, consistency_check, host_check,
                                    attention_check, flops_check)):
        if every or getattr(args, flag):
            check(runs)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
