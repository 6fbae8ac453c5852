"""`modelplan plan MODEL --gpus N --cluster PRESET`: the fastest data/tensor/pipeline split that fits.

Every plan field can be fixed (`--tp 8`), ranged (`--pp 1..16`) or listed (`--zero 0,1`); fixing
all of them evaluates that one plan. `--explain PLAN.json` evaluates a given plan document and
says why it does or does not fit (exit code 1 when it does not).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from modelplan.cli.app import app, print_warnings, user_errors
from modelplan.cli.options import (
    AcModeOpt,
    AttentionOpt,
    CompileOpt,
    CpCommTypeOpt,
    EpOverlapOpt,
    Fp8ParamGatherOpt,
    Fp8RecipeOpt,
    FrameworkOpt,
    GradDtypeOpt,
    JsonOpt,
    MasterWeightsOpt,
    OptimizerOpt,
    PrecisionOpt,
    RecomputeLayersOpt,
    RecomputeMethodOpt,
    RecomputeModulesOpt,
    SeqOpt,
    TpOverlapOpt,
    complete_clusters,
    complete_models,
    finite,
    given,
    given_options,
    global_batch_option,
    implied_recompute,
    recompute_settings,
)
from modelplan.cli.decoder_seq_option import DecoderSeqOpt, check_decoder_seq
from modelplan.cli.images_option import ImagesPerSeqOpt, check_images
from modelplan.cli.dispatcher_option import MoeDispatcherOpt, dispatcher_settings
from modelplan.cli.etp_option import EtpOpt, check_etp, parse_etp
from modelplan.cli.tensor_rate_option import TensorRateOpt, tensor_rate_settings
from modelplan.cli.optimizer_state_option import OptimizerStateDtypeOpt, optimizer_state_settings
from modelplan.cli.gate_option import FakeGateOpt
from modelplan.cli.sac_option import SacAttentionOpt
from modelplan.cli.fsdp_root_option import FsdpRootOpt
from modelplan.cli.rope_fusion_option import RopeFusionOpt
from modelplan.cli.mtp_option import MtpLayersOpt, mtp_note, mtp_warnings, with_mtp_layers
from modelplan.cli.pp_flush_option import PpFlushOpt, pp_flush_settings
from modelplan.cli.finetune_options import with_finetune_options
from modelplan.cli.layout_options import (CompileLossOpt, ElementwiseOpt, FirstStageOpt, FusedNormOpt, LastStageOpt,
                                          LossKernelOpt, LossUpcastOpt,
                                          ReshardOpt, kernel_settings, layout_space)
from modelplan.cli.search_options import (DpOverlapOpt, FsdpShardOpt, OffloadActivationsOpt, OffloadOptimizerOpt,
                                          RankOrderOpt, TpOverlapModesOpt, ZeroppOpt, parse_words, wide_space)
from modelplan.cli.run_options import (CheckpointEveryOpt, CheckpointWriteOpt, MtbfOpt, PriceOpt, PueOpt, RampupOpt,
                                       RestartOpt, StepsOpt, TokensOpt)
from modelplan.specs.family import family_of
from modelplan.specs.limits import MAX_BATCH, MAX_RANKS
from modelplan.specs.plan import Schedule

EXPLAIN_READS = {"explain", "gpus", "cluster", "memory_headroom", "allow_tp_across_nodes", "output", "svg", "json_out"}
"""The plan options `--explain` reads; the document gives everything else."""
DEFAULT_GLOBAL_BATCH = 1024
DEFAULT_CLUSTER = "dgx-h100"
PlanBatchOpt = global_batch_option(str(DEFAULT_GLOBAL_BATCH))


def _range_opt(flag: str, help_text: str):
    return Annotated[Optional[str], typer.Option(flag, help=help_text, show_default=False)]


TpOpt = _range_opt("--tp", "Tensor-parallel size: 8, 1..8 or 2,4,8 [default: every valid value].")
PpOpt = _range_opt("--pp", "Pipeline-parallel size: 4, 1..16 or 2,4 [default: every valid value].")
DpOpt = _range_opt("--dp", "Data-parallel size (fixing it fixes pp = gpus / (tp * dp)).")
VppOpt = _range_opt("--vpp", "Model chunks per pipeline rank (>= 2 means the interleaved schedule).")
MicroOpt = _range_opt("--micro-batch", "Sequences per micro-batch: 1, 1..8 or 1,2,4.")
CpOpt = _range_opt("--cp", "Context-parallel size (sequence split for attention; verify executes it with "
                   "--cp-comm-type all_gather): 2, 1..8 or 2,4 [default: 1, or every valid value from seq 32768 on].")
EpOpt = _range_opt("--ep", "Expert-parallel size (MoE; experts split over data-parallel ranks, or with --etp over "
                   "tp x dp x cp / etp ranks): 8, 1..8 or 2,4,8 [default: every divisor of dp that divides num_experts].")
ZeroOpt = _range_opt("--zero", "ZeRO stages to consider: 1, 0..1 or 0,1,3 [default: 0..3].")
RecomputeListOpt = _range_opt("--recompute", "Activation recompute: none, selective, full, or a comma list.")
ScheduleOpt = _range_opt("--schedule", f"Pipeline schedules: {', '.join(Schedule)} (comma list) [default: 1f1b,interleaved].")


def parse_ints(text: str, what: str, minimum: int = 1) -> list[int] | tuple[int, int]:
    """`8` -> [8]; `2,4,8` -> [2, 4, 8]; `1..16` -> (1, 16); one-line error otherwise."""
    from modelplan.errors import SpecError

    text = text.strip()
    try:
        if ".." in text:
            lo, hi = (int(x) for x in text.split("..", 1))
        else:
            values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SpecError(f"--{what}: expected N, N..M or N,M,... (got '{text[:40]}')") from None
    top = MAX_BATCH if what == "micro-batch" else MAX_RANKS
    if ".." in text:
        if lo < minimum or hi < lo:
            raise SpecError(f"--{what}: range {text} must be lo..hi with {minimum} <= lo <= hi")
        if hi > top:
            raise SpecError(f"--{what}: {hi} is larger than {top:,}")
        return lo, hi
    if not values or min(values) < minimum:
        raise SpecError(f"--{what}: values must be >= {minimum} (got '{text}')")
    if max(values) > top:
        raise SpecError(f"--{what}: {max(values)} is larger than {top:,}")
    return values


def parse_choice(text: str | None, what: str):
    """A plan-field option as the search takes it: a list of values or an IntRange."""
    from modelplan.plan.search import IntRange

    if text is None:
        return None
    parsed = parse_ints(text, what)
    return IntRange(lo=parsed[0], hi=parsed[1]) if isinstance(parsed, tuple) else parsed


@app.command("plan")
@user_errors
@with_finetune_options
def plan_cmd(
    ctx: typer.Context,
    model: Annotated[Optional[str], typer.Argument(metavar="MODEL", help="Preset, spec file, HF config.json or - for standard input (omit with --explain).", show_default=False, autocompletion=complete_models)] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=1, max=MAX_RANKS, help="Number of GPUs to split over.", show_default=False)] = None,
    cluster: Annotated[Optional[str], typer.Option("--cluster", help=f"Cluster preset or file [default: {DEFAULT_CLUSTER}].", show_default=False, autocompletion=complete_clusters)] = None,
    batch: PlanBatchOpt = None,
    seq: SeqOpt = None,
    decoder_seq: DecoderSeqOpt = None,
    images_per_seq: ImagesPerSeqOpt = None,
    precision: PrecisionOpt = "bf16",
    optimizer: OptimizerOpt = "adamw",
    attention: AttentionOpt = "flash",
    framework: FrameworkOpt = "megatron",
    ac_mode: AcModeOpt = None,
    recompute_modules: RecomputeModulesOpt = None,
    recompute_method: RecomputeMethodOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    fp8_recipe: Fp8RecipeOpt = None,
    compile_: CompileOpt = False,
    tp_comm_overlap: TpOverlapOpt = None,
    ep_comm_overlap: EpOverlapOpt = False,
    cp_comm_type: CpCommTypeOpt = None,
    grad_dtype: GradDtypeOpt = None,
    fp8_param_gather: Fp8ParamGatherOpt = False,
    master_weights: MasterWeightsOpt = None,
    tp: TpOpt = None,
    pp: PpOpt = None,
    dp: DpOpt = None,
    vpp: VppOpt = None,
    micro_batch: MicroOpt = None,
    ep: EpOpt = None,
    etp: EtpOpt = None,
    moe_dispatcher: MoeDispatcherOpt = None,
    cp: CpOpt = None,
    max_tp: Annotated[Optional[int], typer.Option("--max-tp", min=1, max=MAX_RANKS, help="Largest tensor-parallel size to consider.", show_default=False)] = None,
    recompute: RecomputeListOpt = None,
    sequence_parallel: Annotated[Optional[bool], typer.Option("--sequence-parallel/--no-sequence-parallel", help="Fix sequence parallelism on or off [default: try both].", show_default=False)] = None,
    zero: ZeroOpt = None,
    schedule: ScheduleOpt = None,
    tp_overlap: TpOverlapModesOpt = None,
    dp_overlap: DpOverlapOpt = None,
    offload_optimizer: OffloadOptimizerOpt = None,
    offload_activations: OffloadActivationsOpt = None,
    fsdp_shard_size: FsdpShardOpt = None,
    zeropp: ZeroppOpt = None,
    rank_order: RankOrderOpt = None,
    first_stage_layers: FirstStageOpt = None,
    last_stage_layers: LastStageOpt = None,
    reshard_after_forward: ReshardOpt = None,
    fused_norm: FusedNormOpt = None,
    elementwise: ElementwiseOpt = None,
    compile_loss: CompileLossOpt = None,
    loss_upcast: LossUpcastOpt = None,
    loss_kernel: LossKernelOpt = None,
    tensor_rate: TensorRateOpt = None,
    optimizer_state_dtype: OptimizerStateDtypeOpt = None,
    pp_flush_microbatches: PpFlushOpt = None,
    fake_balanced_gate: FakeGateOpt = None,
    sac_saves_attention: SacAttentionOpt = None,
    fsdp_ends_in_root: FsdpRootOpt = None,
    rope_fusion: RopeFusionOpt = None,
    mtp_layers: MtpLayersOpt = None,
    memory_headroom: Annotated[float, typer.Option("--memory-headroom", min=0.0, max=0.9, callback=finite, help="Fraction of GPU memory to keep free.")] = 0.0,
    allow_tp_across_nodes: Annotated[bool, typer.Option("--allow-tp-across-nodes", help="Let TP groups span nodes.")] = False,
    top: Annotated[int, typer.Option("--top", min=1, max=1000, help="How many ranked plans to show.")] = 5,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", help="Write the best (or explained) plan's document here (atomic; - prints it instead of the tables).", show_default=False)] = None,
    explain: Annotated[Optional[Path], typer.Option("--explain", help="Evaluate this plan document (- reads it from standard input) and say why it does or does not fit.", show_default=False)] = None,
    svg: Annotated[Optional[Path], typer.Option("--svg", help="Also draw the ranked plans (step time vs memory, limit marked) and the best plan's memory per stage to this SVG file (atomic).", show_default=False)] = None,
    tokens: TokensOpt = None,
    steps: StepsOpt = None,
    price_per_gpu_hour: PriceOpt = None,
    pue: PueOpt = None,
    checkpoint_every: CheckpointEveryOpt = None,
    checkpoint_write_gbps: CheckpointWriteOpt = None,
    mtbf_gpu_hours: MtbfOpt = None,
    restart_minutes: RestartOpt = None,
    rampup_batch: RampupOpt = None,
    json_out: JsonOpt = False,
    finetune=None,  # FinetuneSpec | None, from the options `with_finetune_options` adds
) -> None:
    """Find the fastest data / tensor / pipeline split that fits, ranked and explained."""
    from modelplan.errors import SpecError

    _check_outputs(output, svg, json_out)
    if explain is not None:
        ignored = given_options(ctx, EXPLAIN_READS)
        if ignored:
            raise SpecError(f"--explain evaluates the document's own plan and training: {', '.join(ignored[:4])} "
                            "would have no effect (edit the document, or drop --explain)")
        _explain(explain, model, gpus, cluster, memory_headroom, allow_tp_across_nodes, output, json_out, svg)
        return
    if model is None:
        raise SpecError("MODEL is required (or give --explain PLAN.json)")
    if gpus is None:
        raise SpecError("--gpus is required: how many GPUs to split over")
    from modelplan.cli.plan_render import print_search, search_json
    from modelplan.comm.clusters import load_cluster
    from modelplan.plan.document import dumps_plan_document, plan_document
    from modelplan.plan.search import SearchSpace, search_plans
    from modelplan.specs.load import load_model

    from modelplan.cli.run_options import price_run, print_run, run_spec

    run = run_spec(tokens, steps, price_per_gpu_hour, pue, checkpoint_every, checkpoint_write_gbps, mtbf_gpu_hours,
                   restart_minutes, rampup_batch)
    ft = finetune
    loaded = load_model(model)
    spec = with_mtp_layers(loaded, mtp_layers)
    if ft is not None and not family_of(spec).blocks:
        raise SpecError(f"--finetune: {spec.name} is a '{spec.kind}' spec; fine-tuning is modelled for transformers")
    training = _training(spec, batch, seq, precision, optimizer, attention,
                         dict(framework=framework, ac_mode=ac_mode, fp8_recipe=fp8_recipe, compile=compile_,
                              recompute=_training_recompute(recompute, recompute_modules, recompute_method),
                              **recompute_settings(recompute_modules, recompute_method, recompute_layers),
                              tp_comm_overlap=tp_comm_overlap, ep_comm_overlap=ep_comm_overlap,
                              cp_comm_type=cp_comm_type, finetune=ft, fp8_param_gather=fp8_param_gather,
                              master_weights=master_weights,
                              **kernel_settings(fused_norm, compile_loss, loss_upcast, loss_kernel, elementwise),
                              **dispatcher_settings(moe_dispatcher, spec), **tensor_rate_settings(tensor_rate),
                              **optimizer_state_settings(optimizer_state_dtype),
                              **pp_flush_settings(pp_flush_microbatches),
                              **given(fake_balanced_gate=fake_balanced_gate, sac_saves_attention=sac_saves_attention,
                                       fsdp_ends_in_root=fsdp_ends_in_root, rope_fusion=rope_fusion,
                                       grad_dtype=grad_dtype,
                                       images_per_seq=images_per_seq)),
                         decoder_seq)
    check_decoder_seq(spec, training)
    check_images(spec, training)
    cl = load_cluster(cluster or DEFAULT_CLUSTER)
    etps = parse_etp(etp)
    check_etp(etps, spec)
    space = SearchSpace(
        tp=parse_choice(tp, "tp"), pp=parse_choice(pp, "pp"), dp=parse_choice(dp, "dp"),
        vpp=parse_choice(vpp, "vpp"), micro_batch=parse_choice(micro_batch, "micro-batch"),
        ep=parse_choice(ep, "ep"), etp=etps, cp=parse_choice(cp, "cp"), max_tp=max_tp,
        recompute=parse_words(recompute, "recompute", ("none", "selective", "full"))
        or _recompute_of(recompute_modules, recompute_method),
        sequence_parallel=None if sequence_parallel is None else [sequence_parallel],
        zero=_zero_values(zero) if zero is not None else None,
        schedule=parse_words(schedule, "schedule", tuple(Schedule)),
        allow_tp_across_nodes=allow_tp_across_nodes, memory_headroom=memory_headroom,
        batch_splits=None if run is None or run.rampup is None else [run.rampup.start_batch, run.rampup.increment],
        **wide_space(tp_overlap, dp_overlap, offload_optimizer, offload_activations, fsdp_shard_size, zeropp,
                     rank_order),
        **layout_space(first_stage_layers, last_stage_layers, reshard_after_forward),
    )
    from modelplan.plan.option_checks import asked_of_space, check_settings
    from modelplan.specs.load import load_engine

    print_warnings(mtp_warnings(loaded, mtp_layers)
                   + check_settings(spec, training, asked_of_space(space, training, gpus), load_engine(training.framework)))
    from modelplan.plan.near_fit import search_near_fit
    from modelplan.specs.costmodel import CostModel

    result = search_near_fit(lambda sp: search_plans(spec, training, cl, gpus, sp, top_k=top), space,
                             CostModel().near_fit_margin)
    if result.near_fit_margin:
        print_warnings([result.best[0].notes[0]])
    run_cost = None if run is None else price_run(spec, training, cl, result.best[0], run)
    if svg is not None:
        from modelplan.export.plan_picture import write_plan_svg

        write_plan_svg(result, svg)
    if output is not None:
        from modelplan.export.files import write_text_atomic

        chosen = result.best[0].cp_comm_type  # the searched exchange, written where the run named none
        doc_training = training if chosen is None else training.model_copy(update={"cp_comm_type": chosen})
        write_text_atomic(output, dumps_plan_document(plan_document(spec, doc_training, result.best[0], cl)))
        if str(output) == "-":  # the document is the output
            return
    note = mtp_note(loaded, mtp_layers)
    if json_out:
        import json

        doc = search_json(spec, training, cl, result)
        doc = {**doc, "notes": [note]} if note else doc
        typer.echo(json.dumps(doc if run_cost is None else {**doc, "run": run_cost.model_dump()}, indent=2))
        return
    print_search(spec, training, cl, result, memory_headroom, output)
    if note:
        typer.echo(f"note: {note}")
    if run_cost is not None:
        print_run(run_cost)


def _check_outputs(output: Path | None, svg: Path | None, json_out: bool) -> None:
    """-o and --svg checked together, before the search: writable, distinct, one stdout."""
    from modelplan.errors import SpecError
    from modelplan.export.files import check_one_stdout, check_writable

    targets = {}
    for flag, path in (("-o", output), ("--svg", svg)):
        if path is not None:
            targets[flag] = check_writable(path, flag)
    if svg is not None and str(svg) == "-":
        raise SpecError("--svg -: the picture goes to a file, not standard output")
    check_one_stdout(output, json_out, "-o", "plan document")
    if len(targets) == 2 and targets["-o"] == targets["--svg"]:
        raise SpecError(f"-o and --svg name the same file ({output}): give two names")


def _zero_values(text: str) -> list[int]:
    """ZeRO stages from `1`, `0..1` or `0,1,3`."""
    from modelplan.errors import SpecError

    parsed = parse_ints(text, "zero", minimum=0)
    values = list(range(parsed[0], parsed[1] + 1)) if isinstance(parsed, tuple) else parsed
    if max(values) > 3:
        raise SpecError(f"--zero: stages are 0..3 (got {max(values)})")
    return values


def _training_recompute(recompute: str | None, modules: str | None, method: str | None) -> str:
    """The run's recompute (`TrainingSpec.recompute`): the one --recompute policy when one is
    given, else what --recompute-modules / --recompute-method imply."""
    words = [w.strip().lower() for w in (recompute or "").split(",") if w.strip()]
    if len(words) == 1 and words[0] in ("none", "selective", "full") and modules is None and method is None:
        return words[0]
    return implied_recompute("none", modules, method)


def _recompute_of(modules: str | None, method: str | None) -> list[str] | None:
    """The search's recompute when only --recompute-modules (selective) / --recompute-method (full) is given."""
    implied = implied_recompute("none", modules, method)
    return None if implied == "none" else [implied]


