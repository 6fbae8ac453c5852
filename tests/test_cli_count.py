"""`modelplan count` and `modelplan presets` through Typer's CliRunner."""

from __future__ import annotations

import json
from pathlib import Path
from typing import get_args

import pytest
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.cli import options
from modelplan.specs import training

HF = Path(__file__).parent / "data" / "hf"
runner = CliRunner()


def run(*args: str):
    return runner.invoke(app, list(args))


def count_json(*args: str) -> dict:
    result = run("count", *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_json_total_params_of_gpt2():
    """`count gpt2 --json` puts GPT-2 small's 124,439,808 (HF) at params.total, schema version 1."""
    doc = count_json("gpt2")
    assert (doc["schema_version"], doc["params"]["total"]) == (1, 124_439_808)


def test_json_has_documented_sections():
    """The document has the sections README and modelplan.count.report describe."""
    doc = count_json("mixtral-8x7b", "--seq", "128")
    assert set(doc) == {"schema_version", "kind", "model", "training", "params", "flops", "memory"}
    assert doc["params"]["active"] == 12_879_925_248  # Mixtral model card
    assert doc["memory"]["model_states"] == 18 * 46_702_792_704  # Megatron 18 B/param


def test_options_reach_the_training_spec():
    """--global-batch, --seq, --micro-batch, --precision, --optimizer, --recompute, --attention are applied."""
    doc = count_json("llama-3-8b", "--global-batch", "8", "--seq", "512", "--micro-batch", "2",
                     "--precision", "fp32", "--optimizer", "sgd", "--recompute", "full",
                     "--attention", "eager")
    assert doc["training"] == {"global_batch": 8, "seq_len": 512, "decoder_seq_len": None, "micro_batch": 2,
                               "precision": "fp32", "optimizer": "sgd", "recompute": "full", "attention": "eager",
                               "grad_dtype": "fp32", "master_weights": False}
    assert doc["memory"]["model_states"] == 8 * 8_030_261_248  # fp32 weight 4 + grad 4, no state


def test_default_seq_respects_learned_positions():
    """GPT-2's 1024 learned positions cap the default sequence (2048 otherwise)."""
    assert count_json("gpt2")["training"]["seq_len"] == 1024
    assert count_json("llama-2-7b")["training"]["seq_len"] == 2048


def test_hf_config_json_is_accepted():
    """A HuggingFace config.json path counts like the preset: Llama-3-8B 8,030,261,248 (HF)."""
    assert count_json(str(HF / "llama-3-8b.json"))["params"]["total"] == 8_030_261_248


def test_spec_toml_file_is_accepted(tmp_path):
    """A TOML spec file: 1 layer, h 8, 2 heads, f 16, vocab 10, no biases, untied, RMSNorm:
    embed 80 + attn 4*64 + mlp 3*128 + norms 16 + final 8 + head 80 = 824."""
    path = tmp_path / "tiny.toml"
    path.write_text('name = "tiny"\nlayers = 1\nhidden = 8\nheads = 2\nffn_hidden = 16\nvocab = 10\n')
    assert count_json(str(path))["params"]["total"] == 824


def test_table_output_uses_human_units():
    """The rich table shows 124.4M for GPT-2 and the slash-path components."""
    result = run("count", "gpt2")
    assert result.exit_code == 0, result.output
    assert "124.4M" in result.stdout and "qkv" in result.stdout and "GB" in result.stdout


def test_table_output_shows_moe_active():
    """Mixtral's table states the active count in human units (12.88B -> '12.9B')."""
    result = run("count", "mixtral-8x7b", "--seq", "64")
    assert result.exit_code == 0, result.output
    assert "46.7B" in result.stdout and "12.9B active" in result.stdout


def test_presets_command_lists_models():
    """`modelplan presets` still lists the model presets."""
    result = run("presets")
    assert result.exit_code == 0, result.output
    assert "llama-3-8b" in result.stdout and "mixtral-8x7b" in result.stdout


def test_presets_command_lists_hf_model_types():
    """`modelplan presets` lists the HuggingFace model_types a config.json may name (llama and
    gpt_neox are transformers' own spellings), as text and in --json."""
    import json

    result = run("presets")
    assert result.exit_code == 0, result.output
    line = next(l for l in result.stdout.splitlines() if l.startswith("HuggingFace config.json model_types: "))
    assert {"llama", "gpt_neox", "t5"} <= set(line.split(": ", 1)[1].split(", "))
    doc = json.loads(run("presets", "--json").stdout)
    assert {"llama", "gpt_neox", "t5"} <= set(doc["hf_model_types"])


def test_option_choices_match_training_spec():
    """The CLI's choice lists equal the TrainingSpec Literals they mirror."""
    assert get_args(options.Precision) == get_args(training.Precision)
    assert get_args(options.Optimizer) == get_args(training.Optimizer)
    assert get_args(options.Recompute) == get_args(training.Recompute)


BASE = 'layers = 2\nhidden = 64\nheads = 4\nffn_hidden = 128\nvocab = 100\n'


@pytest.mark.parametrize(
    ("filename", "text", "expected"),
    [
        ("unknown.toml", BASE + "colour = 3\n", "colour: Extra inputs are not permitted"),
        ("negative.toml", BASE.replace("layers = 2", "layers = -2"), "layers: Input should be greater than 0"),
        ("heads.toml", BASE.replace("heads = 4", "heads = 5"), "heads (5) must divide hidden (64)"),
        ("kv.toml", BASE + "kv_heads = 3\n", "kv_heads (3) must divide heads (4)"),
        ("broken.toml", "layers = = 2\n", "broken.toml: malformed TOML"),
        ("broken.json", '{"layers": 2,', "broken.json: truncated JSON at line 1"),
        ("moe.toml", BASE + "[moe]\nnum_experts = 2\ntop_k = 4\nexpert_ffn_hidden = 8\n",
         "moe.top_k (4) must not exceed moe.num_experts (2)"),
        ("hf.json", '{"model_type": "no_such_model"}', "model_type: unsupported 'no_such_model'"),
    ],
)
def test_bad_spec_is_one_line_error(tmp_path, filename, text, expected):
    """Bad specs print one `error: ...` line naming the field, exit 2, no traceback."""
    path = tmp_path / filename
    path.write_text(text)
    result = run("count", str(path))
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert expected in result.stderr
    assert "Traceback" not in result.output


def test_unknown_preset_suggests_close_names():
    """A misspelt preset is a one-line error with suggestions, exit 2."""
    result = run("count", "llama-3-8")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: unknown model preset 'llama-3-8' (did you mean")


def test_missing_file_is_reported():
    """A spec path that does not exist is named."""
    result = run("count", "no/such/model.toml")
    assert (result.exit_code, result.stderr) == (2, "error: no/such/model.toml: no such file\n")


def test_micro_batch_larger_than_batch_is_rejected():
    """--micro-batch above --global-batch names both numbers."""
    result = run("count", "gpt2", "--micro-batch", "4", "--batch", "2")
    assert result.exit_code == 2
    assert "micro_batch (4) must not exceed global_batch (2)" in result.stderr


def test_seq_beyond_learned_positions_is_rejected():
    """--seq 4096 on GPT-2 (1024 learned positions) is a one-line error, exit 2."""
    result = run("count", "gpt2", "--seq", "4096")
    assert result.exit_code == 2
    assert "seq_len (4096) exceeds max_positions (1024)" in result.stderr


def test_depth_limits_the_table_not_the_json():
    """--depth 1 shows only top-level groups in the table; the JSON keeps every path."""
    result = run("count", "gpt2", "--depth", "1")
    assert result.exit_code == 0, result.output
    assert "qkv" not in result.stdout and "mlp" not in result.stdout and "layers" in result.stdout
    assert "layers/attention/qkv" in count_json("gpt2", "--depth", "1")["params"]["breakdown"]
