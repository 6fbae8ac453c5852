"""Every published run of the bench through the real CLI: `modelplan plan` with the run's published
settings as flags, against the bench's own figure (`bench_published_runs.py`, which prices the
run's `Plan` directly).

Per row the settings come from the bench's own loaders (`_training`, `_plan`, `_cluster`), mapped
to `modelplan plan` flags; the axes the CLI searches and the run fixes (TP / DP overlap, offload,
HSDP, ZeRO++, rank order, the CP exchange) are passed at the bench's value, so the two price the
same plan. Prints the rows the CLI refuses (with its one-line error), the rows whose CLI step time
differs from the bench's by more than 1 % (both figures, and the plan or training fields that
differ), and a summary. In-process (typer's CliRunner), about a second per row.

    python benchmarks/check_cli_parity.py [--only SUBSTRING] [--tolerance 0.01]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_published_runs as bench  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from modelplan.cli import app  # noqa: E402
from modelplan.specs.costmodel import CostModel  # noqa: E402
from modelplan.specs.load import load_engine  # noqa: E402

TRAINING_FLAGS = {  # TrainingSpec field -> flag (None: a boolean pair --x / --no-x)
    "attention": "--attention", "framework": "--framework", "ac_mode": "--ac-mode", "fp8_recipe": "--fp8-recipe",
    "grad_dtype": "--grad-dtype", "cp_comm_type": "--cp-comm-type", "recompute_modules": "--recompute-modules",
    "recompute_method": "--recompute-method", "recompute_num_layers": "--recompute-layers",
    "moe_flex_dispatcher": "--moe-dispatcher",  # features moe_flex_dispatcher = deepep / hybridep
    "tensor_rate": "--tensor-rate", "optimizer_state_dtype": "--optimizer-state-dtype", "loss_kernel": "--loss-kernel",
    "pp_flush_microbatches": "--pp-flush-microbatches", "elementwise": "--elementwise",
}
TRAINING_SWITCHES = {"compile": "compile", "tp_comm_overlap": "tp-comm-overlap", "ep_comm_overlap": "ep-comm-overlap",
                     "fp8_param_gather": "fp8-param-gather", "master_weights": "master-weights",
                     "fused_norm": "fused-norm", "compile_loss": "compile-loss", "loss_upcast": "loss-upcast",
                     "fake_balanced_gate": "fake-balanced-gate", "sac_saves_attention": "sac-saves-attention",
                     "fsdp_ends_in_root": "fsdp-ends-in-root", "rope_fusion": "rope-fusion"}


def _switch(name: str, value: bool) -> str:
    return f"--{name}" if value else f"--no-{name}"


def cli_args(run: dict, spec, training, plan, cluster, tmp: Path) -> list[str]:
    """`modelplan plan` arguments for the run: its model and cluster (as files where the bench
    builds them), every published setting, and the searched axes pinned at the bench's value."""
    if "case" in run or "spec" in run:
        model = tmp / "model.json"
        model.write_text(json.dumps(spec.model_dump(mode="json")))
        model_ref = str(model)
    else:
        model_ref = run["model"]
    if "case" in run or run.get("hardware") or "memory_gb" in run:
        cl = tmp / "cluster.json"
        cl.write_text(json.dumps(cluster.model_dump(mode="json")))
        cluster_ref = str(cl)
    else:
        cluster_ref = run["cluster"]
    args = ["plan", model_ref, "--gpus", str(run["gpus"]), "--cluster", cluster_ref, "--json", "--top", "1",
            "--global-batch", str(training.global_batch), "--seq", str(training.seq_len),
            "--precision", training.precision, "--optimizer", training.optimizer]
    for field, flag in TRAINING_FLAGS.items():
        value = getattr(training, field, None)
        if value is None or field in ("recompute_modules",) and not value:
            continue
        if field == "recompute_modules":
            value = ",".join(value)
        args += [flag, str(value)]
    for field, name in TRAINING_SWITCHES.items():
        value = getattr(training, field, None)
        if value is not None:
            args.append(_switch(name, value))
    args += ["--tp", str(plan.tp), "--pp", str(plan.pp), "--dp", str(plan.dp), "--cp", str(plan.cp),
             "--ep", str(plan.ep), "--micro-batch", str(plan.micro_batch), "--schedule", str(plan.schedule),
             "--zero", str(plan.zero), "--recompute", plan.recompute or training.recompute,
             _switch("sequence-parallel", plan.sequence_parallel)]
    args += ["--etp", "tp" if plan.etp is None else str(plan.etp)]  # tp: Megatron-core's default, the CLI's
    if plan.reshard_after_forward != "default":
        args += ["--reshard-after-forward", str(plan.reshard_after_forward).lower()]
    if plan.first_stage_layers is not None:
        args += ["--first-stage-layers", str(plan.first_stage_layers)]
    if plan.last_stage_layers is not None:
        args += ["--last-stage-layers", str(plan.last_stage_layers)]
    if plan.fsdp_shard_size is not None:
        args += ["--fsdp-shard-size", str(plan.fsdp_shard_size)]
    if plan.tp > cluster.gpus_per_node or cluster.gpus_per_node % plan.tp:
        args.append("--allow-tp-across-nodes")
    if run.get("schedule") == "interleaved" and "vpp" not in run:
        # the bench searches vpp and the wider axes (`bench._search_vpp`): so does the CLI
        return [a if a != "1f1b" else "interleaved" for a in args]
    args += ["--vpp", str(plan.vpp)]
    # the axes the CLI searches, pinned where the bench's Plan leaves them at their default
    software = load_engine(training.framework)
    engine_overlap = training.tp_comm_overlap if training.tp_comm_overlap is not None else software.tp_comm_overlap
    tpo = plan.tp_overlap or (("ring" if training.framework == "torchtitan" else "userbuffers")
                              if engine_overlap else "none")
    args += ["--tp-overlap", tpo if plan.sequence_parallel and plan.tp > 1 else "none",
             _switch("dp-overlap", plan.dp_overlap if plan.dp_overlap is not None else CostModel().dp_overlap),
             "--offload-optimizer", plan.offload_optimizer, _switch("offload-activations", plan.offload_activations),
             _switch("zeropp", plan.zeropp), "--rank-order", plan.rank_order]
    if plan.fsdp_shard_size is None:
        args += ["--fsdp-shard-size", "0"]
    if plan.cp > 1 and training.cp_comm_type is None:  # the bench prices the engine's default exchange
        args += ["--cp-comm-type", software.cp_comm_type]
    return args


