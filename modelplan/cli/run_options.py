"""`plan --tokens 15T` (or `--steps`): the whole run of the best plan, its options and its rendering.

The options are defined once here; `modelplan plan` declares them and hands them to `run_section`,
which prices the run (`modelplan.cost.run`) with the chosen plan's step time.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

TokensOpt = Annotated[Optional[str], typer.Option(
    "--tokens", help="Train on this many tokens (15T, 300B, 2.5e12): adds the whole run (days, GPU-hours, "
    "energy, cost, checkpoints, failures).", show_default=False)]
StepsOpt = Annotated[Optional[int], typer.Option(
    "--steps", min=1, help="Or: run this many optimizer steps.", show_default=False)]
PriceOpt = Annotated[Optional[float], typer.Option(
    "--price-per-gpu-hour", min=0.0, help="USD per GPU-hour [default: the cluster preset's list price].",
    show_default=False)]
PueOpt = Annotated[Optional[float], typer.Option(
    "--pue", min=1.0, max=3.0, help="Power usage effectiveness of the data centre [default: 1.1].", show_default=False)]
CheckpointEveryOpt = Annotated[Optional[int], typer.Option(
    "--checkpoint-every", min=1, help="Steps between checkpoints [default: Young's optimum for the job's MTBF].",
    show_default=False)]
CheckpointWriteOpt = Annotated[Optional[float], typer.Option(
    "--checkpoint-write-gbps", min=0.0, help="Aggregate checkpoint write bandwidth, GB/s [default: 0.122 per GPU, "
    "Llama 3's storage].", show_default=False)]
MtbfOpt = Annotated[Optional[float], typer.Option(
    "--mtbf-gpu-hours", min=0.0, help="Mean GPU-hours between job-stopping failures [default: 50,677, Llama 3: "
    "419 interruptions in 54 days on 16,384 GPUs].", show_default=False)]
RestartOpt = Annotated[Optional[float], typer.Option(
    "--restart-minutes", min=0.0, help="Minutes from a failure to training again [default: 10].", show_default=False)]
RampupOpt = Annotated[Optional[str], typer.Option(
    "--rampup-batch", help="Batch ramp-up START,INCREMENT,SAMPLES (Megatron's --rampup-batch-size).",
    show_default=False)]

SI = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12, "P": 10**15}


def parse_count(text: str, what: str) -> int:
    """`15T` -> 15e12, `300B` -> 3e11, `2.5e12` -> 2.5e12 (SI multipliers, rounded up to an integer)."""
    import math

    from modelplan.errors import SpecError

    raw = text.strip().upper().replace("_", "").replace(",", "")
    unit = raw[-1] if raw and raw[-1] in SI and not raw[-1].isdigit() else ""
    number = raw[: len(raw) - len(unit)]
    try:
        value = float(number) * SI[unit]
    except ValueError:
        raise SpecError(f"--{what}: expected a count like 15T, 300B or 2.5e12 (got '{text}')") from None
    if not math.isfinite(value) or value <= 0:
        raise SpecError(f"--{what}: must be a positive count (got '{text}')")
    return math.ceil(value)


def run_spec(tokens, steps, price, pue, checkpoint_every, write_gbps, mtbf, restart, rampup):
    """A RunSpec from the options, or None when neither --tokens nor --steps is given."""
    from modelplan.errors import SpecError, validate_model
    from modelplan.specs.run import RunSpec

    if tokens is None and steps is None:
        others = [flag for flag, value in (("--price-per-gpu-hour", price), ("--pue", pue),
                  ("--checkpoint-every", checkpoint_every), ("--checkpoint-write-gbps", write_gbps),
                  ("--mtbf-gpu-hours", mtbf), ("--restart-minutes", restart), ("--rampup-batch", rampup)) if value is not None]
        if others:
            raise SpecError(f"{others[0]} prices a whole run: give --tokens or --steps too")
        return None
    data = {"tokens": None if tokens is None else parse_count(tokens, "tokens"), "steps": steps,
            "price_per_gpu_hour_usd": price or None, "pue": pue, "checkpoint_every": checkpoint_every,
            "checkpoint_write_gbps": write_gbps, "mtbf_gpu_hours": mtbf, "restart_minutes": restart}
    if rampup is not None:
        parts = [p.strip() for p in rampup.split(",")]
        if len(parts) != 3:
            raise SpecError(f"--rampup-batch: expected START,INCREMENT,SAMPLES (got '{rampup}')")
        start, increment, samples = (parse_count(p, "rampup-batch") if i == 2 else _int(p) for i, p in enumerate(parts))
        data["rampup"] = {"start_batch": start, "increment": increment, "samples": samples}
    return validate_model(RunSpec, {k: v for k, v in data.items() if v is not None}, "run")


def _int(text: str) -> int:
    from modelplan.errors import SpecError

    try:
        return int(text)
    except ValueError:
        raise SpecError(f"--rampup-batch: '{text}' is not an integer") from None


def price_run(spec, training, cluster, est, run):
    """RunCost of the run under plan estimate `est` (ramp-up steps priced with the same plan)."""
    from modelplan.cost.run import checkpoint_bytes, run_cost
    from modelplan.count.memory import count_memory
    from modelplan.plan.estimate import estimate_plan

    ft = training.finetune
    if ft is not None and ft.uses_adapters:  # a checkpoint holds the adapters and their optimizer states
        from modelplan.count.finetune import count_finetune

        tuned = count_finetune(spec, training, ft, est.plan.micro_batch).memory
        saved = checkpoint_bytes(tuned.trainable_weights_bytes, 0, tuned.optimizer_states_bytes)
    else:
        mem = count_memory(spec, training, est.plan.micro_batch)
        saved = checkpoint_bytes(mem.weights, mem.master_weights, mem.optimizer)

    def step_time_at(batch: int) -> float:
        from modelplan.cli.plan_render import plan_label
        from modelplan.errors import SpecError

        smaller = training.model_copy(update={"global_batch": batch})
        try:
            return estimate_plan(spec, smaller, est.plan, cluster).step.step_time_s
        except SpecError as exc:
            raise SpecError(f"rampup: batch {batch} does not run under the plan ({plan_label(est.plan)}, "
                            f"{est.plan.schedule}): {exc}") from None

    return run_cost(run, cluster, est.plan.world_size, training.global_batch, training.seq_len,
                    est.step.step_time_s, saved,
                    batch_multiple=est.plan.dp * est.plan.micro_batch, step_time_at=step_time_at)


def _duration(seconds: float) -> str:
    if seconds >= 86_400:
        return f"{seconds / 86_400:.2f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.2f} h"
    return f"{seconds:.1f} s"


def print_run(cost) -> None:
    """The whole run as aligned text."""
    from modelplan.cli.render import human_bytes, text_table

    typer.echo()
    typer.echo(typer.style("Whole run", bold=True) + f": {cost.steps:,} steps, {cost.tokens:,} tokens on {cost.gpus:,} GPUs")
    how = f"{cost.steps - cost.rampup_steps:,} x {cost.step_time_s:.3f} s"
    if cost.rampup_steps:
        how += f" + {cost.rampup_steps:,} ramp-up steps at their smaller batches"
    rule = "Young's optimum" if cost.checkpoint_every_rule == "young" else "given"
    rows = [
        ("training steps", _duration(cost.train_time_s), how),
        ("checkpoints", _duration(cost.checkpoint_time_s),
         f"{cost.checkpoints:,} x {human_bytes(cost.checkpoint_bytes)} at {cost.checkpoint_write_gbps:,.1f} GB/s "
         f"= {cost.checkpoint_write_s:.1f} s, every {cost.checkpoint_every_steps:,} steps ({rule})"),
        ("failures and restarts", _duration(cost.failure_overhead_s),
         f"{cost.expected_failures:,.1f} expected (job MTBF {cost.job_mtbf_hours:.2f} h), "
         f"{cost.lost_work_per_failure_s / 60:.1f} min lost each"),
        ("wall clock", f"{cost.wall_clock_days:,.2f} days", f"{cost.gpu_hours:,.0f} GPU-hours"),
    ]
    if cost.energy_kwh is not None:
        rows.append(("energy", f"{cost.energy_kwh / 1000:,.1f} MWh",
                     f"{cost.board_power_w:g} W per GPU board (hosts and network not counted) x PUE {cost.pue:g}"))
    if cost.cost_usd is not None:
        rows.append(("cost", f"${cost.cost_usd:,.0f}", f"${cost.price_per_gpu_hour_usd:g} per GPU-hour"))
    else:
        rows.append(("cost", "-", "no price: give --price-per-gpu-hour"))
    for line in text_table(rows, "lrl"):
        typer.echo(line)
    if cost.cost_usd is not None:
        typer.echo(typer.style(f"price: {cost.price_source}", dim=True))
