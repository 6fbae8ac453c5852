"""HuggingFace config.json model_types added in issue 14 round 2 (hf_dense.py, hf_layernorm.py,
hf_moe_extra.py):
each published fixture and variant counts exactly to transformers' own module built on the meta
device (total and per component: embedding, blocks, final norm, head), rounds to its publisher's
total, and runs through `modelplan count` / `modelplan plan`; types the spec cannot express are
refused in one line naming the missing feature."""

from __future__ import annotations

import json

import pytest

from _hf_new_cases import NEW_FIXTURES, NEW_VARIANTS, small, variant
from _hf_reference import config, hf_components, hf_model, hf_numel
from modelplan.count.params import count_params
from modelplan.errors import SpecError
from modelplan.specs.hf import UNMODELLED, from_hf_config


def counts(data: dict):
    return count_params(from_hf_config(data, "config.json"))


def components(data: dict) -> dict[str, int]:
    b = counts(data).breakdown
    return {key: b.get(key, 0) for key in ("embedding", "layers", "final_norm", "head")}


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_new_fixtures_equal_transformers_by_component(name):
    """Published configs: modelplan's embedding / layers / final_norm / head equal the parameters
    of transformers' module under those names (transformers 5.24, meta device)."""
    data = config(name)
    assert components(data) == hf_components(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("name", "overrides"), NEW_VARIANTS,
                         ids=[f"{n or o['model_type']}-{i}" for i, (n, o) in enumerate(NEW_VARIANTS)])
def test_new_variants_equal_transformers(name, overrides):
    """Variants switching each option the new mappers read (biases, tying, window patterns,
    dense/MoE placement, shared experts, head_dim) count exactly, total and per component."""
    data = variant(name, overrides)
    assert components(data) == hf_components(data)


@pytest.mark.parametrize(
    ("name", "billions", "digits"),
    [
        ("glm-4.5-air", 106, 0),  # zai-org GLM-4.5 README: GLM-4.5-Air 106B total
        ("exaone-4.0-32b", 32.0, 1),  # LG AI EXAONE 4.0 model card: 32.0B
        ("smollm3-3b", 3.1, 1),  # HuggingFaceTB SmolLM3-3B (hub safetensors: 3.08B)
        ("stablelm-2-1_6b", 1.6, 1),  # Stability AI StableLM 2 1.6B model card
        ("gpt-j-6b", 6.05, 2),  # EleutherAI GPT-J-6B model card: 6,053,381,344 (6.05B)
        ("gpt-neo-1.3b", 1.3, 1),  # EleutherAI GPT-Neo 1.3B
        ("mpt-7b", 6.7, 1),  # MosaicML MPT-7B model card: 6.7B
        ("glm-4-9b-chat-hf", 9.4, 1),  # THUDM glm-4-9b-chat-hf (hub safetensors: 9.40B)
        ("c4ai-command-r7b-12-2024", 8.0, 1),  # Cohere Command R7B model card: 7B class, hub 8.03B
        ("dbrx-base", 132, 0),  # Databricks DBRX model card: 132B total
        ("ernie-4.5-21b-a3b-pt", 21.8, 1),  # Baidu ERNIE 4.5 technical report: 21B total (hub 21.8B)
        ("ernie-4.5-0.3b-pt", 0.36, 2),  # Baidu ERNIE-4.5-0.3B model card: 0.36B
        ("dots.llm1.base", 143, 0),  # rednote dots.llm1 report: 142B total (hub 143B)
        ("seed-oss-36b-base", 36, 0),  # ByteDance Seed-OSS-36B model card: 36B
        ("minimax-m2", 230, -1),  # MiniMax-M2 model card: 230B total
    ],
)
def test_new_published_totals_rounded(name, billions, digits):
    """The fixtures match the totals their publishers state (independent of transformers) to the
    stated precision; cards truncate as often as they round (GLM-4.5-Air: 106.85B is '106B'), so
    within one unit of the last digit."""
    assert abs(counts(config(name)).total / 1e9 - billions) < 10 ** -digits


