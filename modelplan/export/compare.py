"""Two plans side by side, term by term: compute, bubble, communication, optimizer, memory,
step time, MFU.

The terms are read from each document's `predictions` table, whatever its nesting: every numeric
leaf becomes a slash path (`time/compute_s`, `memory/stages/0/activations_bytes`), so the
comparison follows the planner's field names rather than fixing them here. Units come from the
name's suffix (`_s` seconds, `_bytes` bytes, `_gb` GB, `mfu`/`_fraction` a ratio).
"""

from __future__ import annotations

from typing import Any, Callable, Literal

from modelplan.errors import ModelplanError
from modelplan.plan.document import PlanDocument
from modelplan.specs.base import Spec

Unit = Literal["s", "bytes", "GB", "ratio", ""]
Better = Literal["a", "b", "same"]

# Reading order: time terms (step time last), then memory per stage (peak and budget last),
# then throughput; inside each section a term is placed by the first of these words its name has.
TIME_ORDER = ("compute", "recompute", "bubble", "tp", "cp", "ep", "pp", "dp", "comm", "embedding",
              "optimizer")
MEMORY_ORDER = ("weights", "param", "gradients", "grad", "optimizer", "activations", "comm",
                "buffers", "fragmentation", "reserved", "total", "peak", "budget")
OTHER_ORDER = ("mfu", "hfu", "tflops", "tokens", "bubble", "microbatches", "flops")
# Byte counts named without a unit inside a memory table (weights, activations, total, ...).
MEMORY_WORDS = ("memory", "mem")
# Subtrees of a prediction table that are settings, not predicted terms; leaves that are indices.
SKIPPED_KEYS = ("plan",)
INDEX_LEAVES = ("stage",)
# Higher is better for these (utilisation, throughput); lower is better for the rest.
HIGHER_IS_BETTER = ("mfu", "hfu", "tflops", "tokens_per_s", "throughput", "samples_per_s")
PLAN_FIELDS = ("dp", "tp", "pp", "vpp", "cp", "ep", "micro_batch", "schedule",
               "sequence_parallel", "recompute", "zero")


class TermRow(Spec):
    """One predicted term in both plans."""

    term: str
    """Slash path of the term inside `predictions`."""
    unit: Unit
    """Unit read from the name's suffix."""
    a: float | None
    """Value in plan A (None: A does not predict this term)."""
    b: float | None
    """Value in plan B."""
    diff: float | None
    """b - a, when both exist."""
    rel: float | None
    """(b - a) / |a|, when both exist and a != 0."""
    better: Better | None
    """Which plan is better on this term (None when one side is missing)."""


class PlanRow(Spec):
    """One plan setting in both plans."""

    field: str
    """Plan field name (dp, tp, pp, ...)."""
    a: str
    """Setting in plan A."""
    b: str
    """Setting in plan B."""


class PlanComparison(Spec):
    """Plan A against plan B: settings and predicted terms."""

    label_a: str
    """Name shown for plan A (its file name)."""
    label_b: str
    """Name shown for plan B."""
    settings: tuple[PlanRow, ...]
    """Plan settings, world size first."""
    terms: tuple[TermRow, ...]
    """Predicted terms in reading order (compute ... memory ... MFU)."""


def flatten_numbers(table: Any, prefix: str = "") -> dict[str, float]:
    """Every int/float leaf of nested dicts/lists as `path -> value` (bools and a top-level
    `plan` table skipped)."""
    out: dict[str, float] = {}
    if isinstance(table, dict):
        items = ((str(k), v) for k, v in table.items())
    elif isinstance(table, (list, tuple)):
        items = ((str(i), v) for i, v in enumerate(table))
    else:
        return out
    for key, value in items:
        if not prefix and key in SKIPPED_KEYS:
            continue
        path = f"{prefix}/{key}" if prefix else key
        if isinstance(value, bool) or (prefix and key in INDEX_LEAVES):
            continue
        if isinstance(value, (int, float)):
            out[path] = float(value)
        else:
            out.update(flatten_numbers(value, path))
    return out


def unit_of(path: str) -> Unit:
    """Unit from the last path segment's suffix; unitless leaves under `memory` are bytes."""
    segments = path.lower().split("/")
    leaf = segments[-1]
    if "_per_" in leaf:
        return ""  # a rate (tokens_per_s, tflops_per_gpu)
    if leaf.endswith("_bytes") or leaf == "bytes":
        return "bytes"
    if leaf.endswith("_gb"):
        return "GB"
    if leaf.endswith("_s") or leaf.endswith("_seconds"):
        return "s"
    if "mfu" in leaf or "hfu" in leaf or leaf.endswith("_fraction") or leaf.endswith("_ratio"):
        return "ratio"
    if any(seg.startswith(MEMORY_WORDS) for seg in segments[:-1]) and leaf not in ("stage",):
        return "bytes"
    return ""


