"""`modelplan verify --backend mpi`: one MPI process per rank gives what the simulator gives.

Expected values come from the in-process simulator (`--backend sim`, the default) run on the same
command line: its ledgers are checked against the plan's communication list and its tensors
against a single-device step in test_verify.py and test_cli_verify.py. Both sides go through the
CLI's `--json --ledger --tensors` document. The MPI jobs are subprocesses with timeouts (skipped
without mpi4py and an MPI library); several 2-rank plans share one job to save start-ups.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from modelplan.cli import app

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _mpi_support import env_for, mpiexec, needs_mpi, run_bounded  # noqa: E402

pytestmark = [*needs_mpi, pytest.mark.slow]
runner = CliRunner()
HOOKS = str(Path(__file__).with_name("mpi_cli_hooks.py"))
MODEL = "llama-2-7b"  # scaled down by verify to a few thousand parameters
DETAIL = ["--json", "--ledger", "--tensors"]
TWO_RANK_PLANS = {
    "dp-only": ["--dp", "2"],
    "tp-only": ["--tp", "2"],
    "zero-2": ["--dp", "2", "--zero", "2"],
}


def sim_doc(args: list[str]) -> dict:
    result = runner.invoke(app, ["verify", *args, *DETAIL])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def assert_same_run(mpi: dict, sim: dict, world_size: int) -> None:
    """Same plan, every check passed on both, identical ledgers, equal loss and tensors."""
    assert (mpi["backend"], sim["backend"]) == ("mpi", "sim")
    assert mpi["passed"] and sim["passed"], [r for r in mpi["rows"] if not r["passed"]]
    for key in ("model", "training", "plan", "timeline", "notes"):
        assert mpi[key] == sim[key], key
    # per rank, per entry: op, axis, group size, bytes sent and received, steps, label
    assert len(mpi["ledgers"]) == world_size
    assert mpi["ledgers"] == sim["ledgers"]
    assert [(r["name"], r["passed"]) for r in mpi["rows"]] == [(r["name"], r["passed"]) for r in sim["rows"]]
    loss = {doc["backend"]: next(r["measured"] for r in doc["rows"] if r["name"] == "loss") for doc in (mpi, sim)}
    assert loss["mpi"] == pytest.approx(loss["sim"], rel=1e-13)
    for kind in ("gradients", "updated_parameters"):
        assert mpi["tensors"][kind].keys() == sim["tensors"][kind].keys()
        for name, values in sim["tensors"][kind].items():
            expected = np.array(values)
            np.testing.assert_allclose(np.array(mpi["tensors"][kind][name]), expected, rtol=1e-13,
                                       atol=1e-13 * np.abs(expected).max(), err_msg=f"{kind} {name}")


def split_commands(stdout: str) -> list[str]:
    """The outputs of the commands of one mpi_cli_hooks.py job, in order."""
    return [part.split("\n", 1)[1] for part in stdout.split("=== command ")[1:]]


@pytest.fixture(scope="module")
def two_rank_job() -> dict[str, dict]:
    """One 2-rank job verifying every 2-rank plan through the CLI, in order."""
    args = [HOOKS]
    for plan in TWO_RANK_PLANS.values():
        args += ["--", "verify", MODEL, *plan, "--backend", "mpi", *DETAIL]
    proc = mpiexec(2, args, timeout_s=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    outputs = split_commands(proc.stdout)
    assert len(outputs) == len(TWO_RANK_PLANS), proc.stdout
    return {name: json.loads(text) for name, text in zip(TWO_RANK_PLANS, outputs)}


@pytest.mark.parametrize("name", TWO_RANK_PLANS)
def test_two_rank_plans_match_the_simulator(two_rank_job, name):
    """dp-only, tp-only and ZeRO-2 on 2 processes: the simulator's ledgers, loss and tensors."""
    assert_same_run(two_rank_job[name], sim_doc([MODEL, *TWO_RANK_PLANS[name]]), 2)


