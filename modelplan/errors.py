"""Domain errors: each carries a one-line message that names the field and the problem.

The CLI prints `error: <message>` and exits with code 2; the library raises these instead of
`assert` for anything a user can get wrong.
"""

from __future__ import annotations

from typing import Any, TypeVar

M = TypeVar("M")


class ModelplanError(ValueError):
    """A user-facing error with a one-line message."""


class SpecError(ModelplanError):
    """A model, training, hardware or plan spec is invalid."""


class PresetNotFound(ModelplanError):
    """A preset name that does not exist."""


class PlanInfeasible(ModelplanError):
    """No plan can satisfy the request (the message names the nearest blocker)."""


def format_validation_error(exc: "object", source: str = "") -> str:
    """One line per pydantic error, joined by '; ': `field.path: message`."""
    errors = exc.errors()  # type: ignore[attr-defined]
    parts = []
    for err in errors:
        loc = ".".join(str(x) for x in err.get("loc", ()) if not isinstance(x, int) or True)
        msg = err.get("msg", "invalid")
        if msg.startswith("Value error, "):
            msg = msg[len("Value error, ") :]
        parts.append(f"{loc}: {msg}" if loc else msg)
    prefix = f"{source}: " if source else ""
    return prefix + "; ".join(parts)


def validate_model(cls: type[M], data: Any, source: str = "") -> M:
    """`cls.model_validate(data)` for a pydantic model class; its validation errors become one
    SpecError line (`format_validation_error`, prefixed with `source`)."""
    from pydantic import ValidationError

    try:
        return cls.model_validate(data)  # type: ignore[attr-defined]
    except ValidationError as exc:
        raise SpecError(format_validation_error(exc, source)) from None
