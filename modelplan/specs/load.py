"""Turn what a user names (preset, TOML/JSON spec file, HuggingFace config.json) into a spec."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Union

from modelplan.errors import SpecError, validate_model
from modelplan.presets import load_preset
from modelplan.specs.family import FAMILIES, spec_class
from modelplan.specs.transformer import TransformerSpec

if TYPE_CHECKING:
    from modelplan.specs.engine import EngineProfile
    from modelplan.specs.network import NetworkSpec

# NetworkSpec is imported only when a network is loaded (keeps `modelplan count` start-up short).
ModelSpec = Union[TransformerSpec, "NetworkSpec"]


def model_from_dict(data: dict, source: str = "") -> ModelSpec:
    """Validate a raw table as a transformer or network spec (by its `kind`, default transformer)."""
    if not isinstance(data, dict):
        raise SpecError(f"{source or 'model'}: expected a table/object, got {type(data).__name__}")
    kind = data.get("kind", "transformer")
    cls = spec_class(kind) if isinstance(kind, str) else None  # the family registry, `specs/family.py`
    if cls is None:
        raise SpecError(f"{source or 'model'}: kind: unknown model kind '{kind}' ({', '.join(FAMILIES)})")
    return validate_model(cls, data, source)


def read_json(path: Path) -> dict:
    """Parse a JSON file; every problem (unreadable, not UTF-8, malformed) is one SpecError line."""
    from modelplan.inputs import parse_json, read_text, source_name

    return parse_json(read_text(path), source_name(path))


def model_from_data(data: object, source: str) -> ModelSpec:
    """A spec from parsed file content: a HuggingFace config (has `model_type`), a plan
    document's or wrapper's `model`, or a spec table."""
    if isinstance(data, dict) and ("model_type" in data or _looks_like_hf(data)):
        from modelplan.specs.hf import from_hf_config

        return from_hf_config(data, source=source)
    if isinstance(data, dict) and "model" in data and data.get("kind") in (None, "modelplan.plan"):
        data, source = data["model"], f"{source}: model"
        if isinstance(data, str):  # a plan document may name a preset
            return model_from_dict(load_preset("models", data), data)
    return model_from_dict(data, source)  # type: ignore[arg-type]


_HF_KEYS = ("architectures", "transformers_version", "num_hidden_layers", "hidden_size", "n_layer", "d_model")


def _looks_like_hf(data: dict) -> bool:
    """A HuggingFace config.json (a key only HF configs have) even when model_type is missing:
    the HF reader then says which key is missing instead of listing every unknown spec field."""
    return "kind" not in data and "model" not in data and any(key in data for key in _HF_KEYS)


def load_model(ref: str) -> ModelSpec:
    """A preset name, a .toml/.json spec file, a HuggingFace config.json (has `model_type`), or
    `-`: a JSON or TOML spec on standard input."""
    from modelplan.inputs import is_stdin, read_data, source_name

    if is_stdin(ref):
        return model_from_data(read_data(ref), source_name(ref))
    path = Path(ref)
    if path.suffix.lower() in {".toml", ".json"} or _is_file(path):
        return model_from_data(read_data(path), path.name)
    return model_from_dict(load_preset("models", ref), ref)


def _is_file(path: Path) -> bool:
    """Path.is_file that treats an impossible name (too long, say) as no file."""
    try:
        return path.is_file()
    except (OSError, ValueError):
        return False


@lru_cache(maxsize=None)
def load_engine(name: str) -> "EngineProfile":
    """The profile of a training engine (presets/frameworks/<name>.toml), read once."""
    from modelplan.specs.engine import EngineProfile

    data = load_preset("frameworks", name)
    try:
        return EngineProfile(**data)
    except ValueError as exc:
        raise SpecError(f"frameworks/{name}.toml: {exc}") from None
