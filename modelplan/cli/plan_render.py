"""Terminal and JSON rendering of `modelplan plan`: ranked table, best plan's breakdowns, bars."""

from __future__ import annotations

from pathlib import Path

from modelplan.cli.render import human_bytes

TIME_LABELS = {
    "compute_s": "compute (GEMMs + memory-bound ops)",
    "recompute_s": "recompute forward",
    "tp_comm_s": "TP collectives (exposed)",
    "ep_comm_s": "EP all-to-all (exposed)",
    "cp_comm_s": "CP K/V ring (exposed)",
    "pp_comm_s": "PP send/recv (exposed)",
    "bubble_s": "pipeline bubble",
    "dp_comm_s": "DP / ZeRO traffic (exposed)",
    "embedding_sync_s": "pipeline copies' grad sync",
    "optimizer_s": "optimizer step",
    "offload_s": "offload to host (exposed)",
    "host_s": "host issue, EP overlap (exposed)",
}
OPTIONAL_TERMS = ("ep_comm_s", "cp_comm_s", "offload_s", "host_s")
"""Time terms shown only when the plan has them (MoE all-to-all, context-parallel ring)."""
SHORT = {"interleaved": "intl", "1f1b": "1f1b", "gpipe": "gpipe", "none": "none", "selective": "sel", "full": "full"}
MEMORY_LABELS = ("weights", "gradients", "optimizer", "activations", "comm_buffers", "fragmentation", "reserved")


def bar(value: float, total: float, width: int = 24) -> str:
    """A horizontal bar of eighth-blocks, `width` characters for `total`."""
    if not total > 0 or not value > 0 or total == float("inf"):  # also NaN and inf: no bar
        return ""
    eighths = round(8 * width * min(value / total, 1.0))
    full, rest = divmod(eighths, 8)
    return "█" * full + ("" if rest == 0 else " ▏▎▍▌▋▊▉"[rest])


def plan_label(plan) -> str:
    """tp8 pp4 dp32 vpp3 mb2: a compact name of a plan."""
    parts = [f"tp{plan.tp}", f"pp{plan.pp}", f"dp{plan.dp}"]
    if plan.ep > 1:
        parts.append(f"ep{plan.ep}")
    if plan.cp > 1:
        parts.append(f"cp{plan.cp}")
    if plan.vpp > 1:
        parts.append(f"vpp{plan.vpp}")
    parts.append(f"mb{plan.micro_batch}")
    parts += mechanism_tags(plan)
    return " ".join(parts)


def mechanism_tags(plan) -> list[str]:
    """Short tags of the non-default overlap / offload / placement choices of a plan."""
    tags = []
    if getattr(plan, "tp_overlap", None) not in (None, "none"):
        tags.append({"userbuffers": "tp-ub", "ring": "tp-ring"}[plan.tp_overlap])
    if getattr(plan, "dp_overlap", None) is False:
        tags.append("dp-noovl")
    if getattr(plan, "fsdp_shard_size", None):
        tags.append(f"hsdp{plan.fsdp_shard_size}")
    if getattr(plan, "zeropp", False):
        tags.append("zero++")
    if getattr(plan, "offload_optimizer", "none") != "none":
        tags.append(f"opt-{plan.offload_optimizer}")
    if getattr(plan, "offload_activations", False):
        tags.append("act-cpu")
    if getattr(plan, "rank_order", "tp-cp-dp-pp") != "tp-cp-dp-pp":
        tags.append(plan.rank_order)
    return tags


def _rate(spec) -> str:
    """What the throughput counts: the model family's unit (tokens, samples)."""
    from modelplan.specs.family import family_of

    return f"{family_of(spec).throughput_unit}/s"


def _header(console, spec, training, cluster, gpus: int) -> None:
    from modelplan.specs.family import family_of

    acc = cluster.accelerator
    batch = (f"{training.global_batch} x seq {training.seq_len}" if family_of(spec).throughput_unit == "tokens"
             else f"{training.global_batch} samples")
    if training.decoder_seq_len is not None and getattr(spec, "arch", None) == "encoder_decoder":
        batch += f" (decoder {training.decoder_seq_len})"  # the target tokens per sequence (`plan/stack_lengths.py`)
    if getattr(spec, "vision", None) is not None:  # the images the first stage's tower runs (`plan/vision_tower.py`)
        from modelplan.count.vision_step import images_per_sequence

        unit = spec.vision.input_unit or "image"  # an audio tower's clip (VisionSpec.input_unit)
        batch += f", {images_per_sequence(spec, training)} {unit}(s) per sequence"
    console.print(
        f"[bold]{spec.name}[/bold] on {gpus} x {acc.name} ({cluster.name}, {cluster.gpus_per_node}/node, "
        + (f"{cluster.domain_gpus}/NVLink domain, " if cluster.domain_gpus != cluster.gpus_per_node else "")
        + f"{acc.memory_gb:g} GB{_usable(acc)}): global batch {batch}, "
        f"{training.precision}, {training.optimizer}"
    )
    if getattr(training, "finetune", None) is not None:
        console.print(finetune_line(training.finetune))


