"""The planner against published training runs: iteration time and memory, each run priced with
its own published settings (`modelplan plan` with every plan field fixed).

Runs: benchmarks/published_runs.toml (Megatron-LM/NeMo, Megatron-DeepSpeed, torchtitan, PyTorch
FSDP, llm-foundry, Llama 3; A100 / H100 / H200 / B200; bf16 / fp16 / fp8; every figure with its
source), benchmarks/published_runs_vtrain.toml (vTrain's 109 measured multi-node Megatron-DeepSpeed
runs), the ten Narayanan et al. 2021 runs of tests/data/calibration_runs.json,
benchmarks/published_runs_extra.toml (runs collected after the model was built: all held out) and
benchmarks/published_runs_memory.toml (published per-GPU peaks with the counter each read, all held
out; a run there may carry no time). Memory is compared like for like: the prediction as the
counter the source read would show it (`memory_kind`: allocated / reserved / device,
`plan/memory_reading.py`).

Split: every run carries `split = "fit"` (the modeller may choose constants with it; the Narayanan
runs chose `sustained_fraction`, `kernel_overhead_us`, ... in specs/costmodel.py) or
`split = "holdout"` (never used to choose a constant), by the rule in the TOML header; this script
checks the rule. Figures are reported per split, per engine and per source file.

Per run: published and predicted iteration time and their error (predicted / published - 1),
published and predicted peak memory per GPU where the source gives one, or why the run could not
be priced. A run is UNPRICED when it used a setting this version of modelplan does not take (a
run key with no TrainingSpec/Plan field, e.g. op-level selective checkpointing, fp8 recipe,
reshard_after_forward=False under ZeRO-3, HSDP, an architecture the spec cannot express); such a
run is still priced approximately (the setting ignored) and listed with a `~`, but kept out of the
exact statistics. A run is REJECTED when modelplan says it is invalid or does not fit in memory.

    python benchmarks/bench_published_runs.py [--only SUBSTRING] [--split fit|holdout] [--json]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from modelplan.comm.clusters import load_cluster  # noqa: E402
from modelplan.count.flops import count_flops  # noqa: E402
from modelplan.errors import SpecError  # noqa: E402
from modelplan.plan.calibration import megatron_gpt, paper_flops  # noqa: E402
from modelplan.plan.estimate import estimate_split  # noqa: E402
from modelplan.plan.memory_reading import READINGS, peak_reading  # noqa: E402
from modelplan.plan.near_fit import over_budget, search_near_fit  # noqa: E402
from modelplan.specs.costmodel import CostModel  # noqa: E402
from modelplan.specs.load import load_model, model_from_dict  # noqa: E402
from modelplan.specs.plan import Plan  # noqa: E402
from modelplan.specs.training import TrainingSpec  # noqa: E402

RUN_FILES = (ROOT / "benchmarks" / "published_runs.toml", ROOT / "benchmarks" / "published_runs_vtrain.toml")
# Runs collected after the model was built (issue 13): all held out, whatever the sha256 rule says.
EXTRA_FILE = ROOT / "benchmarks" / "published_runs_extra.toml"
# Published per-GPU peak memory with exact settings (n18mem): all held out; a run may carry no time.
MEMORY_FILE = ROOT / "benchmarks" / "published_runs_memory.toml"
NARAYANAN = ROOT / "tests" / "data" / "calibration_runs.json"
GIB = 2**30
# Settings a run may carry that the training spec takes when this version of modelplan has them.
OPTIONAL_TRAINING = ("attention", "framework", "grad_dtype", "fp8_param_gather", "master_weights", "ac_mode", "fp8_recipe",
                     "cp_comm_type", "recompute_modules", "recompute_method", "recompute_num_layers", "loss_upcast",
                     "fsdp_ends_in_root",
                     "optimizer_state_dtype", "loss_kernel", "pp_flush_microbatches", "elementwise")
# Settings the plan takes when this version of modelplan has them.
OPTIONAL_PLAN = ("reshard_after_forward", "fsdp_shard_size", "etp", "first_stage_layers", "last_stage_layers")
# `features` a run lists that name a TrainingSpec / Plan field (or one of these aliases) are passed
# to it; the others stay informational.
FEATURE_ALIASES = {"async_tp": "tp_comm_overlap", "fp8_all_gather": "fp8_param_gather"}
ENGINE_FRAMEWORK = {"megatron": "megatron", "deepspeed": "deepspeed", "torchtitan": "torchtitan", "fsdp": "fsdp",
                    "foundry": "foundry", "automodel": "automodel"}


def split_rule(run_id: str, file: str = "") -> str:
    """The split fixed in the TOML header: Narayanan runs fit; else sha256(id) % 10 < 3 -> holdout;
    every run of published_runs_extra.toml is holdout."""
    if file in (EXTRA_FILE.name, MEMORY_FILE.name):
        return "holdout"
    if run_id.startswith("narayanan21_"):
        return "fit"
    return "holdout" if int(hashlib.sha256(run_id.encode()).hexdigest()[:8], 16) % 10 < 3 else "fit"


def _implicit(run: dict, key: str) -> bool:
    """True when a setting the model has no field for equals what the model assumes anyway."""
    value = run[key]
    if key == "ac_mode":  # modelplan's `selective` is Megatron's attention-core recompute
        return run.get("recompute") != "selective" or value == "attention_core"
    if key == "reshard_after_forward":  # ZeRO-3 re-gathers in backward; ZeRO-2 keeps params
        return value in (True, "default") if run.get("zero", 0) == 3 else value is False or run.get("zero", 0) < 2
    if key == "fsdp_shard_size":  # shard over the whole data-parallel group
        return value == run.get("dp", 1) * run.get("cp", 1)
    if key == "etp":  # expert tensor parallel = tp (MoE experts split like dense MLPs)
        return value == run.get("tp", 1)
    if key == "fp8_recipe":  # modelplan's fp8: every GEMM at the fp8 rate, no recipe overhead
        return run.get("precision") != "fp8"
    return False


def unsupported(run: dict) -> list[str]:
    """Settings of the run that this version of modelplan cannot take (empty: priced exactly)."""
    reasons = []
    if run.get("unsupported"):
        reasons.append(run["unsupported"])
    for key in OPTIONAL_TRAINING[4:]:
        if key in run and key not in TrainingSpec.model_fields and not _implicit(run, key):
            reasons.append(f"{key}={run[key]!r} not modelled")
    for key in OPTIONAL_PLAN:
        if key in run and key not in Plan.model_fields and not _implicit(run, key):
            reasons.append(f"{key}={run[key]!r} not modelled")
    return reasons


def _training(run: dict) -> TrainingSpec:
    fields = {
        "global_batch": run["global_batch"], "seq_len": run["seq"], "precision": run["precision"],
        "optimizer": "adamw", "recompute": run["recompute"],
    }
    known = TrainingSpec.model_fields
    for name in OPTIONAL_TRAINING:
        if name in run and name in known:
            fields[name] = run[name]
    if "framework" in known and "framework" not in run and run.get("engine") in ENGINE_FRAMEWORK:
        fields["framework"] = ENGINE_FRAMEWORK[run["engine"]]
    fields.update(_features(run, known))
    return TrainingSpec(**fields)


def _features(run: dict, known: dict) -> dict:
    """The run's `features` that name a field of the model (`known`), aliases resolved; a
    feature and its alias both set keep the first true one."""
    out: dict = {}
    for key, value in run.get("features", {}).items():
        name = FEATURE_ALIASES.get(key, key)
        if name in known and not out.get(name):
            out[name] = value
    return out


def _plan(run: dict) -> Plan:
    vpp = run.get("vpp", 1)
    pp = run.get("pp", 1)
    fields = dict(
        dp=run.get("dp", 1), tp=run.get("tp", 1), pp=pp, vpp=vpp, cp=run.get("cp", 1), ep=run.get("ep", 1),
        micro_batch=run["micro_batch"], schedule=run.get("schedule", "interleaved" if vpp > 1 else "1f1b"),
        sequence_parallel=run.get("sequence_parallel", False), recompute=run["recompute"],
        zero=run.get("zero", 0),
    )
    if fields["schedule"] == "interleaved" and vpp == 1:
        fields["schedule"] = "1f1b"  # interleaved with an unpublished vpp (Llama 3): `price` searches it
    for name in OPTIONAL_PLAN:
        if name in run and name in Plan.model_fields:
            fields[name] = run[name]
    fields.update(_features(run, Plan.model_fields))
    return Plan(**fields)


def megatron_core_flops(spec, training: TrainingSpec) -> float:
    """Megatron-core r0.8.0 megatron/training/training.py num_floating_point_operations."""
    B, s, l, h = training.global_batch, training.seq_len, spec.layers, spec.hidden
    heads = spec.heads
    groups = spec.kv_heads or heads
    q_ratio = (spec.head_dim or h // heads) * heads / h
    moe = getattr(spec, "moe", None)
    ffn, routed = (moe.expert_ffn_hidden, moe.top_k) if moe else (spec.ffn_hidden, 1)
    gated = 1.5 if spec.gated_mlp else 1.0
    return 12 * B * s * l * h * h * (
        (1 + groups / heads + s / h) * q_ratio + (ffn / h) * routed * gated + spec.vocab / (2 * l * h))


def published_step_s(run: dict, spec, training: TrainingSpec) -> float:
    """Iteration time implied by the published figure (see the TOML header)."""
    rep = run["reported"]
    if "iteration_time_s" in rep:
        return rep["iteration_time_s"]
    if "tokens_per_s_per_gpu" in rep:
        return training.global_batch * training.seq_len / (rep["tokens_per_s_per_gpu"] * run["gpus"])
    if rep.get("flops") == "megatron96":  # Narayanan et al. 2021 sec. 5.1 (includes full recompute)
        flops = paper_flops(spec, training)
    elif rep.get("flops") == "megatron_core":
        flops = megatron_core_flops(spec, training)
    else:  # model FLOPs, forward + backward, no recompute (PaLM convention)
        flops = count_flops(spec, training).model
    return flops / (rep["tflops_per_gpu"] * 1e12 * run["gpus"])


def narayanan_runs() -> list[dict]:
    """The ten Narayanan et al. 2021 runs, as rows of the same shape (split fit)."""
    out = []
    for record in json.loads(NARAYANAN.read_text()):
        case = megatron_gpt(record)
        out.append({"id": case.id, "engine": "megatron", "split": "fit", "case": case, "file": "calibration_runs.json",
                    "gpus": case.gpus, "reported": {"tflops_per_gpu": case.reported_tflops_per_gpu,
                                                    "flops": "megatron96"}})
    return out


def load_runs() -> list[dict]:
    runs = narayanan_runs()
    for path in (*RUN_FILES, EXTRA_FILE, MEMORY_FILE):
        for run in tomllib.loads(path.read_text())["runs"]:
            runs.append({**run, "file": path.name})
    ids = [r["id"] for r in runs]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise SystemExit(f"error: duplicate run ids: {', '.join(dup)}")
    wrong = [r["id"] for r in runs if r.get("split") != split_rule(r["id"], r["file"])]
    if wrong:
        raise SystemExit(f"error: split does not follow the rule in the TOML header: {', '.join(wrong)}")
    return runs


def _cluster(run: dict):
    cluster = load_cluster(run["cluster"])
    acc_update = {}
    if "memory_gb" in run:  # another part (torchtitan's 96 GB H100): its marketed size, no NVML figure
        acc_update["memory_gb"] = float(run["memory_gb"])
        acc_update["memory_total_mib"] = None
    hardware = run.get("hardware", {})
    for key, value in hardware.items():  # accelerator overrides (memory_bw_tbps, sustained_clock_fraction, ...)
        if key in type(cluster.accelerator).model_fields:
            acc_update[key] = float(value)
    update = {}
    if acc_update:
        update["accelerator"] = cluster.accelerator.model_copy(update=acc_update)
    if "inter_gbps" in hardware:
        update["inter"] = cluster.inter.model_copy(update={"bandwidth_gbps": float(hardware["inter_gbps"])})
    if "intra_gbps" in hardware:  # another NVLink width in the same box (A800: 400 GB/s of A100's 600)
        update["intra"] = cluster.intra.model_copy(update={"bandwidth_gbps": float(hardware["intra_gbps"])})
    return cluster.model_copy(update=update) if update else cluster


def price(run: dict) -> dict:
    """One run priced: published and predicted step and memory, or why it was not priced."""
    row = {"id": run["id"], "engine": run["engine"], "split": run["split"], "file": run["file"]}
    reasons = [] if "case" in run else unsupported(run)
    if reasons:
        row["unpriced"] = "; ".join(reasons)
    try:
        if "case" in run:
            case = run["case"]
            spec, plan, training = case.spec, case.plan, case.training
            cluster = load_cluster("dgx-a100")
            row["published_s"] = published_step_s(run, spec, training)
        elif "spec" not in run and "model" not in run:  # architecture the spec cannot express
            row["published_s"] = run["global_batch"] * run["seq"] / (run["reported"]["tokens_per_s_per_gpu"] * run["gpus"])
            return row
        else:
            spec = model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else load_model(run["model"])
            training = _training(run)
            if "reported" in run:  # a memory-only run (published_runs_memory.toml) has no time
                row["published_s"] = published_step_s(run, spec, training)
            plan, cluster = _plan(run), _cluster(run)
        if run.get("unsupported"):
            return row
        tp_span = plan.tp > cluster.gpus_per_node or cluster.gpus_per_node % plan.tp != 0  # as published
        if run.get("schedule") == "interleaved" and "vpp" not in run:
            est = _search_vpp(spec, training, plan, cluster, run["gpus"], tp_span)
            row["vpp_searched"] = est.plan.vpp
        else:
            # the stage split is searched unless the run publishes it, as `modelplan plan` does
            est = estimate_split(spec, training, plan, cluster, world_size=run["gpus"], allow_tp_across_nodes=tp_span)
    except (SpecError, ValueError) as exc:
        row["rejected"] = " ".join(line.strip() for line in str(exc).splitlines()[:3])
        return row
    if est.plan.stage_split is not None and plan.stage_split is None:
        row["split_searched"] = est.plan.stage_split
    row["predicted_s"] = est.step.step_time_s
    if "published_s" in row:
        row["time_error"] = est.step.step_time_s / row["published_s"] - 1
    row["predicted_gib"] = est.peak_memory_bytes / GIB
    row["fits"] = est.fits
    over = over_budget(est, est.memory_budget_bytes)
    if not est.fits and over <= CostModel().near_fit_margin:  # priced with a may-not-fit note, as `modelplan plan` does
        row["near_fit"] = (f"needs {est.peak_memory_bytes / 1e9:.1f} GB, {100 * over:.1f} % over the "
                           f"{est.memory_budget_bytes / 1e9:.1f} GB budget (plan/near_fit.py)")
    elif not est.fits:
        row["rejected"] = (f"does not fit: needs {est.peak_memory_bytes / 1e9:.1f} GB > "
                           f"{est.memory_budget_bytes / 1e9:.1f} GB")
    if run.get("memory_gib"):  # like for like: the counter the source read (plan/memory_reading.py)
        row["published_gib"] = run["memory_gib"]
        row["memory_reading"] = _reading(run.get("memory_kind", ""))
        row["predicted_reading_gib"] = peak_reading(est.memory, row["memory_reading"]) / GIB
        row["memory_error"] = row["predicted_reading_gib"] / run["memory_gib"] - 1
        row["memory_readings_error"] = {k: peak_reading(est.memory, k) / GIB / v - 1
                                        for k, v in run.get("memory_readings", {}).items()}
    return row


def _reading(kind: str) -> str:
    """The counter a `memory_kind` names (its first word); approx (method not stated): the device total."""
    word = kind.split(" ", 1)[0]
    return word if word in READINGS else "device"


def _search_vpp(spec, training, plan: Plan, cluster, gpus: int, tp_span: bool):
    """An interleaved run whose vpp is not published: `modelplan plan` with every published field
    fixed and vpp searched (the fastest plan that fits; the search's other axes, TP / DP overlap,
    offload, rank order, the CP exchange, searched too: benchmarks/check_cli_parity.py)."""
    from modelplan.plan.search import SearchSpace, search_plans

    space = SearchSpace(
        tp=[plan.tp], pp=[plan.pp], dp=[plan.dp], cp=[plan.cp], ep=[plan.ep], micro_batch=[plan.micro_batch],
        sequence_parallel=[plan.sequence_parallel], recompute=[plan.recompute], zero=[plan.zero],
        schedule=["interleaved"], allow_tp_across_nodes=tp_span, etp=None if plan.etp is None else [plan.etp],
        first_stage_layers=plan.first_stage_layers, last_stage_layers=plan.last_stage_layers,
        reshard_after_forward=plan.reshard_after_forward,
        fsdp_shard_size=None if plan.fsdp_shard_size is None else [plan.fsdp_shard_size],
    )
    return search_near_fit(lambda sp: search_plans(spec, training, cluster, gpus, sp, top_k=1), space,
                           CostModel().near_fit_margin).best[0]


def _stats(errors: list[float]) -> str:
    if not errors:
        return "n=0"
    a = [abs(e) for e in errors]
    return f"n={len(a)}  mean |error| {100 * sum(a) / len(a):5.1f}%  max {100 * max(a):5.1f}%"


def _exact(r: dict) -> bool:
    return ("time_error" in r or "memory_error" in r) and "unpriced" not in r


def _summary(label: str, rows: list[dict]) -> None:
    exact = [r for r in rows if _exact(r)]
    approx = [r for r in rows if "unpriced" in r and ("time_error" in r or "memory_error" in r)]
    rejected = sum(1 for r in rows if "rejected" in r and "unpriced" not in r)
    unpriced = sum(1 for r in rows if "unpriced" in r)
    print(f"{label:<13} iteration time: {_stats([r['time_error'] for r in exact if 'time_error' in r])}")
    print(f"{'':<13} peak memory:    {_stats([r['memory_error'] for r in exact if 'memory_error' in r])}")
    print(f"{'':<13} rejected (invalid or not fitting): {rejected} of {len(rows)}; unpriced (settings not modelled): {unpriced}")
    near = sum(1 for r in rows if "near_fit" in r)
    if near:
        print(f"{'':<13} priced over the memory budget, within the estimate's error band (may not fit): {near}")
    if approx:
        print(f"{'':<13} unpriced, approximate (setting ignored): time {_stats([r['time_error'] for r in approx if 'time_error' in r])};"
              f" memory {_stats([r['memory_error'] for r in approx if 'memory_error' in r])}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="price only runs whose id contains this")
    parser.add_argument("--split", choices=("fit", "holdout"), help="price only runs of this split")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    runs = load_runs()
    if args.only:
        runs = [r for r in runs if args.only in r["id"]]
    if args.split:
        runs = [r for r in runs if r["split"] == args.split]
    rows = [price(r) for r in runs]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    head = f"{'run':<52} {'engine':<10} {'set':<4} {'published':>9} {'predicted':>9} {'error':>7}  {'mem pub':>7} {'mem pred':>8} {'error':>7}"
    print(head)
    print("-" * len(head))
    for r in rows:
        sample = {"fit": "fit", "holdout": "hold"}[r["split"]]
        pub = f"{r['published_s']:9.3f}s" if "published_s" in r else f"{'-':>10}"
        mark = "~" if "unpriced" in r else " "
        if "time_error" in r:
            line = f"{r['id']:<52} {r['engine']:<10} {sample:<4} {pub} {r['predicted_s']:8.3f}s{mark}{100 * r['time_error']:+6.1f}%"
        else:
            line = f"{r['id']:<52} {r['engine']:<10} {sample:<4} {pub} {'-':>9} {'':>7} "
        if "published_gib" in r:
            line += f"  {r['published_gib']:6.1f}G {r['predicted_reading_gib']:7.1f}G {100 * r['memory_error']:+6.1f}%"
        elif "predicted_gib" in r:
            line += f"  {'':>7} {r['predicted_gib']:7.1f}G"
        if "unpriced" in r:
            line += f"\n    unpriced: {r['unpriced']}"
        if "rejected" in r:
            line += f"\n    REJECTED: {r['rejected']}"
        if "near_fit" in r:
            line += f"\n    over the memory budget (may not fit): {r['near_fit']}"
        print(line)
    print()
    for split in ("fit", "holdout"):
        _summary(split, [r for r in rows if r["split"] == split])
    _summary("extra (held)", [r for r in rows if r["file"] == EXTRA_FILE.name])
    _summary("all sets", rows)
    for title, key in (("by engine", "engine"), ("by source file", "file")):
        print()
        print(f"{title} (both splits; exact = priced with all its settings):")
        names = sorted({r[key] for r in rows})
        for name in names:
            if key == "file":
                print(f"{name}:")
            _summary("" if key == "file" else name, [r for r in rows if r[key] == name])
    return 0


if __name__ == "__main__":
    sys.exit(main())
