"""Cases of the model_types added in issue 14 round 2 (modelplan/specs/hf_dense.py,
hf_moe_extra.py): the published fixtures and variants that switch the options the mappers read.
Shared by tests/test_hf_new.py and tests/test_hf.py's coverage check."""

from __future__ import annotations

# Published config.json fixtures of the new types (tests/data/hf/<name>.json; sources in its README).
NEW_FIXTURES = [
    "glm-4.5-air", "glm-4.5", "exaone-4.0-32b", "smollm3-3b", "stablelm-2-1_6b", "gpt-j-6b",
    "gpt-neo-1.3b", "mpt-7b", "glm-4-9b-chat-hf", "c4ai-command-r7b-12-2024", "dbrx-base",
    "ernie-4.5-21b-a3b-pt", "ernie-4.5-0.3b-pt", "dots.llm1.base", "seed-oss-36b-base", "minimax-m2",
]

_SMALL = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
          "num_key_value_heads": 2, "vocab_size": 1000, "max_position_embeddings": 512}
"""A two-block Llama-sized skeleton for types without a fixture (fast on the meta device)."""


def small(model_type: str, **overrides) -> dict:
    """A small config of `model_type` (no architectures: AutoModelForCausalLM)."""
    return {"model_type": model_type, **_SMALL, **overrides}