def test_pipeline_1f1b_on_4_ranks_under_mpiexec():
    """`mpiexec -n 4 python -m mpi4py -m modelplan verify MODEL --pp 4 --backend mpi`: one JSON
    document (ranks 1-3 print nothing), the simulator's ledgers and tensors."""
    plan = ["--pp", "4", "--schedule", "1f1b"]
    proc = mpiexec(4, ["-m", "modelplan", "verify", MODEL, *plan, "--backend", "mpi", *DETAIL],
                   timeout_s=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_run(json.loads(proc.stdout), sim_doc([MODEL, *plan]), 4)


def test_plan_document_on_8_ranks_started_by_verify(tmp_path):
    """`modelplan verify PLAN.json --backend mpi` outside mpiexec starts the plan's 8 ranks itself
    (dp 2 x tp 2 x pp 2 with sequence parallelism and ZeRO-1) and matches the simulator."""
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"model": MODEL, "training": {"global_batch": 8, "seq_len": 2048},
                               "plan": {"dp": 2, "tp": 2, "pp": 2, "sequence_parallel": True, "zero": 1}}))
    command = [sys.executable, "-m", "modelplan", "verify", str(doc), "--backend", "mpi", *DETAIL]
    proc = run_bounded(command, env_for(8), timeout_s=180)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert_same_run(json.loads(proc.stdout), sim_doc([str(doc)]), 8)


def test_failing_check_prints_the_simulator_table_once_and_every_rank_exits_1(monkeypatch):
    """A dropped TP all-reduce (test-only hook): rank 0 prints the simulator's FAIL table, rank 1
    prints nothing, and both ranks end with exit code 1."""
    from modelplan.execute import mappings

    proc = mpiexec(2, [HOOKS, "break-tp", "report-exit", "--", "verify", MODEL, "--tp", "2",
                       "--backend", "mpi"], timeout_s=120)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert sorted(ln for ln in proc.stderr.splitlines() if ln.endswith("exit 1")) == \
        ["rank 0 exit 1", "rank 1 exit 1"], proc.stderr
    monkeypatch.setattr(mappings, "reduce_from_tensor_model_parallel_region", lambda tp, x, label: x)
    sim = runner.invoke(app, ["verify", MODEL, "--tp", "2"])
    assert sim.exit_code == 1
    mpi_lines = split_commands(proc.stdout)[0].splitlines()
    assert "FAIL" in sim.stdout
    assert mpi_lines[:-1] == sim.stdout.splitlines()[:-1]  # the last line has the wall times


def test_killed_rank_ends_the_job_with_a_clear_message():
    """Rank 1 SIGKILLs itself at its 3rd receive (test-only hook): the job ends well inside its
    timeout and mpiexec names the rank and the signal."""
    start = time.monotonic()
    proc = mpiexec(2, [HOOKS, "kill=1:3", "--", "verify", MODEL, "--tp", "2", "--backend", "mpi"],
                   timeout_s=60)
    assert time.monotonic() - start < 30
    assert proc.returncode != 0
    assert "rank 1" in proc.stderr and "signal 9" in proc.stderr, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")] == [
        "error: rank 0 stopped by SIGTERM: the MPI job is ending (a rank died, or mpiexec was "
        "interrupted or timed out)"], proc.stderr


@pytest.mark.parametrize("model,args,shape", [
    (MODEL, ["--dp", "2", "--tp", "2"], "dp 2 x tp 2 x pp 1 x cp 1"),
    ("small-cnn", ["--dp", "2", "--pp", "2"], "dp 2 x tp 1 x pp 2 x cp 1"),  # network specs too
])
def test_wrong_world_size_is_one_line_on_every_rank(model, args, shape):
    """A 4-rank plan in a 3-rank job: the same one-line error on each of the 3 ranks, exit code 2,
    no traceback, nothing on stdout (transformer and network specs alike)."""
    proc = mpiexec(3, ["-m", "modelplan", "verify", model, *args, "--backend", "mpi"], timeout_s=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert errors == [f"error: the plan needs 4 ranks ({shape}) but the MPI job "
                      "has 3: launch with mpiexec -n 4"] * 3, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stdout == ""
