"""`modelplan verify`: run a plan's sharded math on a scaled-down model and check it."""

from __future__ import annotations

import json
import math
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.mpirun import BackendChoice
from modelplan.cli.mtp_option import MtpLayersOpt, mtp_warnings, with_mtp_layers
from modelplan.cli.options import (
    CpCommTypeOpt,
    Recompute,
    RecomputeLayersOpt,
    RecomputeMethodOpt,
    RecomputeModulesOpt,
    complete_models,
    finite,
    given,
    implied_recompute,
    recompute_settings,
)
from modelplan.errors import ModelplanError
from modelplan.specs.plan import Schedule


class OracleChoice(StrEnum):
    numpy = "numpy"
    torch = "torch"


class OptimizerChoice(StrEnum):
    sgd = "sgd"
    momentum = "momentum"
    adam = "adam"
    adamw = "adamw"


def _inputs(target: str, overrides_plan: dict, overrides_training: dict):
    """(spec, training, plan) from a plan document or a model reference plus options.

    A plan document (a JSON object with a `plan`, from a file or `-`) is read by the one plan
    document reader; options override its plan and training fields; a document without a
    global batch gets dp * micro_batch * 2 * pp (two micro-batches per pipeline stage).
    """
    from modelplan.errors import SpecError
    from modelplan.inputs import is_stdin, read_data, source_name
    from modelplan.plan.document import KIND, SEARCH_KIND, check_document_header, parse_plan_document
    from modelplan.specs.load import load_model, model_from_data

    data, name = None, source_name(target)
    if is_stdin(target) or (Path(target).suffix.lower() == ".json" and Path(target).exists()):
        data = read_data(target)
    if isinstance(data, dict) and ("plan" in data or data.get("kind") in (KIND, SEARCH_KIND)):
        doc = check_document_header(data, name)
        for key in ("plan", "training"):
            if key in doc and not isinstance(doc[key], dict | None):
                raise SpecError(f"{name}: {key}: expected an object, got {type(doc[key]).__name__}")
        plan_data = {**(doc.get("plan") or {}), **overrides_plan}
        training_data = {**(doc.get("training") or {}), **overrides_training}
    else:
        spec = load_model(target) if data is None else model_from_data(data, name)
        doc, plan_data, training_data = None, dict(overrides_plan), dict(overrides_training)
    ep = plan_data.get("ep")
    if isinstance(ep, int) and ep > 1 and "dp" not in plan_data:
        plan_data["dp"] = ep  # experts split over data-parallel ranks: the smallest dp ep divides
    vpp = plan_data.get("vpp")
    if isinstance(vpp, int) and vpp > 1 and "schedule" not in plan_data:
        plan_data["schedule"] = "interleaved"
    if "global_batch" not in training_data:
        sizes = [plan_data.get(k, 1) for k in ("dp", "micro_batch", "pp")]
        if all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes):
            training_data["global_batch"] = sizes[0] * sizes[1] * 2 * sizes[2]
    if doc is not None:
        parsed = parse_plan_document({**doc, "plan": plan_data, "training": training_data}, name)
        ft = parsed.training.finetune
        if ft is not None and ft.uses_adapters:
            raise SpecError(f"{name}: training.finetune: verify executes full-training steps; a {ft.method} "
                            "fine-tuning plan is planned only (not executed yet)")
        return parsed.model, parsed.training, parsed.plan
    from modelplan.errors import validate_model
    from modelplan.specs.plan import Plan
    from modelplan.specs.training import TrainingSpec

    return spec, validate_model(TrainingSpec, training_data, "training"), validate_model(Plan, plan_data, "plan")


