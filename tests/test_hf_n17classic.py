"""The BERT-like encoders of modelplan/specs/hf_n17classic.py (roberta, xlm-roberta, camembert,
data2vec-text, roberta-prelayernorm, xlm-roberta-xl, megatron-bert): total parameters equal
sum(p.numel()) of transformers 5.24's module built from a tiny config (the independent source),
and `modelplan count` / `plan --gpus 8` run on the config.json."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _hf_reference import hf_numel
from modelplan.cli import app
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

runner = CliRunner()

TINY = dict(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, intermediate_size=96,
            vocab_size=100, max_position_embeddings=40, type_vocab_size=1)
"""Small enough to build on CPU; type_vocab_size 1 as RoBERTa checkpoints ship it."""

CLASSES = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta", "camembert": "Camembert",
           "data2vec-text": "Data2VecText", "roberta-prelayernorm": "RobertaPreLayerNorm",
           "xlm-roberta-xl": "XLMRobertaXL", "megatron-bert": "MegatronBert"}
"""model_type -> transformers class prefix."""

HEADS = ("Model", "ForMaskedLM", "ForSequenceClassification", "ForTokenClassification")

CASES = [{**TINY, "model_type": t, "architectures": [p + h]} for t, p in CLASSES.items() for h in HEADS]


@pytest.mark.torch
@pytest.mark.parametrize("data", CASES, ids=[d["architectures"][0] for d in CASES])
def test_total_equals_transformers(data):
    """Total parameters equal sum(p.numel()) of the transformers model of the same config."""
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.parametrize("model_type", sorted(CLASSES))
def test_count_and_plan_run(model_type, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` succeed on the config.json."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**TINY, "model_type": model_type,
                                "architectures": [CLASSES[model_type] + "ForMaskedLM"]}))
    result = runner.invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
    result = runner.invoke(app, ["plan", str(path), "--gpus", "8", "--json"])
    assert result.exit_code == 0, result.output