def _training(spec, batch, seq, precision, optimizer, attention="flash", engine: dict | None = None,
              decoder_seq: int | None = None):
    from pydantic import ValidationError

    from modelplan.cli.count import default_seq_len
    from modelplan.errors import SpecError, format_validation_error
    from modelplan.specs.training import TrainingSpec

    try:
        return TrainingSpec(
            global_batch=batch if batch is not None else DEFAULT_GLOBAL_BATCH,
            seq_len=seq if seq is not None else default_seq_len(spec), decoder_seq_len=decoder_seq,
            precision=precision, optimizer=optimizer, attention=attention, **(engine or {}),
        )
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, "training")) from None


def _check_finite(path: Path, est) -> None:
    """A document whose sizes or rates overflow the step time (inf or NaN seconds) is bad input."""
    import math

    from modelplan.errors import SpecError

    bad = {key: value for key, value in {"step": est.step.step_time_s, **est.step.terms()}.items()
           if not math.isfinite(value)}
    if bad:
        key, value = next(iter(bad.items()))
        raise SpecError(f"{path}: the document's sizes and rates give a {key} time of {value} s (not finite)")


def _explain(path: Path, model, gpus, cluster, headroom, allow_tp, output, json_out, svg=None) -> None:
    """Evaluate one plan document; exit 1 when it does not fit."""
    from modelplan.cli.plan_render import print_estimate
    from modelplan.comm.clusters import load_cluster
    from modelplan.errors import SpecError
    from modelplan.plan.document import dumps_plan_document, plan_document, read_plan_document
    from modelplan.plan.estimate import estimate_plan, fit_explanation

    if model is not None:
        raise SpecError("--explain takes the model from the plan document: drop MODEL")
    doc = read_plan_document(path)
    if cluster is not None:
        cl = load_cluster(cluster)
    elif doc.cluster is not None:
        cl = doc.cluster
    else:
        cl = load_cluster(DEFAULT_CLUSTER)
    est = estimate_plan(doc.model, doc.training, doc.plan, cl, doc.cost_model,
                        world_size=gpus, memory_headroom=headroom, allow_tp_across_nodes=allow_tp)
    _check_finite(path, est)
    line = fit_explanation(est, cl.accelerator.memory_capacity_bytes / 1e9, headroom)
    if svg is not None:
        from modelplan.export.plan_picture import write_plan_svg

        write_plan_svg({"best": [est]}, svg)
    if output is not None:
        from modelplan.export.files import write_text_atomic

        write_text_atomic(output, dumps_plan_document(plan_document(doc.model, doc.training, est, cl, doc.cost_model)))
    if str(output) == "-":
        pass
    elif json_out:
        typer.echo(dumps_plan_document({**plan_document(doc.model, doc.training, est, cl, doc.cost_model),
                                        "explanation": line}).rstrip())
    else:
        from modelplan.inputs import source_name

        print_estimate(doc.model, doc.training, cl, est, title=f"{source_name(path)}: {doc.model.name}")
        typer.echo(line)
    if not est.fits:
        raise typer.Exit(1)
