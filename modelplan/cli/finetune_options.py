"""`--finetune full|lora|qlora` on `count` and `plan`: the options, the spec they make, rendering.

The options are defined once here; `with_finetune_options` adds them to a command, which
receives them as one `finetune: FinetuneSpec | None` (`finetune_spec`).
"""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Literal, Optional

import typer

from modelplan.specs.family import family_of
from modelplan.specs.limits import MAX_WIDTH

Method = Literal["full", "lora", "qlora"]
Layout = Literal["llama", "gpt2", "opt", "phi", "neox"]

FinetuneOpt = Annotated[Optional[Method], typer.Option(
    "--finetune", help="Fine-tuning: full, lora (frozen 16-bit base) or qlora (frozen NF4/int8 base): "
    "trainable parameters (PEFT's count) and memory; plan: the fine-tuning plan.", show_default=False)]
LoraRankOpt = Annotated[int, typer.Option("--lora-rank", min=1, max=MAX_WIDTH, help="LoRA rank r (PEFT default 8).")]
LoraTargetsOpt = Annotated[Optional[str], typer.Option(
    "--lora-targets", help="Module names (q_proj,k_proj,v_proj,o_proj,gate_proj,up_proj,down_proj; c_attn,c_proj,c_fc "
    "for GPT-2) or all-linear [default: PEFT's per-model default].", show_default=False)]
LoraLayoutOpt = Annotated[Optional[Layout], typer.Option(
    "--lora-layout", help="HF module naming when the targets leave it open: llama, gpt2, opt, phi or neox.",
    show_default=False)]
LoraDropoutOpt = Annotated[float, typer.Option("--lora-dropout", min=0.0, max=0.99, help="PEFT lora_dropout.")]
AdapterDtypeOpt = Annotated[Literal["fp32", "bf16"], typer.Option(
    "--adapter-dtype", help="Adapter weights: fp32 (PEFT's autocast) or bf16 (the QLoRA paper's script).")]
BaseQuantOpt = Annotated[Optional[Literal["nf4", "int8"]], typer.Option(
    "--base-quant", help="qlora: frozen base in nf4 (default) or int8 (LLM.int8).", show_default=False)]
DoubleQuantOpt = Annotated[bool, typer.Option(
    "--double-quant/--no-double-quant", help="nf4: quantize the block constants too (QLoRA double quantization).")]


FINETUNE_OPTIONS = (("finetune_method", FinetuneOpt, None), ("lora_rank", LoraRankOpt, 8),
                    ("lora_targets", LoraTargetsOpt, None), ("lora_layout", LoraLayoutOpt, None),
                    ("lora_dropout", LoraDropoutOpt, 0.0), ("adapter_dtype", AdapterDtypeOpt, "fp32"),
                    ("base_quant", BaseQuantOpt, None), ("double_quant", DoubleQuantOpt, True))
"""(parameter, option, default) in `finetune_spec`'s order."""


def with_finetune_options(command):
    """Add the fine-tuning options to a Typer command (after its own parameters); the command
    receives them as one keyword, `finetune=finetune_spec(...)` (a one-line error if they clash)."""
    own = inspect.signature(command, eval_str=True)
    kept = [p for p in own.parameters.values() if p.name != "finetune"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=option)
             for name, option, default in FINETUNE_OPTIONS]

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        values = [kwargs.pop(name) for name, _, _ in FINETUNE_OPTIONS]
        return command(*args, finetune=finetune_spec(*values), **kwargs)

    wrapper.__signature__ = own.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    return wrapper


def finetune_spec(method, rank, targets, layout, dropout, adapter_dtype, base_quant, double_quant):
    """A FinetuneSpec from the options, or None without --finetune."""
    from modelplan.errors import SpecError, validate_model
    from modelplan.specs.finetune import FinetuneSpec

    if method is None:
        if targets is not None or base_quant is not None or layout is not None:
            raise SpecError("--lora-targets/--lora-layout/--base-quant describe a fine-tune: give --finetune lora|qlora")
        return None
    names = None if targets is None else tuple(t.strip() for t in targets.split(",") if t.strip())
    return validate_model(FinetuneSpec, {
        "method": method, "lora_rank": rank, "lora_targets": names, "lora_layout": layout, "lora_dropout": dropout,
        "adapter_dtype": adapter_dtype, "base_quant": base_quant, "double_quant": double_quant}, "finetune")


def finetune_document(spec, training, finetune, micro_batch: int) -> dict:
    """The fine-tune as a JSON section (exact integers; bytes in `memory`)."""
    from modelplan.count.finetune import count_finetune

    if not family_of(spec).blocks:
        from modelplan.errors import SpecError

        raise SpecError(f"--finetune: {spec.name} is a '{spec.kind}' spec; fine-tuning is modelled for transformers")
    result = count_finetune(spec, training, finetune, micro_batch)
    lora = result.lora
    return {
        "method": result.method, "frozen_format": result.frozen_format,
        "trainable_params": result.trainable_params, "all_params": result.all_params,
        "trainable_percent": 100.0 * result.trainable_params / result.all_params,
        "lora": None if lora is None else {
            "layout": lora.layout, "targets": lora.targets, "rank": lora.rank,
            "adapted_modules": lora.adapted_modules, "breakdown_params": lora.breakdown_params},
        "memory": {**result.memory.model_dump(), "total_bytes": result.memory.total_bytes},
    }


def print_finetune(section: dict) -> None:
    """The fine-tune as aligned text."""
    from modelplan.cli.render import human_bytes, human_count, text_table

    typer.echo()
    lora = section["lora"]
    how = "" if lora is None else (f": r {lora['rank']} on {', '.join(lora['targets'])} ({lora['layout']} names, "
                                   f"{lora['adapted_modules']:,} modules)")
    typer.echo(typer.style(f"Fine-tune {section['method']}", bold=True) + how)
    typer.echo(f"trainable params: {section['trainable_params']:,} || all params: {section['all_params']:,} || "
               f"trainable%: {section['trainable_percent']:.4f}")
    mem = section["memory"]
    frozen = {"training": "frozen base (16-bit)", "nf4": "frozen base (NF4)", "int8": "frozen base (int8)"}
    rows = [(frozen.get(section["frozen_format"], "frozen base"), mem["frozen_weights_bytes"]),
            ("trainable weights", mem["trainable_weights_bytes"]), ("gradients", mem["gradients_bytes"]),
            ("optimizer states", mem["optimizer_states_bytes"]), ("activations (+ recompute working set)",
                                                                  mem["activations_bytes"]),
            ("total", mem["total_bytes"])]
    for line in text_table([(label, human_bytes(v), f"{v:,}") for label, v in rows], "lrr"):
        typer.echo(line)
    if lora is not None:
        shown = {k: human_count(v) for k, v in lora["breakdown_params"].items()}
        typer.echo(typer.style("adapters: " + ", ".join(f"{k} {v}" for k, v in shown.items()), dim=True))
