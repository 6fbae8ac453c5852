"""`modelplan verify` from the command line: plan documents, model + options, output modes and
exit codes (0 all checks pass, 1 a check fails, 2 bad input)."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.execute import mappings

runner = CliRunner()

MODEL = {"name": "llama-ish", "layers": 32, "hidden": 4096, "heads": 32, "kv_heads": 8, "ffn_hidden": 14336,
         "vocab": 128256}


@pytest.fixture
def model_file(tmp_path):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(MODEL))
    return path


def test_plan_document_passes(tmp_path):
    """A planner document {model, training, plan} verifies and exits 0 with a PASS table."""
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"model": MODEL, "training": {"global_batch": 16, "seq_len": 4096},
                               "plan": {"dp": 2, "tp": 2, "pp": 2}, "version": 1}))
    result = runner.invoke(app, ["verify", str(doc)])
    assert result.exit_code == 0, result.output
    assert "PASS" in result.output and "FAIL" not in result.output


def test_model_with_options_as_json(model_file):
    """MODEL plus --dp/--tp/--zero options; --json prints a document with every check passed."""
    result = runner.invoke(app, ["verify", str(model_file), "--dp", "2", "--tp", "2", "--zero", "2",
                                 "--sequence-parallel", "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["passed"] is True
    assert doc["plan"]["zero"] == 2 and doc["plan"]["sequence_parallel"] is True
    assert {r["name"] for r in doc["rows"]} >= {"loss", "gradients", "bubble fraction", "held weights"}


def test_timeline_and_svg(model_file, tmp_path):
    """--timeline draws one row per pipeline rank; --svg writes a standalone SVG file."""
    svg = tmp_path / "schedule.svg"
    result = runner.invoke(app, ["verify", str(model_file), "--pp", "2", "--vpp", "2", "--timeline", "--svg", str(svg)])
    assert result.exit_code == 0, result.output
    assert "pp rank 0" in result.output and "pp rank 1" in result.output
    text = svg.read_text()
    assert text.startswith("<svg") and text.count("<rect") == 2 * 2 * 2 * 4  # ranks * chunks * (F, B) * m
    assert not list(tmp_path.glob(".schedule.svg.*"))  # no temp file left behind


def test_failing_check_exits_1(model_file, monkeypatch):
    """An executor with a dropped TP AllReduce fails its checks: exit code 1."""
    monkeypatch.setattr(mappings, "reduce_from_tensor_model_parallel_region", lambda tp, x, label: x)
    result = runner.invoke(app, ["verify", str(model_file), "--tp", "2"])
    assert result.exit_code == 1, result.output
    assert "FAIL" in result.output


@pytest.mark.parametrize("args,message", [
    (["--tp", "3"], "tp (3) must divide heads (32)"),
    (["--zero", "4"], "zero"),
    (["--dp", "2", "--global-batch", "3"], "global_batch (3) must be divisible"),
    (["--dp", "64", "--tp", "8"], "the plan needs 512 ranks"),
])
def test_bad_input_is_one_line_and_exit_2(model_file, args, message):
    """Bad plans exit 2 with a one-line error naming the numbers, never a traceback."""
    result = runner.invoke(app, ["verify", str(model_file), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("args,flag", [
    (["--seed", "-1"], "--seed"), (["--dp", "-2"], "--dp"), (["--micro-batch", "0"], "--micro-batch"),
    (["--max-ranks", "0"], "--max-ranks"), (["--timeout-s", "nan"], "--timeout-s"),
])
def test_bad_option_is_bad_input_naming_the_option(model_file, args, flag):
    """--seed -1 and --dp -2 are bad input (exit 2) naming the option given, not a failed check
    (exit 1) nor a field the user never set (global_batch)."""
    result = runner.invoke(app, ["verify", str(model_file), *args])
    assert result.exit_code == 2, result.output
    assert flag in result.stderr and "global_batch" not in result.stderr


def test_vpp_null_in_a_plan_document_is_one_line(tmp_path):
    """`"vpp": null` in a plan document names plan.vpp (it used to reach a comparison with 1)."""
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"model": MODEL, "training": {"global_batch": 8},
                               "plan": {"dp": 2, "vpp": None}}))
    result = runner.invoke(app, ["verify", str(doc)])
    assert result.exit_code == 2
    assert result.stderr.startswith("error: plan.json: plan.vpp: ") and result.stderr.count("\n") == 1


def test_too_many_ranks_names_the_options_that_verify_it(tmp_path):
    """The 1T plan's 3072 ranks (dp 12 x tp 8 x pp 32): the refusal gives `--dp 2 --pp 2` (2 x 8
    x 2 = 32 ranks), which then verifies, and `--max-ranks 512` for all its stages (2 x 8 x 32)."""
    doc = tmp_path / "plan1t.json"
    doc.write_text(json.dumps({"model": "megatron-gpt-1t", "training": {"global_batch": 3072},
                               "plan": {"dp": 12, "tp": 8, "pp": 32, "sequence_parallel": True}}))
    result = runner.invoke(app, ["verify", str(doc)])
    assert result.exit_code == 2
    assert "verify the same code path on fewer ranks with `--dp 2 --pp 2` (32 ranks)" in result.stderr
    assert "`--dp 2 --max-ranks 512`" in result.stderr
    result = runner.invoke(app, ["verify", str(doc), "--dp", "2", "--pp", "2", "--json"])
    assert result.exit_code in (0, 1), result.output  # it runs: the checks decide, not bad input
    rows = {r["name"]: r["passed"] for r in json.loads(result.stdout)["rows"]}
    assert rows["loss"] and rows["gradients"] and len(rows) > 5


def test_large_micro_batch_is_executed_scaled_down():
    """--micro-batch 1000 executes micro-batches of 4 (a note says so) instead of hanging."""
    result = runner.invoke(app, ["verify", "mlp", "--dp", "2", "--micro-batch", "1000", "--json"])
    assert result.exit_code == 0, result.output
    assert "micro-batches of 4 samples (the plan's 1000)" in result.stderr
    assert json.loads(result.stdout)["plan"]["micro_batch"] == 4


def test_plan_document_on_standard_input(tmp_path):
    """`modelplan plan ... -o -` piped into `modelplan verify -`: the document on stdin verifies."""
    written = runner.invoke(app, ["plan", "mlp", "--gpus", "2", "-o", "-"])
    assert written.exit_code == 0, written.output
    result = runner.invoke(app, ["verify", "-"], input=written.stdout)
    assert result.exit_code == 0, result.output


def test_plan_document_without_model_is_rejected(tmp_path):
    """A plan document must say which model it plans."""
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"plan": {"dp": 2}}))
    result = runner.invoke(app, ["verify", str(doc)])
    assert result.exit_code == 2
    assert "not a plan document: missing model" in result.output


@pytest.fixture
def outside_mpi(monkeypatch):
    """This process is not a rank of an MPI job (whatever launched pytest)."""
    for var in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"):
        monkeypatch.delenv(var, raising=False)


def test_mpi_backend_starts_the_plans_ranks_with_the_same_arguments(model_file, outside_mpi, monkeypatch):
    """Outside mpiexec, --backend mpi re-runs the command on dp*tp*pp = 4 ranks with the arguments
    given (defaults and --np left out) and exits with the job's status."""
    from modelplan.cli import mpirun

    calls = []
    monkeypatch.setattr(mpirun, "require_mpi4py", lambda: None)
    monkeypatch.setattr(mpirun, "run_job", lambda n, args, timeout_s: calls.append((n, args, timeout_s)) or 1)
    result = runner.invoke(app, ["verify", str(model_file), "--dp", "2", "--tp", "2", "--no-sequence-parallel",
                                 "--backend", "mpi", "--np", "4", "--json"])
    assert result.exit_code == 1, result.output
    assert calls == [(4, ["verify", str(model_file), "--dp", "2", "--tp", "2", "--no-sequence-parallel",
                          "--backend", "mpi", "--json"], 120.0)]


