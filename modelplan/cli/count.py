"""`modelplan count MODEL` (params, FLOPs, memory) and `modelplan presets`."""

from __future__ import annotations

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.options import (
    AttentionOpt,
    DepthOpt,
    GlobalBatchOpt,
    JsonOpt,
    MicroBatchOpt,
    ModelArg,
    OptimizerOpt,
    PrecisionOpt,
    RecomputeLayersOpt,
    RecomputeMethodOpt,
    RecomputeModulesOpt,
    RecomputeOpt,
    SeqOpt,
    implied_recompute,
    recompute_settings,
)
from modelplan.cli.decoder_seq_option import DecoderSeqOpt, check_decoder_seq
from modelplan.cli.images_option import ImagesPerSeqOpt, check_images
from modelplan.cli.finetune_options import with_finetune_options
from modelplan.cli.mtp_option import MtpLayersOpt, mtp_warnings, with_mtp_layers
from modelplan.specs.family import FAMILIES

DEFAULT_SEQ = 2048


def default_seq_len(spec) -> int:
    """2048 tokens, or fewer when the model's position table is shorter (GPT-2 1024, BERT 512); an
    image encoder's one image (its patches and prefix tokens)."""
    inputs = getattr(spec, "inputs", None)
    if inputs is not None and inputs.modality == "image":
        return inputs.tokens
    return min(DEFAULT_SEQ, getattr(spec, "max_positions", DEFAULT_SEQ))


@app.command("count")
@user_errors
@with_finetune_options
def count_cmd(
    model: ModelArg,
    batch: GlobalBatchOpt = None,
    seq: SeqOpt = None,
    micro_batch: MicroBatchOpt = 1,
    precision: PrecisionOpt = "bf16",
    optimizer: OptimizerOpt = "adamw",
    recompute: RecomputeOpt = "none",
    recompute_modules: RecomputeModulesOpt = None,
    recompute_method: RecomputeMethodOpt = None,
    recompute_layers: RecomputeLayersOpt = None,
    attention: AttentionOpt = "flash",
    json_out: JsonOpt = False,
    depth: DepthOpt = 3,
    decoder_seq: DecoderSeqOpt = None,
    images_per_seq: ImagesPerSeqOpt = None,
    mtp_layers: MtpLayersOpt = None,
    finetune=None,  # FinetuneSpec | None, from the options `with_finetune_options` adds
) -> None:
    """Parameters (total, per component, per layer, MoE active), FLOPs and memory of a model."""
    from pydantic import ValidationError

    from modelplan.count.report import count_document
    from modelplan.errors import SpecError, format_validation_error
    from modelplan.specs.load import load_model
    from modelplan.specs.training import TrainingSpec

    from modelplan.cli.app import print_warnings

    loaded = load_model(model)
    spec = with_mtp_layers(loaded, mtp_layers)
    print_warnings(mtp_warnings(loaded, mtp_layers))
    try:
        training = TrainingSpec(
            global_batch=batch if batch is not None else micro_batch,
            seq_len=seq if seq is not None else default_seq_len(spec),
            decoder_seq_len=decoder_seq,
            images_per_seq=images_per_seq,
            precision=precision,
            optimizer=optimizer,
            recompute=implied_recompute(recompute, recompute_modules, recompute_method),
            attention=attention,
            **recompute_settings(recompute_modules, recompute_method, recompute_layers),
        )
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, "training")) from None
    check_decoder_seq(spec, training)
    check_images(spec, training)
    from modelplan.cli.finetune_options import finetune_document, print_finetune

    ft = finetune
    doc = count_document(spec, training, micro_batch)
    if ft is not None:
        doc["finetune"] = finetune_document(spec, training, ft, micro_batch)
    if json_out:
        import json

        typer.echo(json.dumps({"schema_version": doc["schema_version"], "kind": "modelplan.count",
                               **doc}, indent=2))
        return
    _print_document(doc, depth)
    if ft is not None:
        print_finetune(doc["finetune"])


