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


def test_version_answers_without_loading_any_command():
    """`modelplan --version` prints the package version and loads no command module."""
    probe = ("import sys; sys.argv = ['modelplan', '--version']\nfrom modelplan.cli import main\n"
             "try:\n    main()\nexcept SystemExit as e:\n    code = e.code\n"
             "print(code, sorted(m for m in sys.modules if m.startswith('modelplan.cli.')), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, timeout=60)
    from modelplan import __version__

    assert proc.stdout == f"modelplan {__version__}\n"
    assert proc.stderr.strip() == "0 ['modelplan.cli.app']"


def test_backstop_is_one_line_naming_the_command_exit_70(monkeypatch):
    """An unexpected exception inside a command (a bug) is one line asking for a report, exit 70."""
    from modelplan.count import report

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    monkeypatch.setattr(report, "count_document", broken)
    result = CliRunner().invoke(app, ["count", "gpt2"])
    assert result.exit_code == 70
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: internal error in `modelplan count`: "
                                                   "RuntimeError: boom")
    assert "report" in lines[0] and "Traceback" not in result.output


def test_messages_with_newlines_stay_on_one_line():
    """A preset name holding a newline and a record separator is echoed escaped, on one line."""
    result = CliRunner().invoke(app, ["count", "a\nb\x1e"])
    assert result.exit_code == 2
    assert result.stderr == "error: unknown model preset 'a\\nb\\x1e'; `modelplan presets` lists them\n"


def test_help_keeps_bracketed_text():
    """Help is plain text: `[default: dgx-h100]` and 'modelplan[mpi]' are printed, not eaten as
    rich markup; plan's --batch says its real default, 1024."""
    runner = CliRunner()
    plan_help = " ".join(runner.invoke(app, ["plan", "--help"]).output.split())
    verify_help = " ".join(runner.invoke(app, ["verify", "--help"]).output.split())
    assert "[default: dgx-h100]" in plan_help
    assert "(default: 1024)" in plan_help and "default: the micro-batch" not in plan_help
    assert "'modelplan[mpi]'" in verify_help


def test_every_json_document_has_schema_version_and_kind(tmp_path):
    """count, presets, comm, plan, export, compare, verify and calibrate --json all start with
    schema_version 1 and their own kind."""
    import json

    runner = CliRunner()
    doc = tmp_path / "p.json"
    assert runner.invoke(app, ["plan", "mlp", "--gpus", "2", "-o", str(doc)]).exit_code == 0
    commands = {
        "modelplan.count": ["count", "gpt2", "--json"],
        "modelplan.presets": ["presets", "--json"],
        "modelplan.comm": ["comm", "all_reduce", "-n", "8", "-c", "dgx-h100", "--size", "1M", "--json"],
        "modelplan.search": ["plan", "mlp", "--gpus", "2", "--json"],
        "modelplan.export": ["export", str(doc), "--to", "json", "--json"],
        "modelplan.compare": ["compare", str(doc), str(doc), "--json"],
        "modelplan.verify": ["verify", "mlp", "--dp", "2", "--json"],
        "modelplan.calibrate": ["calibrate", "--backend", "sim", "--np", "2", "-b", "1K", "-e", "1K",
                                "-n", "1", "-w", "0", "--json"],
    }
    for kind, args in commands.items():
        result = runner.invoke(app, args)
        assert result.exit_code == 0, (args, result.output)
        head = json.loads(result.stdout)
        assert (head["schema_version"], head["kind"]) == (1, kind), args


def test_shell_completion_of_presets_clusters_and_collectives():
    """Completing `plan llama-3`, `--cluster dgx-h` and `comm all` offers the matching names."""
    import os

    def complete(words: str) -> list[str]:
        env = {**os.environ, "_MODELPLAN_COMPLETE": "complete_bash", "COMP_WORDS": words,
               "COMP_CWORD": str(len(words.split()) - 1)}
        proc = subprocess.run([sys.executable, "-m", "modelplan"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=60)
        return proc.stdout.split()

    assert complete("modelplan plan llama-3") == ["llama-3-405b", "llama-3-70b", "llama-3-8b"]
    assert complete("modelplan plan gpt2 --cluster dgx-h") == ["dgx-h100", "dgx-h200", "dgx-h800"]
    assert complete("modelplan comm all") == ["all_reduce", "all_gather", "all_to_all"]


def test_tables_never_cut_numbers_short(tmp_path):
    """Piped (not a terminal) and on a 40-column terminal, no table cell ends in an ellipsis."""
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    runner = CliRunner()
    runner.invoke(app, ["plan", "gpt2", "--gpus", "8", "-o", str(a)])
    runner.invoke(app, ["plan", "gpt2", "--gpus", "8", "--tp", "2", "-o", str(b)])
    for env in ({}, {"COLUMNS": "40"}):
        for args in (["compare", str(a), str(b)], ["plan", "llama-3-70b", "--gpus", "64"],
                     ["verify", "gpt2", "--tp", "2"]):
            result = runner.invoke(app, args, env={**env, "TTY_COMPATIBLE": None})
            assert result.exit_code == 0, result.output
            assert "…" not in result.output, (env, args)
