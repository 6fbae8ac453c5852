"""`modelplan plan --explain` on a document whose rates overflow the step time: a one-line error
naming the file, exit code 2, no traceback (found by tests/test_fuzz_cli.py's random mode: the
time table's bar divided inf by inf)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from modelplan.cli import app

runner = CliRunner()


def test_explain_with_a_subnormal_peak_rate_is_one_line(tmp_path):
    doc = tmp_path / "plan.json"
    made = runner.invoke(app, ["plan", "mlp", "--gpus", "4", "-o", str(doc)])
    assert made.exit_code == 0, made.output
    data = json.loads(doc.read_text())
    # 5e-324 TFLOP/s (the smallest positive double): any FLOP count over it is inf seconds
    data["cluster"]["accelerator"]["peak_tflops"] = {k: 5e-324 for k in data["cluster"]["accelerator"]["peak_tflops"]}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    result = runner.invoke(app, ["plan", "--explain", str(bad)])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "bad.json" in lines[0], result.output
    assert "not finite" in lines[0] and "Traceback" not in result.output


def test_explain_of_a_sound_document_still_prints_its_table(tmp_path):
    doc = tmp_path / "plan.json"
    assert runner.invoke(app, ["plan", "mlp", "--gpus", "4", "-o", str(doc)]).exit_code == 0
    result = runner.invoke(app, ["plan", "--explain", str(doc)])
    assert result.exit_code == 0 and "Step time" in result.output, result.output
