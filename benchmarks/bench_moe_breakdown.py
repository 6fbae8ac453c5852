"""Where the predicted step of each Megatron MoE published run goes (issue 13, n18moe): a probe.

Per run: the step's terms (`StepTime`: compute, exposed EP, PP, bubble, DP, optimizer) and one MoE
block's forward + backward kernel seconds per micro-batch on the critical rank, split into the
attention core (fused kernel), the dense linear GEMMs (QKV, output, router), the routed experts'
grouped GEMMs (their per-expert launches included, `plan/grouped_gemm.py`), the fp8 quantisation
passes, and the memory-bound ops (norms, rotary, residuals, router softmax / top-k, permute, the
all-to-all dispatcher's sort by local expert, the fp8 expert padding, unpermute, expert activation,
Megatron's unfused YaRN rotary, per-expert fc2 bias and eager clamp); then the published
step per MoE block and micro-batch slot against the predicted one.

    python benchmarks/bench_moe_breakdown.py [--only SUBSTRING]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from modelplan.plan.estimate import estimate_split  # noqa: E402
from modelplan.plan.evaluator import Evaluator, PlanPoint  # noqa: E402
from modelplan.plan.expert_bias import with_expert_bias  # noqa: E402
from modelplan.plan.expert_clamp import with_expert_clamp  # noqa: E402
from modelplan.plan.expert_sort import sort_kernel  # noqa: E402
from modelplan.plan.experts import expert_capacity  # noqa: E402
from modelplan.plan.fp8_padding import padding_kernel, pads  # noqa: E402
from modelplan.plan.fp8 import gemm_rate_factor, is_fp8_gemm, quantisation_bytes  # noqa: E402
from modelplan.plan.grouped_gemm import extra_launch_s  # noqa: E402
from modelplan.plan.kernels import layer_kernels  # noqa: E402
from modelplan.plan.rotary_fusion import with_engine_rotary  # noqa: E402
from modelplan.specs.load import load_model, model_from_dict  # noqa: E402


def block_split_ms(ev: Evaluator, plan, training) -> dict[str, float]:
    """fwd + bwd ms of one MoE block (the model's first MoE block kind) by kernel class."""
    spec, sw, r, d = ev.spec, ev.software, ev.roofline, ev.dtype_bytes
    tokens = plan.micro_batch * training.seq_len
    routed = tokens * plan.etp // plan.tp if plan.etp else tokens
    cap = expert_capacity(routed, spec.moe, ev.capacity_factor)
    k = layer_kernels(spec, plan.tp, plan.micro_batch, training.seq_len, d, plan.sequence_parallel, moe_layer=True,
                      ep=plan.ep, capacity=cap, attention=training.attention, elementwise=sw.elementwise,
                      etp=plan.etp, norm_elementwise=sw.norm_elementwise)
    k = with_engine_rotary(k, spec, sw.framework, d, sw.rope_fusion)  # as compute.py prices them
    for post in (with_expert_bias, with_expert_clamp):
        k = post(k, spec, sw.framework, d)
    recipe = sw.fp8_recipe
    factor = gemm_rate_factor(recipe, ev.cost.fp8_scaled_gemm_factor) if recipe else 0.0
    out = dict.fromkeys(("attention core", "dense GEMMs", "expert GEMMs", "fp8 quantise", "memory-bound"), 0.0)
    for g in k.gemms:
        f8 = factor if factor and is_fp8_gemm(g.name) else 0.0
        t = r.gemm_time_s(g, d, f8) + sum(r.gemm_time_s(x, d, f8) for x in g.backward())
        out["expert GEMMs" if g.name.startswith("mlp/experts/") else "dense GEMMs"] += t
        if recipe and is_fp8_gemm(g.name):
            q_f, q_b = quantisation_bytes(recipe, d, g.m * g.batch, g.k, g.n, sw.fp8_backend)
            out["fp8 quantise"] += 2 * r.overhead_s + r.memory_time_s(q_f + q_b)
    launch_f, launch_b = extra_launch_s(k.gemms, sw.framework, bool(recipe), r.overhead_s)
    out["expert GEMMs"] += launch_f + launch_b
    out["attention core"] = sum(r.fused_fwd_s(a) + r.fused_bwd_s(a) for a in k.fused)
    out["memory-bound"] = sum(r.elementwise_fwd_s(e) + r.elementwise_bwd_s(e) for e in k.elementwise)
    if sw.framework == "megatron" and training.moe_flex_dispatcher is None:
        op = sort_kernel(spec.moe.num_experts, plan.ep, cap, spec.hidden, d)
        if op is not None:
            out["memory-bound"] += r.elementwise_fwd_s(op) + r.elementwise_bwd_s(op)
    if pads(recipe, sw.framework, training.moe_flex_dispatcher, spec.moe.capacity_factor is None, plan.ep * cap):
        op = padding_kernel(spec.moe.num_experts, cap, spec.hidden, d)
        out["memory-bound"] += r.elementwise_fwd_s(op) + r.elementwise_bwd_s(op)
    return {name: s * 1e3 for name, s in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", default="", help="run ids containing this")
    args = parser.parse_args()
    for run in bench.load_runs():
        if "case" in run or args.only not in run["id"]:
            continue
        spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
        if spec.moe is None or run["engine"] != "megatron":
            continue
        training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
        est = estimate_split(spec, training, plan, cluster, world_size=run["gpus"])
        ev = Evaluator(spec, training, cluster)
        point = PlanPoint.of(est.plan, training)
        stage, bubble, m, _ = ev.context(point)
        rb = stage.blocks[stage.terms.critical_rank]
        published = bench.published_step_s(run, ev.spec, training)
        st = est.step
        slots = (m + bubble) * max(1, rb.moe_run)
        split = block_split_ms(ev, est.plan, training)
        print(f"{run['id']}: published {published:.2f} s, predicted {st.step_time_s:.2f} s "
              f"({st.step_time_s / published - 1:+.1%}); compute {st.compute_s:.2f}, EP {st.ep_comm_s:.2f}, "
              f"PP {st.pp_comm_s:.2f}, bubble {st.bubble_s:.2f}, DP {st.dp_comm_s:.2f}, opt {st.optimizer_s:.2f} s")
        print("    one MoE block fwd+bwd ms: " + ", ".join(f"{k} {v:.2f}" for k, v in split.items())
              + f"; published / predicted step per MoE block slot {published / slots * 1e3:.2f} / "
              f"{st.step_time_s / slots * 1e3:.2f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
