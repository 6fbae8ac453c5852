"""The `modelplan` command line: a thin Typer layer over the library.

Each sub-module registers its commands on `app`; library modules are imported inside the
command functions so that `modelplan count` does not pay for numpy or the planner.
"""

from __future__ import annotations

from modelplan.cli.app import app, main
from modelplan.cli import count as _count  # noqa: F401  (registers commands)

for _name in ("comm", "plan", "verify", "export", "calibrate"):
    try:
        __import__(f"modelplan.cli.{_name}")
    except ModuleNotFoundError as _exc:  # command group not built yet
        if _exc.name != f"modelplan.cli.{_name}":
            raise

__all__ = ["app", "main"]
