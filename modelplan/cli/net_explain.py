"""Rendering of the tensor-parallel walk-through (`modelplan verify NETWORK --tp N --explain`)."""

from __future__ import annotations

from rich.console import Group as RichGroup
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from modelplan.execute.net.explain import Matrix, TpWalkthrough


def matrix_text(m: Matrix) -> Text:
    """A label, the shape, and the values as aligned rows with 4 decimals (or '...' when large)."""
    out = Text(f"{m.label}", style="bold")
    out.append(f"  ({' x '.join(map(str, m.shape))})\n", style="dim")
    if m.values is None:
        out.append("  (too large to show)", style="dim")
        return out
    cells = [[f"{v: .4f}" for v in row] for row in m.values]
    width = max(len(c) for row in cells for c in row)
    out.append("\n".join("  " + " ".join(c.rjust(width) for c in row) for row in cells))
    return out


def walkthrough_renderables(w: TpWalkthrough) -> list:
    """One panel per step: text, the matrices per rank side by side, the whole results, the check."""
    items = [Text(f"Tensor-parallel walk-through of {w.model}: tp {w.tp}, one micro-batch of "
                  f"{w.micro_batch} sample(s), real numbers from the executed ranks", style="bold")]
    for k, step in enumerate(w.steps, 1):
        parts: list = [Text(step.text)]
        if step.ranks:
            table = Table(show_header=True, header_style="bold", box=None, padding=(0, 2))
            for i in range(len(step.ranks)):
                table.add_column(f"rank {i}")
            table.add_row(*[Text("\n").join(matrix_text(m) for m in mats) for mats in step.ranks])
            parts.append(table)
        if step.result:
            table = Table(show_header=False, box=None, padding=(0, 2))
            for _ in step.result:
                table.add_column()
            table.add_row(*[matrix_text(m) for m in step.result])
            parts.append(table)
        if step.check:
            style = "green" if step.passed else "bold red"
            parts.append(Text(("equal: " if step.passed else "DIFFERENT: ") + step.check, style=style))
        items.append(Panel(RichGroup(*parts), title=f"{k}. {step.title}", title_align="left"))
    return items