def _diff(a: dict, b: dict) -> list[str]:
    return [f"{k}: bench {a.get(k)!r} / cli {b.get(k)!r}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]


def check(run: dict, runner: CliRunner, tolerance: float) -> dict:
    """The run's bench row and CLI figure: 'status' ok / refused / differs / both-reject / skipped."""
    row = bench.price(run)
    out = {"id": run["id"], "file": run["file"], "bench_s": row.get("predicted_s")}
    if "predicted_s" not in row and "rejected" not in row:
        return {**out, "status": "skipped", "why": "the bench does not price it (" + (
            row.get("unpriced") or "no spec") + ")"}
    if "case" in run:
        spec, training, plan, cluster = run["case"].spec, run["case"].training, run["case"].plan, bench.load_cluster(
            "dgx-a100")
    else:
        spec = (bench.model_from_dict(dict(run["spec"]), run["id"]) if "spec" in run else bench.load_model(run["model"]))
        training, plan, cluster = bench._training(run), bench._plan(run), bench._cluster(run)
    with tempfile.TemporaryDirectory() as tmp:
        args = cli_args(run, spec, training, plan, cluster, Path(tmp))
        result = runner.invoke(app, args)
    out["args"] = " ".join(a if "/" not in a else Path(a).name for a in args)
    bench_fits = "predicted_s" in row and "rejected" not in row  # fits, or within the near-fit band (plan/near_fit.py)
    if result.exit_code != 0:
        error = (result.output.strip().splitlines() or ["(no output)"])[-1][:300]
        if not bench_fits:
            return {**out, "status": "both-reject", "why": error}
        return {**out, "status": "refused", "why": error}
    doc = json.loads(result.stdout)  # warnings go to stderr
    best = doc["plans"][0]
    cli_s = best["predictions"]["step_time"]["step_time_s"]
    out["cli_s"] = cli_s
    if not bench_fits:
        return {**out, "status": "differs", "why": f"bench rejects ({row.get('rejected')}); the CLI fits"}
    error = cli_s / row["predicted_s"] - 1
    out["error"] = error
    if abs(error) <= tolerance:
        return {**out, "status": "ok"}
    why = _diff(plan.model_dump(mode="json"), best["plan"]) + _diff(training.model_dump(mode="json"), doc["training"])
    return {**out, "status": "differs", "why": "; ".join(why) or "same plan and training fields"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="check only runs whose id contains this")
    parser.add_argument("--tolerance", type=float, default=0.01, help="largest |cli / bench - 1| counted as equal")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = parser.parse_args()
    runs = [r for r in bench.load_runs() if not args.only or args.only in r["id"]]
    runner = CliRunner()
    rows = [check(r, runner, args.tolerance) for r in runs]
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    for status, title in (("refused", "Refused by the CLI"), ("differs", f"CLI differs from the bench by > "
                                                                      f"{100 * args.tolerance:g} %")):
        chosen = [r for r in rows if r["status"] == status]
        print(f"{title}: {len(chosen)}")
        for r in chosen:
            figures = (f" bench {r['bench_s']:.3f} s, cli {r['cli_s']:.3f} s ({100 * r['error']:+.1f} %)"
                       if "error" in r else "")
            print(f"  {r['id']} [{r['file']}]{figures}\n    {r['why']}")
    print()
    counts = {s: sum(r["status"] == s for r in rows) for s in ("ok", "both-reject", "refused", "differs", "skipped")}
    errors = [abs(r["error"]) for r in rows if "error" in r]
    print(f"rows {len(rows)}: " + ", ".join(f"{k} {v}" for k, v in counts.items())
          + (f"; max |cli / bench - 1| {100 * max(errors):.2f} %" if errors else ""))
    for file in sorted({r["file"] for r in rows}):
        mine = [r for r in rows if r["file"] == file]
        print(f"  {file}: " + ", ".join(f"{k} {sum(r['status'] == k for r in mine)}" for k in counts))
    return 1 if counts["refused"] or counts["differs"] else 0


if __name__ == "__main__":
    sys.exit(main())
