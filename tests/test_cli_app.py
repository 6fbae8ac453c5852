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