@pytest.mark.parametrize(
    ("name", "billions", "digits"),
    [
        ("dbrx-base", 36, 0),  # DBRX: 36B active
        ("ernie-4.5-21b-a3b-pt", 3, 0),  # ERNIE-4.5-21B-A3B: 3B activated
        ("dots.llm1.base", 14, 0),  # dots.llm1: 14B activated
        ("glm-4.5-air", 13, 0),  # GLM-4.5-Air: 12B active without embeddings, +1.24B of them
        ("minimax-m2", 11, 0),  # MiniMax-M2: 10B active without embeddings, +1.23B of them
    ],
)
def test_new_active_parameters(name, billions, digits):
    """Active parameters of the new MoE fixtures match the published activated sizes (within one
    unit of the last digit, as above)."""
    assert abs(counts(config(name)).active / 1e9 - billions) < 10 ** -digits


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
def test_apertus_equals_transformers_with_xielu_scalars(tied):
    """Apertus equals transformers' ApertusForCausalLM, xIELU's two learned scalars per block
    (XIELUActivation alpha_p, alpha_n: the `mlp/act` leaf, 2 a block) included."""
    data = small("apertus", num_hidden_layers=3, head_dim=64, tie_word_embeddings=tied)
    c = counts(data)
    assert c.total == hf_numel(data) and c.breakdown["layers/mlp/act"] == 2 * 3


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("top", "text", "cls"), [
    ("qwen2_vl", "qwen2_vl_text", "Qwen2VLForConditionalGeneration"),
    ("qwen2_5_vl", "qwen2_5_vl_text", "Qwen2_5_VLForConditionalGeneration"),
    ("qwen3_vl", "qwen3_vl_text", "Qwen3VLForConditionalGeneration"),
])
def test_vl_text_config_counts_the_language_model(top, text, cls):
    """A Qwen-VL text_config saved with its text model_type counts exactly the language model
    (embedding, blocks, norm, head) of transformers' composite, vision tower left out."""
    text_config = {**small(text, head_dim=64), "tie_word_embeddings": False}
    composite = {"model_type": top, "architectures": [cls], "tie_word_embeddings": False,
                 "text_config": {k: v for k, v in text_config.items() if k != "model_type"},
                 "vision_config": {"depth": 1, "hidden_size": 64, "embed_dim": 64, "num_heads": 4,
                                   "intermediate_size": 128, "out_hidden_size": 256}}
    assert components(text_config) == hf_components(composite, skip="visual")


@pytest.mark.parametrize("model_type", sorted(UNMODELLED))
def test_unmodelled_types_are_refused_naming_the_feature(model_type):
    """A model_type transformers ships but the spec cannot express is one line naming it and
    the missing feature (not 'unsupported' with a list)."""
    with pytest.raises(SpecError) as exc:
        from_hf_config({"model_type": model_type, "num_hidden_layers": 2}, "config.json")
    message = str(exc.value)
    assert message.startswith(f"config.json: model_type: '{model_type}': ") and "not modelled" in message
    assert UNMODELLED[model_type] in message and "\n" not in message


def test_vl_composites_are_no_longer_refused():
    """Qwen2.5-VL reads whole now (tests/test_hf_vision.py); its text model still counts alone above."""
    assert "qwen2_5_vl" not in UNMODELLED and from_hf_config(config("qwen2.5-vl-3b-instruct")).vision is not None


@pytest.mark.parametrize(("name", "key", "value", "message"), [
    ("stablelm-2-1_6b", "qk_layernorm", True, "qk_layernorm: true is not supported"),
    ("mpt-7b", "no_bias", False, "no_bias: false is not supported"),
    ("mpt-7b", "attn_config", {"alibi": False}, "attn_config.alibi: false is not supported"),
    ("dbrx-base", "ffn_config", {"ffn_act_fn": {"name": "gelu"}}, "ffn_config.ffn_act_fn.name: only silu"),
    ("dbrx-base", "attn_config", {"kv_n_heads": "8"}, "attn_config.kv_n_heads: expected an integer"),
    ("gpt-neo-1.3b", "attention_types", [[["global", "local"], 5]], "attention_types: 10 blocks"),
    ("gpt-neo-1.3b", "attention_types", 7, "attention_types: expected"),
    ("exaone-4.0-32b", "sliding_window_pattern", "LLX", "sliding_window_pattern: expected an integer or a string"),
    ("ernie-4.5-21b-a3b-pt", "moe_layer_interval", 0, "moe_layer_interval: must be >= 1"),
    ("c4ai-command-r7b-12-2024", "use_qk_norm", True, "use_qk_norm: true is not supported"),
    ("glm-4.5-air", "n_routed_experts", 1.5, "n_routed_experts: expected an integer"),
])
def test_new_bad_values_are_one_line_errors(name, key, value, message):
    """Unsupported or mistyped fields of the new types: one line naming the field."""
    with pytest.raises(SpecError) as exc:
        from_hf_config(config(name, **{key: value}), "config.json")
    assert f"config.json: {message}" in str(exc.value) and "\n" not in str(exc.value)


