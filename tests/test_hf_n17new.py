"""The 2026 model_types of modelplan/specs/hf_n17new.py and hf_n17new_more.py: glm_moe_dsa,
mistral4, sarvam_mla, hy_v3, cohere2_moe, minimax_m3_vl_text, nanochat, olmo_hybrid. Totals equal
sum(p.numel()) of transformers 5.24's own model built from each small config on CPU (and, by
component, on the meta device); `count` and `plan --gpus 8` run through the CLI; the refused
2026 types fail in one line naming their missing mechanism."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from _hf_n17_checks import assert_count_plan, assert_count_refused, assert_total_on_cpu, class_defaults, ours
from _hf_reference import hf_components
from modelplan.cli import app
from modelplan.count.params import count_params
from modelplan.specs.hf import UNMODELLED, from_hf_config

runner = CliRunner()

_SMALL = {"num_hidden_layers": 4, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
          "vocab_size": 512, "max_position_embeddings": 256, "pad_token_id": 0}
_MLA = {"q_lora_rank": 32, "kv_lora_rank": 16, "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16,
        "moe_intermediate_size": 32, "n_routed_experts": 8, "num_experts_per_tok": 2}

CASES = {
    # GLM-5: dense first block, DSA indexer (4 heads x 32) on every block, no MTP counted
    "glm_moe_dsa": {"model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"], **_SMALL, **_MLA,
                    "first_k_dense_replace": 1, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 8},
    # mlp_layer_types scattered, two shared experts, tied
    "glm_moe_dsa-scattered": {"model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"], **_SMALL, **_MLA,
                              "mlp_layer_types": ["dense", "sparse", "dense", "sparse"], "n_shared_experts": 2,
                              "index_n_heads": 2, "index_head_dim": 16, "tie_word_embeddings": True},
    # Mistral 4: all blocks MoE, softmax router, one shared expert
    "mistral4": {"model_type": "mistral4", "architectures": ["Mistral4ForCausalLM"], **_SMALL, **_MLA},
    # plain q_proj (q_lora_rank null), two dense blocks, attention bias on the down projections
    "mistral4-qproj": {"model_type": "mistral4", "architectures": ["Mistral4ForCausalLM"], **_SMALL, **_MLA,
                       "q_lora_rank": None, "first_k_dense_replace": 2, "n_shared_experts": 0},
    # Sarvam-MLA: default plain q_proj, one dense block
    "sarvam_mla": {"model_type": "sarvam_mla", "architectures": ["DeepseekV3ForCausalLM"], **_SMALL,
                   **{k: v for k, v in _MLA.items() if k != "q_lora_rank"}},
    # Hunyuan 3: block 0 dense, GQA, per-head q/k norms, one shared expert
    "hy_v3": {"model_type": "hy_v3", "architectures": ["HYV3ForCausalLM"], **_SMALL, "num_key_value_heads": 2,
              "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32},
    # explicit mlp_layer_types, two shared experts, attention bias
    "hy_v3-layers": {"model_type": "hy_v3", "architectures": ["HYV3ForCausalLM"], **_SMALL, "num_key_value_heads": 2,
                     "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                     "num_shared_experts": 2, "attention_bias": True,
                     "mlp_layer_types": ["dense", "sparse", "sparse", "dense"]},
    # Cohere2-MoE: LayerNorm, every block MoE, sliding 3 : 1 global, tied
    "cohere2_moe": {"model_type": "cohere2_moe", "architectures": ["Cohere2MoeForCausalLM"], **_SMALL,
                    "num_key_value_heads": 2, "head_dim": 32, "num_experts": 4, "num_experts_per_tok": 2,
                    "sliding_window": 64},
    # RMSNorm, two dense blocks of their own width, shared experts summed, sigmoid selection, untied
    "cohere2_moe-prefix": {"model_type": "cohere2_moe", "architectures": ["Cohere2MoeForCausalLM"], **_SMALL,
                           "num_key_value_heads": 2, "head_dim": 32, "num_experts": 4, "num_experts_per_tok": 2,
                           "rms_norm_eps": 1e-6, "first_k_dense_replace": 2, "prefix_dense_intermediate_size": 192,
                           "num_shared_experts": 1, "shared_expert_combination_strategy": "sum",
                           "expert_selection_fn": "sigmoid", "tie_word_embeddings": False, "sliding_window": 64},
    # MiniMax-M3 text: dense block 0 (moe_layer_freq), shared expert, partial rotary
    "minimax_m3_vl_text": {"model_type": "minimax_m3_vl_text", "architectures": ["MiniMaxM3VLForCausalLM"], **_SMALL,
                           "num_key_value_heads": 2, "head_dim": 32, "rotary_dim": 16, "intermediate_size": 32,
                           "dense_intermediate_size": 192, "shared_intermediate_size": 48, "num_local_experts": 8,
                           "num_experts_per_tok": 2, "moe_layer_freq": [0, 1, 1, 1]},
    # nanochat: weight-free norms, MHA, plain squared-ReLU MLP
    "nanochat": {"model_type": "nanochat", "architectures": ["NanoChatForCausalLM"], **_SMALL},
    # OLMo-Hybrid: default layer types (block 3 attention), derived DeltaNet head dims
    "olmo_hybrid": {"model_type": "olmo_hybrid", "architectures": ["OlmoHybridForCausalLM"], **_SMALL},
    # explicit layer types, GQA, DeltaNet 2 key heads : 4 value heads
    "olmo_hybrid-gqa": {"model_type": "olmo_hybrid", "architectures": ["OlmoHybridForCausalLM"], **_SMALL,
                        "num_key_value_heads": 2, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                        "linear_key_head_dim": 16, "linear_value_head_dim": 24, "linear_conv_kernel_dim": 3,
                        "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"]},
}


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_total_equals_transformers_on_cpu(name):
    """modelplan's total = sum(p.numel()) of the transformers 5.24 model built on CPU (tied
    tensors yielded once)."""
    assert_total_on_cpu(CASES[name])


@pytest.mark.torch
@pytest.mark.parametrize("name", list(CASES))
def test_components_equal_transformers(name):
    """embedding / layers / final_norm / head equal transformers' parameters by name."""
    assert ours(CASES[name]) == hf_components(CASES[name])


