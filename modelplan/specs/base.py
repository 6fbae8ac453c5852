"""The base class every spec derives from: frozen, no unknown fields, documented fields."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Spec(BaseModel):
    """Frozen pydantic model that rejects unknown fields (torchtitan/fastapi style)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