def test_hunyuan_per_block_lists_must_agree():
    data = small("hunyuan_v1_moe", head_dim=64, num_experts=[4, 8], moe_topk=2)
    with pytest.raises(SpecError, match=r"num_experts: per-block values \[4, 8\] differ"):
        from_hf_config(data, "config.json")
    assert counts(small("hunyuan_v1_moe", head_dim=64, num_experts=[4, 4], moe_topk=[2, 2])).total == \
        counts(small("hunyuan_v1_moe", head_dim=64, num_experts=4, moe_topk=2)).total


@pytest.mark.parametrize(("key", "value"), [
    ("rope_scaling", {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                      "original_max_position_embeddings": 8192}),
    ("rope_scaling", {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}),
    ("rope_scaling", {"rope_type": "longrope", "short_factor": [1.0], "long_factor": [2.0]}),
    ("rope_scaling", {"type": "dynamic", "factor": 2.0}),
    ("rope_parameters", {"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0}),
    ("dtype", "bfloat16"),
    ("torch_dtype", "float32"),
])
def test_config_variants_do_not_change_the_count(key, value):
    """rope_scaling / rope_parameters variants and dtype vs torch_dtype change no count."""
    base = config("seed-oss-36b-base")
    assert counts({**base, key: value}).total == counts(base).total


def test_rope_parameters_theta_is_read():
    spec = from_hf_config(config("smollm3-3b", rope_parameters={"rope_type": "default", "rope_theta": 2e6}))
    assert spec.rope_theta == 2e6


def _cli(*args: str):
    from typer.testing import CliRunner

    from modelplan.cli.app import app

    return CliRunner().invoke(app, list(args))


@pytest.mark.slow
@pytest.mark.parametrize("name", NEW_FIXTURES)
def test_cli_count_runs_on_new_fixtures(name, tmp_path):
    """`modelplan count config.json --json` (params, FLOPs, memory) runs on every new fixture."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config(name)))
    result = _cli("count", str(path), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["params"]["total"] == counts(config(name)).total


@pytest.mark.slow
@pytest.mark.parametrize("name", ["smollm3-3b", "glm-4-9b-chat-hf", "ernie-4.5-21b-a3b-pt", "gpt-neo-1.3b",
                                  "c4ai-command-r7b-12-2024", "mpt-7b"])
def test_cli_plan_runs_on_new_fixtures(name, tmp_path):
    """`modelplan plan config.json --gpus 8` finds a plan for the new types that fit on 8 GPUs."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config(name)))
    result = _cli("plan", str(path), "--gpus", "8")
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output


@pytest.mark.slow
def test_cli_plan_too_big_is_one_line(tmp_path):
    """DBRX (132B) on 8 GPUs: a one-line 'needs at least N GPUs' error, exit 2, no traceback."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config("dbrx-base")))
    result = _cli("plan", str(path), "--gpus", "8")
    assert result.exit_code == 2 and "needs at least" in result.output and "Traceback" not in result.output


def test_every_new_type_is_exercised():
    """Each model_type the new mapper modules add has a fixture or a variant above."""
    from modelplan.specs.hf_dense import DENSE_MAPPERS
    from modelplan.specs.hf_layernorm import LAYERNORM_MAPPERS
    from modelplan.specs.hf_moe_extra import MOE_EXTRA_MAPPERS

    tested = {config(n)["model_type"] for n in NEW_FIXTURES}
    tested |= {variant(n, o)["model_type"] for n, o in NEW_VARIANTS}
    tested |= {"apertus", "qwen2_vl_text", "qwen2_5_vl_text", "qwen3_vl_text"}
    assert tested == set(DENSE_MAPPERS) | set(LAYERNORM_MAPPERS) | set(MOE_EXTRA_MAPPERS) | {"falcon_mamba"}  # hf_other


def test_hf_model_builds_on_meta():
    """The reference really is transformers' module (guards against a silently empty model)."""
    pytest.importorskip("transformers")
    assert sum(p.numel() for p in hf_model(config("ernie-4.5-0.3b-pt")).parameters()) > 3e8
