"""Rendering of a verify report: the PASS/FAIL table, the executed pipeline timeline in the
terminal (Megatron-LM paper style: one row per pipeline rank, a block per micro-batch, forward
and backward in two colours, darker for later model chunks) and the same timeline as SVG."""

from __future__ import annotations

from html import escape

from rich.table import Table
from rich.text import Text

from modelplan.execute.report import VerifyReport

_TERM_STYLE = {("F", 0): "black on cyan", ("F", 1): "white on blue", ("B", 0): "black on green",
               ("B", 1): "white on dark_green", ("W", 0): "black on yellow", ("W", 1): "black on dark_orange"}
_SVG_FILL = {("F", 0): "#7fc8f8", ("F", 1): "#2a78c2", ("B", 0): "#8fd694", ("B", 1): "#2f8f46",
             ("W", 0): "#f5d76e", ("W", 1): "#e0a030"}


def _fmt(value) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def report_table(report: VerifyReport) -> Table:
    """One row per check."""
    table = Table(title=f"verify: {report.model.name} under {_plan_line(report)}", title_justify="left")
    for col in ("check", "result", "measured", "expected", "detail"):
        table.add_column(col, justify="right" if col in ("measured", "expected") else "left",
                         overflow="fold")
    for row in report.rows:
        result = Text("PASS", style="bold green") if row.passed else Text("FAIL", style="bold red")
        table.add_row(row.name, result, _fmt(row.measured), _fmt(row.expected), row.detail)
    return table


def _plan_line(report: VerifyReport) -> str:
    p = report.plan
    parts = [f"dp={p.dp} tp={p.tp} pp={p.pp}"]
    if p.vpp > 1:
        parts.append(f"vpp={p.vpp}")
    if p.cp > 1:
        from modelplan.execute.context_parallel import cp_comm_type

        parts.append(f"cp={p.cp} ({cp_comm_type(report.training)})")
    if p.ep > 1:
        parts.append(f"ep={p.ep}")
    if p.etp is not None and p.etp != p.tp:
        parts.append(f"etp={p.etp}")
    parts.append(p.schedule)
    if p.sequence_parallel:
        parts.append("sp")
    if p.zero:
        parts.append(f"zero-{p.zero}")
    return " ".join(parts)


def timeline_text(report: VerifyReport) -> Text:
    """The executed schedule of the first pipeline, two characters per logical time unit."""
    out = Text()
    width = max((s.end for row in report.timeline for s in row), default=0)
    for r, steps in enumerate(report.timeline):
        out.append(f"pp rank {r} ", style="bold")
        cursor = 0
        for s in steps:
            if s.start > cursor:
                out.append("··" * (s.start - cursor), style="dim")
            label = str(s.microbatch)
            cell = label.center(2 * (s.end - s.start))
            out.append(cell, style=_TERM_STYLE[(s.kind, min(s.chunk, 1))])
            cursor = s.end
        out.append("··" * (width - cursor), style="dim")
        out.append("\n")
    out.append("forward ", style=_TERM_STYLE[("F", 0)])
    out.append(" ")
    out.append("backward", style=_TERM_STYLE[("B", 0)])
    if any(st.kind == "W" for row in report.timeline for st in row):
        out.append(" ")
        out.append("weight-grad", style=_TERM_STYLE[("W", 0)])
    if report.plan.vpp > 1:
        out.append("  later chunks darker")
    out.append("  numbers are micro-batches; one cell = one forward of one chunk")
    return out


def timeline_svg(report: VerifyReport, unit_px: int = 22, row_px: int = 28) -> str:
    """The executed schedule as a standalone SVG document."""
    label_px = 90
    width = max((s.end for row in report.timeline for s in row), default=0)
    height = row_px * len(report.timeline) + 30
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_px + width * unit_px + 10}" '
             f'height="{height}" font-family="monospace" font-size="12">',
             f"<title>{escape(report.model.name)}: executed pipeline schedule ({escape(_plan_line(report))})</title>"]
    for r, steps in enumerate(report.timeline):
        y = r * row_px + 5
        parts.append(f'<text x="4" y="{y + row_px / 2 + 4}">pp rank {r}</text>')
        for s in steps:
            x = label_px + s.start * unit_px
            w = (s.end - s.start) * unit_px
            fill = _SVG_FILL[(s.kind, min(s.chunk, 1))]
            parts.append(f'<rect x="{x}" y="{y}" width="{w}" height="{row_px - 6}" fill="{fill}" stroke="#333">'
                         f"<title>{s.kind}{s.microbatch} chunk {s.chunk}: t={s.start}..{s.end}</title></rect>")
            parts.append(f'<text x="{x + w / 2}" y="{y + row_px / 2 + 1}" text-anchor="middle">{s.microbatch}</text>')
    parts.append(f'<text x="4" y="{height - 6}">forward / backward (/ weight-grad) blocks; numbers are micro-batches; '
                 f"bubble {next((r.measured for r in report.rows if r.name == 'bubble fraction'), 0):.4g}</text>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
