"""Cases of the model_types added by issue 16 (modelplan/specs/hf_lfm2.py, ...): the published
fixtures and small variants switching each option the mappers read. Shared by tests/test_hf_more.py."""

from __future__ import annotations

# Published config.json fixtures (tests/data/hf/<name>.json; sources in its README).
MORE_FIXTURES = ["lfm2-1.2b", "lfm2-8b-a1b", "trinity-mini", "trinity-nano-preview", "recurrentgemma-2b",
                 "minimax-text-01-hf"]
DSA_FIXTURES = ["deepseek-v3.2"]  # compared as the main model (transformers builds no MTP layer)

_AF = {"model_type": "afmoe", "num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 512,
       "moe_intermediate_size": 64, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
       "vocab_size": 1000, "num_experts": 8, "num_experts_per_tok": 2}

_DSA = {"model_type": "deepseek_v32", "architectures": ["DeepseekV32ForCausalLM"], "num_hidden_layers": 3,
        "hidden_size": 256, "intermediate_size": 512, "moe_intermediate_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 4, "vocab_size": 1000, "q_lora_rank": 64, "kv_lora_rank": 32, "qk_nope_head_dim": 16,
        "qk_rope_head_dim": 8, "v_head_dim": 16, "n_routed_experts": 8, "num_experts_per_tok": 2, "n_group": 2,
        "topk_group": 1, "first_k_dense_replace": 1, "index_n_heads": 4, "index_head_dim": 32, "index_topk": 16,
        "num_nextn_predict_layers": 0}

_RG = {"model_type": "recurrent_gemma", "architectures": ["RecurrentGemmaForCausalLM"], "num_hidden_layers": 5,
       "hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4, "vocab_size": 1000,
       "attention_window_size": 64}

_MM = {"model_type": "minimax", "architectures": ["MiniMaxForCausalLM"], "num_hidden_layers": 4, "hidden_size": 256,
       "intermediate_size": 128, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 1000,
       "num_local_experts": 4, "num_experts_per_tok": 2}

_LFM = {"num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 768, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 512}

MORE_VARIANTS = [
    # LFM2: full_attn_idxs only (layer_types derived), default ffn 2/3 adjust and multiple_of rounding
    {"model_type": "lfm2", **_LFM, "full_attn_idxs": [1, 3], "block_ffn_dim_multiplier": 1.5, "block_multiple_of": 64},
    # explicit layer_types, conv biases, kernel 4, no ffn adjust, untied head via tie_embedding
    {"model_type": "lfm2", **_LFM, "layer_types": ["conv", "conv", "full_attention", "conv"], "conv_bias": True,
     "conv_L_cache": 4, "block_auto_adjust_ff_dim": False, "tie_embedding": False},
    # block_ff_dim overrides intermediate_size (2/3 of 1000 rounded up to 768); every block attention
    {"model_type": "lfm2", **_LFM, "block_ff_dim": 1000},
    # LFM2-MoE: 1 dense block, no expert bias, conv biases, head_dim given
    {"model_type": "lfm2_moe", **_LFM, "layer_types": ["conv", "full_attention", "conv", "conv"],
     "moe_intermediate_size": 64, "num_experts": 8, "num_experts_per_tok": 2, "num_dense_layers": 1,
     "use_expert_bias": False, "conv_bias": True, "head_dim": 32, "tie_word_embeddings": False},
    # every block MoE (num_dense_layers 0)
    {"model_type": "lfm2_moe", **_LFM, "layer_types": ["conv", "full_attention"] * 2, "moe_intermediate_size": 64,
     "num_experts": 4, "num_experts_per_tok": 2, "num_dense_layers": 0},
    # AFMoE: global every 2nd block (derived), 2 shared experts, no dense block, tied, muP off
    {**_AF, "global_attn_every_n_layers": 2, "num_shared_experts": 2, "num_dense_layers": 0, "sliding_window": 64,
     "tie_word_embeddings": True},
    # no shared expert, kv heads default to heads, explicit layer_types all global, 3 dense blocks
    {**{k: v for k, v in _AF.items() if k != "num_key_value_heads"}, "num_shared_experts": 0, "num_dense_layers": 3,
     "layer_types": ["full_attention"] * 4, "mup_enabled": True, "route_scale": 2.0},
    # DeepSeek-V3.2: dense first block, grouped sigmoid routing, the indexer (4 heads x 32, top 16)
    {**_DSA},
    # mlp_layer_types (scattered MoE blocks), 2 shared experts, attention bias, tied
    {**_DSA, "mlp_layer_types": ["sparse", "dense", "sparse"], "n_shared_experts": 2, "attention_bias": True,
     "tie_word_embeddings": True, "index_n_heads": 2, "index_head_dim": 16},
    # RecurrentGemma: default block_types over 5 blocks (the cycle cut), MHA, lru_width = hidden
    {**_RG},
    # lru_width 512, conv 3, MQA with q/k/v biases, attention first, untied, partial rotary 0.25
    {**_RG, "lru_width": 512, "conv1d_width": 3, "num_key_value_heads": 1, "attention_bias": True,
     "block_types": ["attention", "recurrent"], "tie_word_embeddings": False, "partial_rotary_factor": 0.25},
    # MiniMax-01: the default alternating pattern, head_dim = hidden / heads; then head_dim 32, block 64,
    # a sliding window on the softmax blocks and an explicit pattern
    {**_MM},
    {**_MM, "head_dim": 32, "block_size": 64, "sliding_window": 128,
     "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"]},
]

# RWKV-4 (totals only: transformers names its embeddings rwkv.embeddings, its final norm ln_out, and
# holds the embedding LayerNorm inside block 0 as pre_ln)
RWKV_FIXTURES = ["rwkv-4-169m-pile"]
RWKV_VARIANTS = [
    {"model_type": "rwkv", "architectures": ["RwkvForCausalLM"], "num_hidden_layers": 3, "hidden_size": 256,
     "attention_hidden_size": 192, "intermediate_size": 600, "vocab_size": 1000, "tie_word_embeddings": True},
]
