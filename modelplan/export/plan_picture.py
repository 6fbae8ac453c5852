"""One SVG for a planner search: the candidates picture above the chosen plan's memory per stage.

`write_plan_svg(search_result, path)` is the single call the planner CLI makes for
`plan --svg FILE`. It reads `search_result` by duck typing (attributes or mapping keys):

- `candidates`: items with `step_time_s` and a memory per GPU as `memory_gb` or one of
  `memory_bytes` / `memory_per_gpu_bytes` / `peak_memory_bytes`; optional `label` (else built from
  the item's `plan`) and `feasible` / `fits`;
- `chosen` (or `best`): an index into the candidates or one of them; may be missing;
- `memory_limit_gb` or `memory_limit_bytes`;
- optional `stages`: items with `stage` and `<component>_gb` or `<component>_bytes` for the
  components weights, gradients, optimizer, activations, buffers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from modelplan.errors import ModelplanError
from modelplan.export.files import write_text_atomic
from modelplan.export.svg import (
    COMPONENT_COLORS,
    CandidatePoint,
    StageMemory,
    render_candidates_svg,
    render_memory_stages_svg,
)

GB = 1e9


def _get(obj: Any, *names: str, default: Any = None) -> Any:
    for name in names:
        if isinstance(obj, dict) and name in obj:
            return obj[name]
        if not isinstance(obj, dict) and hasattr(obj, name):
            return getattr(obj, name)
    return default


def _memory_gb(obj: Any, stem: str = "memory") -> float | None:
    value = _get(obj, f"{stem}_gb")
    if value is not None:
        return float(value)
    for name in (f"{stem}_bytes", f"{stem}_per_gpu_bytes", f"peak_{stem}_bytes"):
        value = _get(obj, name)
        if value is not None:
            return float(value) / GB
    return None


def _label(item: Any) -> str:
    label = _get(item, "label")
    if label:
        return str(label)
    plan = _get(item, "plan")
    if plan is None:
        return "plan"
    parts = [f"{axis}={_get(plan, axis)}" for axis in ("dp", "tp", "pp", "cp", "ep", "vpp")
             if _get(plan, axis, default=1) != 1 or axis in ("dp", "tp", "pp")]
    return " ".join(parts)


def candidate_point(item: Any) -> CandidatePoint:
    """A CandidatePoint from a planner candidate (see the module docstring for the names read)."""
    if isinstance(item, CandidatePoint):
        return item
    step = _get(item, "step_time_s")
    memory = _memory_gb(item)
    if step is None or memory is None:
        raise ModelplanError("plan picture: a candidate lacks step_time_s or its memory per GPU")
    feasible = _get(item, "feasible", "fits", default=True)
    return CandidatePoint(label=_label(item), step_time_s=float(step), memory_gb=memory,
                          feasible=bool(feasible))


def stage_memory(item: Any, index: int) -> StageMemory:
    """A StageMemory from a planner stage breakdown (GB or bytes per component)."""
    if isinstance(item, StageMemory):
        return item
    values = {f"{name}_gb": _memory_gb(item, name) or 0.0 for name in COMPONENT_COLORS}
    return StageMemory(stage=int(_get(item, "stage", default=index)), **values)


def plan_svg(
    points: Sequence[CandidatePoint],
    chosen: int | CandidatePoint | None,
    memory_limit_gb: float,
    stages: Sequence[StageMemory] = (),
) -> str:
    """Both pictures in one SVG document (the stage bars only when `stages` are given)."""
    top = render_candidates_svg(points, chosen, memory_limit_gb)
    parts = [top]
    if stages:
        parts.append(render_memory_stages_svg(stages, memory_limit_gb=memory_limit_gb))
    height = 420 * len(parts)
    inner = []
    for k, part in enumerate(parts):
        body = part.split("\n", 1)[1].rsplit("</svg>", 1)[0]  # drop the outer <svg> tags
        inner.append(f'<svg x="0" y="{420 * k}" width="640" height="420" viewBox="0 0 640 420">'
                     f"\n{body}</svg>")
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="640" height="{height}" '
            f'viewBox="0 0 640 {height}">\n' + "\n".join(inner) + "\n</svg>\n")


def write_plan_svg(search_result: Any, path: str | Path) -> Path:
    """Write the planner search picture to `path` (atomically); returns the path."""
    items = list(_get(search_result, "candidates", default=()) or ())
    points = [candidate_point(item) for item in items]
    chosen = _get(search_result, "chosen", "best")
    if chosen is not None and not isinstance(chosen, int):
        chosen = points[items.index(chosen)] if chosen in items else candidate_point(chosen)
    limit = _get(search_result, "memory_limit_gb")
    if limit is None:
        limit_bytes = _get(search_result, "memory_limit_bytes")
        if limit_bytes is None:
            raise ModelplanError("plan picture: the search result names no memory limit")
        limit = float(limit_bytes) / GB
    stages = [stage_memory(s, i) for i, s in enumerate(_get(search_result, "stages") or ())]
    return write_text_atomic(path, plan_svg(points, chosen, float(limit), stages))
