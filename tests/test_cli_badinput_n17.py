"""Bad input, one class per test: exit code != 0, no traceback, one line naming what was broken.

The expected name in each case is the field or flag the case broke (not a message copied from the
code), so a message that stops naming it fails here. benchmarks/cli_fuzz.py sweeps every option.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.cli.app import run

ROOT = Path(__file__).resolve().parent.parent
LLAMA = json.loads((ROOT / "tests" / "data" / "hf" / "llama-2-7b.json").read_text())
MIXTRAL = json.loads((ROOT / "tests" / "data" / "hf" / "mixtral-8x7b-v0.1.json").read_text())
RUNNER = CliRunner()


@pytest.fixture(scope="module")
def command():
    """The click command of every modelplan command, built once."""
    app.load()
    return typer.main.get_command(app)


def refused(command, argv: list[str]) -> str:
    """Run `modelplan ARGV` as the console script does; assert a clean refusal; its error line."""
    with RUNNER.isolation() as (out, err, _):
        code = run(argv, command)
        text = out.getvalue().decode() + err.getvalue().decode()
    assert code not in (0, 70), (code, text)  # 70: the backstop, a bug
    assert "Traceback" not in text, text
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1, text
    return errors[0]


@pytest.mark.parametrize(("field", "value", "hf_key"), [
    ("num_hidden_layers", 0, "layers"), ("num_hidden_layers", -1, "layers"),
    ("vocab_size", 0, "vocab"), ("num_attention_heads", 0, "heads"),
    ("num_attention_heads", 30, "heads"),  # 30 does not divide hidden_size 4096
    ("num_key_value_heads", 64, "kv_heads"),  # more kv heads than heads (32)
    ("num_key_value_heads", 5, "kv_heads"),  # 5 does not divide 32
    ("intermediate_size", 0, "ffn_hidden"), ("max_position_embeddings", 0, "max_positions"),
])
def test_hf_config_bad_field_names_the_config_key(command, tmp_path, field, value, hf_key):
    """A broken HF config.json field is refused naming the key the user wrote (and the spec field)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, field: value}))
    line = refused(command, ["count", str(path)])
    assert f"{field} = {value}" in line, line
    assert hf_key in line, line


@pytest.mark.parametrize(("field", "value"), [("num_local_experts", 0), ("num_experts_per_tok", 9),
                                              ("num_experts_per_tok", 0)])
def test_hf_moe_config_bad_field_names_the_config_key(command, tmp_path, field, value):
    """Mixtral with 0 experts or top-k above its 8 experts: the message names the MoE key."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**MIXTRAL, field: value}))
    assert f"{field} = {value}" in refused(command, ["count", str(path)])


@pytest.mark.parametrize(("field", "value"), [("hidden_size", "4096"), ("hidden_size", 1.5),
                                              ("num_hidden_layers", [1]), ("vocab_size", True)])
def test_hf_config_wrong_type_names_the_key(command, tmp_path, field, value):
    """A size of the wrong JSON type is refused naming the key."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**LLAMA, field: value}))
    assert field in refused(command, ["count", str(path)])


@pytest.mark.parametrize("field", ["hidden_size", "num_hidden_layers", "num_attention_heads",
                                   "intermediate_size"])
def test_hf_config_missing_field_names_it(command, tmp_path, field):
    """A size the model type needs, left out, is refused naming it."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({k: v for k, v in LLAMA.items() if k != field}))
    assert field in refused(command, ["count", str(path)])


@pytest.mark.parametrize(("flag", "value"), [
    ("--gpus", "0"), ("--gpus", "-1"), ("--gpus", "abc"), ("--gpus", "1.5"), ("--batch", "0"),
    ("--seq", "nan"), ("--seq", ""), ("--tp", "0"), ("--memory-headroom", "nan"),
    ("--memory-headroom", "inf"), ("--tokens", "-1"),
])
def test_plan_bad_number_names_the_flag(command, flag, value):
    """A zero, negative, non-integer, NaN/inf or empty number is refused naming its flag."""
    argv = ["plan", "gpt2", "--gpus", "8", "--batch", "64", "--seq", "256"]
    if flag in argv:
        argv[argv.index(flag) + 1] = value
    else:
        argv += [flag, value]
    assert flag in refused(command, argv)


@pytest.mark.parametrize(("argv", "name"), [
    (["plan", "gpt2", "--gpus", "8", "--tp", "5"], "tp"),  # 5 divides neither 12 heads nor 8 GPUs
    (["plan", "gpt2", "--gpus", "8", "--dp", "3"], "dp"),
    (["plan", "gpt2", "--gpus", "64", "--pp", "64"], "pp"),  # 64 stages for 12 layers
    (["plan", "gpt2", "--gpus", "8", "--ep", "2"], "ep"),  # GPT-2 has no experts
    (["plan", "gpt2", "--gpus", "8", "--batch", "8", "--micro-batch", "16"], "micro"),
    (["verify", "gpt2", "--tp", "5", "--max-ranks", "8"], "tp"),
    (["verify", "gpt2", "--dp", "2", "--global-batch", "3", "--max-ranks", "2"], "global"),
])
def test_inconsistent_parallel_flags_name_the_axis(command, argv, name):
    """Parallel degrees that cannot split the model or the batch are refused naming the axis."""
    assert name in refused(command, argv).lower()


@pytest.mark.parametrize("flag", ["--recompute-layers", "--micro-batch"])
def test_count_huge_flag_names_it(command, flag):
    """A value beyond modelplan's limits (a typo) is refused naming the flag the user typed."""
    assert flag in refused(command, ["count", "gpt2", flag, "9" * 30])