def _print_document(doc: dict, depth: int) -> None:
    """The count document as aligned text: parameters, FLOPs, memory (bold headings on a terminal)."""
    from modelplan.cli.render import (
        breakdown_rows,
        human_bytes,
        human_count,
        human_flops,
        summarise_layers,
        text_table,
    )

    def heading(text: str, rest: str = "") -> None:
        typer.echo(typer.style(text, bold=True) + rest)

    def lines(rows, align, header=None) -> None:
        for text in text_table(rows, align, header):
            typer.echo(text)

    model, tr, params, flops, mem = (
        doc["model"], doc["training"], doc["params"], doc["flops"], doc["memory"]
    )
    heading(model["name"], f"  {model['source']}" if model["source"] else "")
    active = "" if params["active"] == params["total"] else f", {human_count(params['active'])} active per token ({params['active']:,})"
    heading(f"parameters: {human_count(params['total'])}", f" ({params['total']:,}){active}")
    typer.echo()
    shown = {k: v for k, v in params["breakdown"].items() if k.count("/") < depth}
    lines(breakdown_rows(shown, params["total"], human_count), "lrrr", ("component", "params", "exact", "share"))
    family = FAMILIES[model["kind"]]
    if family.blocks:  # a network's layers are the rows of the table above
        typer.echo(f"per layer: {summarise_layers(params['per_layer'])}")
    mtp = doc.get("not_built", {}).get("mtp")
    if mtp is not None:
        typer.echo(f"not built: {mtp['modules']} MTP module(s), {human_count(mtp['params'])} ({mtp['params']:,}): "
                   f"{mtp['note']}")
    typer.echo()

    if family.throughput_unit == "tokens":
        tokens = tr["global_batch"] * tr["seq_len"]
        step = f"global batch {tr['global_batch']} x seq {tr['seq_len']} = {tokens:,} tokens"
    else:
        step = f"global batch {tr['global_batch']} samples"
    heading("FLOPs", f" per step: {step}, recompute {tr['recompute']}")
    summary = [
        (f"forward per {family.throughput_unit.removesuffix('s')}",
         flops["forward_per_token"]),
        ("forward per step", flops["forward"]),
        ("model (fwd + bwd, MFU numerator)", flops["model"]),
        ("hardware (+ recompute, HFU numerator)", flops["hardware"]),
    ]
    lines([(label, human_flops(v), f"{v:,}") for label, v in summary], "lrr")
    typer.echo()
    shown = {k: v for k, v in flops["breakdown"].items() if k.count("/") < depth}
    lines(breakdown_rows(shown, flops["forward"], human_flops), "lrrr", ("forward FLOPs per step", "FLOPs", "exact", "share"))
    import textwrap

    typer.echo(typer.style(textwrap.fill(f"convention: {flops['convention']}", 100), dim=True))
    typer.echo()

    heading("Memory", f" (one unsharded replica): {tr['precision']}, {tr['optimizer']}, "
            f"grads {tr['grad_dtype']}, master weights {'yes' if tr['master_weights'] else 'no'}, "
            f"attention {tr.get('attention', 'eager')}")
    per_param = mem["model_states"] / params["total"] if params["total"] else 0.0
    rows = (
        ("weights", mem["weights"]),
        ("gradients", mem["gradients"]),
        ("optimizer states", mem["optimizer"]),
        ("master weights", mem["master_weights"]),
        (f"model states ({per_param:g} B/param)", mem["model_states"]),
        (f"activations (micro-batch {tr['micro_batch']}, recompute {tr['recompute']})", mem["activations"]),
        (f"KV cache (inference, batch {tr['micro_batch']})", mem["kv_cache"]),
        ("KV cache per further token (each sequence)", mem.get("kv_cache_per_token", 0)),
    )
    if mem.get("kv_state_per_sequence", 0):  # Mamba-style blocks: a fixed-size state per sequence
        rows += (("of the cache, fixed-size states (each sequence)", mem["kv_state_per_sequence"]),)
    lines([(label, human_bytes(v), f"{v:,}") for label, v in rows], "lrr")
    vision = doc.get("vision")
    if vision is not None:
        typer.echo()
        heading("Vision tower", f" per image: {vision['image_size']} x {vision['image_size']} px, "
                f"{vision['patches_per_image']:,} patches -> " + (
                    "1 pooled embedding" if vision["tokens_per_image"] == 1  # CLIP / SigLIP pairs' image embedding
                    else f"{vision['tokens_per_image']:,} tokens the decoder cross-attends to"
                    if vision.get("tokens_read_by") == "cross_attention" else f"{vision['tokens_per_image']:,} text positions")
                + f"; {vision['images_per_seq']} per sequence in the step's FLOPs above")
        rows = (("forward FLOPs", human_flops(vision["forward_flops_per_image"]), vision["forward_flops_per_image"]),
                ("training FLOPs (fwd + bwd)", human_flops(vision["training_flops_per_image"]),
                 vision["training_flops_per_image"]),
                ("activations", human_bytes(vision["activation_bytes_per_image"]), vision["activation_bytes_per_image"]))
        lines([(label, text, f"{v:,}") for label, text, v in rows], "lrr")
        typer.echo(typer.style(textwrap.fill(f"convention: {vision['convention']}", 100), dim=True))
    _print_inputs(doc.get("inputs"), heading)


def _print_inputs(inputs: dict | None, heading) -> None:
    """What one sequence of an image / audio encoder is, and its forward FLOPs."""
    from modelplan.cli.render import human_flops

    if inputs is None:
        return
    typer.echo()
    if inputs["unit"] == "image":
        height, width = inputs.get("input_size") or [inputs["image_size"]] * 2
        heading("Per image", f": {height} x {width} px = {inputs['patches']:,} patches + {inputs['tokens'] - inputs['patches']} "
                f"prefix tokens = {inputs['tokens']:,} tokens (one sequence); forward "
                f"{human_flops(inputs['forward_flops_per_image'])}")
        return
    rate = inputs["sample_rate"]
    heading("Per clip", f": {inputs['samples_per_sequence'] / rate:.2f} s of {rate:,} Hz audio "
            f"({inputs['frames_per_second']} frames a second = tokens); forward "
            f"{human_flops(inputs['forward_flops_per_sequence'])} a clip, "
            f"{human_flops(inputs['forward_flops_per_second'])} a second of audio")


@app.command("presets")
@user_errors
def presets_cmd(json_out: JsonOpt = False) -> None:
    """List the shipped model, accelerator and cluster presets."""
    from modelplan.presets import preset_names
    from modelplan.specs.hf import model_types

    categories = ("models", "accelerators", "clusters")
    if json_out:
        import json

        typer.echo(json.dumps({"schema_version": 1, "kind": "modelplan.presets",
                               **{c: preset_names(c) for c in categories}, "hf_model_types": model_types()}, indent=2))
        return
    for category in categories:
        typer.echo(f"{category}: {', '.join(preset_names(category)) or '-'}")
    typer.echo(f"HuggingFace config.json model_types: {', '.join(model_types())}")
