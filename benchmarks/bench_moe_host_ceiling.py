"""The host cost per op each published MoE run allows (issue 13, n17moe): a probe, not a model.

A rank issues its kernels one after another from one host thread, so a run's step can never be
shorter than its host issue time: host ops per step x cost per op <= published step. With the op
count of `bench_host_dispatch.py` (`moe_segment_ops`: Megatron-core's router and all-to-all
dispatcher, TransformerEngine v2.9's GroupedLinear per local expert, the planner's attention-side
kernels), every published run of a layout caps the per-op host cost at published step / ops per
step. The token-drop twin of a dropless run (same model, layout and expert op count, no host sync)
therefore bounds the cost the dropless run may be charged if both ran on the same host stack; the
dropless run would need published step / ops per step to be wholly host-bound.

`--moe-perf` prices Megatron-LM's own MoE-layer benchmark cases (tests/functional_tests/test_cases/
common/moe_perf: one MoELayer, TE grouped GEMM, force-balanced dropless routing, tp 1 ep 8, seq 4096,
micro-batch 1, timed with CUDA events on DGX H100; baseline.json) with the planner's MoE MLP kernels
and EP AllToAll, against the measured forward and backward milliseconds.

`--later` prices the same three models' later H100 rows of Megatron-Bridge's performance archive
(docs/performance-summary-archive.md at 067f987, "26.02" to "26.04 NeMo Container") as variants of
the 25.11 rows (the table's GBS, MBS, PP, VP, EP; the EP overlap and dispatcher from the recipe
files at the matching tag: v0.3.0 = 26.02, v0.3.1 = 26.02.01, v0.4.x = 26.04): not bench rows, a
check of which setting the errors follow.

    python benchmarks/bench_moe_host_ceiling.py [--only SUBSTRING] [--moe-perf] [--later]
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


MOE_PERF_BF16 = {
    # Megatron-LM tests/functional_tests/test_cases/common/moe_perf: test_cases.py MIXTRAL_PROXY /
    # DEEPSEEK_PROXY (gated_linear_unit and add_bias_linear off, TransformerConfig defaults: gelu);
    # baseline.json forward_ms / backward_ms of the *_a2a_tp1ep8_bf16 cases.
    # name: (hidden, expert ffn, experts, top-k, shared ffn, router, groups, group top-k, fwd ms, bwd ms)
    "mixtral_a2a_tp1ep8_bf16": (4096, 14336, 8, 2, 0, "softmax", 1, 1, 4.327, 7.684),
    "deepseek_a2a_tp1ep8_bf16": (7168, 2048, 32, 8, 2048, "sigmoid", 8, 4, 7.119, 10.483),
}


def moe_perf() -> None:
    """The planner's MoE MLP (router, permute, experts, unpermute, shared expert) and EP AllToAll of
    one MoELayer against Megatron-LM's measured moe_perf baselines (module docstring)."""
    from modelplan.comm.clusters import load_cluster
    from modelplan.plan.experts import expert_capacity
    from modelplan.plan.kernels import moe_mlp_kernels
    from modelplan.specs.blocks import MoESpec
    from modelplan.specs.training import TrainingSpec
    from modelplan.specs.transformer import TransformerSpec

    cluster, tokens, ep = load_cluster("dgx-h100"), 4096, 8
    for name, (h, f, experts, k, shared, router, groups, group_k, fwd_ms, bwd_ms) in MOE_PERF_BF16.items():
        moe = MoESpec(num_experts=experts, top_k=k, expert_ffn_hidden=f, shared_experts=1 if shared else 0,
                      shared_expert_ffn_hidden=shared or None, router=router, router_groups=groups,
                      router_group_top_k=group_k)
        spec = TransformerSpec(layers=1, hidden=h, heads=8, kv_heads=8, ffn_hidden=f, vocab=32000,
                               gated_mlp=False, activation="gelu", moe=moe)
        ev = Evaluator(spec, TrainingSpec(global_batch=ep, seq_len=tokens, precision="bf16", framework="megatron"),
                       cluster)
        a2a = ev.block_terms(1, False, 1, "none", 1, ep).ep
        gemms, ew = moe_mlp_kernels(ev.spec, 1, ep, tokens, 2, expert_capacity(tokens, ev.spec.moe, ev.capacity_factor))
        r = ev.roofline
        fwd = sum(r.gemm_time_s(g, 2) for g in gemms) + sum(r.elementwise_fwd_s(e) for e in ew) + a2a.fwd_s
        bwd = sum(r.gemm_time_s(x, 2) for g in gemms for x in g.backward()) + sum(r.elementwise_bwd_s(e) for e in ew)
        bwd += a2a.bwd_s
        print(f"{name:28} measured fwd {fwd_ms:5.2f} bwd {bwd_ms:5.2f} ms; planner fwd {fwd * 1e3:5.2f} "
              f"({fwd * 1e3 / fwd_ms - 1:+.0%}) bwd {bwd * 1e3:5.2f} ({bwd * 1e3 / bwd_ms - 1:+.0%}) ms")