def _order_key(path: str, appearance: int) -> tuple[int, int, int, int]:
    """(section, stage, rank of the term's name, first appearance) -> time, memory, throughput."""
    unit = unit_of(path)
    segments = path.lower().split("/")
    if unit == "s" or "time" in segments[0] and len(segments) > 1:
        section, order = 0, TIME_ORDER
    elif unit in ("bytes", "GB") or segments[0].startswith(MEMORY_WORDS):
        section, order = 1, MEMORY_ORDER
    else:
        section, order = 2, OTHER_ORDER
    indices = [int(seg) for seg in segments if seg.isdigit()]
    stage = indices[0] if indices else (10**9 if section == 1 else 0)  # peak/budget after stages
    for words in (segments[-1].split("_"), "_".join(segments).split("_")):
        for rank, word in enumerate(order):
            if word in words:
                return section, stage, rank, appearance
    return section, stage, len(order), appearance


def _better(path: str, a: float, b: float) -> Better | None:
    """Which side is better; None for settings-like terms (counts, budgets, FLOP totals)."""
    leaf = path.lower().rsplit("/", 1)[-1]
    if leaf.startswith("num_") or "budget" in leaf or leaf.endswith("_flops"):
        return None
    if a == b:
        return "same"
    higher = any(word in path.lower() for word in HIGHER_IS_BETTER)
    return ("b" if b > a else "a") if higher else ("b" if b < a else "a")


def compare_predictions(pred_a: dict[str, Any], pred_b: dict[str, Any]) -> tuple[TermRow, ...]:
    """Term rows for the union of both documents' numeric predictions."""
    flat_a, flat_b = flatten_numbers(pred_a), flatten_numbers(pred_b)
    first_seen = list(dict.fromkeys([*flat_a, *flat_b]))
    paths = sorted(first_seen, key=lambda p: _order_key(p, first_seen.index(p)))
    rows = []
    for path in paths:
        a, b = flat_a.get(path), flat_b.get(path)
        both = a is not None and b is not None
        rows.append(
            TermRow(
                term=path,
                unit=unit_of(path),
                a=a,
                b=b,
                diff=(b - a) if both else None,
                rel=((b - a) / abs(a)) if both and a != 0 else None,
                better=_better(path, a, b) if both else None,
            )
        )
    return tuple(rows)


def _fits(predictions: dict[str, Any]) -> bool | None:
    """The predicted `fits` flag (top level or in a memory table), if the document has one."""
    for table in (predictions, predictions.get("memory")):
        if isinstance(table, dict) and isinstance(table.get("fits"), bool):
            return table["fits"]
    return None


def _setting(value: Any) -> str:
    return "-" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


Evaluate = Callable[[PlanDocument], dict[str, Any]]
"""Predicts a document's terms (the planner's evaluate), for documents written without them."""


def _predictions(doc: PlanDocument, label: str, evaluate: Evaluate | None) -> dict[str, Any]:
    if doc.predictions:
        return doc.predictions
    if evaluate is None:
        raise ModelplanError(
            f"{label}: the document has no predictions and no planner is available to "
            "evaluate it; write it with `modelplan plan`"
        )
    return evaluate(doc)


def compare_documents(
    a: PlanDocument,
    b: PlanDocument,
    label_a: str = "A",
    label_b: str = "B",
    evaluate: Evaluate | None = None,
) -> PlanComparison:
    """Compare two plan documents; one without predictions is priced with `evaluate`."""
    pred_a = _predictions(a, label_a, evaluate)
    pred_b = _predictions(b, label_b, evaluate)
    settings = [PlanRow(field="world_size", a=str(a.plan.world_size), b=str(b.plan.world_size))]
    for name in PLAN_FIELDS:
        settings.append(
            PlanRow(
                field=name, a=_setting(getattr(a.plan, name)), b=_setting(getattr(b.plan, name))
            )
        )
    fits = [_fits(pred) for pred in (pred_a, pred_b)]
    if fits != [None, None]:
        settings.append(PlanRow(field="fits (predicted)", a=_setting(fits[0]), b=_setting(fits[1])))
    if a.model.name != b.model.name:
        settings.insert(0, PlanRow(field="model", a=a.model.name, b=b.model.name))
    return PlanComparison(
        label_a=label_a,
        label_b=label_b,
        settings=tuple(settings),
        terms=compare_predictions(pred_a, pred_b),
    )