def _usable(acc) -> str:
    """The device memory the plan's budget starts from, in the GB of the memory tables, where it is
    not the marketed figure (an H100 "80 GB" is 81,559 MiB = 85.5 GB as NVML reports it)."""
    if acc.memory_total_mib is None:
        return ""
    return f", {acc.memory_capacity_bytes / 1e9:.1f} GB usable"


def finetune_line(ft) -> str:
    """What a fine-tuning plan trains, in one line."""
    if not ft.uses_adapters:
        return "[bold]fine-tuning plan[/bold] (full): every parameter trains"
    targets = ", ".join(ft.lora_targets) if ft.lora_targets else "PEFT's default targets"
    base = {"training": "16-bit", "nf4": "NF4" + (" + double quant" if ft.double_quant else ""),
            "int8": "int8"}[ft.frozen_format]
    return (f"[bold]fine-tuning plan[/bold] ({ft.method}): r {ft.lora_rank} adapters on {targets} ({ft.adapter_dtype}, "
            f"with gradients and optimizer states); frozen base {base}, no gradients or optimizer states")


def print_estimate(spec, training, cluster, est, title: str | None = None, console=None) -> None:
    """One plan in detail: time breakdown and memory per stage, each with bars."""
    from modelplan.cli.render import console as make_console
    from rich.table import Table

    console = console or make_console(highlight=False)
    plan = est.plan
    if title:
        _header(console, spec, training, cluster, plan.world_size)
    console.print(
        f"[bold]{plan_label(plan)}[/bold]  schedule {plan.schedule}, sequence parallel "
        f"{'on' if plan.sequence_parallel else 'off'}, recompute {plan.recompute or training.recompute}, ZeRO {plan.zero}, "
        f"{est.num_microbatches} micro-batches" + _split_note(spec, plan)
    )
    step = est.step.step_time_s
    console.print(
        f"step {step:.3f} s, {est.throughput_per_s:,.0f} {_rate(spec)}, {est.model_tflops_per_gpu:.1f} model "
        f"TFLOP/s/GPU (MFU {100 * est.mfu:.1f}%), {est.hardware_tflops_per_gpu:.1f} hardware "
        f"(HFU {100 * est.hfu:.1f}%), bubble {100 * est.bubble_fraction:.1f}%"
    )
    table = Table(title="Step time", title_justify="left", show_edge=False, pad_edge=False)
    for col, justify in (("term", "left"), ("seconds", "right"), ("share", "right"), ("", "left")):
        table.add_column(col, justify=justify)
    for key, value in est.step.terms().items():
        if key in OPTIONAL_TERMS and value == 0:
            continue
        table.add_row(TIME_LABELS[key], f"{value:.3f}", f"{100 * value / step:.1f}%", bar(value, step))
    table.add_row("[bold]step[/bold]", f"[bold]{step:.3f}[/bold]", "100%", "")
    console.print(table)
    hidden = []
    if est.step.dp_comm_total_s > 0:
        hidden.append(f"DP traffic {est.step.dp_comm_total_s:.3f} s in all")
    if est.step.tp_hidden_s > 0:
        hidden.append(f"TP traffic hidden {est.step.tp_hidden_s:.3f} s")
    if est.step.cp_hidden_s > 0:
        hidden.append(f"CP ring traffic hidden behind attention {est.step.cp_hidden_s:.3f} s")
    if hidden:
        console.print(f"[dim]{'; '.join(hidden)}[/dim]")
    mem = Table(title="Memory per GPU (largest stages)", title_justify="left", show_edge=False, pad_edge=False)
    mem.add_column("")
    for stage in est.memory:
        mem.add_column(f"stage {stage.stage}", justify="right")
    for key in MEMORY_LABELS:
        mem.add_row(key.replace("_", " "), *[human_bytes(getattr(s, key)) for s in est.memory])
    mem.add_row("[bold]total[/bold]", *[f"[bold]{human_bytes(s.total)}[/bold]" for s in est.memory])
    mem.add_row("of budget", *[bar(s.total, est.memory_budget_bytes, 12) + f" {100 * s.total / est.memory_budget_bytes:.0f}%" for s in est.memory])
    console.print(mem)
    for note in est.notes:
        console.print(f"[dim]note: {note}[/dim]")


