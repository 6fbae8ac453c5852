"""`modelplan launch`: the command line (or SLURM script) that starts a plan on a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.export import EngineVersionOption


@app.command("launch")
@user_errors
def launch_cmd(
    plan_file: Annotated[Path, typer.Argument(help="A plan document (JSON) from `modelplan plan`.")],
    to: Annotated[str, typer.Option("--to", help="Engine: megatron, deepspeed, torchtitan or ddp.")],
    nodes: Annotated[int, typer.Option("--nodes", help="Nodes to run on.")] = 1,
    gpus_per_node: Annotated[
        Optional[int],
        typer.Option("--gpus-per-node", help="GPUs per node (default: the plan's cluster, else 8)."),
    ] = None,
    emit: Annotated[
        str, typer.Option("--emit", help="shell (torchrun / deepspeed lines) or slurm (sbatch).")
    ] = "shell",
    engine_version: EngineVersionOption = None,
) -> None:
    """Print the full torchrun / deepspeed command line for the cluster, or an sbatch script."""
    from modelplan.errors import ModelplanError
    from modelplan.export.cluster_launch import launch_text
    from modelplan.export.engines import export_document, parse_engine
    from modelplan.plan.document import read_plan_document

    if emit not in ("shell", "slurm"):
        raise ModelplanError(f"--emit: unknown '{emit}' (choose shell, slurm)")
    engine = parse_engine(to)
    doc = read_plan_document(plan_file)
    export = export_document(engine, doc, engine_version)
    per_node = gpus_per_node or (doc.cluster.gpus_per_node if doc.cluster is not None else 8)
    typer.echo(launch_text(export, doc.plan.world_size, nodes, per_node, emit,  # type: ignore[arg-type]
                           job_name=f"modelplan-{doc.model.name}"), nl=False)
