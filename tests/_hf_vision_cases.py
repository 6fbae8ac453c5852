"""Cases of the vision-language composites of modelplan/specs/hf_vision.py: the published
fixtures (tests/data/hf/<name>.json, sources in its README) and small variants that switch each
option the mappers read. Shared by tests/test_hf_vision.py and tests/test_hf.py's coverage check."""

from __future__ import annotations

VISION_FIXTURES = [
    "qwen2.5-vl-7b-instruct", "qwen2.5-vl-3b-instruct", "qwen2-vl-7b-instruct", "qwen3-vl-8b-instruct",
    "llava-1.5-7b-hf", "llava-v1.6-mistral-7b-hf", "llama-4-scout-17b-16e-instruct", "internvl3-1b-hf",
    "qwen3-vl-30b-a3b-instruct",
]

TEXT = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
        "num_key_value_heads": 2, "vocab_size": 1000, "head_dim": 64}
"""A two-block text model (fast on the meta device)."""

_CLIP = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
         "image_size": 56, "patch_size": 14}
_QWEN25 = {"depth": 3, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4, "out_hidden_size": 256,
           "fullatt_block_indexes": [1], "image_size": 224}
_QWEN3 = {"depth": 3, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4, "out_hidden_size": 256,
          "deepstack_visual_indexes": [0, 2], "num_position_embeddings": 100, "image_size": 128}
_LLAMA4 = {**_CLIP, "intermediate_size": 256, "projector_input_dim": 128, "projector_output_dim": 128,
           "vision_output_dim": 128}


def composite(model_type: str, arch: str, **fields) -> dict:
    return {"model_type": model_type, "architectures": [arch], **fields}


