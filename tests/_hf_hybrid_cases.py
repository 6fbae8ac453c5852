"""Cases of the hybrid linear-mixer model_types (modelplan/specs/hf_hybrid.py): the published
fixtures and small variants switching each option the mappers read. Shared by
tests/test_hf_hybrid.py and tests/test_hf.py's coverage check."""

from __future__ import annotations

# Published config.json fixtures (tests/data/hf/<name>.json; sources in its README).
HYBRID_FIXTURES = ["qwen3-next-80b-a3b-instruct", "bamba-9b", "granite-4.0-h-tiny", "nvidia-nemotron-nano-9b-v2",
                   "mamba-codestral-7b-v0.1"]

_S = {"num_hidden_layers": 4, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
      "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 512}
_DELTA = {"linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
          "linear_value_head_dim": 48}
_MOE = {"num_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64, "shared_expert_intermediate_size": 96}
_NEMO = {"model_type": "nemotron_h", "hidden_size": 256, "num_attention_heads": 4, "num_key_value_heads": 2,
         "head_dim": 64, "intermediate_size": 512, "vocab_size": 1000, "mamba_num_heads": 8, "mamba_head_dim": 32,
         "ssm_state_size": 16, "n_groups": 2}


_KIMI = {"model_type": "kimi_linear", "num_hidden_layers": 5, "hidden_size": 256, "intermediate_size": 512,
         "num_attention_heads": 4, "num_key_value_heads": 4, "vocab_size": 1000, "pad_token_id": 0,
         "moe_intermediate_size": 64, "num_local_experts": 8, "num_experts_per_tok": 2, "kv_lora_rank": 32,
         "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 16, "linear_num_heads": 4, "linear_head_dim": 32}


def _nemotron(pattern: str, **extra) -> dict:
    return {**_NEMO, "hybrid_override_pattern": pattern, "num_hidden_layers": len(pattern), **extra}


HYBRID_VARIANTS = [
    # gated DeltaNet: value heads twice the key heads, head_dim 64, default interval pattern
    {"model_type": "qwen3_next", **_S, **_MOE, **_DELTA, "head_dim": 64},
    # dense first block, MoE every 2nd, attention biases, tied head, equal key / value heads
    {"model_type": "qwen3_next", **_S, **_MOE, "mlp_only_layers": [0], "decoder_sparse_step": 2,
     "linear_num_key_heads": 2, "linear_num_value_heads": 2, "linear_key_head_dim": 32, "linear_value_head_dim": 32,
     "attention_bias": True, "tie_word_embeddings": True},
    {"model_type": "qwen3_5_text", **_S, **_DELTA, "head_dim": 64,
     "layer_types": ["linear_attention", "full_attention", "linear_attention", "full_attention"]},
    {"model_type": "qwen3_5_moe_text", **{k: v for k, v in _S.items() if k != "intermediate_size"}, **_MOE, **_DELTA},
    # Mamba-2 with 2 groups, explicit head dim; then 1 group, projection biases, no conv bias, tied
    {"model_type": "bamba", **_S, "attn_layer_indices": [1], "mamba_n_heads": 8, "mamba_d_head": 64,
     "mamba_n_groups": 2, "mamba_d_state": 16, "mamba_expand": 2},
    {"model_type": "bamba", **_S, "attn_layer_indices": [1, 3], "mamba_n_heads": 16, "mamba_n_groups": 1,
     "mamba_d_state": 32, "mamba_proj_bias": True, "mamba_conv_bias": False, "tie_word_embeddings": True},
    # Granite 4.0-H: MoE + shared MLP; then dense (num_local_experts 0: the shared MLP alone), rope, biases
    {"model_type": "granitemoehybrid", **_S, "layer_types": ["mamba", "attention", "mamba", "mamba"],
     "mamba_n_heads": 8, "mamba_n_groups": 1, "mamba_d_state": 16, "num_local_experts": 4, "num_experts_per_tok": 2,
     "shared_intermediate_size": 128},
    {"model_type": "granitemoehybrid", **_S, "layer_types": ["mamba", "attention", "mamba", "mamba"],
     "mamba_n_heads": 8, "mamba_n_groups": 2, "mamba_d_state": 16, "num_local_experts": 0,
     "shared_intermediate_size": 128, "position_embedding_type": "rope", "attention_bias": True},
    # Nemotron-H: M / * / - blocks; with E (MoE, groups) blocks; biases (its head is never tied)
    _nemotron("M-M*-M-"),
    _nemotron("MEM*EME", n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
              moe_shared_expert_intermediate_size=96, n_group=2, topk_group=1),
    _nemotron("M*M-", use_bias=True, use_conv_bias=False, mlp_bias=True, tie_word_embeddings=True),
    # Falcon-H1: attention and Mamba-2 in every block; mamba_d_ssm; then d_ssm null (expand x hidden),
    # the gated norm, every bias, head_dim, tied head and the muP embedding / head multipliers
    {"model_type": "falcon_h1", **{**_S, "num_hidden_layers": 3}, "mamba_d_ssm": 384, "mamba_n_heads": 6,
     "mamba_d_state": 16, "mamba_n_groups": 2},
    {"model_type": "falcon_h1", **{**_S, "num_hidden_layers": 3}, "mamba_d_ssm": None, "mamba_n_heads": 8,
     "mamba_d_state": 16, "mamba_rms_norm": True, "projectors_bias": True, "mamba_proj_bias": True,
     "attention_bias": True, "mlp_bias": True, "head_dim": 32, "tie_word_embeddings": True,
     "embedding_multiplier": 5.0, "lm_head_multiplier": 0.5, "mamba_conv_bias": False},
    # Kimi Linear: KDA + MLA blocks, the default pattern and MoE from block 1; then the checkpoint's
    # linear_attn_config (1-based full_attn_layers), q latent, biases, 2 shared experts, groups
    {**_KIMI},
    {**_KIMI, "linear_attn_config": {"head_dim": 16, "num_heads": 8, "short_conv_kernel_size": 3,
                                     "full_attn_layers": [2, 5], "kda_layers": [1, 3, 4]},
     "first_k_dense_replace": 2, "n_shared_experts": 2, "q_lora_rank": 24, "attention_bias": True, "n_group": 2,
     "topk_group": 1, "tie_word_embeddings": True},
    {"model_type": "mamba2", "num_hidden_layers": 2, "hidden_size": 256, "num_heads": 8, "head_dim": 64,
     "n_groups": 2, "state_size": 16, "vocab_size": 1000},
]
