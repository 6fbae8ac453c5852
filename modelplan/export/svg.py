"""SVG pictures written directly (no plotting dependency): candidate plans (step time against
memory per GPU, the chosen plan and the memory limit marked) and memory per pipeline stage as
stacked bars. Every user string is escaped; the output parses with xml.etree.

Element ids tests and tools can find: `chosen-plan` (the chosen point), `memory-limit` (the
limit line), `x-axis` / `y-axis`; in the stage picture `stage-memory-limit`,
`stage-x-axis` / `stage-y-axis`, `legend`, `stage-<i>`.
"""

from __future__ import annotations

import math
from typing import Sequence
from xml.sax.saxutils import escape, quoteattr

from pydantic import Field

from modelplan.specs.base import Spec

FONT = "font-family:sans-serif;font-size:12px"
COMPONENT_COLORS = {
    "weights": "#4c72b0",
    "gradients": "#dd8452",
    "optimizer": "#55a868",
    "activations": "#c44e52",
    "buffers": "#8172b3",
}
"""Fill colour of each memory component (seaborn 'deep' palette)."""


class CandidatePoint(Spec):
    """One candidate plan on the step-time / memory picture."""

    label: str
    """Short description, e.g. 'dp=8 tp=2 pp=4'."""
    step_time_s: float = Field(ge=0)
    """Predicted step time in seconds."""
    memory_gb: float = Field(ge=0)
    """Predicted peak memory per GPU in GB (1e9 bytes)."""
    feasible: bool = True
    """Whether the plan fits (drawn filled) or not (drawn hollow grey)."""


class StageMemory(Spec):
    """Memory of one pipeline stage (its busiest rank), in GB (1e9 bytes)."""

    stage: int = Field(ge=0)
    """Pipeline stage index."""
    weights_gb: float = Field(0.0, ge=0)
    """Model weights held by the rank."""
    gradients_gb: float = Field(0.0, ge=0)
    """Gradient buffers."""
    optimizer_gb: float = Field(0.0, ge=0)
    """Optimizer states and master weights."""
    activations_gb: float = Field(0.0, ge=0)
    """Stashed activations at the peak."""
    buffers_gb: float = Field(0.0, ge=0)
    """Communication buffers, workspaces, fragmentation."""

    @property
    def total_gb(self) -> float:
        """Sum of the components."""
        return sum(getattr(self, f"{name}_gb") for name in COMPONENT_COLORS)


def nice_ticks(hi: float, count: int = 5, lo: float = 0.0) -> list[float]:
    """Ticks covering [lo, hi] at a step of 1, 2, 2.5 or 5 times a power of 10, starting at the
    largest multiple of the step <= lo."""
    if hi <= lo:
        hi = lo + (abs(lo) or 1.0)
    raw = (hi - lo) / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    first = math.floor(lo / step + 1e-9)
    last = math.ceil(hi / step - 1e-9)
    return [round(i * step, 12) for i in range(first, last + 1)]


def _padded_range(values: list[float]) -> tuple[float, float]:
    """A y range around the data with 10 % padding (never below 0): step times of candidate
    plans usually differ by a few %, which a zero-based axis would flatten."""
    lo, hi = min(values), max(values)
    pad = 0.1 * (hi - lo) if hi > lo else 0.1 * (abs(hi) or 1.0)
    return max(0.0, lo - pad), hi + pad


def _fmt(value: float) -> str:
    return f"{value:g}"


