"""The shipped model presets (presets/models/*.toml) pinned to published sizes."""

from __future__ import annotations

import pytest

from modelplan.count.params import count_params
from modelplan.presets import load_preset, preset_names
from modelplan.specs.load import load_model

# Flags that change a count; every preset states them instead of relying on defaults.
COUNT_FLAGS = ("position", "norm", "norm_bias", "qkv_bias", "attn_out_bias", "mlp_bias",
               "gated_mlp", "final_norm")

PUBLISHED = {
    "gpt2": 124_439_808,  # HF safetensors metadata, openai-community/gpt2
    "gpt2-medium": 354_823_168,  # HF safetensors metadata, openai-community/gpt2-medium
    "gpt2-large": 774_030_080,  # HF safetensors metadata, openai-community/gpt2-large
    "gpt2-xl": 1_557_611_200,  # HF safetensors metadata, openai-community/gpt2-xl
    "llama-2-7b": 6_738_415_616,  # HF safetensors metadata
    "llama-2-13b": 13_015_864_320,  # HF safetensors metadata, meta-llama/Llama-2-13b-hf
    "llama-2-70b": 68_976_648_192,  # HF safetensors metadata, meta-llama/Llama-2-70b-hf
    "llama-3-8b": 8_030_261_248,  # HF safetensors metadata
    "llama-3-70b": 70_553_706_496,  # HF safetensors metadata, meta-llama/Meta-Llama-3-70B
    "mistral-7b": 7_241_732_096,  # HF safetensors metadata
    "mixtral-8x7b": 46_702_792_704,  # HF safetensors metadata
    "bert-base": 109_482_240,  # HF BertModel (with pooler)
}

# HF configs with the published hyper-parameters, for the PyTorch cross-check.
HF_EQUIVALENT = {
    "gpt2-xl": {"model_type": "gpt2", "n_layer": 48, "n_embd": 1600, "n_head": 25, "vocab_size": 50257},
    "llama-3-405b": {"model_type": "llama", "num_hidden_layers": 126, "hidden_size": 16384,
                     "num_attention_heads": 128, "num_key_value_heads": 8,
                     "intermediate_size": 53248, "vocab_size": 128256},
    "llama-2-70b": {"model_type": "llama", "num_hidden_layers": 80, "hidden_size": 8192,
                    "num_attention_heads": 64, "num_key_value_heads": 8,
                    "intermediate_size": 28672, "vocab_size": 32000},
    "bert-large": {"model_type": "bert", "num_hidden_layers": 24, "hidden_size": 1024,
                   "num_attention_heads": 16, "intermediate_size": 4096, "vocab_size": 30522},
}


@pytest.mark.parametrize(("name", "total"), sorted(PUBLISHED.items()))
def test_preset_matches_published_total(name, total):
    """Each preset counts to its model's published total."""
    assert count_params(load_model(name)).total == total


def test_gpt3_is_175b():
    """Brown et al. 2020, Table 2.1: GPT-3 175B has 175.0B parameters (rounded): within 0.5%."""
    assert abs(count_params(load_model("gpt3-175b")).total / 175.0e9 - 1) < 0.005


def test_llama_3_405b_is_405b():
    """Llama 3 paper (Dubey et al. 2024): 405B parameters (rounded): within 0.5%."""
    assert abs(count_params(load_model("llama-3-405b")).total / 405e9 - 1) < 0.005


TRANSFORMER_PRESETS = [
    name for name in preset_names("models")
    if load_preset("models", name).get("kind", "transformer") == "transformer"
]


@pytest.mark.parametrize("name", TRANSFORMER_PRESETS)
def test_preset_cites_source_and_states_count_flags(name):
    """Every transformer preset has a source and states each count-changing flag explicitly."""
    table = load_preset("models", name)
    assert table.get("source")
    missing = [flag for flag in COUNT_FLAGS if flag not in table]
    assert not missing, f"{name} leaves {missing} to defaults"
    if table.get("position") == "learned":
        assert "max_positions" in table
    if table.get("arch") == "encoder":
        assert {"type_vocab", "pooler", "lm_head", "embedding_norm"} <= set(table)
    else:
        assert "tied_embeddings" in table


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(HF_EQUIVALENT))
def test_preset_equals_pytorch_module(name):
    """The preset equals sum(p.numel()) of the HF module with the same hyper-parameters (meta)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    data = HF_EQUIVALENT[name]
    cfg = transformers.AutoConfig.for_model(**data)
    auto = transformers.AutoModel if data["model_type"] == "bert" else transformers.AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(cfg)
    assert count_params(load_model(name)).total == sum(p.numel() for p in model.parameters())