@app.command("verify")
@user_errors
def verify_cmd(
    ctx: typer.Context,
    target: Annotated[str, typer.Argument(help="PLAN.json (keys model, training, plan) or a model: preset name, spec file, HF config.json; - reads either from standard input.", autocompletion=complete_models)],
    dp: Annotated[Optional[int], typer.Option(min=1, help="Data-parallel size.")] = None,
    tp: Annotated[Optional[int], typer.Option(min=1, help="Tensor-parallel size.")] = None,
    pp: Annotated[Optional[int], typer.Option(min=1, help="Pipeline-parallel size.")] = None,
    vpp: Annotated[Optional[int], typer.Option(min=1, help="Model chunks per pipeline rank (interleaved).")] = None,
    ep: Annotated[Optional[int], typer.Option(min=1, help="Expert-parallel size (MoE; divides dp, which defaults to ep).")] = None,
    cp: Annotated[Optional[int], typer.Option(min=1, help="Context-parallel size (executed with --cp-comm-type all_gather).")] = None,
    cp_comm_type: CpCommTypeOpt = None,
    micro_batch: Annotated[Optional[int], typer.Option("--micro-batch", min=1, help="Sequences per micro-batch.")] = None,
    global_batch: Annotated[Optional[int], typer.Option("--global-batch", min=1, help="Sequences per step (default dp*micro_batch*2*pp).")] = None,
    seq: Annotated[Optional[int], typer.Option(min=1, help="Sequence length of the real run.")] = None,
    schedule: Annotated[Optional[Schedule], typer.Option(help="Pipeline schedule.")] = None,
    sequence_parallel: Annotated[Optional[bool], typer.Option("--sequence-parallel/--no-sequence-parallel", help="Megatron sequence parallelism.")] = None,
    zero: Annotated[Optional[int], typer.Option(min=0, max=3, help="ZeRO stage 0-3.")] = None,
    recompute: Annotated[Optional[Recompute], typer.Option("--recompute", help="Activation recompute: none, selective (the attention core, recomputed in backward) or full.", show_default=False)] = None,
    recompute_modules: RecomputeModulesOpt = None,
    recompute_method: RecomputeMethodOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    mtp_layers: MtpLayersOpt = None,
    optimizer: Annotated[Optional[OptimizerChoice], typer.Option(help="Optimizer of the step.")] = None,
    seed: Annotated[int, typer.Option(min=0, max=2**63 - 1, help="Seed of the initial weights and the data.")] = 0,
    steps: Annotated[int, typer.Option(min=1, max=1000, help="Optimizer steps to run and compare one by one (each on a fresh batch; LR warm-up over 2, cosine decay after).")] = 3,
    oracle: Annotated[OracleChoice, typer.Option(help="Single-device run to compare with: numpy (the executor's reference) or torch (PyTorch float64, autograd, torch.optim; pip install 'modelplan[torch]').")] = OracleChoice.numpy,
    layers_per_stage: Annotated[int, typer.Option("--layers-per-stage", min=1, max=64, help="Blocks per pipeline stage in the scaled-down model.")] = 1,
    max_ranks: Annotated[int, typer.Option("--max-ranks", min=1, max=4096, help="Refuse plans needing more ranks than this (each is a thread, or an MPI process).")] = 256,
    backend: Annotated[BackendChoice, typer.Option(help="sim: one thread per rank in this process; mpi: one MPI process per rank (pip install 'modelplan[mpi]').")] = BackendChoice.sim,
    num_ranks: Annotated[Optional[int], typer.Option("--np", min=1, max=4096, help="mpi outside mpiexec: start the job with this many ranks (default: the plan's).")] = None,
    timeout_s: Annotated[float, typer.Option("--timeout-s", min=1, max=86400, callback=finite, help="End the sharded step after this many seconds, naming what each rank waited for.")] = 120.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    ledger: Annotated[bool, typer.Option("--ledger", help="With --json: add every rank's ledger (op, axis, bytes, steps, label per call).")] = False,
    tensors: Annotated[bool, typer.Option("--tensors", help="With --json: add the sharded run's gradients and updated parameters, reassembled.")] = False,
    timeline: Annotated[bool, typer.Option("--timeline", help="Draw the executed pipeline schedule.")] = False,
    svg: Annotated[Optional[Path], typer.Option("--svg", help="Write the executed schedule as SVG to this file.")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Networks: walk through the tensor-parallel math step by step.")] = False,
) -> None:
    """Execute the plan's sharded math on a scaled-down model and check it against one device.

    With --backend mpi run it as `mpiexec -n N python -m mpi4py -m modelplan verify ...`, or let
    it start that job itself (N = the plan's ranks, or --np).
    """
    plan_opts = given(dp=dp, tp=tp, pp=pp, vpp=vpp, ep=ep, cp=cp, micro_batch=micro_batch,
                      schedule=schedule.value if schedule else None, sequence_parallel=sequence_parallel, zero=zero)
    training_opts = given(global_batch=global_batch, seq_len=seq, cp_comm_type=cp_comm_type,
                          optimizer=optimizer.value if optimizer else None)
    if recompute is not None or recompute_modules is not None or recompute_method is not None:
        plan_opts["recompute"] = None  # the training's recompute below, not a document's plan.recompute
        training_opts.update(recompute=implied_recompute(recompute or "none", recompute_modules, recompute_method),
                             **recompute_settings(recompute_modules, recompute_method, recompute_layers))
    elif recompute_layers is not None:
        training_opts["recompute_num_layers"] = recompute_layers
    if (ledger or tensors) and not json_out:
        raise ModelplanError("--ledger and --tensors add to the --json document: add --json")
    if timeline and json_out:
        raise ModelplanError("--timeline draws the schedule below the table: drop --json (or write it with --svg)")
    if num_ranks is not None and backend is BackendChoice.sim:
        raise ModelplanError(f"--np ({num_ranks}) starts an MPI job: use it with --backend mpi (sim runs the "
                             "plan's ranks as threads)")
    loaded, training, plan = _inputs(target, plan_opts, training_opts)
    spec = with_mtp_layers(loaded, mtp_layers)
    if plan.etp not in (None, plan.tp):  # the executor splits experts like the dense MLPs
        raise ModelplanError(f"plan.etp ({plan.etp}): verify executes the experts split over tp ({plan.tp}); an "
                             "expert tensor-parallel size other than tp is planned and exported only")
    check_ranks(plan, max_ranks)
    from modelplan.cli.app import print_warnings
    from modelplan.plan.option_checks import asked_of_plan, inert_settings

    print_warnings(mtp_warnings(loaded, mtp_layers) + inert_settings(training, asked_of_plan(plan, training)))
    training, plan = executed_batch(training, plan)
    if svg is not None:
        from modelplan.export.files import check_writable

        check_writable(svg, "--svg")
    run_args = dict(seed=seed, layers_per_stage=layers_per_stage, max_ranks=max_ranks, timeout_s=timeout_s,
                    oracle=oracle.value, steps=steps)
    show = dict(json_out=json_out, ledger=ledger, tensors=tensors, timeline=timeline, svg=svg)
    if backend is BackendChoice.sim:
        out = _verify_sim(spec, training, plan, run_args)
        raise typer.Exit(_show(out, **show, walk=_walkthrough(spec, plan, seed, explain)))

    from modelplan.execute.mpilaunch import inside_mpi_job

    if not inside_mpi_job():
        raise typer.Exit(_launch(ctx, plan, num_ranks, max_ranks, timeout_s))
    _verify_on_this_rank(spec, training, plan, run_args, show)


VERIFY_MICRO_BATCH = 4
"""Largest micro-batch verify executes: it runs every sample for real, and the sharded code path
is the same from a micro-batch of 1."""


def check_ranks(plan, max_ranks: int) -> None:
    """Refuse a plan with more ranks than --max-ranks, saying which options bring it under."""
    world = plan.world_size
    if world <= max_ranks:
        return
    shape = f"dp {plan.dp} x tp {plan.tp} x pp {plan.pp} x cp {plan.cp}"
    # the data-parallel and pipeline code paths are the same from dp = 2 (or ep) and pp = 2
    steps, opts, sizes = [], [], dict(dp=plan.dp, pp=plan.pp, tp=plan.tp)
    for axis, smallest in (("dp", max(2, plan.ep) if plan.dp > 1 else 1), ("pp", min(plan.pp, 2)),
                           ("tp", min(plan.tp, 2))):
        if math.prod(sizes.values()) * plan.cp <= max_ranks or sizes[axis] <= smallest:
            continue
        sizes[axis] = smallest
        opts.append(f"--{axis} {smallest}")
        steps.append((" ".join(opts), math.prod(sizes.values()) * plan.cp))
    fits = [(o, n) for o, n in steps if n <= max_ranks]
    hint = (f"verify the same code path on fewer ranks with `{fits[0][0]}` ({fits[0][1]} ranks)"
            if fits else "this plan cannot be scaled under it")
    full = steps[0][1] if steps else world
    more = (f", or keep all {plan.pp} pipeline stages and {plan.tp} tensor ranks with "
            f"`{steps[0][0]} --max-ranks {full}` (one thread or MPI process per rank)"
            if steps and max_ranks < full <= 4096 and fits and fits[0][1] != full else "")
    raise ModelplanError(f"the plan needs {world} ranks ({shape}) and verify runs at most "
                         f"--max-ranks ({max_ranks}): {hint}{more}")


def executed_batch(training, plan):
    """(training, plan) as verify executes them: at most VERIFY_MICRO_BATCH samples per
    micro-batch and 2 * pp micro-batches, or two pipeline flushes of at most 2 * pp when the step
    has several (`plan/pipeline/flush.py`; the same code path as the real step, like the scaled
    model); a note on stderr says so when that changes the batch."""
    from modelplan.errors import SpecError
    from modelplan.plan.pipeline.flush import flush_sizes

    try:
        m = plan.num_microbatches(training.global_batch)
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    micro, small_m = min(plan.micro_batch, VERIFY_MICRO_BATCH), min(m, 2 * plan.pp)
    sizes = flush_sizes(m, training.pp_flush_microbatches)
    flush = {}
    if plan.pp > 1 and len(sizes) > 1:  # two flushes, each the flush the schedule was checked for or 2 pp
        per_flush = min(sizes[0], 2 * plan.pp)
        small_m, flush = 2 * per_flush, {"pp_flush_microbatches": per_flush}
    if (micro, small_m) == (plan.micro_batch, m):
        return training, plan
    if _prints_notes():
        what = [f"micro-batches of {micro} samples (the plan's {plan.micro_batch})"] if micro != plan.micro_batch else []
        what += [f"{small_m} micro-batches per step (the plan's {m})"] if small_m != m else []
        what += [f"flushes of {flush['pp_flush_microbatches']} (the plan's {sizes[0]})"] \
            if flush and flush["pp_flush_microbatches"] != sizes[0] else []
        typer.echo(f"note: verify executes {' and '.join(what)}: the same sharded code path", err=True)
    return (training.model_copy(update={"global_batch": plan.dp * micro * small_m, **flush}),
            plan.model_copy(update={"micro_batch": micro}))


def _prints_notes() -> bool:
    """Outside MPI, or rank 0 of an MPI job."""
    import os

    return all(os.environ.get(v, "0") == "0" for v in ("OMPI_COMM_WORLD_RANK", "PMI_RANK"))


def _walkthrough(spec, plan, seed: int, explain: bool):
    """The recorded tensor-parallel walk-through of a network (--explain with tp > 1), else None."""
    if not explain:
        return None
    from modelplan.specs.family import family_of

    if not family_of(spec).walkthrough or plan.tp == 1:
        typer.echo("note: --explain walks through tensor parallelism of network models (tp > 1)", err=True)
        return None
    from modelplan.execute.net.explain import tp_walkthrough

    return tp_walkthrough(spec, plan, seed=seed)


def _verify_sim(spec, training, plan, run_args: dict):
    """verify on threads, with a progress bar on stderr."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from modelplan.execute.verify import verify_run

    phases = ["sharded step", "single-device reference step", "checks"]
    with Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("scaling down", total=len(phases))

        def step(message: str) -> None:
            progress.update(task, description=message, completed=next(
                (i for i, p in enumerate(phases) if message.startswith(p.split()[0])), 0))

        out = verify_run(spec, training, plan, "sim", progress=step, **run_args)
        progress.update(task, completed=len(phases))
    return out


def _launch(ctx: typer.Context, plan, num_ranks: int | None, max_ranks: int, timeout_s: float) -> int:
    """Outside an MPI job: run this same command on the plan's ranks under mpiexec."""
    from modelplan.cli.mpirun import command_args, require_mpi4py, run_job

    n = plan.world_size if num_ranks is None else num_ranks
    if n != plan.world_size:
        raise ModelplanError(f"--np ({n}) must equal the plan's ranks ({plan.world_size} = dp {plan.dp} x "
                             f"tp {plan.tp} x pp {plan.pp} x cp {plan.cp})")
    require_mpi4py()  # after the checks of the user's arguments, which need no MPI
    return run_job(n, command_args(ctx, drop={"num_ranks"}), timeout_s)


def _verify_on_this_rank(spec, training, plan, run_args: dict, show: dict) -> None:
    """One rank of an MPI job. Rank 0 prints the report; every rank ends with rank 0's exit code
    (an error every rank meets, such as a wrong world size, is printed by every rank)."""
    from modelplan.cli.mpirun import rank_is_terminal
    from modelplan.execute.mpicomm import exit_rank, share_from_root
    from modelplan.execute.verify import verify_run

    code: int | None = None
    try:
        out = verify_run(spec, training, plan, "mpi", **run_args)
        if out is not None:  # rank 0
            code = _show(out, **show, terminal=rank_is_terminal())
    except ModelplanError as exc:
        typer.echo(f"error: {exc}", err=True)
        code = 2
    try:
        code = share_from_root(code)
    except ModelplanError:  # no MPI library: every rank printed the same error
        pass
    if code:
        exit_rank(code)  # a plain exit, not the MPI_Abort of `python -m mpi4py` on sys.exit(1)


def _show(out: Any, *, json_out: bool, ledger: bool, tensors: bool, timeline: bool, svg: Path | None,
          terminal: bool | None = None, walk: Any = None) -> int:
    """Print the report (table or JSON), write the SVG; the exit code (0 all checks pass, else 1)."""
    from dataclasses import asdict

    from modelplan.cli.render import console as make_console

    from modelplan.cli.verify_render import report_table, timeline_svg, timeline_text
    from modelplan.export.files import write_text_atomic

    report = out.report
    if svg is not None:
        write_text_atomic(svg, timeline_svg(report))
    if json_out:
        doc = {"schema_version": 1, "kind": "modelplan.verify", "passed": report.passed,
               **report.model_dump(mode="json")}
        if walk is not None:
            doc["explain"] = walk.model_dump(mode="json")
        if ledger:
            doc["ledgers"] = [[asdict(e) for e in lg.entries] for lg in out.ledgers]
        if tensors:
            doc["tensors"] = {"gradients": {k: v.tolist() for k, v in out.grads.items()},
                              "updated_parameters": {k: v.tolist() for k, v in out.params.items()}}
        typer.echo(json.dumps(doc, indent=2))
        return 0 if report.passed else 1
    console = make_console(force_terminal=terminal)
    if walk is not None:
        from modelplan.cli.net_explain import walkthrough_renderables

        for item in walkthrough_renderables(walk):
            console.print(item)
    console.print(report_table(report))
    for note in report.notes:
        console.print(f"note: {note}", style="dim")
    if timeline:
        console.print(timeline_text(report))
    verdict = "[bold green]all checks passed[/]" if report.passed else "[bold red]some checks failed[/]"
    console.print(f"{verdict} (sharded step {report.sharded_s:.2f} s, reference {report.reference_s:.2f} s)")
    return 0 if report.passed else 1
