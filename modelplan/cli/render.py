"""Rendering helpers for the terminal: human units and aligned text tables of slash-path breakdowns."""

from __future__ import annotations

COUNT_UNITS = ((1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "K"))
BYTE_UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "KB"))
FLOP_UNITS = ((1e18, "EFLOP"), (1e15, "PFLOP"), (1e12, "TFLOP"), (1e9, "GFLOP"), (1e6, "MFLOP"))


def _scaled(value: float, units: tuple[tuple[float, str], ...], plain: str) -> str:
    """At least 3 significant digits in the largest unit not above the value: 124.4M, 8.03B."""
    if value == 0:
        return "0"
    for scale, suffix in units:
        if abs(value) >= scale:
            x = value / scale
            return f"{x:.2f}{suffix}" if abs(x) < 10 else f"{x:.1f}{suffix}"
    return f"{value:,.0f}{plain}"


def human_count(n: int) -> str:
    """Parameters: 124.4M, 8.03B (decimal K/M/B/T)."""
    return _scaled(n, COUNT_UNITS, "")


def human_bytes(n: int) -> str:
    """Bytes in decimal units: 16.1 GB (1 GB = 1e9 bytes)."""
    return _scaled(n, tuple((s, " " + u) for s, u in BYTE_UNITS), " B")


def human_flops(n: int) -> str:
    """FLOPs: 1.23 PFLOP."""
    return _scaled(n, tuple((s, " " + u) for s, u in FLOP_UNITS), " FLOP")


def tree_rows(breakdown: dict[str, int]) -> list[tuple[int, str, int]]:
    """(depth, last path segment, value) per key; keys arrive parent-first, depth-first."""
    return [(key.count("/"), key.rsplit("/", 1)[-1], value) for key, value in breakdown.items()]


def text_table(rows: list[tuple[str, ...]], align: str, header: tuple[str, ...] | None = None,
               gap: int = 3) -> list[str]:
    """Rows as aligned text lines (`align`: one 'l' or 'r' per column), header first if given.

    `modelplan count` prints with this instead of rich tables: the output stays a plain, greppable
    column layout and the command does not pay rich's import and layout time at start-up.
    """
    table = ([header] if header else []) + rows
    widths = [max(len(row[i]) for row in table) for i in range(len(align))]

    def line(row: tuple[str, ...]) -> str:
        cells = [c.ljust(w) if a == "l" else c.rjust(w) for c, w, a in zip(row, widths, align)]
        return (" " * gap).join(cells).rstrip()

    out = [line(row) for row in table]
    if header:
        out.insert(1, "-" * len(out[0]))
    return out


def breakdown_rows(breakdown: dict[str, int], total: int, fmt) -> list[tuple[str, str, str, str]]:
    """(indented component, human value, exact value, share of total) per slash path."""
    rows = []
    for depth, name, value in tree_rows(breakdown):
        share = f"{100 * value / total:.1f}%" if total else "-"
        rows.append(("  " * depth + name, fmt(value), f"{value:,}", share))
    return rows


def summarise_layers(per_layer: list[int]) -> str:
    """`12 x 7.09M` when all blocks are equal, else the distinct sizes with their counts."""
    if not per_layer:
        return "-"
    groups: dict[int, int] = {}
    for value in per_layer:
        groups[value] = groups.get(value, 0) + 1
    return ", ".join(f"{count} x {human_count(value)}" for value, count in groups.items())


PIPE_WIDTH = 1000
"""Console width when stdout is not a terminal: tables keep their natural width in a pipe."""


def console(stderr: bool = False, **kwargs):
    """The rich Console modelplan prints with: tables never cut a cell short with an ellipsis
    (a narrow terminal wraps them instead), and in a pipe they keep their full width."""
    import os
    import sys

    from rich.console import Console
    from rich.table import Table

    class _Console(Console):
        def print(self, *objects, **print_kwargs):  # noqa: A003 - rich's name
            for obj in objects:
                if isinstance(obj, Table):
                    for column in obj.columns:
                        column.overflow, column.no_wrap = "fold", False
            super().print(*objects, **print_kwargs)

    stream = sys.stderr if stderr else sys.stdout
    terminal = kwargs.get("force_terminal")
    if terminal is None:
        terminal = stream.isatty() or os.environ.get("TTY_COMPATIBLE") == "1"
    if not terminal and "width" not in kwargs and "COLUMNS" not in os.environ:
        kwargs["width"] = PIPE_WIDTH
    return _Console(stderr=stderr, **kwargs)
