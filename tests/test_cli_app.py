"""The CLI loads only the command module it runs, and every command for help (modelplan.cli.app)."""

import subprocess
import sys
from pathlib import Path

from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.cli.app import COMMAND_MODULES

ROOT = Path(__file__).resolve().parent.parent
PROBE = """
import sys
sys.argv = ["modelplan", "count", "mlp", "--json"]
from modelplan.cli import main
try:
    main()
except SystemExit:
    pass
print(sorted(m for m in sys.modules if m.startswith("modelplan.cli.") and m != "modelplan.cli.app"),
      "numpy" in sys.modules, file=sys.stderr)
"""


def test_count_imports_neither_other_commands_nor_numpy():
    """`modelplan count` imports its own command module (and helpers), not plan/verify/comm or numpy."""
    proc = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, timeout=60)
    loaded, numpy_loaded = proc.stderr.strip().rsplit(" ", 1)
    for other in ("plan", "verify", "comm", "export", "calibrate"):
        assert f"modelplan.cli.{other}'" not in loaded, loaded
    assert "modelplan.cli.count" in loaded
    assert numpy_loaded == "False"


def test_help_lists_every_command():
    """`modelplan --help` names every command of COMMAND_MODULES (all modules load for help)."""
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0, result.output
    for name in COMMAND_MODULES:
        assert name in result.output


def _modelplan(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "modelplan", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)


def test_bad_option_value_is_one_line_exit_2():
    """`--seq -5` breaks the option's bound (>= 1): one `error:` line naming --seq, exit 2, no traceback."""
    proc = _modelplan("count", "gpt2", "--seq", "-5")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "--seq" in lines[0]
    assert "Traceback" not in proc.stderr


def test_missing_required_option_and_unknown_option_are_one_line():
    """A missing --cluster and an unknown --bogus each give one `error:` line and exit 2."""
    for args, word in ((("comm", "allreduce", "--ranks", "8"), "--cluster"), (("count", "gpt2", "--bogus"), "--bogus")):
        proc = _modelplan(*args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and word in lines[0], proc.stderr


def test_command_exit_code_passes_through_the_entry_point():
    """The entry point returns the command's own exit code: a verify whose checks all pass exits 0."""
    proc = _modelplan("verify", "gpt2", "--tp", "2", "--json")
    assert proc.returncode == 0, proc.stderr