LATER_ROWS = (
    # (label, 25.11 row it varies, tokens/s/GPU published, overrides)
    ("Qwen3-30B 26.02: pp 2 vp 12 mbs 1 GBS 1024 ep 8, EP overlap (v0.3.0: deepep)",
     "mbridge2511_qwen3_30b_a3b_h100_fp8", 5113, dict(vpp=12, micro_batch=1, global_batch=1024)),
    ("Qwen3-30B 26.02.01 as printed (same layout), no overlap (v0.3.1: hybridep)",
     "mbridge2511_qwen3_30b_a3b_h100_fp8", 9058,
     dict(vpp=12, micro_batch=1, global_batch=1024, ep_comm_overlap=False)),
    ("Qwen3-30B 26.02.01 as v0.3.1's recipe: pp 1 ep 16, no overlap, hybridep",
     "mbridge2511_qwen3_30b_a3b_h100_fp8", 9058,
     dict(pp=1, vpp=1, schedule="1f1b", micro_batch=1, global_batch=1024, ep=16, dp=16, ep_comm_overlap=False)),
    ("Qwen3-30B 26.04: pp 1 mbs 1 GBS 1024 ep 16, no overlap, hybridep",
     "mbridge2511_qwen3_30b_a3b_h100_fp8", 8901,
     dict(pp=1, vpp=1, schedule="1f1b", micro_batch=1, global_batch=1024, ep=16, dp=16, ep_comm_overlap=False)),
    ("Qwen3-235B 26.04: GBS 8192, EP overlap", "mbridge2511_qwen3_235b_a22b_h100_fp8", 1686,
     dict(global_batch=8192)),
    ("GPT-OSS-120B 26.04: GBS 1280 (no EP overlap)", "mbridge2511_gpt_oss_120b_h100_bf16", 5810,
     dict(global_batch=1280)),
)


def later() -> None:
    """The later archive rows as variants of the 25.11 rows (module docstring)."""
    runs = {r["id"]: r for r in bench.load_runs()}
    for label, base, tokens_per_s, changes in LATER_ROWS:
        run = {**runs[base], "id": base + "_later", "reported": {"tokens_per_s_per_gpu": tokens_per_s}}
        changes = dict(changes)
        features = dict(run.get("features", {}))
        if "ep_comm_overlap" in changes:
            features["ep_comm_overlap"] = changes.pop("ep_comm_overlap")
        run.update(changes, features=features)
        row = bench.price(run)
        print(f"{label:80} published {row['published_s']:6.2f} s, predicted {row['predicted_s']:6.2f} s "
              f"({row['time_error']:+.1%})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="mbridge25", help="run ids containing this")
    parser.add_argument("--moe-perf", action="store_true", help="Megatron-LM's moe_perf cases instead")
    parser.add_argument("--later", action="store_true", help="the later H100 archive rows instead")
    args = parser.parse_args()
    if args.moe_perf:
        moe_perf()
        return 0
    if args.later:
        later()
        return 0
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