def test_mpi_backend_without_mpi4py_is_one_line(model_file, outside_mpi, monkeypatch):
    """No mpi4py installed: exit 2 and one line saying to install modelplan[mpi]."""
    import sys

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # makes `import mpi4py` raise ImportError
    result = runner.invoke(app, ["verify", str(model_file), "--dp", "2", "--backend", "mpi"])
    assert result.exit_code == 2, result.output
    assert result.output.startswith("error: ") and result.output.count("\n") == 1
    assert "install modelplan[mpi]" in result.output


def test_np_other_than_the_plans_ranks_is_one_line(model_file, outside_mpi):
    """--np 3 for a dp 2 x tp 2 plan is refused before any process starts."""
    result = runner.invoke(app, ["verify", str(model_file), "--dp", "2", "--tp", "2", "--backend", "mpi",
                                 "--np", "3"])
    assert result.exit_code == 2, result.output
    assert "--np (3) must equal the plan's ranks (4 = dp 2 x tp 2 x pp 1 x cp 1)" in result.output


def test_ledger_needs_json(model_file):
    """--ledger only adds to the JSON document: without --json it is a one-line error."""
    result = runner.invoke(app, ["verify", str(model_file), "--ledger"])
    assert result.exit_code == 2
    assert "add --json" in result.output


def test_json_ledger_and_tensors(model_file):
    """--json --ledger --tensors: one ledger per rank (dp 2: each rank all-reduces its gradients
    over the 2 dp ranks) and every gradient at the full shape of the scaled-down model."""
    result = runner.invoke(app, ["verify", str(model_file), "--dp", "2", "--json", "--ledger", "--tensors"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert len(doc["ledgers"]) == 2
    dp_ops = {(e["op"], e["group_size"]) for lg in doc["ledgers"] for e in lg if e["axis"] == "dp"}
    assert ("all_reduce", 2) in dp_ops
    hidden, vocab = doc["model"]["hidden"], doc["model"]["vocab"]
    grads = doc["tensors"]["gradients"]
    assert np.array(grads["embedding/word/weight"]).shape == (vocab, hidden)  # (vocab, hidden) table
    assert np.array(grads["head/lm/weight"]).shape == (hidden, vocab)  # y = x @ w, (in, out)
    assert grads.keys() == doc["tensors"]["updated_parameters"].keys()


def test_header_names_context_parallelism():
    """A cp 2 run says so in the table title (was 'dp=1 tp=2 pp=1 1f1b', as if cp were 1), with
    the exchange it executed: the one asked for, else Megatron's default p2p
    (presets/frameworks/megatron.toml)."""
    for args, expected in [(["--cp", "2", "--tp", "2", "--cp-comm-type", "all_gather"], "cp=2 (all_gather)"),
                           (["--cp", "2"], "cp=2 (p2p)")]:
        result = CliRunner().invoke(app, ["verify", "llama-3-8b", *args, "--steps", "1"], env={"COLUMNS": "200"})
        assert result.exit_code == 0, result.output
        assert expected in result.output.split("┏")[0]  # the title, above the table