# (fixture name or None, overrides): None builds `small(model_type)` from the overrides.
NEW_VARIANTS = [
    ("stablelm-2-1_6b", {"num_hidden_layers": 2, "use_parallel_residual": True, "use_qkv_bias": False,
                         "tie_word_embeddings": True}),
    ("gpt-j-6b", {"n_layer": 2, "rotary_dim": 32, "n_inner": 1000, "tie_word_embeddings": True}),
    ("gpt-neo-1.3b", {"num_layers": 3, "attention_types": [[["local"], 1], [["global"], 2]],
                      "attention_layers": ["local", "global", "global"]}),
    ("mpt-7b", {"n_layers": 2, "attn_config": {"alibi": True, "clip_qkv": 6.0}, "tie_word_embeddings": False}),
    ("glm-4-9b-chat-hf", {"num_hidden_layers": 2, "attention_bias": False, "tie_word_embeddings": True}),
    ("c4ai-command-r7b-12-2024", {"num_hidden_layers": 5, "sliding_window_pattern": 2, "tie_word_embeddings": False}),
    ("c4ai-command-r7b-12-2024", {"num_hidden_layers": 3, "layer_types": ["full_attention"] * 3}),
    ("exaone-4.0-32b", {"num_hidden_layers": 6, "sliding_window_pattern": 3, "tie_word_embeddings": True}),
    ("smollm3-3b", {"num_hidden_layers": 4, "use_sliding_window": True, "sliding_window": 1024, "max_window_layers": 2}),
    ("glm-4.5-air", {"num_hidden_layers": 4, "first_k_dense_replace": 2, "use_qk_norm": True, "n_shared_experts": 2,
                     "attention_bias": False, "n_group": 4, "topk_group": 2}),
    (None, small("glm4_moe", num_attention_heads=6, moe_intermediate_size=64, n_routed_experts=8,
                 num_experts_per_tok=2)),  # no head_dim: hidden // heads (256 // 6 = 42)
    ("dbrx-base", {"n_layers": 2, "ffn_config": {"ffn_hidden_size": 1024, "moe_num_experts": 8, "moe_top_k": 2},
                   "attn_config": {"kv_n_heads": 4, "rope_theta": 10000}}),
    ("ernie-4.5-21b-a3b-pt", {"num_hidden_layers": 6, "moe_layer_start_index": 2, "moe_layer_end_index": 4,
                              "moe_layer_interval": 1, "use_bias": True, "tie_word_embeddings": False}),
    ("ernie-4.5-21b-a3b-pt", {"num_hidden_layers": 6, "moe_layer_interval": 2, "moe_num_shared_experts": 0}),
    ("ernie-4.5-0.3b-pt", {"num_hidden_layers": 2, "use_bias": True, "tie_word_embeddings": False}),
    ("dots.llm1.base", {"num_hidden_layers": 3, "first_k_dense_replace": 0, "n_shared_experts": 1,
                        "attention_bias": True}),
    ("seed-oss-36b-base", {"num_hidden_layers": 2, "attention_out_bias": True, "attention_bias": False}),
    ("minimax-m2", {"num_hidden_layers": 2, "num_local_experts": 16, "tie_word_embeddings": True}),
    (None, small("nemotron", head_dim=64, partial_rotary_factor=0.5, tie_word_embeddings=True)),
    (None, small("exaone", num_layers=2, head_dim=64)),
    (None, small("helium", head_dim=64)),
    (None, small("arcee", head_dim=64)),
    (None, small("hunyuan_v1_dense", head_dim=64)),
    (None, small("hunyuan_v1_moe", head_dim=64, num_experts=8, moe_topk=2)),
    (None, small("olmo3", num_hidden_layers=5, sliding_window=128)),
    (None, small("olmo3", num_hidden_layers=2, layer_types=["full_attention", "sliding_attention"], sliding_window=64)),
    (None, small("ministral", head_dim=64, sliding_window=256,
                 layer_types=["sliding_attention", "full_attention"])),
    (None, small("ministral3", head_dim=64)),
    (None, small("internlm3", head_dim=64, qkv_bias=True, bias=True)),
    (None, small("cwm", num_hidden_layers=4, head_dim=64, sliding_window=128)),
    (None, small("solar_open", head_dim=64, moe_intermediate_size=128, n_routed_experts=8, num_experts_per_tok=2)),
    (None, small("flex_olmo", num_experts=4, num_experts_per_tok=2, pad_token_id=0)),
    (None, small("exaone_moe", num_hidden_layers=3, head_dim=64, num_experts=8, num_experts_per_tok=2,
                 moe_intermediate_size=128)),
    (None, small("falcon_mamba", hidden_size=128, state_size=8, expand=2, time_step_rank=16)),
    (None, small("granitemoeshared", num_local_experts=4, shared_intermediate_size=128, pad_token_id=0)),
    (None, small("granitemoeshared", num_local_experts=4, num_experts_per_tok=2, pad_token_id=0)),
    (None, small("vaultgemma", num_hidden_layers=3, head_dim=64)),
    (None, small("glm4_moe_lite", num_hidden_layers=3, moe_intermediate_size=64, n_routed_experts=8,
                 num_experts_per_tok=2, kv_lora_rank=32, q_lora_rank=48, qk_nope_head_dim=32,
                 qk_rope_head_dim=16, v_head_dim=32)),
    (None, small("glm4_moe_lite", num_hidden_layers=3, mlp_layer_types=["dense", "sparse", "dense"],
                 q_lora_rank=None, moe_intermediate_size=64, n_routed_experts=8, num_experts_per_tok=2,
                 kv_lora_rank=32, qk_nope_head_dim=32, qk_rope_head_dim=16, v_head_dim=32)),
    (None, small("iquestcoder", head_dim=64)),
    (None, small("mellum", head_dim=64, num_local_experts=8, num_experts_per_tok=2, moe_intermediate_size=64,
                 layer_types=["sliding_attention", "full_attention"], sliding_window=64)),
    (None, small("sarvam_moe", head_dim=64, moe_intermediate_size=64, n_routed_experts=8, num_experts_per_tok=2)),
    (None, small("jais2", head_dim=64, attention_bias=False)),
    (None, small("granite_swa", num_hidden_layers=5, head_dim=64, tie_word_embeddings=False, pad_token_id=0)),
    (None, {"model_type": "codegen", "n_layer": 2, "n_embd": 256, "n_head": 4, "rotary_dim": 32, "vocab_size": 1000,
            "n_positions": 512, "tie_word_embeddings": True}),
    (None, small("granitemoe_swa", num_hidden_layers=5, num_local_experts=4, shared_intermediate_size=128,
                 pad_token_id=0)),
    (None, small("minicpm3", kv_lora_rank=32, q_lora_rank=48, qk_nope_head_dim=32, qk_rope_head_dim=16,
                 v_head_dim=32, scale_emb=12, scale_depth=1.4, dim_model_base=64)),
    (None, small("youtu", kv_lora_rank=32, q_lora_rank=None, qk_nope_head_dim=32, qk_rope_head_dim=16,
                 v_head_dim=32, tie_word_embeddings=False)),
    (None, small("persimmon", pad_token_id=0)),
    (None, small("persimmon", qk_layernorm=False, partial_rotary_factor=0.25, pad_token_id=0)),
]


def variant(name: str | None, overrides: dict) -> dict:
    """The config dict of one NEW_VARIANTS entry."""
    if name is None:
        return dict(overrides)
    from _hf_reference import config

    return config(name, **overrides)
