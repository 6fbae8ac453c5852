"""The causal-LM model_types of modelplan/specs/hf_n18causal.py: hyperclovax, kolibri1, flint,
lara_mini, aria_text, emu3, cohere_compass_text, apertus1p5_text. Totals and components equal sum(p.numel()) of
transformers 5.24's own model built from each small config (meta device, tied tensors once) and
from the config class defaults; `count` and `plan --gpus 8` run through the CLI; the refused types
fail in one line naming their missing mechanism."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _hf_n17_checks import assert_count_plan, assert_count_refused, assert_total_on_cpu, class_defaults, ours
from _hf_reference import hf_components, hf_training_flop_counts, transformers_module
from modelplan.cli import app
from modelplan.count.flops import count_flops
from modelplan.count.params import count_params
from modelplan.specs.hf import UNMODELLED, from_hf_config
from modelplan.specs.training import TrainingSpec

runner = CliRunner()

_SMALL = {"num_hidden_layers": 5, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
          "vocab_size": 512, "max_position_embeddings": 256, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
_MOE = {"num_key_value_heads": 2, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
        "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "sliding_window": 16}

_ROPE = {"rope_type": "default", "rope_theta": 10000.0}

CASES = {
    # Granite blocks + post_norm1 / post_norm2 (sandwich), GQA
    "hyperclovax": {"model_type": "hyperclovax", "architectures": ["HyperCLOVAXForCausalLM"], **_SMALL,
                    "num_key_value_heads": 2, "logits_scaling": 0.5, "attention_multiplier": 0.1},
    # no peri-layer norms, head_dim wider than hidden / heads
    "hyperclovax-nopost": {"model_type": "hyperclovax", "architectures": ["HyperCLOVAXForCausalLM"], **_SMALL,
                           "use_post_norm": False, "head_dim": 48},
    # GLM-4 sandwich blocks, every block MoE with an ungated shared expert, 4 sliding : 1 full
    "kolibri1": {"model_type": "kolibri1", "architectures": ["Kolibri1ForCausalLM"], **_SMALL, **_MOE},
    # tied, explicit layer types
    "kolibri1-tied": {"model_type": "kolibri1", "architectures": ["Kolibri1ForCausalLM"], **_SMALL, **_MOE,
                      "tie_word_embeddings": True, "layer_types": ["sliding_attention", "full_attention"] * 2
                      + ["sliding_attention"]},
    # sinks, dense blocks 0 and 1, sigmoid experts + ungated shared expert
    "flint": {"model_type": "flint", "architectures": ["FlintForCausalLM"], **_SMALL, **_MOE},
    # scattered dense blocks and every other block sparse
    "flint-step": {"model_type": "flint", "architectures": ["FlintForCausalLM"], **_SMALL, **_MOE,
                   "mlp_only_layers": [3], "decoder_sparse_step": 2},
    # gated DeltaNet, sliding and full Qwen3 attention, every block MoE, tied
    "lara_mini": {"model_type": "lara_mini", "architectures": ["LaraMiniForCausalLM"], **_SMALL, **_MOE,
                  "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 16,
                  "linear_value_head_dim": 24},
    # Aria text: every block MoE (top-k softmax), two shared experts as one wide MLP
    "aria_text": {"model_type": "aria_text", "architectures": ["AriaTextForCausalLM"], **_SMALL,
                  "num_key_value_heads": 2, "moe_num_experts": 4, "moe_topk": 2, "moe_num_shared_experts": 2},
    # Cohere Compass text: parallel block, tied, all full (its config class needs per-type rope_parameters)
    "cohere_compass_text": {"model_type": "cohere_compass_text", "architectures": ["CohereCompassForCausalLM"],
                            **_SMALL, "rope_parameters": {"full_attention": _ROPE}},
    # GQA, untied, 4 sliding blocks then a NoPE full block
    "cohere_compass_text-nope": {"model_type": "cohere_compass_text", "architectures": ["CohereCompassForCausalLM"],
                                 **_SMALL, "num_key_value_heads": 2, "tie_word_embeddings": False, "sliding_window": 16,
                                 "layer_types": ["sliding_attention"] * 4 + ["full_attention"],
                                 "rope_parameters": {"sliding_attention": _ROPE, "full_attention": None}},
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_components_equal_transformers(name):
    """embedding / layers / final_norm / head equal transformers' parameters by name (meta device)."""
    assert ours(CASES[name]) == hf_components(CASES[name])


@pytest.mark.torch
def test_total_equals_transformers_on_cpu():
    """The total = sum(p.numel()) of the transformers model really built on CPU (kolibri1)."""
    assert_total_on_cpu(CASES["kolibri1"])


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize(("model_type", "arch"), [
    ("hyperclovax", "HyperCLOVAXForCausalLM"), ("kolibri1", "Kolibri1ForCausalLM"), ("flint", "FlintForCausalLM"),
    ("lara_mini", "LaraMiniForCausalLM"), ("aria_text", "AriaTextForCausalLM")])
def test_class_defaults_equal_transformers(model_type, arch):
    """The config class defaults alone (every size left out) give transformers' own count."""
    data = {**class_defaults(model_type), "architectures": [arch]}
    assert ours(data) == hf_components(data)


