"""The base class every spec derives from: frozen, no unknown fields, documented fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Frozen pydantic model that rejects unknown fields (torchtitan/fastapi style).

    Fields are documented by attribute docstrings for readers and IDEs; pydantic is not asked to
    parse them (`use_attribute_docstrings` reads the source at import and slows start-up).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)