@pytest.mark.torch
@pytest.mark.slow
@pytest.mark.parametrize("model_type", ["glm_moe_dsa", "mistral4", "sarvam_mla", "hy_v3", "cohere2_moe",
                                        "minimax_m3_vl_text", "nanochat", "olmo_hybrid"])
def test_class_defaults_equal_transformers(model_type):
    """The config class defaults alone (every size left out) give transformers' own count."""
    data = class_defaults(model_type)
    if model_type == "mistral4":  # AutoModelForCausalLM has no entry for Mistral4Config
        data["architectures"] = ["Mistral4ForCausalLM"]
    assert ours(data) == hf_components(data)


@pytest.mark.parametrize("name", list(CASES))
def test_cli_count_and_plan_run(name, tmp_path):
    """`modelplan count` and `modelplan plan --gpus 8` accept the config.json."""
    assert_count_plan(tmp_path, CASES[name])


def test_hy_v3_moe_block_by_hand():
    """hy_v3 MoE block, h 128, 8 experts of 32, one shared of 32: router 8 x 128; experts 8 x 3 x
    128 x 32; shared 3 x 128 x 32 (the correction bias is a buffer, not counted)."""
    spec = from_hf_config(CASES["hy_v3"])
    moe = spec.moe
    assert (moe.num_experts, moe.expert_ffn_hidden, moe.shared_expert_ffn_hidden, moe.router) == (8, 32, 32, "sigmoid")
    assert moe.router_score_correction and not moe.score_correction_param
    assert [spec.is_moe_layer(i) for i in range(4)] == [False, True, True, True]


@pytest.mark.parametrize(("data", "field"), [
    ({**CASES["glm_moe_dsa"], "indexer_types": ["full", "shared", "full", "shared"]}, "indexer_types"),
    ({**CASES["glm_moe_dsa"], "index_topk_freq": 2}, "index_topk_freq / index_topk_pattern"),
    ({**CASES["mistral4"], "n_group": 2, "topk_group": 1}, "n_group"),
    ({**CASES["cohere2_moe"], "num_shared_experts": 1}, "shared_expert_combination_strategy"),
    ({**CASES["minimax_m3_vl_text"], "layer_types": ["full_attention", "minimax_m3_sparse"] * 2}, "layer_types"),
    ({**CASES["minimax_m3_vl_text"], "swiglu_limit": 10.0}, "swiglu_alpha / swiglu_limit"),
])
def test_unmodelled_options_refused_in_one_line(data, field, tmp_path):
    """An option the spec cannot state exactly: one line naming the field, non-zero exit."""
    assert_count_refused(tmp_path, data, f": {field}:")


@pytest.mark.parametrize("model_type", [  # hy_v4, deepseek_v4, glm5_next, qwen4_exp: test_hf_hyperconn.py;
                                        # mistral_large4, dots3_note_text: test_hf_mla_layers.py; zaya: test_hf_cca.py;
                                        # bailing_hybrid: test_hf_linear_mla.py; inkling*: test_hf_inkling.py;
                                        # mimo_v2_flash, lfm3, laguna: test_hf_n18attn.py
                                        "axk2"])
def test_refused_types_name_the_mechanism(model_type, tmp_path):
    """Each refused 2026 type fails in one line with its missing mechanism (UNMODELLED)."""
    assert_count_refused(tmp_path, {"model_type": model_type}, UNMODELLED[model_type])


@pytest.mark.parametrize(("composite", "text"), [("dots3_note", "dots3_note_text")])
def test_composites_point_to_their_text_model(composite, text, tmp_path):
    """A refused composite whose language model is supported says which model_type counts it."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": composite}))
    result = runner.invoke(app, ["count", str(path)])
    assert result.exit_code != 0 and f"model_type '{text}'" in result.output
