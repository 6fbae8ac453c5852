"""The Typer application object, the shared error handling and the entry point."""

from __future__ import annotations

import functools
import sys
from typing import Callable, TypeVar

import typer

from modelplan.errors import ModelplanError

app = typer.Typer(
    name="modelplan",
    help="Size a model, price its training, split it over GPUs and verify the split.",
    no_args_is_help=True,
    add_completion=True,
    pretty_exceptions_enable=False,
)

F = TypeVar("F", bound=Callable)


def user_errors(fn: F) -> F:
    """Turn a ModelplanError (bad input) into `error: <one line>` on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ModelplanError as exc:
            typer.echo(f"error: {exc}", err=True)
            raise typer.Exit(2) from None

    return wrapper  # type: ignore[return-value]


def main() -> None:
    """Console-script entry point."""
    try:
        app()
    except ModelplanError as exc:  # defensive: commands normally handle their own
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)


@app.callback()
def _root() -> None:
    """Size a model, price its training, split it over GPUs and verify the split."""
