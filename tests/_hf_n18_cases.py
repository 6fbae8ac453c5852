"""Small config.json cases of tests/test_hf_n18attn.py, one or more per model_type of
modelplan/specs/hf_n18attn.py and hf_gemma4.py (each also built by transformers in that file)."""

from __future__ import annotations

SMALL = {"num_hidden_layers": 4, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
          "vocab_size": 512, "max_position_embeddings": 256, "pad_token_id": 0}

CASES = {
    # LFM3 defaults at 8 blocks: conv, conv, full, conv, sliding, conv, full, conv; sandwich norms, gate, tied
    "lfm3": {"model_type": "lfm3", "architectures": ["Lfm3ForCausalLM"], **SMALL, "num_hidden_layers": 8,
             "num_key_value_heads": 2, "head_dim": 32, "sliding_window": 64, "bos_token_id": 1, "eos_token_id": 2},
    # no sandwich norms, no gate, conv biases, untied
    "lfm3-plain": {"model_type": "lfm3", "architectures": ["Lfm3ForCausalLM"], **SMALL, "num_key_value_heads": 2,
                   "head_dim": 32, "use_sandwich_norm": False, "use_attention_gate": False, "conv_bias": True,
                   "tie_word_embeddings": False, "layer_types": ["conv", "full_attention", "conv", "full_attention"],
                   "bos_token_id": 1, "eos_token_id": 2},
    # Laguna: per-head softplus gate, dense block 0, shared expert, correction bias as a parameter
    "laguna": {"model_type": "laguna", "architectures": ["LagunaForCausalLM"], **SMALL, "num_key_value_heads": 2,
               "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
               "shared_expert_intermediate_size": 48},
    # per-element gate, sliding blocks, scattered dense blocks, one head count listed per block
    "laguna-element": {"model_type": "laguna", "architectures": ["LagunaForCausalLM"], **SMALL,
                       "num_key_value_heads": 2, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
                       "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "gating": "per-element",
                       "sliding_window": 64, "num_attention_heads_per_layer": [4, 4, 4, 4],
                       "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                       "mlp_layer_types": ["dense", "sparse", "dense", "sparse"], "attention_bias": True},
    # Laguna XS.2's layout: sliding blocks with more query heads than the global ones, 3 : 1
    "laguna-swa-heads": {"model_type": "laguna", "architectures": ["LagunaForCausalLM"], **SMALL,
                         "num_key_value_heads": 2, "head_dim": 32, "num_experts": 8, "num_experts_per_tok": 2,
                         "moe_intermediate_size": 32, "shared_expert_intermediate_size": 48, "sliding_window": 64,
                         "num_attention_heads_per_layer": [8, 8, 8, 4],
                         "layer_types": ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]},
    # DiffLlama: GQA with 2 kv heads, lambda vectors
    "diffllama": {"model_type": "diffllama", "architectures": ["DiffLlamaForCausalLM"], **SMALL,
                  "num_key_value_heads": 2},
    # MiMo-V2-Flash: default pattern at 7 blocks (full at 0 and 5), q/k 48 wide, v 32, dense block 0
    "mimo_v2_flash": {"model_type": "mimo_v2_flash", "architectures": ["MiMoV2FlashForCausalLM"], **SMALL,
                      "num_hidden_layers": 7, "num_key_value_heads": 1, "head_dim": 48, "v_head_dim": 32,
                      "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                      "sliding_window": 32},
    # grouped routing, attention bias on q/k/v, explicit layer and MLP types
    "mimo_v2_flash-groups": {"model_type": "mimo_v2_flash", "architectures": ["MiMoV2FlashForCausalLM"], **SMALL,
                             "num_key_value_heads": 2, "head_dim": 48, "v_head_dim": 32, "n_routed_experts": 8,
                             "num_experts_per_tok": 2, "moe_intermediate_size": 32, "n_group": 2, "topk_group": 1,
                             "attention_bias": True, "sliding_window": 32,
                             "layer_types": ["sliding_attention", "sliding_attention", "full_attention",
                                             "sliding_attention"],
                             "mlp_layer_types": ["dense", "sparse", "sparse", "dense"]},
    # JetMoE: 4 attention experts of 2 kv heads x 16, top 2 (4 query heads), 4 MLP experts of 64
    "jetmoe": {"model_type": "jetmoe", "architectures": ["JetMoeForCausalLM"], **SMALL, "num_key_value_heads": 2,
               "kv_channels": 16, "num_local_experts": 4, "num_experts_per_tok": 2, "intermediate_size": 64},
    # untied, top 1
    "jetmoe-top1": {"model_type": "jetmoe", "architectures": ["JetMoeForCausalLM"], **SMALL, "num_key_value_heads": 4,
                    "kv_channels": 32, "num_local_experts": 3, "num_experts_per_tok": 1, "intermediate_size": 64,
                    "tie_word_embeddings": False},
    # Doge: GQA 2 kv heads, dynamic mask (A, dt_proj), residual weights, untied
    "doge": {"model_type": "doge", "architectures": ["DogeForCausalLM"], **SMALL, "num_key_value_heads": 2},
    # attention bias (dt_proj's too), sliding window, tied
    "doge-bias": {"model_type": "doge", "architectures": ["DogeForCausalLM"], **SMALL, "attention_bias": True,
                  "sliding_window": 64, "tie_word_embeddings": True},
    # Doge's cross-domain MoE: the SwiGLU plus 36 product-key experts (6 x 6 keys), top 4
    "doge-moe": {"model_type": "doge", "architectures": ["DogeForCausalLM"], **SMALL, "num_key_value_heads": 2,
                 "is_moe": True, "num_experts": 36, "num_experts_per_tok": 4},
    # Gemma 4 text at 6 blocks (5 sliding, 1 global of head_dim 64), per-layer inputs 16 wide over 64 rows
    "gemma4_text": {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], **SMALL, "num_hidden_layers": 6,
                    "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64, "sliding_window": 32,
                    "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 64},
    # attention_k_eq_v: global blocks 1 kv head, no v_proj; the last 3 blocks reuse K/V; untied
    "gemma4_text-kv": {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], **SMALL,
                       "num_hidden_layers": 8, "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64,
                       "attention_k_eq_v": True, "num_global_key_value_heads": 1, "num_kv_shared_layers": 3,
                       "layer_types": ["sliding_attention", "full_attention"] * 4, "sliding_window": 32,
                       "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 64,
                       "tie_word_embeddings": False},
    # use_double_wide_mlp: the 3 K/V-sharing blocks' MLPs 2 x 256 wide
    "gemma4_text-wide": {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], **SMALL,
                         "num_hidden_layers": 8, "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64,
                         "num_kv_shared_layers": 3, "use_double_wide_mlp": True, "sliding_window": 32,
                         "layer_types": ["sliding_attention", "full_attention"] * 4,
                         "hidden_size_per_layer_input": 16, "vocab_size_per_layer_input": 64},
    # Gemma 4's MoE blocks (26B-A4B style): 8 experts of 32 beside each block's MLP, top 2
    "gemma4_text-moe": {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], **SMALL,
                        "num_hidden_layers": 6, "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64,
                        "sliding_window": 32, "hidden_size_per_layer_input": 0, "enable_moe_block": True,
                        "num_experts": 8, "top_k_experts": 2, "moe_intermediate_size": 32,
                        "attention_k_eq_v": True, "num_global_key_value_heads": 1},
    # the serialised form: per_layer_config overrides, no per-layer inputs
    "gemma4_text-per-layer": {"model_type": "gemma4_text", "architectures": ["Gemma4ForCausalLM"], **SMALL,
                              "num_key_value_heads": 2, "head_dim": 32, "sliding_window": 32,
                              "hidden_size_per_layer_input": 0,
                              "layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
                              "per_layer_config": {"1": {"head_dim": 48}, "3": {"head_dim": 48}}},
    # Gemma 4 unified text: no per-layer inputs
    "gemma4_unified_text": {"model_type": "gemma4_unified_text", "architectures": ["Gemma4UnifiedForCausalLM"], **SMALL,
                            "num_hidden_layers": 6, "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64,
                            "sliding_window": 32},
}
