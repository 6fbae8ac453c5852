"""The RoBERTa family and Sarvam-MLA (modelplan/specs/hf_roberta.py): totals equal transformers
5.24's modules built on CPU from small configs, for every head the loader reads (MLM, causal LM,
sequence / token classification, QA, multiple choice, the bare model), and at the class defaults
on the meta device."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _hf_n17_checks import class_defaults
from _hf_reference import hf_model, hf_numel
from modelplan.cli import app
from modelplan.count.params import count_params
from modelplan.specs.hf import from_hf_config

runner = CliRunner()

PREFIX = {"roberta": "Roberta", "xlm-roberta": "XLMRoberta", "camembert": "Camembert", "data2vec-text": "Data2VecText",
          "roberta-prelayernorm": "RobertaPreLayerNorm", "xlm-roberta-xl": "XLMRobertaXL"}
HEADS = ["ForMaskedLM", "ForCausalLM", "ForSequenceClassification", "ForTokenClassification",
         "ForQuestionAnswering", "ForMultipleChoice", "Model"]
TINY = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=101,
            max_position_embeddings=40, type_vocab_size=1, num_labels=3)
CASES = [{**TINY, "model_type": t, "architectures": [PREFIX[t] + head]} for t in PREFIX for head in HEADS]
SARVAM = dict(model_type="sarvam_mla", hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=4, intermediate_size=64, moe_intermediate_size=16, n_routed_experts=8,
              num_experts_per_tok=2, vocab_size=101, kv_lora_rank=8, qk_nope_head_dim=8, qk_rope_head_dim=4,
              v_head_dim=8)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("data", CASES + [SARVAM, {**SARVAM, "q_lora_rank": 12, "n_shared_experts": 2}],
                         ids=[c["architectures"][0] for c in CASES] + ["sarvam_mla-0", "sarvam_mla-1"])
def test_total_equals_transformers_on_cpu(data):
    model = hf_model(data, device="cpu")
    assert count_params(from_hf_config(data)).total == sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["roberta-prelayernorm", "xlm-roberta-xl", "sarvam_mla"])
def test_class_defaults_equal_transformers(model_type):
    """Class defaults on the meta device (AutoModelForCausalLM's head for the RoBERTa ones)."""
    data = class_defaults(model_type)
    if model_type in PREFIX:
        data["architectures"] = [PREFIX[model_type] + "ForCausalLM"]
    assert count_params(from_hf_config(data)).total == hf_numel(data)


def test_published_roberta_base_total():
    """FacebookAI/roberta-base (vocab 50265, 514 positions, 1 token type) as RobertaForMaskedLM, by
    hand: embeddings 50265 x 768 + 514 x 768 + 768 + LayerNorm 1,536 = 39,000,576; 12 blocks of
    4 x 768^2 + 4 x 768 + 2 x 768 x 3072 + 3072 + 768 + 2 x 1,536 = 85,054,464; LM head dense
    589,824 + 768, LayerNorm 1,536, decoder tied, bias 50,265 = 642,393: 124,697,433."""
    data = {**TINY, "model_type": "roberta", "architectures": ["RobertaForMaskedLM"], "hidden_size": 768,
            "num_hidden_layers": 12, "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 50265,
            "max_position_embeddings": 514}
    assert count_params(from_hf_config(data)).total == 124_697_433


def test_cli_count_runs(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CASES[0]))
    result = runner.invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