class _Frame:
    """Maps data (x, y) into a plot box inside the SVG canvas (y grows upwards)."""

    def __init__(self, left: float, top: float, width: float, height: float,
                 x_max: float, y_max: float, y_min: float = 0.0) -> None:
        self.left, self.top, self.width, self.height = left, top, width, height
        self.x_max, self.y_max, self.y_min = x_max, y_max, y_min

    def x(self, value: float) -> float:
        return self.left + self.width * value / self.x_max

    def y(self, value: float) -> float:
        return self.top + self.height * (1 - (value - self.y_min) / (self.y_max - self.y_min))

    def axes(self, x_ticks: list[float], y_ticks: list[float], x_label: str, y_label: str,
             x_tick_labels: list[str] | None = None, id_prefix: str = "") -> list[str]:
        bottom, right = self.top + self.height, self.left + self.width
        out = [f'<g id="{id_prefix}x-axis" style="{FONT}">',
               f'<line x1="{self.left}" y1="{bottom}" x2="{right}" y2="{bottom}" stroke="black"/>']
        labels = x_tick_labels or [_fmt(t) for t in x_ticks]
        for tick, text in zip(x_ticks, labels):
            x = self.x(tick)
            out.append(f'<line x1="{x:.1f}" y1="{bottom}" x2="{x:.1f}" y2="{bottom + 5}" '
                       'stroke="black"/>')
            out.append(f'<text x="{x:.1f}" y="{bottom + 18}" text-anchor="middle">'
                       f"{escape(text)}</text>")
        out.append(f'<text x="{self.left + self.width / 2:.1f}" y="{bottom + 36}" '
                   f'text-anchor="middle">{escape(x_label)}</text></g>')
        out += [f'<g id="{id_prefix}y-axis" style="{FONT}">',
                f'<line x1="{self.left}" y1="{self.top}" x2="{self.left}" y2="{bottom}" '
                'stroke="black"/>']
        for tick in y_ticks:
            y = self.y(tick)
            out.append(f'<line x1="{self.left - 5}" y1="{y:.1f}" x2="{self.left}" y2="{y:.1f}" '
                       'stroke="black"/>')
            out.append(f'<text x="{self.left - 8}" y="{y + 4:.1f}" text-anchor="end">'
                       f"{_fmt(tick)}</text>")
        mid = self.top + self.height / 2
        out.append(f'<text x="{self.left - 48}" y="{mid:.1f}" text-anchor="middle" '
                   f'transform="rotate(-90 {self.left - 48} {mid:.1f})">{escape(y_label)}</text>')
        out.append("</g>")
        return out


def _document(width: int, height: int, title: str, body: list[str]) -> str:
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}">')
    heading = (f'<text x="{width / 2:.1f}" y="20" text-anchor="middle" '
               'style="font-family:sans-serif;font-size:14px;font-weight:bold">'
               f"{escape(title)}</text>")
    return "\n".join([head, f"<title>{escape(title)}</title>",
                      f'<rect width="{width}" height="{height}" fill="white"/>', heading,
                      *body, "</svg>"]) + "\n"


def render_candidates_svg(
    points: Sequence[CandidatePoint],
    chosen: int | CandidatePoint | None,
    memory_limit_gb: float,
    *,
    title: str = "Candidate plans",
    width: int = 640,
    height: int = 420,
) -> str:
    """Step time (y) against memory per GPU (x) for `points`; `chosen` (index or point) is ringed
    and labelled (id "chosen-plan"); the memory limit is a dashed vertical line
    (id "memory-limit")."""
    if isinstance(chosen, int):
        if not 0 <= chosen < len(points):
            raise ValueError(f"chosen ({chosen}) is not an index into {len(points)} points")
        chosen_point: CandidatePoint | None = points[chosen]
    else:
        chosen_point = chosen
    every = list(points) + ([chosen_point] if chosen_point is not None else [])
    if not every:
        raise ValueError("points: need at least one candidate plan")
    x_ticks = nice_ticks(max([p.memory_gb for p in every] + [memory_limit_gb]) * 1.05)
    y_lo, y_hi = _padded_range([p.step_time_s for p in every])
    y_ticks = nice_ticks(y_hi, lo=y_lo)
    # Top margin holds the title and a one-row legend; the plot box sits below them.
    frame = _Frame(70, 56, width - 100, height - 116, x_ticks[-1], y_ticks[-1], y_ticks[0])
    body = frame.axes(x_ticks, y_ticks, "memory per GPU (GB)", "step time (s)")
    bottom = frame.top + frame.height
    limit_x = frame.x(memory_limit_gb)
    body.append(
        f'<line id="memory-limit" x1="{limit_x:.1f}" y1="{frame.top}" x2="{limit_x:.1f}" '
        f'y2="{bottom}" stroke="#c44e52" stroke-dasharray="6,4">'
        f"<title>memory limit {_fmt(memory_limit_gb)} GB</title></line>"
    )
    body.append(f'<text x="{limit_x - 4:.1f}" y="{bottom - 6}" fill="#c44e52" text-anchor="end" '
                f'style="{FONT}">limit {escape(_fmt(memory_limit_gb))} GB</text>')
    body.append('<g id="candidates">')
    for point in points:
        fill = "#4c72b0" if point.feasible else "none"
        stroke = "#4c72b0" if point.feasible else "#999999"
        cls = "candidate" if point.feasible else "candidate infeasible"
        tip = f"{point.label}: {_fmt(point.step_time_s)} s, {_fmt(point.memory_gb)} GB"
        body.append(f'<circle class={quoteattr(cls)} cx="{frame.x(point.memory_gb):.1f}" '
                    f'cy="{frame.y(point.step_time_s):.1f}" r="4" fill="{fill}" '
                    f'stroke="{stroke}"><title>{escape(tip)}</title></circle>')
    body.append("</g>")
    if chosen_point is not None:
        cx, cy = frame.x(chosen_point.memory_gb), frame.y(chosen_point.step_time_s)
        tip = f"chosen: {chosen_point.label}"
        # Label on the side with more room: left of the ring in the right half of the plot.
        right_half = cx > frame.left + frame.width / 2
        tx, anchor = (cx - 11, "end") if right_half else (cx + 11, "start")
        body.append(f'<g id="chosen-plan"><circle cx="{cx:.1f}" cy="{cy:.1f}" r="8" fill="none" '
                    f'stroke="#dd8452" stroke-width="3"><title>{escape(tip)}</title></circle>'
                    f'<text x="{tx:.1f}" y="{cy + 20:.1f}" text-anchor="{anchor}" '
                    f'style="{FONT}">{escape(chosen_point.label)}</text></g>')
    lx, ly = frame.left + 10, 38
    body.append(f'<g id="candidates-legend" style="{FONT}">'
                f'<circle cx="{lx}" cy="{ly}" r="4" fill="#4c72b0" stroke="#4c72b0"/>'
                f'<text x="{lx + 10}" y="{ly + 4}">fits</text>'
                f'<circle cx="{lx + 60}" cy="{ly}" r="4" fill="none" stroke="#999999"/>'
                f'<text x="{lx + 70}" y="{ly + 4}">does not fit</text>'
                f'<circle cx="{lx + 170}" cy="{ly}" r="6" fill="none" '
                'stroke="#dd8452" stroke-width="3"/>'
                f'<text x="{lx + 182}" y="{ly + 4}">chosen</text>'
                f'<line x1="{lx + 250}" y1="{ly}" x2="{lx + 270}" y2="{ly}" stroke="#c44e52" '
                'stroke-dasharray="6,4"/>'
                f'<text x="{lx + 276}" y="{ly + 4}">memory limit</text></g>')
    return _document(width, height, title, body)


