"""Malformed input files never end in a traceback, the backstop or a half-written output.

A sample of benchmarks/cli_fuzz.py's deterministic file sweeps (the benchmark runs them all):
HuggingFace config.json files with one number set to a wrong type, a negative, zero, huge or NaN
value or deleted, the file empty, a folder, not JSON, nested 100,000 deep or unreadable
(/proc/self/mem); model and cluster TOML presets with one number replaced the same way. Each case
must exit 0 or be refused with one `error:` line (exit 2); a TOML preset's refusal names the
broken key. Beside them, the rules those sweeps found missing, one per test.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from modelplan.cli import app
from modelplan.cli.app import run

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import cli_fuzz  # noqa: E402

RUNNER = CliRunner()


@pytest.fixture(scope="module")
def command():
    app.load()
    return typer.main.get_command(app)


def _classes(command, cases, tmp_path, named: bool) -> list:
    bad = []
    for argv, broken in cases:
        res = cli_fuzz.classify(RUNNER, command, argv, broken, 60.0, named)
        if res.cls in ("crash", "hang") or cli_fuzz.leftovers(tmp_path):
            bad.append(res)
    return bad


def test_broken_hf_configs_are_refused_cleanly(command, tmp_path):
    """Two mutations of every HF config.json under tests/data/hf plus the whole-file cases: no crash."""
    cases = cli_fuzz.config_cases(tmp_path, per_file=2)
    bad = _classes(command, cases, tmp_path, named=False)
    assert not bad, [(r.cls, r.argv, r.text) for r in bad[:5]]


def test_broken_toml_presets_are_refused_naming_the_key(command, tmp_path):
    """Every tenth TOML mutation (models and a cluster): no crash, and a refusal names the key it broke."""
    cases = cli_fuzz.toml_cases(tmp_path)[::10]
    results = [cli_fuzz.classify(RUNNER, command, argv, broken, 60.0, False) for argv, broken in cases]
    assert not [r for r in results if r.cls in ("crash", "hang", "unclear")], [
        (r.cls, r.argv[-1], r.text) for r in results if r.cls in ("crash", "hang", "unclear")][:5]
    assert not cli_fuzz.leftovers(tmp_path)


def _refused(command, argv: list[str]) -> str:
    with RUNNER.isolation() as (out, err, _):
        code = run(argv, command)
        text = out.getvalue().decode() + err.getvalue().decode()
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert code == 2 and len(errors) == 1 and "Traceback" not in text, text
    return errors[0]


@pytest.mark.parametrize("value", ['"450"', "true"])
def test_cluster_number_written_as_text_or_bool_is_refused(command, tmp_path, value):
    """`bandwidth_gbps = "450"` or `= true` was coerced to 450 / 1 GB/s; a number goes there (pydantic lax mode)."""
    text = (ROOT / "presets" / "clusters" / "dgx-h100.toml").read_text()
    path = tmp_path / "c.toml"
    path.write_text(text.replace("bandwidth_gbps = 50.0", f"bandwidth_gbps = {value}", 1))
    line = _refused(command, ["comm", "all_reduce", "-n", "16", "-s", "1M", "-c", str(path)])
    assert "bandwidth_gbps" in line and "expected a number" in line, line


def test_model_size_written_as_text_is_refused(command, tmp_path):
    """`layers = "2"` in a model TOML: refused naming layers (it was read as 2)."""
    path = tmp_path / "m.toml"
    path.write_text('name = "t"\nlayers = "2"\nhidden = 64\nheads = 4\nffn_hidden = 128\nvocab = 100\nmax_positions = 64\n')
    assert "layers" in _refused(command, ["count", str(path)])


@pytest.mark.parametrize(("raw", "key"), [
    ('{"model_type": "llama", "rope_scaling": {"type": "linear", "factor": NaN}}', "rope_scaling.factor"),
    ('{"model_type": "llama", "hidden_size": Infinity}', "hidden_size"),
    ('{"model_type": "llama", "layer_types": [1, 2, 1e999]}', "layer_types[2]"),
])
def test_non_finite_json_number_names_its_key(command, tmp_path, raw, key):
    """NaN / Infinity (not JSON) and 1e999 are refused naming the key path where they stand."""
    path = tmp_path / "config.json"
    path.write_text(raw)
    line = _refused(command, ["count", str(path)])
    assert f"{key}: " in line, line


def test_hf_eps_and_softcap_name_the_config_keys(command, tmp_path):
    """Gemma 2 with rms_norm_eps 0 and final_logit_softcapping -1: the keys the user wrote are named."""
    data = json.loads((ROOT / "tests" / "data" / "hf" / "gemma-2-9b.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**data, "rms_norm_eps": 0, "final_logit_softcapping": -1}))
    line = _refused(command, ["count", str(path)])
    assert "rms_norm_eps = 0" in line and "final_logit_softcapping = -1" in line, line


@pytest.mark.parametrize(("base", "path", "value", "key"), [
    ("mixtral-8x7b-v0.1.json", ("num_experts_per_tok",), 10**30, "num_experts_per_tok = "),  # moe: top_k (...)
    ("llava-1.5-7b-hf.json", ("vision_config", "intermediate_size"), 0, "vision_config.intermediate_size = 0"),
    ("llava-1.5-7b-hf.json", ("vision_config", "num_hidden_layers"), 10**30, "vision_config.num_hidden_layers = "),
])
def test_nested_spec_errors_name_the_config_key(command, tmp_path, base, path, value, key):
    """A MoE or vision-tower field's own check names the config.json key it came from (MixtralConfig,
    LlavaConfig.vision_config's CLIPVisionConfig spellings)."""
    data = json.loads((ROOT / "tests" / "data" / "hf" / base).read_text())
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    config = tmp_path / "config.json"
    config.write_text(json.dumps(data))
    assert key in _refused(command, ["count", str(config)])
