"""`modelplan count MODEL` (params, FLOPs, memory) and `modelplan presets`."""

from __future__ import annotations

from typing import Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.options import (
    DepthOpt,
    GlobalBatchOpt,
    JsonOpt,
    MicroBatchOpt,
    ModelArg,
    OptimizerOpt,
    PrecisionOpt,
    RecomputeOpt,
    SeqOpt,
)

DEFAULT_SEQ = 2048


def default_seq_len(spec) -> int:
    """2048 tokens, or fewer when the model's position table is shorter (GPT-2 1024, BERT 512)."""
    return min(DEFAULT_SEQ, getattr(spec, "max_positions", DEFAULT_SEQ))


@app.command("count")
@user_errors
def count_cmd(
    model: ModelArg,
    batch: GlobalBatchOpt = None,
    seq: SeqOpt = None,
    micro_batch: MicroBatchOpt = 1,
    precision: PrecisionOpt = "bf16",
    optimizer: OptimizerOpt = "adamw",
    recompute: RecomputeOpt = "none",
    json_out: JsonOpt = False,
    depth: DepthOpt = 3,
) -> None:
    """Parameters (total, per component, per layer, MoE active), FLOPs and memory of a model."""
    from pydantic import ValidationError

    from modelplan.count.report import count_document
    from modelplan.errors import SpecError, format_validation_error
    from modelplan.specs.load import load_model
    from modelplan.specs.training import TrainingSpec

    spec = load_model(model)
    try:
        training = TrainingSpec(
            global_batch=batch if batch is not None else micro_batch,
            seq_len=seq if seq is not None else default_seq_len(spec),
            precision=precision,
            optimizer=optimizer,
            recompute=recompute,
        )
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, "training")) from None
    doc = count_document(spec, training, micro_batch)
    if json_out:
        import json

        typer.echo(json.dumps(doc, indent=2))
        return
    _print_document(doc, depth)


def _print_document(doc: dict, depth: int) -> None:
    """The count document as rich tables: parameters, FLOPs, memory."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from modelplan.cli.render import (
        breakdown_table,
        human_bytes,
        human_count,
        human_flops,
        summarise_layers,
    )

    console = Console(highlight=False, emoji=False)
    model, tr, params, flops, mem = (
        doc["model"], doc["training"], doc["params"], doc["flops"], doc["memory"]
    )
    source = f"  [dim]{escape(model['source'])}[/dim]" if model["source"] else ""
    console.print(f"[bold]{escape(model['name'])}[/bold]{source}")
    active = "" if params["active"] == params["total"] else f", {human_count(params['active'])} active per token ({params['active']:,})"
    console.print(f"parameters: [bold]{human_count(params['total'])}[/bold] ({params['total']:,}){active}")
    shown = {k: v for k, v in params["breakdown"].items() if k.count("/") < depth}
    console.print(breakdown_table("Parameters", shown, params["total"], human_count, "params"))
    if model["kind"] == "transformer":  # a network's layers are the rows of the table above
        console.print(f"per layer: {summarise_layers(params['per_layer'])}")
    console.print()

    if model["kind"] == "transformer":
        tokens = tr["global_batch"] * tr["seq_len"]
        step = f"global batch {tr['global_batch']} x seq {tr['seq_len']} = {tokens:,} tokens"
    else:
        step = f"global batch {tr['global_batch']} samples"
    console.print(f"[bold]FLOPs[/bold] per step: {step}, recompute {tr['recompute']}")
    summary = Table(show_header=False, show_edge=False, pad_edge=False, box=None)
    summary.add_column()
    summary.add_column(justify="right")
    summary.add_column(justify="right", style="dim")
    for label, value in (
        ("forward per token" if model["kind"] == "transformer" else "forward per sample",
         flops["forward_per_token"]),
        ("forward per step", flops["forward"]),
        ("model (fwd + bwd, MFU numerator)", flops["model"]),
        ("hardware (+ recompute, HFU numerator)", flops["hardware"]),
    ):
        summary.add_row(label, human_flops(value), f"{value:,}")
    console.print(summary)
    shown = {k: v for k, v in flops["breakdown"].items() if k.count("/") < depth}
    console.print(breakdown_table("Forward FLOPs per step", shown, flops["forward"], human_flops, "FLOPs"))
    console.print(f"[dim]convention: {escape(flops['convention'])}[/dim]\n")

    console.print(
        f"[bold]Memory[/bold] (one unsharded replica): {tr['precision']}, {tr['optimizer']}, "
        f"grads {tr['grad_dtype']}, master weights {'yes' if tr['master_weights'] else 'no'}"
    )
    table = Table(show_header=False, show_edge=False, pad_edge=False, box=None)
    table.add_column()
    table.add_column(justify="right")
    table.add_column(justify="right", style="dim")
    per_param = mem["model_states"] / params["total"] if params["total"] else 0.0
    rows = (
        ("weights", mem["weights"]),
        ("gradients", mem["gradients"]),
        ("optimizer states", mem["optimizer"]),
        ("master weights", mem["master_weights"]),
        (f"model states ({per_param:g} B/param)", mem["model_states"]),
        (f"activations (micro-batch {tr['micro_batch']}, recompute {tr['recompute']})", mem["activations"]),
        (f"KV cache (inference, batch {tr['micro_batch']})", mem["kv_cache"]),
    )
    for label, value in rows:
        table.add_row(label, human_bytes(value), f"{value:,}")
    console.print(table)


@app.command("presets")
@user_errors
def presets_cmd() -> None:
    """List the shipped model, accelerator and cluster presets."""
    from modelplan.presets import preset_names

    for category in ("models", "accelerators", "clusters"):
        typer.echo(f"{category}: {', '.join(preset_names(category)) or '-'}")
