"""Calculon's best plan and modelplan's, each priced by both tools, on Calculon's 13B GPT / 64 A100.

Reads Calculon's own search result (benchmarks/calculon_13b_64a100.json, written by
benchmarks/calculon_run.py from a Calculon checkout), searches the same problem with modelplan
(the wide space, and the part of it Calculon can express: ZeRO 0/1, no HSDP / ZeRO++), prices
Calculon's best plan with modelplan and modelplan's best plans with Calculon (with --calculon
PATH, through calculon_run.py --price; without it, the prices stored by the last such run), and
prints both tools' step time term by term. Writes benchmarks/calculon_13b_compare.json.

    python benchmarks/calculon_compare.py [--calculon /path/to/calculon]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.comm.ops import Axis  # noqa: E402
from modelplan.plan.estimate import estimate_plan  # noqa: E402
from modelplan.plan.evaluator import Evaluator  # noqa: E402
from modelplan.plan.search import SearchSpace, search_plans  # noqa: E402
from modelplan.specs.plan import Plan  # noqa: E402
from modelplan.specs.training import TrainingSpec  # noqa: E402
from modelplan.specs.transformer import TransformerSpec  # noqa: E402

HERE = Path(__file__).resolve().parent
SEARCH = HERE / "calculon_13b_64a100.json"
OUT = HERE / "calculon_13b_compare.json"
GPUS = 64

# Calculon's models/gpt3-13B.json: hidden 5140, 40 heads of 128, ffn 20560, 40 blocks, seq 2048; its
# parameter count adds (51200 + seq) x hidden of embeddings (calculon/llm/llm.py), so vocab 51200.
# GPT-3 conventions otherwise (Brown et al. 2020: learned positions, LayerNorm, GeLU, biases, tied).
SPEC = TransformerSpec(
    name="GPT-3 13B (Calculon models/gpt3-13B.json)", layers=40, hidden=5140, heads=40, head_dim=128,
    ffn_hidden=20560, vocab=51200, max_positions=2048, position="learned", norm="layernorm", norm_bias=True,
    qkv_bias=True, attn_out_bias=True, mlp_bias=True, gated_mlp=False, activation="gelu", tied_embeddings=True,
    dropout=True,
)
TRAINING = TrainingSpec(global_batch=512, seq_len=2048, precision="fp16", optimizer="adam", attention="eager")
"""Calculon's run: `llm-optimal-execution models/gpt3-13B.json 64 512 float16` (batch 512 = GPT-3
13B's 1M tokens; Calculon's Adam with an fp32 master copy). Calculon's block is Megatron's of
2022 (Korthikanti et al.): unfused attention (QK^T, softmax, dropout, context as separate
kernels, the s x s tensors stored) and dropout, so modelplan runs with attention 'eager' and
dropout on; `--flash` prices modelplan's default fused attention instead."""
CALCULON_SPACE = dict(zero=[0, 1], fsdp_shard_size=[], zeropp=[False])
"""What Calculon can express of modelplan's space (optimizer sharding = ZeRO-1; no ZeRO-2/3)."""

RECOMPUTE = {"full": "full", "attn_only": "selective", "none": "none"}
TP_OVERLAP = {"none": "none", "ring": "ring", "pipe": "userbuffers"}


def modelplan_plan(exe: dict) -> Plan:
    """A Calculon execution as a modelplan Plan (networks: the axes on net 0, the NVLink node)."""
    tp, pp, dp, v = exe["tensor_par"], exe["pipeline_par"], exe["data_par"], exe["pipeline_interleaving"]
    in_node = [a for a, d in (("tp", tp), ("pp", pp), ("dp", dp)) if d > 1 and exe[f"{dict(tp='tensor', pp='pipeline', dp='data')[a]}_par_net"] == 0]
    order = "tp-cp-pp-dp" if "pp" in in_node and "dp" not in in_node else "tp-cp-dp-pp"
    sp = exe["tensor_par_comm_type"] != "ar" and tp > 1
    return Plan(tp=tp, pp=pp, dp=dp, vpp=v, schedule="interleaved" if v > 1 else "1f1b", micro_batch=exe["microbatch_size"],
                sequence_parallel=sp, recompute=RECOMPUTE[exe["activation_recompute"]],
                zero=1 if exe["optimizer_sharding"] else 0,
                tp_overlap=TP_OVERLAP[exe["tensor_par_overlap"]] if sp else "none", dp_overlap=exe["data_par_overlap"],
                offload_optimizer="cpu" if exe["optimizer_offload"] else "none",
                offload_activations=exe["activations_offload"], rank_order=order)


