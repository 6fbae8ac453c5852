"""`modelplan count` and `modelplan presets` (placeholder until the calculator lands)."""

from __future__ import annotations

import typer

from modelplan.cli.app import app, user_errors


@app.command("presets")
@user_errors
def presets_cmd() -> None:
    """List the shipped model, accelerator and cluster presets."""
    from modelplan.presets import preset_names

    for category in ("models", "accelerators", "clusters"):
        typer.echo(f"{category}: {', '.join(preset_names(category)) or '-'}")
