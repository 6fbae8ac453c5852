"""Popular text types counted exactly as transformers 5.24 builds them: DeepSeek-V3 / V3.2 without
the MTP modules their classes do not build (reported apart, `not_built`), Apertus with xIELU's two
learned scalars per block, GIT's single-bias head. Every expected total
is transformers' own sum(p.numel()) of the class the config names, at the class defaults (meta
device) and on a small config on CPU, tied and untied."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _hf_n17_checks import class_defaults
from _hf_reference import hf_model, hf_mtp_numel, hf_numel
from modelplan.cli import app
from modelplan.count.params import count_params, not_built_params
from modelplan.specs.hf import from_hf_config

SMALL_MLA = {"num_hidden_layers": 3, "first_k_dense_replace": 1, "hidden_size": 64, "intermediate_size": 96,
             "moe_intermediate_size": 32, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 2,
             "topk_group": 1, "num_attention_heads": 4, "num_key_value_heads": 4, "kv_lora_rank": 16,
             "q_lora_rank": 24, "qk_nope_head_dim": 8, "qk_rope_head_dim": 8, "v_head_dim": 8, "vocab_size": 256,
             "index_n_heads": 2, "index_head_dim": 16, "index_topk": 4}
"""A small DeepSeek-V3 / V3.2 (MLA, one dense + two MoE blocks, 2 indexer heads for V3.2)."""

ARCH = {"deepseek_v3": "DeepseekV3ForCausalLM", "deepseek_v32": "DeepseekV32ForCausalLM",
        "apertus": "ApertusForCausalLM"}


def _defaults(model_type: str, tied: bool, **overrides) -> dict:
    if model_type == "deepseek_v32" and "num_hidden_layers" in overrides:  # one entry a block
        layers = overrides["num_hidden_layers"]
        overrides = {**overrides, "mlp_layer_types": ["dense"] + ["sparse"] * (layers - 1),
                     "layer_types": ["indexed_attention"] * layers}
    return {**class_defaults(model_type), "architectures": [ARCH[model_type]], "tie_word_embeddings": tied,
            **overrides}


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("model_type", sorted(ARCH))
def test_class_defaults_equal_transformers(model_type, tied):
    """The class-default config (DeepSeek-V3's 671B, V3.2's, Apertus 8B) counts to transformers'
    own module (meta device): no MTP module, xIELU's scalars in."""
    data = _defaults(model_type, tied)
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
@pytest.mark.parametrize("model_type", sorted(ARCH))
def test_small_configs_equal_transformers_on_cpu(model_type, tied):
    """Shrunk configs, built for real on CPU: total equals sum(p.numel()) of the module."""
    small = SMALL_MLA if model_type != "apertus" else {"num_hidden_layers": 3, "hidden_size": 64,
                                                       "intermediate_size": 96, "num_attention_heads": 4,
                                                       "num_key_value_heads": 2, "vocab_size": 256}
    data = _defaults(model_type, tied, **small)
    assert count_params(from_hf_config(data)).total == sum(p.numel() for p in hf_model(data, "cpu").parameters())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["deepseek_v3", "deepseek_v32"])
def test_declared_mtp_is_reported_apart(model_type):
    """num_nextn_predict_layers 2 changes no total; for DeepSeek-V3 `not_built` equals what
    transformers' MtpModel adds (enorm, hnorm, eh_proj, an MoE block, a post norm per module;
    MtpModel cannot wrap DeepseekV32Config in 5.24: no num_mtp_layers)."""
    data = _defaults(model_type, False, **SMALL_MLA, num_nextn_predict_layers=2)
    spec = from_hf_config(data)
    assert (spec.mtp_layers, spec.mtp_not_built) == (0, 2)
    assert count_params(spec).total == hf_numel(data)
    if model_type == "deepseek_v3":
        assert not_built_params(spec) == {"mtp": hf_mtp_numel(data)}


@pytest.mark.torch
def test_count_json_reports_mtp_apart(tmp_path):
    """`count --json` on DeepSeek-V3's defaults: params.total is the main model, `not_built.mtp`
    holds the declared module's size (11,610,067,968: MtpModel, tests/test_hf.py), the text says so."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(class_defaults("deepseek_v3")))
    runner = CliRunner()
    result = runner.invoke(app, ["count", str(path), "--json"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["params"]["total"] == 671_026_404_352  # DeepseekV3ForCausalLM at its class defaults (meta)
    assert doc["not_built"]["mtp"]["modules"] == 1 and doc["not_built"]["mtp"]["params"] == 11_610_067_968
    assert "mtp" not in doc["params"]["breakdown"]
    text = runner.invoke(app, ["count", str(path)])
    assert text.exit_code == 0 and "not built: 1 MTP module(s), 11.6B" in text.output


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("tied", [False, True])
def test_git_head_has_one_bias(tied):
    """GitForCausalLM's `output` is one biased Linear (no second bias untied): equal to transformers."""
    data = {**class_defaults("git"), "architectures": ["GitForCausalLM"], "tie_word_embeddings": tied}
    spec = from_hf_config(data)
    assert not spec.head_bias_copy and count_params(spec).total == hf_numel(data)


CLASS_CASES = [
    ("bailing_hybrid", "BailingHybridForCausalLM", {"tie_word_embeddings": True}),  # _tied_weights_keys = {}
    ("moshi", "MoshiForCausalLM", {"tie_word_embeddings": True}),  # no _tied_weights_keys
    ("cosmos3_edge", "Cosmos3EdgeForConditionalGeneration", {"tie_word_embeddings": True}),
    ("evolla", "EvollaForProteinText2Text", {"tie_word_embeddings": True}),
    ("molmo2", "Molmo2ForConditionalGeneration", {"tie_word_embeddings": True}),
    ("mllama", "MllamaForCausalLM", {}),  # MllamaTextModel + lm_head: no vision tower
    ("mllama", "MllamaForConditionalGeneration", {}),
    ("bigbird_pegasus", "BigBirdPegasusForSequenceClassification", {}),  # BigBirdPegasusClassificationHead
    ("bigbird_pegasus", "BigBirdPegasusForQuestionAnswering", {}),
]


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "cls", "overrides"), CLASS_CASES, ids=[f"{t}-{c}" for t, c, _ in CLASS_CASES])
def test_head_classes_equal_transformers(model_type, cls, overrides):
    """Class defaults under the class a mapping names: a head class that never ties (whatever
    tie_word_embeddings says), MllamaForCausalLM's text model alone, BigBird-Pegasus' BART-style
    classification head, each equal to transformers' own module (meta device)."""
    data = {**class_defaults(model_type), "architectures": [cls], **overrides}
    if isinstance(data.get("text_config"), dict) and "tie_word_embeddings" in overrides:
        data["text_config"] = {**data["text_config"], "tie_word_embeddings": overrides["tie_word_embeddings"]}
    assert count_params(from_hf_config(data)).total == hf_numel(data)


@pytest.mark.torch
def test_apertus_verify_runs_and_says_it_leaves_the_scalars_out(tmp_path):
    """`verify` still executes Apertus (tp 2, pp 2): xIELU's scalars change no collective or step
    order, so the scaled-down model leaves them out and the output says so."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(_defaults("apertus", False)))
    result = CliRunner().invoke(app, ["verify", str(path), "--tp", "2", "--pp", "2"])
    assert result.exit_code == 0, result.output
    assert "extras.act_params: left out of the scaled-down model" in result.output
