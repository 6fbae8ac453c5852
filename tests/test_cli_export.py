"""`modelplan export` and `modelplan compare` through Typer's CliRunner."""

import json

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.export.engines import export_plan
from modelplan.plan.document import SCHEMA_VERSION, parse_plan_document
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

runner = CliRunner()
MODEL = TransformerSpec(name="llama-3-8b", layers=32, hidden=4096, heads=32, kv_heads=8,
                        ffn_hidden=14336, vocab=128256, max_positions=8192)
TRAINING = TrainingSpec(global_batch=64, seq_len=8192)
PLAN_A = Plan(dp=8, zero=1)
PLAN_B = Plan(dp=4, tp=2, sequence_parallel=True, zero=1)


def _write(path, plan, predictions=None, **changes):
    data = json.loads(export_plan("json", MODEL, TRAINING, plan, None, predictions).text)
    data.update(changes)
    path.write_text(json.dumps(data))
    return path


def _one_line_error(result):
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


def test_json_round_trip(tmp_path):
    """export --to json -o out.json reads back to the same plan; re-exporting is a fixed point."""
    src = _write(tmp_path / "plan.json", PLAN_B, {"step_time_s": 1.0})
    out = tmp_path / "out.json"
    result = runner.invoke(app, ["export", str(src), "--to", "json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    doc = parse_plan_document(json.loads(out.read_text()))
    assert (doc.model, doc.training, doc.plan) == (MODEL, TRAINING, PLAN_B)
    again = runner.invoke(app, ["export", str(out), "--to", "json"])
    assert again.output == out.read_text()


@pytest.mark.parametrize("engine, marker", [
    ("megatron", "--tensor-model-parallel-size 2"),
    ("deepspeed", '"autotp_size": 2'),
    ("torchtitan", "tensor_parallel_degree=2,"),
])
def test_export_to_stdout(tmp_path, engine, marker):
    """Each engine prints its config with the plan's tp degree in that engine's spelling."""
    src = _write(tmp_path / "plan.json", PLAN_B)
    result = runner.invoke(app, ["export", str(src), "--to", engine])
    assert result.exit_code == 0, result.output
    assert marker in result.output


def test_output_file_leaves_no_temporary(tmp_path):
    """-o writes the file (atomically: nothing else is left in the folder)."""
    src = _write(tmp_path / "plan.json", PLAN_B)
    result = runner.invoke(app, ["export", str(src), "--to", "deepspeed", "-o",
                                 str(tmp_path / "ds_config.json")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds_config.json", "plan.json"]
    assert json.loads((tmp_path / "ds_config.json").read_text())["train_batch_size"] == 64


def test_unknown_engine_is_one_line_exit_2(tmp_path):
    """--to vllm: one line naming the engine and the choices."""
    src = _write(tmp_path / "plan.json", PLAN_A)
    line = _one_line_error(runner.invoke(app, ["export", str(src), "--to", "vllm"]))
    assert "'vllm'" in line and "megatron" in line


def test_newer_schema_is_one_line_exit_2(tmp_path):
    """A document of schema_version SCHEMA_VERSION + 1 is refused in one line."""
    src = _write(tmp_path / "plan.json", PLAN_A, schema_version=SCHEMA_VERSION + 1)
    line = _one_line_error(runner.invoke(app, ["export", str(src), "--to", "megatron"]))
    assert "newer" in line


def test_truncated_file_is_one_line_exit_2(tmp_path):
    """A plan file cut in the middle: one line saying truncated JSON."""
    src = _write(tmp_path / "plan.json", PLAN_A)
    src.write_text(src.read_text()[:200])
    line = _one_line_error(runner.invoke(app, ["export", str(src), "--to", "megatron"]))
    assert "truncated JSON" in line


def test_missing_file_is_one_line_exit_2(tmp_path):
    """A path that does not exist: one line, exit 2."""
    line = _one_line_error(runner.invoke(app, ["export", str(tmp_path / "nope.json"),
                                               "--to", "json"]))
    assert "nope.json" in line


def test_compare_shows_both_plans_and_the_difference(tmp_path):
    """Both file names, both step times and the hand-computed difference (1.5 s - 2.0 s)."""
    a = _write(tmp_path / "a.json", PLAN_A, {"step_time_s": 2.0, "mfu": 0.40})
    b = _write(tmp_path / "b.json", PLAN_B, {"step_time_s": 1.5, "mfu": 0.45})
    result = runner.invoke(app, ["compare", str(a), str(b)], env={"COLUMNS": "120"})
    assert result.exit_code == 0, result.output
    for text in ("a.json", "b.json", "2.000 s", "1.500 s", "-500.0 ms", "+5.0 pt"):
        assert text in result.output, text


def test_compare_json(tmp_path):
    """--json: the step-time row carries a, b, b - a and the winner."""
    a = _write(tmp_path / "a.json", PLAN_A, {"step_time_s": 2.0})
    b = _write(tmp_path / "b.json", PLAN_B, {"step_time_s": 1.5})
    result = runner.invoke(app, ["compare", str(a), str(b), "--json"])
    assert result.exit_code == 0, result.output
    row = json.loads(result.output)["terms"][0]
    assert (row["a"], row["b"], row["diff"], row["better"]) == (2.0, 1.5, -0.5, "b")


def test_compare_without_predictions_uses_the_planner(tmp_path):
    """Documents without predictions are priced by the planner (document cluster, else the
    `plan` default): the step-time and MFU rows appear for both."""
    a = _write(tmp_path / "a.json", PLAN_A)
    b = _write(tmp_path / "b.json", PLAN_B)
    result = runner.invoke(app, ["compare", str(a), str(b), "--json"])
    assert result.exit_code == 0, result.output
    terms = {row["term"]: row for row in json.loads(result.output)["terms"]}
    assert terms["step_time/step_time_s"]["a"] > 0 and terms["step_time/step_time_s"]["b"] > 0
    assert "throughput/mfu" in terms


def test_compare_a_plan_the_planner_cannot_price_is_one_line_exit_2(tmp_path):
    """No predictions and a plan the planner cannot price (cp = 3 does not divide seq_len): one
    line naming the numbers, exit 2 (cp itself is planned since context parallelism was added)."""
    a = _write(tmp_path / "a.json", Plan(dp=4, cp=3))
    assert "cp (3) must divide seq_len" in _one_line_error(runner.invoke(app, ["compare", str(a), str(a)]))


@pytest.mark.parametrize("framework, engine", [
    ("megatron", "megatron"), ("deepspeed", "deepspeed"), ("torchtitan", "torchtitan"), ("fsdp", "ddp"),
])
def test_export_without_to_follows_the_plans_engine(tmp_path, framework, engine):
    """The engine is part of the plan (`plan --framework`, issue 13 item 5): `export` without --to
    writes that engine's launch config (PyTorch FSDP runs as the ddp target's torchrun config)."""
    src = _write(tmp_path / "plan.json", PLAN_A)
    data = json.loads(src.read_text())
    data["training"]["framework"] = framework
    src.write_text(json.dumps(data))
    result = runner.invoke(app, ["export", str(src), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["engine"] == engine


def test_export_without_to_for_an_engine_without_exporter_is_one_line(tmp_path):
    """llm-foundry has no exporter: one line naming the engine and the targets, exit 2."""
    src = _write(tmp_path / "plan.json", PLAN_B)
    data = json.loads(src.read_text())
    data["training"]["framework"] = "foundry"
    src.write_text(json.dumps(data))
    line = _one_line_error(runner.invoke(app, ["export", str(src)]))
    assert "foundry" in line and "--to" in line