def render_memory_stages_svg(
    stages: Sequence[StageMemory],
    *,
    memory_limit_gb: float | None = None,
    title: str = "Memory per pipeline stage",
    width: int = 640,
    height: int = 420,
) -> str:
    """Stacked bars per stage (weights, gradients, optimizer, activations, buffers) with a
    legend (id "legend"); the limit, when given, is a dashed horizontal line
    (id "stage-memory-limit")."""
    if not stages:
        raise ValueError("stages: need at least one pipeline stage")
    top_gb = max([s.total_gb for s in stages] + [memory_limit_gb or 0.0]) * 1.05
    y_ticks = nice_ticks(top_gb)
    frame = _Frame(70, 40, width - 230, height - 100, len(stages), y_ticks[-1])
    centres = [i + 0.5 for i in range(len(stages))]
    body = frame.axes(centres, y_ticks, "pipeline stage", "memory per GPU (GB)",
                      [str(s.stage) for s in stages], id_prefix="stage-")
    bar = 0.6 * frame.width / len(stages)
    for i, stage in enumerate(stages):
        base = 0.0
        body.append(f'<g class="stage" id="stage-{stage.stage}">')
        for name, color in COMPONENT_COLORS.items():
            value = getattr(stage, f"{name}_gb")
            if value <= 0:
                continue
            y_top, y_bottom = frame.y(base + value), frame.y(base)
            tip = f"stage {stage.stage} {name}: {_fmt(round(value, 3))} GB"
            body.append(f'<rect class="{name}" x="{frame.x(centres[i]) - bar / 2:.1f}" '
                        f'y="{y_top:.1f}" width="{bar:.1f}" height="{y_bottom - y_top:.1f}" '
                        f'fill="{color}"><title>{escape(tip)}</title></rect>')
            base += value
        body.append("</g>")
    if memory_limit_gb is not None:
        y = frame.y(memory_limit_gb)
        body.append(f'<line id="stage-memory-limit" x1="{frame.left}" y1="{y:.1f}" '
                    f'x2="{frame.left + frame.width}" y2="{y:.1f}" stroke="#c44e52" '
                    f'stroke-dasharray="6,4"><title>memory limit {_fmt(memory_limit_gb)} GB'
                    "</title></line>")
    legend_x = frame.left + frame.width + 20
    body.append(f'<g id="legend" style="{FONT}">')
    for k, (name, color) in enumerate(COMPONENT_COLORS.items()):
        y = frame.top + 20 * k
        body.append(f'<rect x="{legend_x}" y="{y}" width="12" height="12" fill="{color}"/>')
        body.append(f'<text x="{legend_x + 18}" y="{y + 10}">{name}</text>')
    body.append("</g>")
    return _document(width, height, title, body)
