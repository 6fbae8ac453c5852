"""benchmarks/hf_command_sweep.py: its outcome rules and a sample of its sweep (every command on a
dense, an MoE, a hybrid-SSM and an image-text HF type's class defaults ends ok or in a one-line
refusal, never a crash)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

pytest.importorskip("transformers")

import hf_command_sweep as sweep  # noqa: E402
import hf_coverage  # noqa: E402


def test_shrink_sets_layer_counts_and_cuts_per_layer_lists():
    """Every layer count above 2 becomes 2, nested ones too, and a list as long as it is cut to 2."""
    data = {"num_hidden_layers": 4, "layer_types": ["a", "b", "a", "b"], "vocab_size": 4,
            "text_config": {"num_layers": 6, "pattern": [1, 2, 3, 4, 5, 6]}, "architectures": ["X"]}
    small = sweep.shrink(data)
    assert small == {"num_hidden_layers": 2, "layer_types": ["a", "b"], "vocab_size": 4,
                     "text_config": {"num_layers": 2, "pattern": [1, 2]}, "architectures": ["X"]}
    assert data["num_hidden_layers"] == 4  # the input is left as it was


def test_shrink_returns_none_when_nothing_is_above_two():
    """A config already at 2 layers has no shrunk copy."""
    assert sweep.shrink({"num_hidden_layers": 2}) is None


def test_a_bad_field_is_a_one_line_refusal(tmp_path):
    """A negative hidden_size in a config.json is refused in one line (exit 2), not a crash."""
    path = tmp_path / "bad.json"
    path.write_text('{"model_type": "llama", "hidden_size": -8, "num_hidden_layers": 2, '
                    '"num_attention_heads": 2, "intermediate_size": 16, "vocab_size": 32}')
    kind, detail = sweep.run(["count", str(path), "--json"])
    assert kind == "refused", detail
    assert detail.startswith("error:") and "hidden_size = -8" in detail


def test_an_escaped_exception_is_a_crash(monkeypatch, tmp_path):
    """An exception other than a ModelplanError inside a command is classed CRASH (the backstop's exit 70)."""
    import modelplan.specs.load as load

    def boom(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(load, "load_model", boom)  # modelplan/cli/count.py imports it at call time
    kind, detail = sweep.run(["count", "gpt2-small", "--json"])
    assert kind == "CRASH", detail
    assert "ZeroDivisionError" in detail


@pytest.mark.parametrize("model_type", ["llama", "mixtral", "jamba", "llava"])
def test_every_command_on_class_defaults_is_ok_or_a_one_line_refusal(model_type, tmp_path):
    """The sweep's commands (and --wide's) on the class defaults of `model_type`: none crashes."""
    data = hf_coverage.default_config(model_type)
    assert data is not None
    outcomes = sweep.sweep(model_type, data, tmp_path, wide=True)
    assert outcomes["count"][0] == "ok", outcomes["count"]
    crashes = {command: detail for command, (kind, detail) in outcomes.items() if kind in ("CRASH", "usage")}
    assert crashes == {}


HEADS_ZERO = ["cohere_compass", "cohere_compass_text", "diffllama", "doge", "glm46v", "glm4v", "glm_ocr", "glmga",
              "lfm2", "lfm2_vl", "minimax", "mllama", "recurrent_gemma", "roformer", "unlimited_ocr", "zamba",
              "zamba2"]
"""The types whose mapper divided by num_attention_heads = 0 (ZeroDivisionError, exit 70) before
HFConfig refused it (hf_command_sweep.py --mutate)."""


@pytest.mark.parametrize("model_type", HEADS_ZERO)
def test_zero_attention_heads_is_a_one_line_error_naming_the_field(model_type, tmp_path):
    """num_attention_heads = 0 in the class defaults (top level, else text_config): exit 2, one line."""
    data = hf_coverage.default_config(model_type)
    bad = dict(data["text_config"]) if "num_attention_heads" not in data else data
    bad["num_attention_heads"] = 0
    if bad is not data:
        data["text_config"] = bad
    path = tmp_path / "config.json"
    path.write_text(__import__("json").dumps(data))
    from typer.testing import CliRunner

    from modelplan.cli import app

    result = CliRunner().invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "num_attention_heads: must be > 0 (config.json: num_attention_heads = 0)" in lines[0], lines


OTHER_BAD = [("minicpm3", "hidden_size", 0, "hidden_size: must be > 0, got 0"),
             ("minicpm3", "num_hidden_layers", 0, "num_hidden_layers: must be > 0, got 0"),
             ("olmo_hybrid", "num_hidden_layers", 0, "num_hidden_layers: must be > 0, got 0"),
             ("glm_ocr", "hidden_size", None, "text_config.hidden_size: missing"),
             ("glm_ocr", "hidden_size", "big", "text_config.hidden_size: expected an integer, got 'big'"),
             ("inkling_text", "head_dim", 0, "head_dim: must be > 0, got 0"),
             ("minimax_m3_vl_text", "head_dim", 0, "head_dim: must be > 0, got 0"),
             ("muse_glimmer", "head_dim", 0, "text_config.head_dim: must be > 0, got 0")]
"""(type, key, bad value, message) the --mutate sweep crashed on before (ZeroDivisionError,
TypeError, IndexError: exit 70): each is now a one-line error naming the field."""


@pytest.mark.parametrize(("model_type", "key", "value", "message"), OTHER_BAD)
def test_other_bad_values_are_one_line_errors_naming_the_field(model_type, key, value, message, tmp_path):
    """The class defaults with `key` (top level, else text_config) set to `value`: exit 2, one line."""
    import json

    from typer.testing import CliRunner

    from modelplan.cli import app

    data = hf_coverage.default_config(model_type)
    (data if key in data else data["text_config"])[key] = value
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    result = CliRunner().invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and message in lines[0], lines
