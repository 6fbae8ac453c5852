"""The base class every spec derives from: frozen, no unknown fields, documented fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, model_validator


class Spec(BaseModel):
    """Frozen pydantic model that rejects unknown fields (torchtitan/fastapi style).

    Fields are documented by attribute docstrings for readers and IDEs; pydantic is not asked to
    parse them (`use_attribute_docstrings` reads the source at import and slows start-up).
    Floats must be finite (a TOML `inf` or a JSON `1e400` is refused where it enters, not turned
    into NaN downstream), and sizes stay within `modelplan.specs.limits`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="after")
    def _within_limits(self) -> "Spec":
        from modelplan.specs.limits import limit_errors

        errors = limit_errors(self)
        if errors:
            raise ValueError("; ".join(errors))
        return self
