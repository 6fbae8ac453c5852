"""The RoPE base (HF rope_theta): read from config.json, carried by presets, written by exports.

Expected values come from the published config.json files under tests/data/hf/ (read here with
plain json, not through modelplan) and from transformers' own config classes for the defaults.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from modelplan.export.megatron import megatron_arguments
from modelplan.export.torchtitan import to_torchtitan
from modelplan.specs.hf import ROPE_THETA_DEFAULTS, from_hf_config
from modelplan.specs.load import load_model
from modelplan.specs.plan import Plan
from modelplan.specs.training import TrainingSpec
from modelplan.specs.transformer import TransformerSpec

ROOT = Path(__file__).resolve().parent.parent
HF = ROOT / "tests" / "data" / "hf"


def _published(name: str) -> dict:
    return json.loads((HF / name).read_text())


@pytest.mark.parametrize("name, key", [
    ("llama-3-8b.json", "rope_theta"),           # 500000.0
    ("c4ai-command-r-plus.json", "rope_theta"),  # 75000000.0
    ("granite-3.1-8b-base.json", "rope_theta"),  # 10000000.0
    ("pythia-160m.json", "rotary_emb_base"),     # GPT-NeoX spelling
])
def test_read_from_config_json(name, key):
    assert from_hf_config(_published(name), name).rope_theta == float(_published(name)[key])


def test_read_from_text_config_of_a_wrapper():
    """Mistral-Small-3.1 (mistral3) keeps it in text_config: 1e9 in the published file."""
    data = _published("mistral-small-3.1-24b-instruct-2503.json")
    assert from_hf_config(data, "m").rope_theta == data["text_config"]["rope_theta"] == 1e9


def test_transformers_5_rope_parameters_per_layer_type():
    """transformers 5 nests it in rope_parameters, per layer type for Gemma 3: the global base."""
    data = {**_published("gemma-3-1b-it.json")}
    data.pop("rope_theta")
    data["rope_parameters"] = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "default", "rope_theta": 2e6}}
    assert from_hf_config(data, "g").rope_theta == 2e6


def test_absent_means_the_config_class_default():
    """Llama-2-7b-hf's config.json has no rope_theta: LlamaConfig's default, 10000."""
    assert "rope_theta" not in _published("llama-2-7b.json")
    assert from_hf_config(_published("llama-2-7b.json"), "l").rope_theta == 10000.0
    assert from_hf_config(_published("gpt2.json"), "g").rope_theta is None  # learned positions


def test_defaults_table_equals_transformers_config_classes():
    transformers = pytest.importorskip("transformers")
    for model_type, theta in ROPE_THETA_DEFAULTS.items():
        config = transformers.CONFIG_MAPPING[model_type]()
        config = getattr(config, "text_config", None) or config
        params = getattr(config, "rope_parameters", None) or {}
        params = params.get("full_attention", params)
        expected = params.get("rope_theta", getattr(config, "rope_theta", None))
        assert expected == theta, model_type


def test_presets_carry_their_config_json_value():
    """Every preset made from a shipped config.json states that file's RoPE base."""
    checked = 0
    for path in sorted((ROOT / "presets" / "models").glob("*.toml")):
        match = re.search(r"tests/data/hf/([\w.\-]+\.json)", path.read_text())
        if not match:
            continue
        spec = load_model(path.stem)
        assert spec.rope_theta == from_hf_config(_published(match.group(1)), match.group(1)).rope_theta, path.stem
        checked += 1
    assert checked >= 15
    assert load_model("llama-3-70b").rope_theta == 500000.0  # Meta-Llama-3-70B config.json


def test_megatron_writes_rotary_base_and_percent():
    spec = TransformerSpec(name="m", layers=2, hidden=256, heads=4, ffn_hidden=1024, vocab=1000,
                           rope_theta=500000.0, rotary_fraction=0.5)
    flags = megatron_arguments(spec, TrainingSpec(global_batch=8), Plan(dp=8)).flags()
    assert flags["--rotary-base"] == "500000"  # arguments.py: type=int
    assert flags["--rotary-percent"] == "0.5"
    unstated = spec.model_copy(update={"rope_theta": None, "rotary_fraction": 1.0})
    flags = megatron_arguments(unstated, TrainingSpec(global_batch=8), Plan(dp=8)).flags()
    assert "--rotary-base" not in flags and "--rotary-percent" not in flags


def test_torchtitan_module_sets_the_rope_theta():
    spec = TransformerSpec(name="m", layers=2, hidden=256, heads=4, ffn_hidden=1024, vocab=1000,
                           rope_theta=1e6)
    text = to_torchtitan(spec, TrainingSpec(global_batch=8), Plan(dp=8)).text
    constants = {node.targets[0].id: ast.literal_eval(node.value) for node in ast.parse(text).body
                 if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                 and isinstance(node.value, ast.Constant)}
    assert constants["ROPE_THETA"] == 1e6
    assert "theta=ROPE_THETA" in text
