"""The planner against published training runs: iteration time and memory, each run priced with
its own published settings (`modelplan plan` with every plan field fixed).

Runs: benchmarks/published_runs.toml (Megatron-LM, Megatron-DeepSpeed, torchtitan, PyTorch
FSDP, llm-foundry; A100 / H100; bf16 / fp8; every figure with its source) plus the ten
Narayanan et al. 2021 runs of tests/data/calibration_runs.json. A run is IN-SAMPLE when it was
used to choose a constant of the cost model (the Narayanan runs chose `sustained_fraction`,
`kernel_overhead_us`, ...; see specs/costmodel.py); every other run is OUT-OF-SAMPLE.

Per run: published and predicted iteration time and their error (predicted / published - 1),
published and predicted peak memory per GPU where the source gives one, or why the run could not
be priced (rejected as invalid or as not fitting in memory). Then mean / max absolute errors,
in-sample and out-of-sample separately, and the count of rejected runs.

    python benchmarks/bench_published_runs.py [--only SUBSTRING] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.count.flops import count_flops  # noqa: E402
from modelplan.errors import SpecError  # noqa: E402
from modelplan.plan.calibration import megatron_gpt, paper_flops  # noqa: E402
from modelplan.plan.estimate import estimate_plan  # noqa: E402
from modelplan.specs.load import load_model, model_from_dict  # noqa: E402
from modelplan.specs.plan import Plan  # noqa: E402
from modelplan.specs.training import TrainingSpec  # noqa: E402

RUNS = ROOT / "benchmarks" / "published_runs.toml"
NARAYANAN = ROOT / "tests" / "data" / "calibration_runs.json"
GIB = 2**30
# Settings a run may carry that the training spec takes when this version of modelplan has them.
OPTIONAL_TRAINING = ("attention", "framework")


def _training(run: dict, spec) -> TrainingSpec:
    fields = {
        "global_batch": run["global_batch"], "seq_len": run["seq"], "precision": run["precision"],
        "optimizer": "adamw", "recompute": run["recompute"],
    }
    known = TrainingSpec.model_fields
    for name in OPTIONAL_TRAINING:
        if name in run and name in known:
            fields[name] = run[name]
    if "framework" in known and "framework" not in run and run.get("engine") in ("megatron", "deepspeed", "torchtitan", "fsdp"):
        fields["framework"] = run["engine"]
    return TrainingSpec(**fields)


def _plan(run: dict) -> Plan:
    vpp = run.get("vpp", 1)
    pp = run.get("pp", 1)
    return Plan(
        dp=run.get("dp", 1), tp=run.get("tp", 1), pp=pp, vpp=vpp, cp=run.get("cp", 1),
        micro_batch=run["micro_batch"], schedule="interleaved" if vpp > 1 else "1f1b",
        sequence_parallel=run.get("sequence_parallel", False), recompute=run["recompute"],
        zero=run.get("zero", 0),
    )


def published_step_s(run: dict, spec, training: TrainingSpec) -> float:
    """Iteration time implied by the published figure (see the TOML header)."""
    rep = run["reported"]
    if "iteration_time_s" in rep:
        return rep["iteration_time_s"]
    if "tokens_per_s_per_gpu" in rep:
        return training.global_batch * training.seq_len / (rep["tokens_per_s_per_gpu"] * run["gpus"])
    if rep.get("flops") == "megatron96":  # Narayanan et al. 2021 sec. 5.1 (includes full recompute)
        flops = paper_flops(spec, training)
    else:  # model FLOPs, forward + backward, no recompute (PaLM convention)
        flops = count_flops(spec, training).model
    return flops / (rep["tflops_per_gpu"] * 1e12 * run["gpus"])


def narayanan_runs() -> list[dict]:
    """The ten Narayanan et al. 2021 runs, as rows of the same shape (in-sample)."""
    out = []
    for record in json.loads(NARAYANAN.read_text()):
        case = megatron_gpt(record)
        out.append({"id": case.id, "engine": "megatron", "in_sample": True, "case": case,
                    "gpus": case.gpus, "reported": {"tflops_per_gpu": case.reported_tflops_per_gpu,
                                                    "flops": "megatron96"}})
    return out


def price(run: dict) -> dict:
    """One run priced: published and predicted step and memory, or the reason it was rejected."""
    row = {"id": run["id"], "engine": run["engine"], "in_sample": bool(run.get("in_sample", False))}
    try:
        if "case" in run:
            case = run["case"]
            spec, plan = case.spec, case.plan
            training = case.training
            cluster = load_cluster("dgx-a100")
        else:
            spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
            training, plan = _training(run, spec), _plan(run)
            cluster = load_cluster(run["cluster"])
            if "memory_gb" in run:
                acc = cluster.accelerator.model_copy(update={"memory_gb": float(run["memory_gb"])})
                cluster = cluster.model_copy(update={"accelerator": acc})
        row["published_s"] = published_step_s(run, spec, training)
        est = estimate_plan(spec, training, plan, cluster, world_size=run["gpus"])
    except (SpecError, ValueError) as exc:
        row["rejected"] = str(exc).splitlines()[0]
        return row
    row["predicted_s"] = est.step.step_time_s
    row["time_error"] = est.step.step_time_s / row["published_s"] - 1
    row["predicted_gib"] = est.peak_memory_bytes / GIB
    row["fits"] = est.fits
    if not est.fits:
        row["rejected"] = (f"does not fit: needs {est.peak_memory_bytes / 1e9:.1f} GB > "
                           f"{est.memory_budget_bytes / 1e9:.1f} GB")
    if run.get("memory_gib"):
        row["published_gib"] = run["memory_gib"]
        row["memory_error"] = row["predicted_gib"] / run["memory_gib"] - 1
    return row


def _stats(errors: list[float]) -> str:
    if not errors:
        return "n=0"
    a = [abs(e) for e in errors]
    return f"n={len(a)}  mean |error| {100 * sum(a) / len(a):5.1f}%  max {100 * max(a):5.1f}%"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="price only runs whose id contains this")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    runs = narayanan_runs() + tomllib.loads(RUNS.read_text())["runs"]
    if args.only:
        runs = [r for r in runs if args.only in r["id"]]
    rows = [price(r) for r in runs]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    head = f"{'run':<36} {'engine':<10} {'set':<4} {'published':>9} {'predicted':>9} {'error':>7}  {'mem pub':>7} {'mem pred':>8} {'error':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        sample = "in" if r["in_sample"] else "out"
        pub = f"{r['published_s']:9.3f}" if "published_s" in r else " " * 9
        if "predicted_s" in r:
            line = f"{r['id']:<36} {r['engine']:<10} {sample:<4} {pub}s {r['predicted_s']:8.3f}s {100 * r['time_error']:+6.1f}%"
        else:
            line = f"{r['id']:<36} {r['engine']:<10} {sample:<4} {pub}s {'-':>9} {'':>7}"
        if "published_gib" in r:
            line += f"  {r['published_gib']:6.1f}G {r['predicted_gib']:7.1f}G {100 * r['memory_error']:+6.1f}%"
        elif "predicted_gib" in r:
            line += f"  {'':>7} {r['predicted_gib']:7.1f}G"
        if "rejected" in r:
            line += f"\n    REJECTED: {r['rejected']}"
        print(line)
    print()
    for label, flag in (("in-sample ", True), ("out-of-sample", False)):
        priced = [r for r in rows if r["in_sample"] == flag and "time_error" in r]
        mem = [r["memory_error"] for r in priced if "memory_error" in r]
        rejected = sum(1 for r in rows if r["in_sample"] == flag and "rejected" in r)
        total = sum(1 for r in rows if r["in_sample"] == flag)
        print(f"{label:<13} iteration time: {_stats([r['time_error'] for r in priced])}")
        print(f"{'':<13} peak memory:    {_stats(mem)}")
        print(f"{'':<13} rejected (invalid or not fitting): {rejected} of {total}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