def print_search(spec, training, cluster, result, headroom: float, output: Path | None) -> None:
    """Ranked table of the top plans, the best in detail, and what the search rejected."""
    from modelplan.cli.render import console as make_console
    from rich.table import Table

    console = make_console(highlight=False)
    _header(console, spec, training, cluster, result.gpus)
    table = Table(title=f"Top {len(result.best)} plans", title_justify="left", box=None, pad_edge=False,
                  padding=(0, 1), header_style="bold")
    cols = ("#", "tp", "pp", "dp", "vpp", "mb", "sched", "SP", "recomp", "ZeRO", "step s", _rate(spec), "MFU", "memory")
    for col in cols:
        table.add_column(col, justify="left" if col in ("sched", "recomp") else "right", no_wrap=True)

    extra = [axis for axis in ("ep", "cp") if any(getattr(e.plan, axis) > 1 for e in result.best)]
    for col in extra:  # parallel axes shown only when some ranked plan uses them
        table.add_column(col, justify="right", no_wrap=True)
    tags = [" ".join(mechanism_tags(e.plan)) for e in result.best]
    if any(tags):  # overlap / offload / sharding / placement choices, when some ranked plan makes one
        table.add_column("overlap, offload, placement", justify="left", no_wrap=True)
    for i, est in enumerate(result.best, 1):
        p = est.plan
        table.add_row(
            str(i), str(p.tp), str(p.pp), str(p.dp), str(p.vpp), str(p.micro_batch), SHORT.get(p.schedule, p.schedule),
            "on" if p.sequence_parallel else "off", SHORT.get(str(p.recompute or training.recompute), ""), str(p.zero),
            f"{est.step.step_time_s:.3f}", f"{est.throughput_per_s:,.0f}", f"{100 * est.mfu:.1f}%",
            f"{est.peak_memory_bytes / 1e9:.1f}G", *[str(getattr(p, axis)) for axis in extra],
            *([tags[i - 1]] if any(tags) else []), style="bold" if i == 1 else None,
        )
    console.print(table)
    console.print()
    print_estimate(spec, training, cluster, result.best[0], console=console)
    rejected = ", ".join(f"{reason} {count:,}" for reason, count in result.rejected.items()) or "none"
    console.print(
        f"\n[dim]searched {result.candidates:,} plans in {result.wall_s:.2f} s: {result.evaluated:,} timed, "
        f"{result.bounded:,} skipped by a step-time bound; rejected: {rejected}[/dim]"
    )
    for reason, example in result.examples.items():
        console.print(f"[dim]  e.g. {reason}: {example}[/dim]")
    if output is not None:
        console.print(f"wrote {output}")


def search_json(spec, training, cluster, result) -> dict:
    """The search as one JSON document: inputs, search statistics, ranked plans with predictions."""
    from modelplan.plan.document import SCHEMA_VERSION, predictions_dict

    return {
        "schema_version": SCHEMA_VERSION,
        "kind": "modelplan.search",
        "model": spec.model_dump(mode="json"),
        "training": training.model_dump(mode="json"),
        "cluster": cluster.model_dump(mode="json"),
        "search": {
            "gpus": result.gpus, "candidates": result.candidates, "evaluated": result.evaluated,
            "bounded": result.bounded,
            "rejected": result.rejected, "examples": result.examples, "wall_s": result.wall_s,
            "near_fit_margin": result.near_fit_margin,
        },
        "plans": [{"plan": e.plan.model_dump(mode="json"), "predictions": predictions_dict(e)} for e in result.best],
        **_finetune_section(spec, training, result),
    }


def _finetune_section(spec, training, result) -> dict:
    """`finetune`: a fine-tuning plan's trainable counts and one unsharded replica's memory
    (`count --finetune`, at the best plan's micro-batch); empty for pre-training plans."""
    ft = getattr(training, "finetune", None)
    if ft is None:
        return {}
    from modelplan.cli.finetune_options import finetune_document

    micro_batch = result.best[0].plan.micro_batch if result.best else 1
    return {"finetune": {"plan": "fine-tuning", **finetune_document(spec, training, ft, micro_batch)}}


def _split_note(spec, plan) -> str:
    """', blocks per stage 2+4+4+2' when the plan has pipeline stages of unequal size."""
    from modelplan.specs.family import family_of

    if plan.pp == 1 or not family_of(spec).stage_split:
        return ""
    from modelplan.plan.stages import split_layers

    counts = split_layers(spec.layers, plan.pp * plan.vpp, plan.stage_split)
    return "" if len(set(counts)) == 1 else f", blocks per stage {'+'.join(map(str, counts))}"
