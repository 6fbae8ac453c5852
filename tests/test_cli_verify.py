"""`modelplan verify` from the command line: plan documents, model + options, output modes and
exit codes (0 all checks pass, 1 a check fails, 2 bad input)."""

from __future__ import annotations

import json

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
])
def test_bad_input_is_one_line_and_exit_2(model_file, args, message):
    """Bad plans exit 2 with a one-line error naming the numbers, never a traceback."""
    result = runner.invoke(app, ["verify", str(model_file), *args])
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_plan_document_without_model_is_rejected(tmp_path):
    """A plan document must say which model it plans."""
    doc = tmp_path / "plan.json"
    doc.write_text(json.dumps({"plan": {"dp": 2}}))
    result = runner.invoke(app, ["verify", str(doc)])
    assert result.exit_code == 2
    assert "needs a 'model' key" in result.output
