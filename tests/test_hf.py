"""HuggingFace config.json -> TransformerSpec (modelplan.specs.hf), checked against published
totals and against the HF modules themselves built on the meta device."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.specs.hf import MAPPERS, from_hf_config

HF = Path(__file__).parent / "data" / "hf"  # config.json files as published on the HF Hub


def config(name: str, **overrides) -> dict:
    """A fixture config with some keys replaced."""
    return {**json.loads((HF / f"{name}.json").read_text()), **overrides}


def count(data: dict) -> int:
    return count_params(from_hf_config(data, "config.json")).total


@pytest.mark.parametrize(
    ("name", "total"),
    [
        ("gpt2", 124_439_808),  # HF safetensors metadata, openai-community/gpt2
        ("llama-2-7b", 6_738_415_616),  # HF safetensors metadata, meta-llama/Llama-2-7b-hf
        ("llama-3-8b", 8_030_261_248),  # HF safetensors metadata, meta-llama/Meta-Llama-3-8B
        ("mistral-7b-v0.1", 7_241_732_096),  # HF safetensors metadata, mistralai/Mistral-7B-v0.1
        ("mixtral-8x7b-v0.1", 46_702_792_704),  # HF safetensors metadata
        ("bert-base-uncased", 109_482_240),  # HF BertModel incl. pooler
        ("bloom-560m", 559_214_592),  # bigscience/bloom-560m model card
        ("pythia-160m", 162_322_944),  # Biderman et al. 2023 (Pythia), Table 1 total params
    ],
)
def test_published_totals(name, total):
    """Configs of released models count to the totals their publishers report."""
    assert count(config(name)) == total


def test_mixtral_active_parameters():
    """Mixtral-8x7B uses 12,879,925,248 parameters per token (model card: 12.9B active)."""
    assert count_params(from_hf_config(config("mixtral-8x7b-v0.1"))).active == 12_879_925_248


def test_falcon_7b_is_multi_query_and_parallel():
    """Falcon-7B (multi_query, parallel_attn): one KV head, one LayerNorm per block."""
    spec = from_hf_config(config("falcon-7b"))
    assert (spec.num_kv_heads, spec.parallel_block, spec.num_norms_per_layer) == (1, True, 1)


def test_opt_position_table_has_two_extra_rows():
    """OPTLearnedPositionalEmbedding allocates max_position_embeddings + 2 rows."""
    assert from_hf_config(config("opt-125m")).max_positions == 2050


def test_unknown_model_type_lists_supported():
    """An unknown model_type is a one-line SpecError that lists the supported ones."""
    with pytest.raises(SpecError, match=r"model_type: unsupported 't5' \(supported: bert, bloom,") as exc:
        from_hf_config({"model_type": "t5"}, "config.json")
    assert "\n" not in str(exc.value)


def test_missing_size_key_is_named():
    """A config without hidden_size names the key and the model_type."""
    data = config("llama-2-7b")
    del data["hidden_size"]
    with pytest.raises(SpecError, match=r"config.json: hidden_size: missing \(needed for model_type 'llama'\)"):
        from_hf_config(data, "config.json")


def test_invalid_values_are_reported_by_field():
    """A negative size reaches the spec validator and comes back naming the field."""
    with pytest.raises(SpecError, match=r"layers: Input should be greater than 0"):
        from_hf_config(config("llama-2-7b", num_hidden_layers=-1), "config.json")


def test_qwen2_moe_rejects_scattered_dense_layers():
    """mlp_only_layers other than a leading run cannot be expressed and say so."""
    with pytest.raises(SpecError, match=r"mlp_only_layers: only a leading run"):
        from_hf_config(config("qwen1.5-moe-a2.7b", mlp_only_layers=[3]), "config.json")


# Released configs plus variants that switch every option the mappers read, each compared with
# sum(p.numel()) of the HF module built from the same dict (small layer counts keep it fast).
VARIANTS = [
    ("gpt2", {}),
    ("gpt2", {"n_inner": 1000, "tie_word_embeddings": False}),
    ("llama-2-7b", {"num_hidden_layers": 2}),
    ("llama-3-8b", {"num_hidden_layers": 2, "attention_bias": True, "mlp_bias": True}),
    ("llama-3-8b", {"num_hidden_layers": 2, "head_dim": 96, "tie_word_embeddings": True}),
    ("mistral-7b-v0.1", {"num_hidden_layers": 2}),
    ("mixtral-8x7b-v0.1", {"num_hidden_layers": 2, "num_local_experts": 4}),
    ("qwen2-0.5b", {}),
    ("qwen1.5-moe-a2.7b", {"num_hidden_layers": 4}),
    ("qwen1.5-moe-a2.7b", {"num_hidden_layers": 4, "decoder_sparse_step": 2}),
    ("qwen1.5-moe-a2.7b", {"num_hidden_layers": 4, "mlp_only_layers": [0, 1]}),
    ("gemma-2b", {"num_hidden_layers": 2}),
    ("pythia-160m", {}),
    ("pythia-160m", {"use_parallel_residual": False, "attention_bias": False, "tie_word_embeddings": True}),
    ("santacoder", {"n_layer": 2}),
    ("santacoder", {"n_layer": 2, "multi_query": False}),
    ("falcon-7b", {"num_hidden_layers": 2}),
    ("falcon-7b", {"num_hidden_layers": 2, "parallel_attn": False, "bias": True, "alibi": True}),
    ("falcon-40b", {"num_hidden_layers": 2}),
    ("falcon-40b", {"num_hidden_layers": 2, "num_ln_in_parallel_attn": 1, "ffn_hidden_size": 1000}),
    ("bloom-560m", {"n_layer": 2}),
    ("opt-125m", {}),
    ("opt-350m", {}),
    ("opt-125m", {"enable_bias": False, "do_layer_norm_before": False}),
    ("phi-2", {"num_hidden_layers": 2}),
    ("phi-2", {"num_hidden_layers": 2, "qk_layernorm": True, "num_key_value_heads": 8}),
    ("bert-base-uncased", {}),
]


@pytest.fixture(scope="module")
def hf_numel():
    """sum(p.numel()) of the HF model class for a config dict, built on the meta device."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    transformers.logging.set_verbosity_error()

    def numel(data: dict) -> int:
        kwargs = {k: v for k, v in data.items() if k not in ("architectures", "_name_or_path")}
        cfg = transformers.AutoConfig.for_model(**kwargs)
        auto = transformers.AutoModel if data["model_type"] == "bert" else transformers.AutoModelForCausalLM
        with torch.device("meta"):
            model = auto.from_config(cfg)
        return sum(p.numel() for p in model.parameters())  # tied tensors are yielded once

    return numel


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("name", "overrides"), VARIANTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(VARIANTS)])
def test_counts_equal_pytorch_modules(hf_numel, name, overrides):
    """Our count equals the parameter elements of the HF module (AutoModelForCausalLM/AutoModel)."""
    data = config(name, **overrides)
    assert count(data) == hf_numel(data)


def test_every_mapper_has_a_fixture_or_variant():
    """Each supported model_type is exercised against PyTorch above."""
    tested = {config(name)["model_type"] for name, _ in VARIANTS}
    assert tested == set(MAPPERS)
