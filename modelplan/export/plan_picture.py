"""One SVG for a planner search: the candidates picture above the chosen plan's memory per stage.

`write_plan_svg(search_result, path)` is the single call the planner CLI makes for
`plan --svg FILE`. It reads `search_result` by duck typing (attributes or mapping keys), so it
follows the planner's result types without importing them:

- candidates: `candidates` when it is a list, else `best` (fastest first); each item has a step
  time (`step_time_s`, or `step.step_time_s`), a memory per GPU (`memory_gb`, or one of
  `memory_bytes` / `memory_per_gpu_bytes` / `peak_memory_bytes`), optionally `label` (else built
  from its `plan`) and `feasible` / `fits`;
- `chosen`: an index or an item; without it the first of `best` is the chosen plan;
- the limit: `memory_limit_gb` / `memory_limit_bytes`, else the chosen item's
  `memory_budget_bytes`;
- stages: `stages`, else the chosen item's `memory` list; per component (weights, gradients,
  optimizer, activations, buffers) `<name>_gb`, `<name>_bytes` or plain `<name>` in bytes;
  buffers default to comm_buffers + fragmentation + reserved.
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


def _step_time_s(obj: Any) -> float | None:
    value = _get(obj, "step_time_s")
    if value is None:
        value = _get(_get(obj, "step"), "step_time_s")
    return None if value is None else float(value)


def _label(item: Any) -> str:
    label = _get(item, "label")
    if label:
        return str(label)
    plan = _get(item, "plan")
    if plan is None:
        return "plan"
    parts = [f"{axis}={_get(plan, axis)}" for axis in ("dp", "tp", "pp", "vpp", "cp", "ep")
             if _get(plan, axis, default=1) != 1 or axis in ("dp", "tp", "pp")]
    if _get(plan, "zero", default=0):
        parts.append(f"zero={_get(plan, 'zero')}")
    if _get(plan, "micro_batch", default=1) != 1:
        parts.append(f"mb={_get(plan, 'micro_batch')}")
    if _get(plan, "recompute") not in (None, "none"):
        parts.append(f"recompute={_get(plan, 'recompute')}")
    return " ".join(parts)


def candidate_point(item: Any) -> CandidatePoint:
    """A CandidatePoint from a planner candidate (see the module docstring for the names read)."""
    if isinstance(item, CandidatePoint):
        return item
    step = _step_time_s(item)
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
    values = {}
    for name in COMPONENT_COLORS:
        gb = _memory_gb(item, name)
        if gb is None and isinstance(_get(item, name), (int, float)):
            gb = float(_get(item, name)) / GB  # plain component name: bytes
        values[f"{name}_gb"] = gb
    if values["buffers_gb"] is None:
        extra = [_get(item, key) for key in ("comm_buffers", "fragmentation", "reserved")]
        values["buffers_gb"] = sum(float(v) for v in extra if v is not None) / GB
    clean = {key: value or 0.0 for key, value in values.items()}
    return StageMemory(stage=int(_get(item, "stage", default=index)), **clean)


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
        if isinstance(chosen, int):
            chosen = points[chosen]
        title = "Memory per pipeline stage" + (f": {chosen.label}" if chosen is not None else "")
        parts.append(render_memory_stages_svg(stages, memory_limit_gb=memory_limit_gb, title=title))
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
    items = _get(search_result, "candidates")
    from_best = not isinstance(items, (list, tuple))
    if from_best:
        items = _get(search_result, "best", default=()) or ()
    items = list(items)
    if not items:
        raise ModelplanError("plan picture: the search result has no candidate plans")
    points = [candidate_point(item) for item in items]
    chosen = _get(search_result, "chosen")
    if chosen is None and from_best:
        chosen = 0
    chosen_item = items[chosen] if isinstance(chosen, int) else chosen
    if chosen is not None and not isinstance(chosen, int):
        chosen = points[items.index(chosen)] if chosen in items else candidate_point(chosen)
    limit = _get(search_result, "memory_limit_gb")
    if limit is None:
        limit_bytes = _get(search_result, "memory_limit_bytes")
        if limit_bytes is None and chosen_item is not None:
            limit_bytes = _get(chosen_item, "memory_budget_bytes")
        if limit_bytes is None:
            raise ModelplanError("plan picture: the search result names no memory limit")
        limit = float(limit_bytes) / GB
    stage_items = _get(search_result, "stages")
    if stage_items is None and chosen_item is not None:
        stage_items = _get(chosen_item, "memory")
    stages = [stage_memory(s, i) for i, s in enumerate(stage_items or ())]
    return write_text_atomic(path, plan_svg(points, chosen, float(limit), stages))