VISION_VARIANTS = [
    # Qwen2-VL: text keys at the top (pre-v5 saves) or in text_config; mlp_ratio; tying
    composite("qwen2_vl", "Qwen2VLForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2_vl_text"},
              vision_config={"depth": 2, "embed_dim": 64, "num_heads": 4, "hidden_size": 256, "mlp_ratio": 3,
                             "image_size": 112}),
    composite("qwen2_vl", "Qwen2VLForConditionalGeneration", **TEXT, tie_word_embeddings=True,
              vision_config={"depth": 2, "embed_dim": 64, "num_heads": 4, "hidden_size": 256, "spatial_merge_size": 1}),
    # Qwen2.5-VL: window attention layers, a tie forwarded from an old text_config
    composite("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", **TEXT, vision_config=_QWEN25),
    composite("qwen2_5_vl", "Qwen2_5_VLForConditionalGeneration", text_config={**TEXT, "tie_word_embeddings": True},
              vision_config={**_QWEN25, "temporal_patch_size": 1, "patch_size": 16}),
    # Qwen3-VL: deepstack mergers, learned position table, tying
    composite("qwen3_vl", "Qwen3VLForConditionalGeneration", text_config=TEXT, vision_config=_QWEN3),
    composite("qwen3_vl", "Qwen3VLForConditionalGeneration", text_config=TEXT, tie_word_embeddings=True,
              vision_config={**_QWEN3, "deepstack_visual_indexes": []}),
    # Qwen3-VL-MoE: dense blocks by mlp_only_layers / decoder_sparse_step, tying
    composite("qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration",
              text_config={**TEXT, "num_hidden_layers": 4, "num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 64, "mlp_only_layers": [0], "decoder_sparse_step": 1},
              vision_config=_QWEN3),
    composite("qwen3_vl_moe", "Qwen3VLMoeForConditionalGeneration", tie_word_embeddings=True,
              text_config={**TEXT, "num_hidden_layers": 4, "num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 64, "decoder_sparse_step": 2, "attention_bias": True},
              vision_config={**_QWEN3, "deepstack_visual_indexes": [1]}),
    # GLM-4V: downsample conv + SwiGLU merger; qkv bias
    composite("glm4v", "Glm4vForConditionalGeneration", text_config={**TEXT, "head_dim": None},
              vision_config={"depth": 2, "hidden_size": 64, "num_heads": 4, "out_hidden_size": 96,
                             "intermediate_size": 160, "image_size": 112, "patch_size": 14}),
    composite("glm4v", "Glm4vForConditionalGeneration", tie_word_embeddings=True, text_config=TEXT,
              vision_config={"depth": 2, "hidden_size": 64, "num_heads": 4, "out_hidden_size": 96,
                             "intermediate_size": 160, "image_size": 56, "patch_size": 14, "attention_bias": True}),
    # GLM-4.5V: GLM-4.5 MoE text model (dense prefix, shared expert) under the GLM-4V tower
    composite("glm4v_moe", "Glm4vMoeForConditionalGeneration",
              text_config={**TEXT, "num_attention_heads": 8, "num_hidden_layers": 3, "first_k_dense_replace": 1,
                           "n_routed_experts": 8, "num_experts_per_tok": 2, "moe_intermediate_size": 64},
              vision_config={"depth": 2, "hidden_size": 64, "num_heads": 4, "out_hidden_size": 96,
                             "intermediate_size": 160, "image_size": 56, "patch_size": 14}),
    composite("glm4v_moe", "Glm4vMoeForConditionalGeneration",
              text_config={**TEXT, "attention_bias": False, "n_routed_experts": 4, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 64, "n_shared_experts": 2},
              vision_config={"depth": 1, "hidden_size": 64, "num_heads": 4, "out_hidden_size": 96,
                             "intermediate_size": 160, "image_size": 56, "patch_size": 14}),
    # Qwen3.5 / Qwen3.5-MoE: gated-DeltaNet text models (tests/_hf_hybrid_cases.py) under the
    # Qwen3-VL tower without deepstack mergers
    composite("qwen3_5", "Qwen3_5ForConditionalGeneration",
              text_config={**TEXT, "num_hidden_layers": 4, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
                           "linear_key_head_dim": 32, "linear_value_head_dim": 48,
                           "layer_types": ["linear_attention", "full_attention"] * 2},
              vision_config={**_QWEN3, "deepstack_visual_indexes": []}),
    composite("qwen3_5_moe", "Qwen3_5MoeForConditionalGeneration",
              text_config={**TEXT, "num_hidden_layers": 4, "num_experts": 8, "num_experts_per_tok": 2,
                           "moe_intermediate_size": 64, "shared_expert_intermediate_size": 96,
                           "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_key_head_dim": 32,
                           "linear_value_head_dim": 48},
              vision_config={k: v for k, v in _QWEN3.items() if k != "deepstack_visual_indexes"}),
    # LLaVA: CLIP or SigLIP tower, several feature layers, projector bias off
    composite("llava", "LlavaForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config={**_CLIP, "model_type": "clip_vision_model"}),
    composite("llava", "LlavaForConditionalGeneration", text_config={**TEXT, "model_type": "mistral"},
              multimodal_projector_bias=False, vision_feature_layer=[-1, -3],
              vision_config={**_CLIP, "model_type": "siglip_vision_model"}),
    composite("llava", "LlavaForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
              vision_feature_select_strategy="full", vision_config=_CLIP),
    composite("llava_next", "LlavaNextForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
              vision_config=_CLIP),
    # Llama 4: MoE text model, pixel-shuffle adapter
    composite("llama4", "Llama4ForConditionalGeneration",
              text_config={**TEXT, "num_local_experts": 4, "intermediate_size_mlp": 384, "interleave_moe_layer_step": 2},
              vision_config=_LLAMA4),
    # Idefics3 / SmolVLM: pixel-shuffle connector by scale_factor
    composite("idefics3", "Idefics3ForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              scale_factor=3, vision_config={**_CLIP, "image_size": 84}),
    composite("smolvlm", "SmolVLMForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config=_CLIP),
    # InternVL: list sizes, qk norms + RMSNorm + qkv bias, no absolute positions + final LayerNorm
    composite("internvl", "InternVLForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
              vision_config={**_CLIP, "image_size": [56, 56], "patch_size": [14, 14]}),
    composite("internvl", "InternVLForConditionalGeneration", text_config={**TEXT, "model_type": "qwen3"},
              tie_word_embeddings=False,
              vision_config={**_CLIP, "use_qk_norm": True, "attention_bias": True, "norm_type": "rms_norm"}),
    composite("internvl", "InternVLForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
              downsample_ratio=0.25,
              vision_config={**_CLIP, "use_mean_pooling": False, "use_absolute_position_embeddings": False}),
]
"""Small composites, each switching options the vision mappers read."""

VISION_PARAM_PREFIXES = ("visual.", "vision_tower.", "vision_model.", "multi_modal_projector.", "connector.",
                         "image_newline")
"""Name parts of the HF parameters of a tower and its projector (the `vision` group's)."""
