"""`modelplan plan --finetune lora|qlora` through Typer's CliRunner: labelled tables and JSON, one-line errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from modelplan.cli import app

runner = CliRunner()
QLORA_7B = ["plan", "llama-2-7b", "--gpus", "2", "--batch", "8", "--seq", "512", "--finetune", "qlora", "--top", "2"]


def run(*args: str):
    return runner.invoke(app, list(args))


def test_table_says_it_is_a_fine_tuning_plan():
    """The header names the method, the adapters and the frozen base's format."""
    result = run(*QLORA_7B)
    assert result.exit_code == 0, result.output
    assert "fine-tuning plan (qlora): r 8 adapters" in result.output and "frozen base NF4" in result.output


def test_json_carries_the_finetune_section():
    """--json: `finetune` with the plan kind, PEFT's trainable count (32 x 2 x 8 x 8192) and the training spec's finetune."""
    result = run(*QLORA_7B, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["finetune"]["plan"] == "fine-tuning" and doc["finetune"]["trainable_params"] == 4_194_304
    assert doc["training"]["finetune"]["method"] == "qlora"
    assert doc["plans"][0]["predictions"]["memory"]["fits"]


def test_explain_reads_a_fine_tuning_plan_back(tmp_path):
    """-o writes the fine-tune into the document; --explain prices it the same (same peak memory)."""
    out = tmp_path / "ft.json"
    assert run(*QLORA_7B, "-o", str(out)).exit_code == 0
    written = json.loads(out.read_text())
    result = run("plan", "--explain", str(out), "--json")
    assert result.exit_code == 0, result.output
    again = json.loads(result.output)
    assert again["predictions"]["memory"]["peak_bytes"] == written["predictions"]["memory"]["peak_bytes"]


def _one_line_error(result, text: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:") and text in lines[0], result.output


def test_qlora_with_fp8_is_one_line_exit_2():
    """--precision fp8 with --finetune qlora: not modelled, one line."""
    _one_line_error(run(*QLORA_7B, "--precision", "fp8"), "fp8")


def test_lora_rank_zero_is_one_line_exit_2(capsys):
    """--lora-rank 0, as the console script runs it: one line naming the option, exit 2."""
    from modelplan.cli.app import run as console_run

    assert console_run([*QLORA_7B, "--lora-rank", "0"]) == 2
    captured = capsys.readouterr()
    lines = (captured.out + captured.err).strip().splitlines()
    assert lines == ["error: Invalid value for '--lora-rank': Input should be greater than or equal to 1"]


def test_lora_targets_without_finetune_is_one_line_exit_2():
    """--lora-targets alone describes no fine-tune."""
    _one_line_error(run("plan", "llama-2-7b", "--gpus", "2", "--lora-targets", "q_proj"), "--finetune")


def test_moe_fine_tune_plan_is_one_line_exit_2():
    """Adapters on an MoE model are counted but not planned."""
    _one_line_error(run("plan", "mixtral-8x7b", "--gpus", "8", "--finetune", "lora"), "MoE")


def test_verify_refuses_a_fine_tuning_plan(tmp_path):
    """verify executes full-training steps only: a qlora document is a one-line error."""
    out = tmp_path / "ft.json"
    assert run(*QLORA_7B, "-o", str(out)).exit_code == 0
    _one_line_error(run("verify", str(out)), "fine-tuning plan")


def test_export_refuses_a_fine_tuning_plan_for_an_engine(tmp_path):
    """Engine launch configs are for full training: export --to megatron of a qlora plan is one line."""
    out = tmp_path / "ft.json"
    assert run(*QLORA_7B, "-o", str(out)).exit_code == 0
    _one_line_error(run("export", str(out), "--to", "megatron", "-o", str(tmp_path / "x")), "fine-tuning plan")


def test_full_fine_tune_plans_like_training_and_says_so():
    """--finetune full: every parameter trains, so the plan equals the training plan; the header says fine-tuning."""
    base = ["plan", "gpt2", "--gpus", "2", "--batch", "8", "--seq", "512", "--top", "1", "--json"]
    plain, full = run(*base), run(*base, "--finetune", "full")
    assert plain.exit_code == 0 and full.exit_code == 0, full.output
    a, b = json.loads(plain.output), json.loads(full.output)
    assert a["plans"][0]["predictions"]["step_time"] == b["plans"][0]["predictions"]["step_time"]
    assert b["finetune"]["method"] == "full" and "finetune" not in a


def test_run_checkpoints_hold_the_adapters_and_their_adam_states():
    """--tokens: a LoRA checkpoint is the fp32 adapters (4 B) and Adam m, v (8 B): 12 x 4,194,304 B, not the base."""
    result = run("plan", "llama-2-7b", "--gpus", "2", "--batch", "8", "--seq", "512", "--finetune", "lora",
                 "--tokens", "1M", "--top", "1", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["run"]["checkpoint_bytes"] == 12 * 4_194_304
