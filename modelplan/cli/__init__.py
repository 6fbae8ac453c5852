"""The `modelplan` command line: a thin Typer layer over the library.

Each sub-module registers its commands on `app` (imported on demand, see `modelplan.cli.app`);
library modules are imported inside the command functions so that `modelplan count` does not
pay for numpy or the planner.
"""

from __future__ import annotations

import os

# pydantic's plugin loader scans every installed distribution's entry points (tens of ms with a
# big environment) before the first model class; the CLI uses no pydantic plugins.
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")

from modelplan.cli.app import app, main  # noqa: E402

__all__ = ["app", "main"]