def test_recompute_layers_without_method_names_both_flags(command):
    """--recompute-layers alone: the message names the flag that is missing, --recompute-method."""
    line = refused(command, ["count", "gpt2", "--recompute-layers", "2"])
    assert "--recompute-layers" in line and "--recompute-method" in line, line


@pytest.mark.parametrize(("flag", "value"), [("--min-size", "0"), ("--max-size", "0")])
def test_calibrate_size_out_of_range_names_the_flag(command, flag, value):
    """A sweep size of 0 bytes is refused naming the flag, not the library's argument."""
    argv = ["calibrate", "--backend", "sim", "-b", "1K", "-e", "2K", "-n", "1", "-w", "0", flag, value]
    assert flag in refused(command, argv)


@pytest.mark.parametrize("kind", ["missing", "folder", "empty", "binary", "bad_toml", "bad_json"])
def test_unreadable_model_file_is_named(command, tmp_path, kind):
    """A model argument that is no readable spec is refused quoting the file."""
    path = tmp_path / {"missing": "nope.json", "folder": "dir", "empty": "empty.json", "binary": "bin.json",
                       "bad_toml": "bad.toml", "bad_json": "bad.json"}[kind]
    if kind == "folder":
        path.mkdir()
    elif kind != "missing":
        path.write_bytes({"empty": b"", "binary": bytes(range(256)), "bad_toml": b"layers = [1, 2\n",
                          "bad_json": b'{"layers": 2, "hidden":'}[kind])
    assert path.name in refused(command, ["count", str(path)])


@pytest.mark.parametrize("where", ["readonly", "folder", "under_a_file"])
def test_unwritable_output_is_refused_and_nothing_written(command, tmp_path, where):
    """-o into a read-only folder, onto a folder, or under a file: refused naming -o, no file left."""
    ro = tmp_path / "ro"
    ro.mkdir()
    (tmp_path / "afile").write_text("x")
    target = {"readonly": ro / "out.json", "folder": ro, "under_a_file": tmp_path / "afile" / "out.json"}[where]
    ro.chmod(0o555)
    try:
        if where == "readonly" and os.access(ro, os.W_OK):
            pytest.skip("running as a user who can write a 0555 folder")
        before = sorted(p.name for p in tmp_path.rglob("*"))
        line = refused(command, ["plan", "gpt2", "--gpus", "8", "-o", str(target)])
        assert "-o" in line or "--output" in line, line
        assert sorted(p.name for p in tmp_path.rglob("*")) == before
    finally:
        ro.chmod(0o755)


@pytest.mark.parametrize(("argv", "flag"), [
    (["serve", "llama-3-8b", "--gpus", "1", "--context"], "--context"),
    (["serve", "llama-3-8b", "--gpus", "1", "--context", "4096", "--batch"], "--batch"),
    (["serve", "llama-3-8b", "--gpus", "1", "--context", "4096", "--concurrency"], "--concurrency"),
    (["serve", "llama-3-8b", "--gpus", "1", "--context", "4096", "--block-size"], "--block-size"),
    (["comm", "all_reduce", "--size", "1M", "--cluster", "dgx-h100", "--ranks"], "--ranks"),
    (["count", "gpt2", "--lora-rank"], "--lora-rank"),
    (["count", "flan-t5-xl", "--decoder-seq"], "--decoder-seq"),
])
def test_absurdly_large_size_is_refused(command, argv, flag):
    """10**30 tokens, sequences, ranks or LoRA rank (a typo) is refused naming the flag, not
    silently priced (the limits of modelplan.specs.limits)."""
    assert flag in refused(command, [*argv, "1" + "0" * 30])
