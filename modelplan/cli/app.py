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
    rich_markup_mode=None,  # help text is plain: `[default: dgx-h100]`, 'modelplan[mpi]' stay
)

F = TypeVar("F", bound=Callable)

EXIT_INPUT = 2
"""Bad input: a one-line `error:` naming the field (exit code 1 is kept for failed checks)."""
EXIT_INTERNAL = 70
"""An unexpected exception, a bug (BSD sysexits EX_SOFTWARE)."""
EXIT_INTERRUPTED = 130
"""Ctrl-C (128 + SIGINT)."""
TRACEBACK_VAR = "MODELPLAN_TRACEBACK"
"""Set to 1 to see the traceback behind an internal error."""


def one_line(text: object) -> str:
    """A message on one line: newlines and other unprintable characters (a user's input quoted in
    it may hold any) are written as escapes, `\\n`, `\\x1e`."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def print_error(message: object) -> None:
    """`error: <message>` on stderr, one line."""
    sys.stderr.write(f"error: {one_line(message)}\n")
    sys.stderr.flush()


def print_warnings(lines: list[str]) -> None:
    """`warning: <line>` on stderr for each line, each once."""
    for line in dict.fromkeys(lines):
        sys.stderr.write(f"warning: {one_line(line)}\n")
    sys.stderr.flush()


def internal_error(command: str, exc: BaseException) -> int:
    """The backstop: one line naming the command and asking for a report; the exit code (70)."""
    import os

    if os.environ.get(TRACEBACK_VAR) == "1":
        import traceback

        traceback.print_exception(exc)
    where = f"`modelplan {command}`" if command else "modelplan"
    print_error(f"internal error in {where}: {type(exc).__name__}: {str(exc)[:300]} -- this is a "
                f"bug in modelplan; please report it with the command line "
                f"({TRACEBACK_VAR}=1 shows the traceback)")
    return EXIT_INTERNAL


def _click_exceptions() -> tuple[type, ...]:
    """typer's and click's control-flow exceptions (exit, abort, usage errors): they pass through."""
    try:  # recent typer vendors click as typer._click; older typer uses click itself
        from typer._click.exceptions import ClickException
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click.exceptions import ClickException
    return typer.Exit, typer.Abort, ClickException


def user_errors(fn: F) -> F:
    """Every command's error handling: a ModelplanError (bad input) is `error: <one line>` and
    exit code 2; Ctrl-C is `error: interrupted` and 130; any other exception is a bug, reported
    in one line by the backstop with exit code 70."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ModelplanError as exc:
            print_error(exc)
            raise typer.Exit(EXIT_INPUT) from None
        except KeyboardInterrupt:
            print_error("interrupted")
            raise typer.Exit(EXIT_INTERRUPTED) from None
        except _click_exceptions():
            raise
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(141) from None  # 128 + SIGPIPE: the reader went away (| head)
        except Exception as exc:  # noqa: BLE001 - the backstop
            raise typer.Exit(internal_error(fn.__name__.removesuffix("_cmd"), exc)) from None

    return wrapper  # type: ignore[return-value]


def _quiet_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the interpreter's final flush is quiet."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def _version_requested(argv: list[str]) -> bool:
    return argv in (["--version"], ["-V"])


def main() -> None:
    """Console-script entry point: load only the command being run (all of them for help).

    Usage errors (a bad option value, a missing argument) print one line, `error: <message>`,
    and exit 2, like the library's own errors, instead of click's usage box. Anything unexpected
    ends in the backstop's one line and exit code 70, never a traceback.
    """
    argv = sys.argv[1:]
    if _version_requested(argv):  # before typer builds the command tree: no import cost
        from modelplan import __version__

        print(f"modelplan {__version__}")
        sys.exit(0)
    name = argv[0] if argv else ""
    try:
        sys.exit(_run(argv, name))
    except KeyboardInterrupt:
        print_error("interrupted")
        sys.exit(EXIT_INTERRUPTED)
    except BrokenPipeError:
        _quiet_stdout()
        sys.exit(141)


def _run(argv: list[str], name: str) -> int:
    if name in COMMAND_MODULES:
        app.load([name])
        app._partial = True
    return run(argv)


def run(argv: list[str], command=None) -> int:
    """`modelplan ARGV` in this process, as the console script runs it; its exit code.

    `command` is the click command built from `app` (typer.main.get_command); building it takes
    a while, so a caller running many command lines (the fuzz test) builds it once."""
    try:  # recent typer vendors click as typer._click; older typer uses click itself
        from typer._click.exceptions import ClickException, NoArgsIsHelpError
    except ImportError:  # pragma: no cover - depends on the installed typer
        from click.exceptions import ClickException, NoArgsIsHelpError

    name = argv[0] if argv else ""
    try:
        if command is None:
            command = typer.main.get_command(app)
        code = command.main(args=argv, prog_name="modelplan", standalone_mode=False)
    except NoArgsIsHelpError as exc:  # `modelplan` alone, or a group without its command: help
        print(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        return exc.exit_code
    except ClickException as exc:
        print_error(exc.format_message())
        return EXIT_INPUT
    except typer.Abort:
        print_error("interrupted")
        return EXIT_INTERRUPTED
    except ModelplanError as exc:  # defensive: commands normally handle their own
        print_error(exc)
        return EXIT_INPUT
    except (KeyboardInterrupt, BrokenPipeError):
        raise
    except Exception as exc:  # noqa: BLE001 - the backstop, outside any command
        return internal_error(name if name in COMMAND_MODULES else "", exc)
    return code if isinstance(code, int) else 0


def _print_version(value: bool) -> None:
    if value:
        from modelplan import __version__

        typer.echo(f"modelplan {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", "-V", is_eager=True, callback=_print_version,
                                 help="Print modelplan's version and exit."),
) -> None:
    """Size a model, price its training, split it over GPUs and verify the split."""