def _auto_numel(data: dict) -> int:
    """sum(p.numel()) of what AutoModelForCausalLM builds from `data` on the meta device."""
    import torch

    transformers = transformers_module()
    cfg = transformers.AutoConfig.for_model(data["model_type"])
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(cfg)
    return sum(p.numel() for p in model.parameters())


@pytest.mark.torch
@pytest.mark.slow
def test_emu3_language_model_equals_transformers():
    """Emu3's default config.json: AutoModelForCausalLM builds its language model (Emu3ForCausalLM
    on text_config), and the count equals it."""
    data = class_defaults("emu3")
    assert count_params(from_hf_config(data)).total == _auto_numel(data)


@pytest.mark.torch
@pytest.mark.slow
def test_apertus1p5_text_defaults_equal_transformers():
    """Apertus 1.5 text at its class defaults equals transformers' Apertus1p5TextForCausalLM,
    xIELU's two learned scalars (alpha_p, alpha_n) per block included, tied and untied."""
    for tied in (False, True):
        data = {**class_defaults("apertus1p5_text"), "architectures": ["Apertus1p5TextForCausalLM"],
                "tie_word_embeddings": tied}
        assert count_params(from_hf_config(data)).total == sum(hf_components(data).values())


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("name", ["hyperclovax", "kolibri1", "flint", "aria_text", "cohere_compass_text-nope"])
def test_training_flops_equal_flop_counter(name):
    """One fwd + bwd of the HF module (eager attention and experts, batch 2, 12 tokens: under the
    16-token window) counts exactly our model FLOPs (torch.utils.flop_counter.FlopCounterMode).
    lara_mini is left out: HF's chunked gated-delta rule runs intra-chunk matmuls the convention
    does not count (as for qwen3_next)."""
    data = CASES[name]
    ours_flops = count_flops(from_hf_config(data), TrainingSpec(global_batch=2, seq_len=12)).model
    assert ours_flops == sum(hf_training_flop_counts(data, 2, 12).values())


def test_hyperclovax_multiplies_logits_and_defaults_the_attention_scale():
    """logits * logits_scaling (HyperCLOVAXForCausalLM, unlike Granite's division); a null
    attention_multiplier is head_dim ** -0.5 (HyperCLOVAXConfig.__post_init__)."""
    spec = from_hf_config(CASES["hyperclovax"])
    assert (spec.logit_scale, spec.attention_scale, spec.norm_placement) == (0.5, 0.1, "sandwich")
    spec = from_hf_config({**CASES["hyperclovax-nopost"], "attention_multiplier": None})
    assert spec.attention_scale == pytest.approx(48 ** -0.5) and spec.norm_placement != "sandwich"


def test_cohere_compass_nope_full_blocks():
    """A null rope_parameters entry for full_attention: those blocks run without RoPE
    (CohereCompassTextModel passes them no position embeddings)."""
    assert from_hf_config(CASES["cohere_compass_text-nope"]).nope_full_attention
    assert not from_hf_config(CASES["cohere_compass_text"]).nope_full_attention


def test_flint_moe_placement_by_hand():
    """Flint defaults: blocks 0, 1 dense (mlp_only_layers), the rest MoE; sinks on."""
    spec = from_hf_config(CASES["flint"])
    assert [spec.is_moe_layer(i) for i in range(5)] == [False, False, True, True, True]
    assert spec.attention_sinks and spec.moe.router == "sigmoid" and not spec.moe.router_score_correction


@pytest.mark.parametrize("name", ["hyperclovax", "kolibri1", "flint", "lara_mini", "aria_text",
                                  "cohere_compass_text-nope"])
def test_cli_count_and_plan_run(name, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` accept the config.json."""
    assert_count_plan(tmp_path, CASES[name])


@pytest.mark.parametrize(("data", "field"), [
    ({"model_type": "apertus1p5_text", **_SMALL, "output_vocab_size": 256}, "output_vocab_size"),
    ({"model_type": "emu3", "architectures": ["Emu3ForConditionalGeneration"], "text_config": _SMALL}, "architectures"),
    ({**CASES["lara_mini"], "layer_types": ["mamba"] * 5}, "layer_types"),
])
def test_unmodelled_options_refused_in_one_line(data, field, tmp_path):
    """An option the spec cannot state exactly: one line naming the field, non-zero exit."""
    assert_count_refused(tmp_path, data, f": {field}:")


@pytest.mark.parametrize("model_type", ["dory", "hrm_text", "blt"])
def test_refused_types_name_the_mechanism(model_type, tmp_path):
    """Each refused type fails in one line with its missing mechanism (UNMODELLED)."""
    assert_count_refused(tmp_path, {"model_type": model_type}, UNMODELLED[model_type])


@pytest.mark.parametrize("name", ["hyperclovax", "kolibri1", "flint", "lara_mini", "cohere_compass_text-nope"])
def test_cli_verify_passes(name, tmp_path):
    """`modelplan verify`: the sharded numpy step equals the single-device reference and the
    ledger equals the communication list for the mapped block kinds (sinks, sandwich norms,
    gated DeltaNet beside sliding attention, ungated shared experts)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(CASES[name]))
    result = runner.invoke(app, ["verify", str(path)])
    assert result.exit_code == 0, result.output
    assert "all checks passed" in result.output
