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


# Flagship presets of the families read from HF configs, each citing the config.json it states
# (shipped under tests/data/hf/), with the total transformers 5.24 builds for that config on the
# meta device (checked live in test_hf.py::test_published_configs_equal_transformers_modules).
FLAGSHIPS = {
    "qwen3-8b": ("qwen3-8b", 8_190_735_360),
    "qwen3-32b": ("qwen3-32b", 32_762_123_264),
    "qwen3-235b-a22b": ("qwen3-235b-a22b", 235_093_634_560),
    "gemma-3-27b": ("gemma-3-27b-it", 27_432_406_640),
    "gemma-2-27b": ("gemma-2-27b", 27_227_128_320),
    "deepseek-v3": ("deepseek-v3", 671_026_404_352 + 11_610_067_968),  # main model + 1 MTP module
    "deepseek-v2-lite": ("deepseek-v2-lite", 15_706_484_224),
    "gpt-oss-120b": ("gpt-oss-120b", 116_829_156_672),
    "gpt-oss-20b": ("gpt-oss-20b", 20_914_757_184),
    "olmo-2-32b": ("olmo-2-0325-32b", 32_234_279_936),
    "olmoe-1b-7b": ("olmoe-1b-7b-0924", 6_919_161_856),
    "phi-4": ("phi-4", 14_659_507_200),
    "phi-3.5-moe": ("phi-3.5-moe-instruct", 41_873_153_344),
    "starcoder2-15b": ("starcoder2-15b", 15_957_889_024),
    "granite-3.1-8b": ("granite-3.1-8b-base", 8_170_848_256),
    "command-r-plus": ("c4ai-command-r-plus", 103_810_674_688),
    "llama-4-maverick-text": ("llama-4-maverick-17b-128e-text", 400_711_848_960),
    "glm-4-32b": ("glm-4-32b-0414", 32_566_487_552),
    "flan-t5-xl": ("flan-t5-xl", 2_783_959_040),
    "mamba-2.8b": ("mamba-2.8b-hf", 2_768_345_600),
    "jamba-v0.1": ("jamba-v0.1", 51_570_323_328),
}


@pytest.mark.parametrize("name", sorted(FLAGSHIPS))
def test_flagship_preset_states_its_hf_config(name):
    """The preset is field for field the model its cited config.json reads as (name, source aside),
    and counts to the total transformers builds for that config."""
    from _hf_reference import config
    from modelplan.specs.hf import from_hf_config

    fixture, total = FLAGSHIPS[name]
    preset = load_model(name).model_dump(exclude={"name", "source"})
    hf = from_hf_config(config(fixture))
    hf = hf.model_copy(update={"mtp_layers": hf.mtp_not_built, "mtp_not_built": 0})  # presets train declared MTP modules
    assert preset == hf.model_dump(exclude={"name", "source"})
    assert count_params(load_model(name)).total == total
