"""`modelplan export` (plan -> Megatron-LM / DeepSpeed / torchtitan / JSON) and
`modelplan compare` (two plans side by side, term by term)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from modelplan.cli.app import app, user_errors
from modelplan.cli.options import complete_words

if TYPE_CHECKING:
    from modelplan.export.compare import PlanComparison, TermRow
    from modelplan.plan.document import PlanDocument

JsonOption = Annotated[bool, typer.Option("--json", help="Print a machine-readable JSON document.")]
EngineVersionOption = Annotated[
    Optional[str],
    typer.Option("--engine-version", help="Engine release to write for (default: the newest "
                 "supported: Megatron-LM core_v0.16.1, deepspeed 0.19.8, torchtitan 0.3.0)."),
]


@app.command("export")
@user_errors
def export_cmd(
    plan_file: Annotated[
        Path, typer.Argument(help="A plan document (JSON) from `modelplan plan -o` (or its --json "
                                  "output); - reads it from standard input.")
    ],
    to: Annotated[
        Optional[str], typer.Option("--to", help="Target: megatron, deepspeed, torchtitan, ddp or json "
                                    "[default: the plan's engine (plan --framework): megatron, deepspeed, "
                                    "torchtitan; fsdp -> ddp; ddp for network plans].",
                                    autocompletion=complete_words(("megatron", "deepspeed", "torchtitan", "ddp", "json")),
                                    show_default=False)
    ] = None,
    output: Annotated[
        Optional[Path], typer.Option("-o", "--output", help="Write to this file (atomically) instead of stdout.")
    ] = None,
    engine_version: EngineVersionOption = None,
    as_json: JsonOption = False,
) -> None:
    """Turn a plan into a launch config: a Megatron-LM script, ds_config.json, a torchtitan 0.3
    config module, or a plain PyTorch DDP/FSDP config (network plans)."""
    from modelplan.export.engines import default_engine, export_document, parse_engine
    from modelplan.plan.document import read_plan_document

    engine = parse_engine(to) if to is not None else None
    if output is not None:
        from modelplan.export.files import check_one_stdout, check_writable

        check_writable(output, "-o")
        check_one_stdout(output, as_json, "-o", "launch config")
    doc = read_plan_document(plan_file)
    result = export_document(engine if engine is not None else default_engine(doc), doc, engine_version)
    if output is not None:
        from modelplan.export.files import write_text_atomic

        write_text_atomic(output, result.text)
        if str(output) == "-":
            return
    if as_json:
        payload = {"schema_version": 1, "kind": "modelplan.export", **result.model_dump(mode="json")}
        if output is not None:
            payload["written_to"] = str(output)
        typer.echo(json.dumps(payload, indent=2))
        return
    if output is None:
        typer.echo(result.text, nl=False)
        return
    typer.echo(f"wrote {output} ({result.engine.value})")
    for note in result.unsupported:
        typer.echo(f"  not expressible: {note}")


def _evaluate(doc: "PlanDocument") -> dict:
    """Predictions for a document written without them: the planner's estimate on the document's
    cluster (or `modelplan plan`'s default cluster), in the document's prediction layout."""
    from modelplan.cli.plan import DEFAULT_CLUSTER
    from modelplan.comm.clusters import load_cluster
    from modelplan.plan.document import predictions_dict
    from modelplan.plan.estimate import estimate_plan

    cluster = doc.cluster if doc.cluster is not None else load_cluster(DEFAULT_CLUSTER)
    estimate = estimate_plan(doc.model, doc.training, doc.plan, cluster, doc.cost_model)
    return predictions_dict(estimate)


def _format(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit == "bytes":
        return f"{value / 1e9:,.2f} GB"
    if unit == "GB":
        return f"{value:,.2f} GB"
    if unit == "s":
        return f"{value * 1e3:,.1f} ms" if abs(value) < 1 else f"{value:,.3f} s"
    if unit == "ratio":
        return f"{value * 100:.1f} %"
    return f"{value:,.4g}"


def _diff_cell(row: "TermRow") -> str:
    if row.diff is None:
        return "-"
    if row.unit == "ratio":
        text = f"{row.diff * 100:+.1f} pt"  # percentage points
    else:
        text = _format(row.diff, row.unit)
        if row.diff > 0:
            text = "+" + text
    if row.rel is not None:
        text += f" ({row.rel * 100:+.1f} %)"
    colour = {"a": "red", "b": "green", "same": "dim"}.get(row.better or "", "")
    return f"[{colour}]{text}[/{colour}]" if colour else text


def render_comparison(comparison: "PlanComparison") -> None:
    """Two rich tables: settings (differences in bold yellow) and predicted terms."""
    from modelplan.cli.render import console as make_console
    from rich.markup import escape
    from rich.table import Table

    a, b = escape(comparison.label_a), escape(comparison.label_b)
    settings = Table(title="Plans", title_justify="left")
    settings.add_column("setting")
    settings.add_column(a)
    settings.add_column(b)
    for row in comparison.settings:
        style = "bold yellow" if row.a != row.b else None
        settings.add_row(row.field, escape(row.a), escape(row.b), style=style)
    terms = Table(title=f"Predictions (green: {b} better, red: {a} better)", title_justify="left")
    terms.add_column("term")
    for name in (a, b):
        terms.add_column(name, justify="right")
    terms.add_column(f"{b} - {a}", justify="right")
    for row in comparison.terms:
        terms.add_row(escape(row.term), _format(row.a, row.unit), _format(row.b, row.unit),
                      _diff_cell(row))
    console = make_console(highlight=False)
    console.print(settings)
    console.print(terms)


@app.command("compare")
@user_errors
def compare_cmd(
    plan_a: Annotated[Path, typer.Argument(help="First plan document (JSON).")],
    plan_b: Annotated[Path, typer.Argument(help="Second plan document (JSON).")],
    as_json: JsonOption = False,
) -> None:
    """Two plans side by side: compute, bubble, communication, optimizer, memory, step time, MFU."""
    from modelplan.export.compare import compare_documents
    from modelplan.plan.document import read_plan_document

    from modelplan.inputs import source_name

    doc_a, doc_b = read_plan_document(plan_a), read_plan_document(plan_b)
    comparison = compare_documents(doc_a, doc_b, source_name(plan_a), source_name(plan_b),
                                   evaluate=_evaluate)
    if as_json:
        typer.echo(json.dumps({"schema_version": 1, "kind": "modelplan.compare",
                               **comparison.model_dump(mode="json")}, indent=2))
        return
    render_comparison(comparison)
