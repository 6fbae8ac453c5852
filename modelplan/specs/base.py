"""The base class every spec derives from: frozen, no unknown fields, documented fields."""

from __future__ import annotations

import functools
import types
from typing import Union, get_args, get_origin

from pydantic import BaseModel, ConfigDict, model_validator


class Spec(BaseModel):
    """Frozen pydantic model that rejects unknown fields (torchtitan/fastapi style).

    Fields are documented by attribute docstrings for readers and IDEs; pydantic is not asked to
    parse them (`use_attribute_docstrings` reads the source at import and slows start-up).
    Floats must be finite (a TOML `inf` or a JSON `1e400` is refused where it enters, not turned
    into NaN downstream), numbers are numbers (a TOML `"450"` or `true` where a number goes is
    refused, not coerced to 450 or 1), and sizes stay within `modelplan.specs.limits`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_numbers(cls, data):
        if isinstance(data, dict):
            for name in numeric_fields(cls):
                value = data.get(name)
                if value.__class__ is bool or value.__class__ is str:
                    raise ValueError(f"{name}: expected a number, got {type(value).__name__} {str(value)[:40]!r}")
        return data

    @model_validator(mode="after")
    def _within_limits(self) -> "Spec":
        from modelplan.specs.limits import limit_errors

        errors = limit_errors(self)
        if errors:
            raise ValueError("; ".join(errors))
        return self


_NUMBER = (int, float)


@functools.cache
def numeric_fields(cls: type[BaseModel]) -> tuple[str, ...]:
    """The fields of `cls` typed as numbers alone (int, float, or either or None)."""
    out = []
    for name, info in cls.model_fields.items():
        ann = info.annotation
        args = get_args(ann) if get_origin(ann) in (Union, types.UnionType) else (ann,)
        kinds = [a for a in args if a is not type(None)]
        if kinds and all(a in _NUMBER for a in kinds):
            out.append(name)
    return tuple(out)
