"""Load accelerator and cluster specs from a preset name or a TOML/JSON file.

A cluster table names its accelerator by preset (`accelerator = "a100-80gb"`), by a file path
(relative to the cluster file), or embeds it as a table. `extends = "dgx-h100"` starts from
another cluster (preset or file) and overrides the keys given, table by table; this is how a
profile written by `modelplan calibrate` adds `[[collective_fits]]` to a shipped preset. Its
`[calibration]` table (what was measured and the per-algorithm fits) is for people and tools,
not part of the cluster.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ValidationError

from modelplan.errors import SpecError, format_validation_error
from modelplan.presets import load_preset
from modelplan.specs.hardware import Accelerator, Cluster

_MAX_EXTENDS = 8
_CALIBRATION = "calibration"
"""The table of a `modelplan calibrate` profile that is not part of the cluster spec."""


def _is_file_ref(ref: str) -> bool:
    path = Path(ref)
    try:
        return path.suffix.lower() in {".toml", ".json"} or path.is_file()
    except (OSError, ValueError):  # a name no file can have (too long, say)
        return False


def _read_table(ref: str, category: str, base_dir: Path | None = None) -> tuple[dict, str, Path | None]:
    """(table, source name, folder of the file or None for presets)."""
    from modelplan.inputs import is_stdin, read_table, source_name

    if is_stdin(ref):
        return read_table(ref), source_name(ref), None
    if _is_file_ref(ref):
        path = Path(ref)
        if base_dir is not None and not path.is_absolute():
            path = base_dir / path
        return read_table(path), path.name, path.parent
    return load_preset(category, ref), ref, None  # type: ignore[arg-type]


def accelerator_from_dict(data: dict, source: str = "accelerator") -> Accelerator:
    """Validate a raw table as an `Accelerator` (one-line SpecError on bad input)."""
    try:
        return Accelerator.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source)) from None


def load_accelerator(ref: str, base_dir: Path | None = None) -> Accelerator:
    """An accelerator from a preset name (`modelplan presets`) or a TOML/JSON file."""
    data, source, _ = _read_table(ref, "accelerators", base_dir)
    return accelerator_from_dict(data, source)


def _merge(base: dict, over: dict) -> dict:
    """`over` on top of `base`; sub-tables (intra, inter, peak_tflops) merge key by key."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def _resolve_extends(data: dict, source: str, base_dir: Path | None, depth: int = 0) -> dict:
    ref = data.get("extends")
    if ref is None:
        return data
    if not isinstance(ref, str):
        raise SpecError(f"{source}: extends: expected a preset name or file, got {ref!r}")
    if depth >= _MAX_EXTENDS:
        raise SpecError(f"{source}: extends: more than {_MAX_EXTENDS} levels (a cycle?)")
    base, base_source, base_base_dir = _read_table(ref, "clusters", base_dir)
    base = _resolve_extends(base, base_source, base_base_dir, depth + 1)
    if isinstance(base.get("accelerator"), str) and base_base_dir is not None:
        acc = base["accelerator"]
        if _is_file_ref(acc) and not Path(acc).is_absolute():
            base = {**base, "accelerator": str(base_base_dir / acc)}
    merged = _merge(base, {k: v for k, v in data.items() if k != "extends"})
    return merged


def cluster_from_dict(data: dict, source: str = "cluster", base_dir: Path | None = None) -> Cluster:
    """Validate a raw cluster table, resolving `extends` and a named accelerator."""
    if _CALIBRATION in data and "extends" not in data:
        raise SpecError(f"{source}: a `modelplan calibrate` profile is a cluster only with "
                        'extends = "<cluster preset or file>" (e.g. dgx-h100) to take the rest from: '
                        "add that line, or rerun calibrate with --extends")
    data = {k: v for k, v in _resolve_extends(data, source, base_dir).items() if k != _CALIBRATION}
    acc = data.get("accelerator")
    if isinstance(acc, str):
        data = {**data, "accelerator": load_accelerator(acc, base_dir)}
    elif isinstance(acc, dict):
        data = {**data, "accelerator": accelerator_from_dict(acc, f"{source}: accelerator")}
    try:
        return Cluster.model_validate(data)
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source)) from None


def load_cluster(ref: str) -> Cluster:
    """A cluster from a preset name (`modelplan presets`) or a TOML/JSON file (a calibrated
    profile included)."""
    data, source, base_dir = _read_table(ref, "clusters")
    return cluster_from_dict(data, source, base_dir)
