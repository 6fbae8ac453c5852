"""Typed key lookup over a raw HuggingFace config dict.

Every value a mapper reads goes through one typed accessor, so a value of the wrong type (a
string size, a list that is a number, an infinite float from `1e400` in JSON) is a one-line
SpecError naming the key before any arithmetic sees it. Missing optional keys take the HF config
class default the mapper passes; aliases follow the class's `attribute_map`.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from modelplan.errors import SpecError

_ACTIVATIONS = {
    "silu": "silu", "swish": "silu", "gelu": "gelu", "relu": "relu",
    "gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh", "gelu_fast": "gelu_tanh",
    "bloom_gelu": "gelu_tanh", "gelu_python": "gelu",
    # squared ReLU (Nemotron, Arcee): the spec's nearest kind; the activation changes no count
    "relu2": "relu",
}

_MISSING = object()


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


DIVISOR_KEYS = frozenset({"num_attention_heads", "n_head", "n_embd"})
"""Keys every mapper divides by (head_dim = hidden_size // num_attention_heads, HF's own default in
e.g. LlamaConfig): `integer` refuses a value <= 0 in one line instead of a ZeroDivisionError
(benchmarks/hf_command_sweep.py --mutate found it in 19 mappers)."""


class HFConfig:
    """Typed access to one (possibly nested) HF config dict; `source` prefixes every error."""

    def __init__(self, data: dict, source: str, path: str = "", defaults: dict | None = None) -> None:
        self.data, self.source, self.path = data, source, path
        self.defaults = defaults or {}
        """HF config class defaults of the size keys, for sparse nested configs (Gemma 3's
        text_config omits vocab_size): `size` falls back to them."""

    def _name(self, key: str) -> str:
        return f"{self.path}{key}"

    def _error(self, key: str, problem: str) -> SpecError:
        return SpecError(f"{self.source}: {self._name(key)}: {problem}")

    def has(self, key: str) -> bool:
        """Whether `key` is present and not null."""
        return self.data.get(key) is not None

    def _raw(self, keys: tuple[str, ...], default: Any, nullable: bool = False) -> tuple[str, Any]:
        """The first present key's value; a JSON null reads as absent unless `nullable` (then it
        is None: `"sliding_window": null` switches the window off, as in the HF config class)."""
        for key in keys:
            if self.data.get(key) is not None or (nullable and key in self.data):
                return key, self.data[key]
        return keys[0], default

    def _missing(self, key: str) -> SpecError:
        return self._error(key, f"missing (needed for model_type '{self.data.get('model_type')}')")

    def integer(self, key: str, default: Any = _MISSING, *aliases: str, nullable: bool = False) -> Any:
        """An integer (bools and numeric strings refused); `default` may be None."""
        name, value = self._raw((key, *aliases), default, nullable)
        if value is _MISSING:
            raise self._missing(key)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value is None or (isinstance(value, int) and not isinstance(value, bool)):
            if name in DIVISOR_KEYS and value is not None and value <= 0:
                raise self._error(name, f"must be > 0 (config.json: {name} = {value!r})")
            return value
        raise self._error(name, f"expected an integer, got {value!r} ({_kind(value)})")

    def size(self, *keys: str) -> int:
        """A required integer under the first present key of `keys` (attribute_map aliases)."""
        return self.integer(keys[0], self.defaults.get(keys[0], _MISSING), *keys[1:])

    def divisor(self, key: str, default: Any = _MISSING) -> int:
        """An integer > 0 under `key` (a size another is divided by: a one-line error, not a
        ZeroDivisionError, when it is 0 or negative)."""
        value = self.integer(key, self.defaults.get(key, _MISSING) if default is _MISSING else default)
        if value is None or value <= 0:
            raise self._error(key, f"must be > 0, got {value!r}")
        return value

    def number(self, key: str, default: Any = _MISSING, *aliases: str, nullable: bool = False,
               positive: bool = False) -> Any:
        """A finite number (> 0 with `positive`: it is divided by or raised to a negative power);
        `default` may be None."""
        name, value = self._raw((key, *aliases), default, nullable)
        if value is _MISSING:
            raise self._missing(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._error(name, f"expected a number, got {value!r} ({_kind(value)})")
        if not math.isfinite(value):
            raise self._error(name, f"expected a finite number, got {value!r}")
        if positive and value <= 0:
            raise self._error(name, f"must be > 0, got {value!r}")
        return float(value)

    def _checked(self, keys: tuple[str, ...], default: Any, ok: Callable[[Any], bool], expected: str) -> Any:
        """The value under `keys` if `ok` accepts it (None passes), else a one-line error."""
        name, value = self._raw(keys, default)
        if value is _MISSING:
            raise self._missing(keys[0])
        if value is None or ok(value):
            return value
        raise self._error(name, f"expected {expected}, got {value!r} ({_kind(value)})")

    def flag(self, key: str, default: Any = _MISSING, *aliases: str) -> Any:
        """A JSON boolean; `default` may be None."""
        return self._checked((key, *aliases), default, lambda v: isinstance(v, bool), "true or false")

    def text(self, key: str, default: Any = _MISSING, *aliases: str) -> Any:
        """A string; `default` may be None."""
        return self._checked((key, *aliases), default, lambda v: isinstance(v, str), "a string")

    def ints(self, key: str, default: Any = _MISSING) -> Any:
        """A list of integers; `default` may be None."""
        value = self._checked((key,), default, lambda v: isinstance(v, list) and all(
            isinstance(x, int) and not isinstance(x, bool) for x in v), "a list of integers")
        return None if value is None else list(value)

    def texts(self, key: str, default: Any = _MISSING) -> Any:
        """A list of strings; `default` may be None."""
        value = self._checked((key,), default, lambda v: isinstance(v, list) and all(isinstance(x, str) for x in v),
                              "a list of strings")
        return None if value is None else list(value)

    def with_defaults(self, defaults: dict, fill_null: bool = False) -> "HFConfig":
        """This config with its config class's `defaults` under every key it leaves out, and with
        `fill_null` also under keys it sets to null (for classes whose __init__ maps None to the
        default; elsewhere null means "off", e.g. DeepSeek's q_lora_rank)."""
        present = {k: v for k, v in self.data.items() if not (fill_null and v is None)}
        return HFConfig({**defaults, **present}, self.source, self.path, self.defaults)

    def mlp_sparse_layers(self, default: list[str]) -> list[int]:
        """The MoE blocks of mlp_layer_types ('dense' / 'sparse' per block; `default` when the
        config has none), as HYV3Config, LagunaConfig and MiMoV2FlashConfig state them."""
        kinds = self.texts("mlp_layer_types", None) or default
        self.check_names("mlp_layer_types", kinds, ("dense", "sparse"), self.size("num_hidden_layers"))
        return [i for i, kind in enumerate(kinds) if kind == "sparse"]

    def renamed(self, names: dict[str, str]) -> "HFConfig":
        """This config with keys renamed (old -> new) where the new key is absent: a family's
        own key names (EXAONE 3 num_layers) read by a shared mapper."""
        data = dict(self.data)
        for old, new in names.items():
            if old in data and new not in data:
                data[new] = data[old]
        return HFConfig(data, self.source, self.path, self.defaults)

    def sub(self, key: str, defaults: dict | None = None) -> "HFConfig | None":
        """A nested config object (`text_config`, `vision_config`); None when absent. With
        `defaults` (the nested class's size defaults) an absent object reads as empty."""
        value = self.data.get(key)
        if value is None:
            return None if defaults is None else HFConfig({}, self.source, f"{self._name(key)}.", defaults)
        if not isinstance(value, dict):
            raise self._error(key, f"expected an object, got {value!r} ({_kind(value)})")
        return HFConfig(value, self.source, f"{self._name(key)}.", defaults)

    def activation(self, default: str, *keys: str) -> str:
        """Map an HF activation name onto the spec's few kinds (it changes no count)."""
        name = self.text(keys[0], default, *keys[1:])
        if name in _ACTIVATIONS:
            return _ACTIVATIONS[name]
        if "gelu" in name:
            return "gelu"
        raise self._error(keys[0], f"unsupported activation '{name}'")

    def dropout(self, default: float, *keys: str) -> bool:
        """Whether any of the dropout probabilities `keys` is positive."""
        return any((self.number(key, default) or 0.0) > 0 for key in keys)

    def check_names(self, key: str, names: list[str], supported, layers: int, shown: str | None = None) -> None:
        """A per-block list of names: every one in `supported`, one per block (`layers`)."""
        unknown = sorted(set(names) - set(supported))
        if unknown:
            raise self._error(key, f"unsupported {unknown} (supported: {shown or ', '.join(supported)})")
        if len(names) != layers:
            raise self._error(key, f"{len(names)} entries for num_hidden_layers {layers}")

    def num_labels(self) -> int:
        """HF PretrainedConfig.num_labels: len(id2label) when given, else num_labels, else 2."""
        labels = self.data.get("id2label")
        if labels is not None:
            if not isinstance(labels, dict) or not labels:
                raise self._error("id2label", f"expected a non-empty object, got {labels!r}")
            return len(labels)
        return self.integer("num_labels", 2)
