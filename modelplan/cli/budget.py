"""`modelplan budget --flops 1e24 | --gpus N --days D --cluster C`: the compute-optimal model, its
shape, its plan and how long it trains."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.options import JsonOpt, PrecisionOpt, finite
from modelplan.specs.limits import MAX_BATCH, MAX_RANKS, MAX_SEQ, MAX_TRAINING_FLOPS, MAX_WIDTH

SizeBy = Literal["tokens-per-param", "hoffmann", "besiroglu"]
"""The values of modelplan.cost.budget.SizeBy (repeated so that --help does not import pydantic)."""


@app.command("budget")
@user_errors
def budget_cmd(
    flops: Annotated[Optional[str], typer.Option("--flops", help="Training FLOP budget (1e24, 3.8e25).", show_default=False)] = None,
    gpus: Annotated[Optional[int], typer.Option("--gpus", min=1, max=MAX_RANKS, help="GPUs to train on (plans the chosen shape).", show_default=False)] = None,
    days: Annotated[Optional[float], typer.Option("--days", min=0.0, max=36_500, callback=finite, help="Wall-clock days on --gpus (instead of --flops).", show_default=False)] = None,
    cluster: Annotated[Optional[str], typer.Option("--cluster", help="Cluster preset or file [default: dgx-h100].", show_default=False)] = None,
    size_by: Annotated[SizeBy, typer.Option("--size-by", help="Which split picks the model: tokens-per-param (Chinchilla's ~20, or --tokens-per-param), or a fitted law's optimum: hoffmann (Approach 3 as published) or besiroglu (its 2024 replication).")] = "tokens-per-param",
    tokens_per_param: Annotated[float, typer.Option("--tokens-per-param", min=0.0, max=1e6, callback=finite, help="Tokens per parameter of the tokens-per-param split (over-train for inference: 100+).")] = 20.0,
    seq: Annotated[int, typer.Option("--seq", min=1, max=MAX_SEQ, help="Training sequence length.")] = 4096,
    batch: Annotated[int, typer.Option("--batch", min=1, max=MAX_BATCH, help="Global batch in sequences.")] = 1024,
    vocab: Annotated[int, typer.Option("--vocab", min=1, max=MAX_WIDTH, help="Vocabulary of the shape (default: Llama 3's).")] = 128_256,
    precision: PrecisionOpt = "bf16",
    json_out: JsonOpt = False,
) -> None:
    """The compute-optimal model for a FLOP or GPU-days budget: size, tokens, shape, plan, days."""
    from modelplan.cli.plan import DEFAULT_CLUSTER
    from modelplan.cli.run_options import parse_count
    from modelplan.comm.clusters import load_cluster
    from modelplan.cost.budget import budget
    from modelplan.errors import SpecError, validate_model
    from modelplan.plan.search import SearchSpace, search_plans
    from modelplan.specs.training import TrainingSpec

    if flops is None and days is None:
        raise SpecError("give --flops, or --gpus and --days")
    training = validate_model(TrainingSpec, {"global_batch": batch, "seq_len": seq, "precision": precision}, "training")
    cl = load_cluster(cluster or DEFAULT_CLUSTER)

    def search(spec, tr, c, n):
        return search_plans(spec, tr, c, n, SearchSpace(), top_k=1).best[0]

    flops_value = None if flops is None else float(parse_count(flops, "flops"))
    if flops_value is not None and flops_value > MAX_TRAINING_FLOPS:
        raise SpecError(f"--flops ({flops}) must be <= {MAX_TRAINING_FLOPS:.0e}: larger than any model "
                        "modelplan can shape")
    result = budget(cl, training, search, flops=flops_value,
                    gpus=gpus, days=days, size_by=size_by, tokens_per_param=tokens_per_param, vocab=vocab)
    if json_out:
        import json

        typer.echo(json.dumps(budget_json(result, cl), indent=2))
        return
    print_budget(result, cl)


def budget_json(result, cluster) -> dict:
    """The budget as a JSON document (units in every numeric key; counts are plain)."""
    from modelplan.cost.scaling import LAWS
    from modelplan.plan.document import predictions_dict

    doc = {
        "schema_version": 1,
        "kind": "modelplan.budget",
        "compute_flops": result.compute_flops,
        "size_by": result.size_by,
        "laws": {name: law.model_dump() for name, law in LAWS.items()},
        "allocations": [a.model_dump() for a in result.allocations],
        "model": result.spec.model_dump(mode="json"),
        "params": result.params,
        "tokens": result.tokens,
        "sizing_rounds": result.rounds,
        "days_target_days": result.days_target,
        "cluster": cluster.name,
    }
    if result.plan is not None:
        doc["plan"] = {"plan": result.plan.plan.model_dump(mode="json"), "predictions": predictions_dict(result.plan)}
        doc["run"] = result.run.model_dump()
    return doc


def print_budget(result, cluster) -> None:
    """The budget as aligned text."""
    from modelplan.cli.render import human_count, text_table
    from modelplan.cost.scaling import LAWS

    typer.echo(typer.style(f"Budget {result.compute_flops:.3g} FLOPs", bold=True) + " (C = 6 N D)")
    rows = [(a.rule + (" *" if a.rule == result.size_by else ""), human_count(round(a.params)),
             human_count(round(a.tokens)), f"{a.tokens_per_param:.1f}", f"{a.loss_hoffmann_nats:.3f}",
             f"{a.loss_besiroglu_nats:.3f}") for a in result.allocations]
    for line in text_table(rows, "lrrrrr", ("split", "params", "tokens", "tokens/param", "loss (Hoffmann)",
                                             "loss (Besiroglu)")):
        typer.echo(line)
    for law in LAWS.values():
        typer.echo(typer.style(f"{law.name}: E {law.E:g}, A {law.A:g}, B {law.B:g}, alpha {law.alpha:g}, "
                               f"beta {law.beta:g} ({law.source})", dim=True))
    s = result.spec
    typer.echo()
    typer.echo(typer.style("Shape", bold=True) + f" {s.name}: {result.params:,} params, {s.layers} layers, hidden "
               f"{s.hidden}, {s.heads} heads ({s.num_kv_heads} KV) of {s.dim_head}, ffn {s.ffn_hidden}, vocab {s.vocab}; "
               f"{result.tokens:,} tokens")
    typer.echo(typer.style("rule: Llama 3 recipe, hidden/layers ~ 128, head dim 128, 8 KV heads (heads a multiple of 8 "
                           "from hidden 1024), ffn 3.5 x hidden (modelplan.cost.shape)", dim=True))
    if result.plan is None:
        typer.echo("give --gpus to plan it")
        return
    from modelplan.cli.plan_render import plan_label
    from modelplan.cli.run_options import print_run

    est = result.plan
    typer.echo()
    rounds = f" after {result.rounds} sizing rounds" if result.rounds > 1 else ""
    if result.days_target is not None:
        rounds += f" (target {result.days_target:g} days)"
    typer.echo(typer.style("Plan", bold=True) + f" on {est.plan.world_size} x {cluster.accelerator.name}{rounds}: "
               f"{plan_label(est.plan)}, step {est.step.step_time_s:.3f} s, MFU {100 * est.mfu:.1f}%")
    print_run(result.run)
