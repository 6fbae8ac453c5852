"""`modelplan verify`: run a plan's sharded math on a scaled-down model and check it."""

from __future__ import annotations

import json
import os
import tempfile
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Optional

import typer

from modelplan.cli.app import app, user_errors


class ScheduleChoice(StrEnum):
    gpipe = "gpipe"
    one_f_one_b = "1f1b"
    interleaved = "interleaved"


class OptimizerChoice(StrEnum):
    sgd = "sgd"
    momentum = "momentum"
    adam = "adam"
    adamw = "adamw"


def _write_atomic(path: Path, text: str) -> None:
    """Temp file in the target folder, then os.replace: a reader never sees half a file."""
    path = path.resolve()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _inputs(target: str, overrides_plan: dict, overrides_training: dict):
    """(spec, training, plan) from a plan document or a model reference plus options."""
    from pydantic import ValidationError

    from modelplan.errors import SpecError, format_validation_error
    from modelplan.specs.load import load_model, model_from_dict, read_json
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    path = Path(target)
    doc = read_json(path) if path.suffix.lower() == ".json" and path.is_file() else None
    is_plan_doc = isinstance(doc, dict) and "plan" in doc
    if is_plan_doc:
        if "model" not in doc:
            raise SpecError(f"{path.name}: a plan document needs a 'model' key next to 'plan'")
        model = doc["model"]
        spec = load_model(model) if isinstance(model, str) else model_from_dict(model, f"{path.name}: model")
        plan_data, training_data = dict(doc["plan"] or {}), dict(doc.get("training") or {})
    else:
        spec, plan_data, training_data = load_model(target), {}, {}
    plan_data.update(overrides_plan)
    training_data.update(overrides_training)
    if plan_data.get("vpp", 1) > 1 and "schedule" not in plan_data:
        plan_data["schedule"] = "interleaved"
    if "global_batch" not in training_data:
        p = plan_data
        training_data["global_batch"] = p.get("dp", 1) * p.get("micro_batch", 1) * 2 * p.get("pp", 1)
    try:
        return spec, TrainingSpec.model_validate(training_data), Plan.model_validate(plan_data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, path.name if is_plan_doc else "")) from None


@app.command("verify")
@user_errors
def verify_cmd(
    target: Annotated[str, typer.Argument(help="PLAN.json (keys model, training, plan) or a model: preset name, spec file, HF config.json.")],
    dp: Annotated[Optional[int], typer.Option(help="Data-parallel size.")] = None,
    tp: Annotated[Optional[int], typer.Option(help="Tensor-parallel size.")] = None,
    pp: Annotated[Optional[int], typer.Option(help="Pipeline-parallel size.")] = None,
    vpp: Annotated[Optional[int], typer.Option(help="Model chunks per pipeline rank (interleaved).")] = None,
    ep: Annotated[Optional[int], typer.Option(help="Expert-parallel size (MoE; divides dp).")] = None,
    micro_batch: Annotated[Optional[int], typer.Option("--micro-batch", help="Sequences per micro-batch.")] = None,
    global_batch: Annotated[Optional[int], typer.Option("--global-batch", help="Sequences per step (default dp*micro_batch*2*pp).")] = None,
    seq: Annotated[Optional[int], typer.Option(help="Sequence length of the real run.")] = None,
    schedule: Annotated[Optional[ScheduleChoice], typer.Option(help="Pipeline schedule.")] = None,
    sequence_parallel: Annotated[Optional[bool], typer.Option("--sequence-parallel/--no-sequence-parallel", help="Megatron sequence parallelism.")] = None,
    zero: Annotated[Optional[int], typer.Option(help="ZeRO stage 0-3.")] = None,
    optimizer: Annotated[Optional[OptimizerChoice], typer.Option(help="Optimizer of the step.")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the initial weights and the data.")] = 0,
    layers_per_stage: Annotated[int, typer.Option("--layers-per-stage", help="Blocks per pipeline stage in the scaled-down model.")] = 1,
    max_ranks: Annotated[int, typer.Option("--max-ranks", help="Refuse plans needing more simulated ranks than this.")] = 256,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    timeline: Annotated[bool, typer.Option("--timeline", help="Draw the executed pipeline schedule.")] = False,
    svg: Annotated[Optional[Path], typer.Option("--svg", help="Write the executed schedule as SVG to this file.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Networks: walk through the tensor-parallel math step by step.")] = False,
) -> None:
    """Execute the plan's sharded math on a scaled-down model and check it against one device."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from modelplan.cli.verify_render import report_table, timeline_svg, timeline_text
    from modelplan.execute.verify import verify

    plan_opts = {k: v for k, v in dict(dp=dp, tp=tp, pp=pp, vpp=vpp, ep=ep, micro_batch=micro_batch,
                                        schedule=schedule.value if schedule else None,
                                        sequence_parallel=sequence_parallel, zero=zero).items() if v is not None}
    training_opts = {k: v for k, v in dict(global_batch=global_batch, seq_len=seq,
                                            optimizer=optimizer.value if optimizer else None).items() if v is not None}
    spec, training, plan = _inputs(target, plan_opts, training_opts)

    phases = ["sharded step", "single-device reference step", "checks"]
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("scaling down", total=len(phases))

        def step(message: str) -> None:
            progress.update(task, description=message, completed=next(
                (i for i, p in enumerate(phases) if message.startswith(p.split()[0])), 0))

        report = verify(spec, training, plan, seed=seed, layers_per_stage=layers_per_stage,
                        max_ranks=max_ranks, progress=step)
        progress.update(task, completed=len(phases))

    if svg is not None:
        _write_atomic(svg, timeline_svg(report))
    console = Console()
    walk = None
    if explain and getattr(spec, "kind", None) == "network" and plan.tp > 1:
        from modelplan.execute.net.explain import tp_walkthrough

        walk = tp_walkthrough(spec, plan, seed=seed)
    if json_out:
        extra = {"explain": walk.model_dump(mode="json")} if walk is not None else {}
        typer.echo(json.dumps({"passed": report.passed, **report.model_dump(mode="json"), **extra}, indent=2))
    else:
        if walk is not None:
            from modelplan.cli.net_explain import walkthrough_renderables

            for item in walkthrough_renderables(walk):
                console.print(item)
        elif explain:
            console.print("note: --explain walks through tensor parallelism of network models (tp > 1)", style="dim")
        console.print(report_table(report))
        for note in report.notes:
            console.print(f"note: {note}", style="dim")
        if timeline:
            console.print(timeline_text(report))
        verdict = "[bold green]all checks passed[/]" if report.passed else "[bold red]some checks failed[/]"
        console.print(f"{verdict} (sharded step {report.sharded_s:.2f} s, reference {report.reference_s:.2f} s)")
    raise typer.Exit(0 if report.passed else 1)
