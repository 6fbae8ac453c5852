"""Turn what a user names (preset, TOML/JSON spec file, HuggingFace config.json) into a spec."""

from __future__ import annotations

import json
from pathlib import Path
from functools import lru_cache
from typing import TYPE_CHECKING, Union

from modelplan.errors import SpecError, validate_model
from modelplan.presets import load_preset, read_toml
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
    cls: type | None = TransformerSpec if kind == "transformer" else None
    if kind == "network":
        from modelplan.specs.network import NetworkSpec

        cls = NetworkSpec
    if cls is None:
        raise SpecError(f"{source or 'model'}: kind: unknown model kind '{kind}' (transformer, network)")
    return validate_model(cls, data, source)


def read_json(path: Path) -> dict:
    """Parse a JSON file; a syntax error becomes a one-line SpecError naming the file."""
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path.name}: malformed JSON: {exc}") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read: {exc.strerror}") from None


_HF_KEYS = ("architectures", "transformers_version", "num_hidden_layers", "hidden_size", "n_layer", "d_model")


def _looks_like_hf(data: dict) -> bool:
    """A HuggingFace config.json (a key only HF configs have) even when model_type is missing:
    the HF reader then says which key is missing instead of listing every unknown spec field."""
    return "kind" not in data and "model" not in data and any(key in data for key in _HF_KEYS)


def load_model(ref: str) -> ModelSpec:
    """A preset name, a .toml/.json spec file, or a HuggingFace config.json (has `model_type`)."""
    path = Path(ref)
    if path.suffix.lower() in {".toml", ".json"} or path.is_file():
        if not path.is_file():
            raise SpecError(f"{ref}: no such file")
        if path.suffix.lower() == ".json":
            data = read_json(path)
            if isinstance(data, dict) and ("model_type" in data or _looks_like_hf(data)):
                from modelplan.specs.hf import from_hf_config

                return from_hf_config(data, source=path.name)
            if isinstance(data, dict) and "model" in data and "kind" not in data:
                data = data["model"]
            return model_from_dict(data, path.name)
        return model_from_dict(read_toml(path), path.name)
    return model_from_dict(load_preset("models", ref), ref)


@lru_cache(maxsize=None)
def load_engine(name: str) -> "EngineProfile":
    """The profile of a training engine (presets/frameworks/<name>.toml), read once."""
    from modelplan.specs.engine import EngineProfile

    data = load_preset("frameworks", name)
    try:
        return EngineProfile(**data)
    except ValueError as exc:
        raise SpecError(f"frameworks/{name}.toml: {exc}") from None