def calculon_executions(plan: Plan, cluster) -> list[dict]:
    """The plan as Calculon executions: each axis on net 0 (NVLink) when its groups stay in a node,
    else net 1; ZeRO >= 1 as optimizer sharding (Calculon prices ZeRO-2/3 traffic as ZeRO-1's)."""
    ev = Evaluator(SPEC, TRAINING, cluster)
    shapes = ev.shapes(plan.tp, plan.dp, plan.pp, plan.ep, plan.cp, plan.rank_order)
    net = {a: 0 if shapes[a].nodes == 1 else 1 for a in (Axis.TP, Axis.PP, Axis.DP)}
    inverse = {v: k for k, v in RECOMPUTE.items()}
    return [{
        "tensor_par": plan.tp, "pipeline_par": plan.pp, "data_par": plan.dp,
        "tensor_par_net": net[Axis.TP], "pipeline_par_net": net[Axis.PP], "data_par_net": net[Axis.DP],
        "batch_size": TRAINING.global_batch, "microbatch_size": plan.micro_batch,
        "activation_recompute": inverse[plan.recompute], "pipeline_interleaving": plan.vpp,
        "optimizer_sharding": plan.zero >= 1, "tensor_par_comm_type": "rs_ag" if plan.sequence_parallel else "ar",
        "tensor_par_overlap": {v: k for k, v in TP_OVERLAP.items()}.get(plan.tp_overlap or "none", "none"),
        "seq_par_ag_redo": False, "data_par_overlap": plan.dp_overlap is not False,
        "weight_offload": False, "activations_offload": plan.offload_activations,
        "optimizer_offload": plan.offload_optimizer != "none",
    }]


def calculon_prices(executions: list[dict], calculon: str | None, stored: dict) -> list[dict]:
    """Calculon's stats for the executions: run its model, or take the stored ones."""
    if calculon is None:
        return stored
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "exe.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(executions))
        subprocess.run([sys.executable, str(HERE / "calculon_run.py"), "--calculon", calculon, "models/gpt3-13B.json",
                        str(GPUS), str(TRAINING.global_batch), "systems/a100_80g.json", str(dst), "--price", str(src)],
                       check=True, env={**os.environ, "PYTHONPATH": calculon})
        return json.loads(dst.read_text())["priced"]


def calculon_terms(stats: dict) -> dict:
    """Calculon's batch time by term (its get_stats_json names)."""
    return {"compute (fw + bw)": stats["fw_time"] + stats["bw_time"], "recompute": stats["recompute_time"],
            "TP exposed": stats["tp_comm_exposed_time"] + stats["recomm_exposed_time"],
            "PP exposed": stats["pp_comm_exposed_time"], "bubble": stats["bubble_time"],
            "DP exposed": stats["dp_comm_exposed_time"], "optimizer": stats["optim_step_time"],
            "offload exposed": stats["fw_offload_exposed_time"] + stats["bw_offload_exposed_time"],
            "total": stats["total_time"]}


def modelplan_terms(est) -> dict:
    s = est.step
    return {"compute (fw + bw)": s.compute_s, "recompute": s.recompute_s, "TP exposed": s.tp_comm_s,
            "PP exposed": s.pp_comm_s, "bubble": s.bubble_s, "DP exposed": s.dp_comm_s + s.embedding_sync_s,
            "optimizer": s.optimizer_s, "offload exposed": s.offload_s, "total": s.step_time_s}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calculon", help="a Calculon checkout, to price modelplan's plans with Calculon")
    parser.add_argument("--flash", action="store_true", help="modelplan with fused attention (not Calculon's block)")
    args = parser.parse_args()
    global TRAINING
    if args.flash:
        TRAINING = TRAINING.model_copy(update={"attention": "flash"})
    cluster = load_cluster("dgx-a100")
    found = json.loads(SEARCH.read_text())
    out_path = OUT.with_name(OUT.stem + "_flash.json") if args.flash else OUT
    stored = json.loads(out_path.read_text()) if out_path.exists() else {}
    c_best = found["best"][0]
    c_plan = modelplan_plan(c_best["execution"])
    wide = search_plans(SPEC, TRAINING, cluster, GPUS).best[0]
    narrow = search_plans(SPEC, TRAINING, cluster, GPUS, SearchSpace(**CALCULON_SPACE)).best[0]
    rows = {"calculon's best": (c_plan, c_best["stats"])}
    executions = calculon_executions(wide.plan, cluster) + calculon_executions(narrow.plan, cluster)
    priced = calculon_prices(executions, args.calculon, stored.get("calculon_priced", []))
    if len(priced) == 2:
        rows["modelplan's best"] = (wide.plan, priced[0].get("stats"))
        rows["modelplan's best in Calculon's space"] = (narrow.plan, priced[1].get("stats"))
    out = {"calculon_commit": found["calculon_commit"], "calculon_search": found["counts"],
           "calculon_search_cpu_s": found["cpu_s"], "calculon_priced": priced, "rows": {}}
    print(f"{SPEC.name} on {GPUS} x {cluster.accelerator.name}, batch {TRAINING.global_batch} x {TRAINING.seq_len}")
    for name, (plan, stats) in rows.items():
        est = estimate_plan(SPEC, TRAINING, plan, cluster)
        m_terms = modelplan_terms(est)
        c_terms = calculon_terms(stats) if stats else None
        out["rows"][name] = {"plan": plan.model_dump(mode="json"), "modelplan_s": m_terms, "calculon_s": c_terms}
        print(f"\n{name}: {plan}")
        print(f"  {'term':20s} {'modelplan s':>12s} {'Calculon s':>11s}")
        for term, value in m_terms.items():
            other = f"{c_terms[term]:11.3f}" if c_terms else "        n/a"
            print(f"  {term:20s} {value:12.3f} {other}")
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(out, indent=1) + "\n")
    os.replace(tmp, out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
