"""The Typer application object, the shared error handling and the entry point.

Commands live in one module per group and register themselves on `app` when imported. Importing
them all costs start-up time that `modelplan count` should not pay, so `app` loads them on
demand: `main()` imports only the module of the command on the command line, and anything that
reads the command list (`--help`, completion, CliRunner in tests) imports them all.
"""

from __future__ import annotations

import functools
import importlib
import sys
from typing import Callable, TypeVar

import typer

from modelplan.errors import ModelplanError

# Command name -> the module of modelplan.cli that defines it.
COMMAND_MODULES: dict[str, str] = {
    "count": "count",
    "presets": "count",
    "comm": "comm",
    "calibrate": "calibrate",
    "plan": "plan",
    "verify": "verify",
    "export": "export",
    "compare": "export",
    "budget": "budget",
    "serve": "serve",
    "launch": "launch",
}


class LazyTyper(typer.Typer):
    """A Typer app whose command modules are imported the first time the command list is read."""

    _loading = False
    _loaded: set[str]

    def load(self, names: list[str] | None = None) -> None:
        """Import the modules of `names` (every command module when None)."""
        modules = list(dict.fromkeys(COMMAND_MODULES.values())) if names is None else [
            COMMAND_MODULES[n] for n in names if n in COMMAND_MODULES]
        self._loading = True
        try:
            for module in modules:
                if module not in self._loaded:
                    importlib.import_module(f"modelplan.cli.{module}")
                    self._loaded.add(module)
        finally:
            self._loading = False

    @property
    def registered_commands(self):  # type: ignore[override]
        if not self._loading and len(self._loaded) < len(set(COMMAND_MODULES.values())) and not self._partial:
            self.load()
        return self._commands

    @registered_commands.setter
    def registered_commands(self, value) -> None:
        self._commands = value
        self._loaded = set()
        self._partial = False


app = LazyTyper(
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
    """Console-script entry point: load only the command being run (all of them for help).

    Usage errors (a bad option value, a missing argument) print one line, `error: <message>`,
    and exit 2, like the library's own errors, instead of click's usage box.
    """
    try:  # recent typer vendors click as typer._click; older typer uses click itself
        from typer._click.exceptions import ClickException, NoArgsIsHelpError
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click.exceptions import ClickException, NoArgsIsHelpError

    name = sys.argv[1] if len(sys.argv) > 1 else ""
    if name in COMMAND_MODULES:
        app.load([name])
        app._partial = True
    try:
        code = app(standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `modelplan` alone, or a group without its command: help
        print(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(exc.exit_code)
    except ClickException as exc:
        print(f"error: {exc.format_message()}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except typer.Abort:
        print("error: aborted", file=sys.stderr)
        sys.exit(1)
    except ModelplanError as exc:  # defensive: commands normally handle their own
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


@app.callback()
def _root() -> None:
    """Size a model, price its training, split it over GPUs and verify the split."""
