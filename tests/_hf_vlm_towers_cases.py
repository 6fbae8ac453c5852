"""Small configs of the composites of modelplan/specs/hf_vlm_towers.py, hf_gemma4_vision.py and hf_omni.py, each
switching an option the mappers read (tower kv heads, windows, text model_type spellings, the
projector bias, tying)."""

from __future__ import annotations

from _hf_vision_cases import _QWEN25, TEXT, composite

_STEP3P5 = {"num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 256, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512, "n_routed_experts": 4,
            "num_experts_per_tok": 2, "moe_intermediate_size": 32, "share_expert_dim": 48,
            "mlp_layer_types": ["dense", "sparse"], "layer_types": ["sliding_attention", "full_attention"],
            "sliding_window": 64}
_STEP_VISION = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 112,
                "patch_size": 14, "mlp_ratio": 1.5}

TOWER_CASES = [
    # EXAONE 4.5: Qwen2.5-VL's windowed tower with 2 kv heads of 4; an 'exaone4_5_text' text model,
    # tied, kv heads = heads, 4 x 4-patch windows
    composite("exaone4_5", "Exaone4_5_ForConditionalGeneration", text_config={**TEXT, "model_type": "exaone4"},
              vision_config={**_QWEN25, "num_key_value_heads": 2}),
    composite("exaone4_5", "Exaone4_5_ForConditionalGeneration", tie_word_embeddings=True,
              text_config={**TEXT, "model_type": "exaone4_5_text"},
              vision_config={**_QWEN25, "num_key_value_heads": 4, "window_size": 56, "image_size": 112}),
    # Step 3.7: layer-scaled ViT, two conv downsamplers, bias-free projector; a biased projector and
    # the remote-code key names (width / layers / heads) with a text model_type Step3p7Config drops
    composite("step3p7", "Step3p7ForConditionalGeneration", text_config=_STEP3P5, vision_config=_STEP_VISION),
    composite("step3p7", "Step3p7ForConditionalGeneration", projector_bias=True,
              text_config={**_STEP3P5, "model_type": "step3p7_text"},
              vision_config={"width": 32, "layers": 1, "heads": 2, "image_size": 56, "patch_size": 7,
                             "mlp_ratio": 2.0, "model_type": "step3p7_vision"}),
]
"""Small composites (fast on the meta device)."""

_LFM3 = {"model_type": "lfm3", "num_hidden_layers": 4, "hidden_size": 128, "intermediate_size": 256,
         "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "vocab_size": 512, "sliding_window": 64,
         "bos_token_id": 1, "eos_token_id": 2, "pad_token_id": 0}
_LFM3_VISION = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 4, "num_attention_heads": 4,
                "num_key_value_heads": 2, "patch_size": 14, "image_size": 112}
TOWER_CASES += [
    # LFM3-VL: the default block pattern (conv, conv, attention, conv); an explicit pattern with a
    # 5 x 5 kernel, no merge, bias-free projector, untied
    composite("lfm3_vl", "Lfm3VlForConditionalGeneration", text_config=_LFM3, vision_config=_LFM3_VISION,
              projector_hidden_size=96),
    composite("lfm3_vl", "Lfm3VlForConditionalGeneration", text_config=_LFM3, projector_hidden_size=48,
              projector_bias=False, tie_word_embeddings=False,
              vision_config={**_LFM3_VISION, "layer_types": ["full_attention", "conv", "full_attention", "conv"],
                             "conv_kernel_size": 5, "spatial_merge_size": 1, "temporal_patch_size": 1}),
]

_GEMMA4 = {"model_type": "gemma4_text", "num_hidden_layers": 6, "hidden_size": 128, "intermediate_size": 256,
           "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64,
           "sliding_window": 32, "vocab_size": 512, "hidden_size_per_layer_input": 16,
           "vocab_size_per_layer_input": 64, "pad_token_id": 0}
_GEMMA4_VISION = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 24, "patch_size": 8, "position_embedding_size": 32,
                  "pooling_kernel_size": 2, "image_size": 64}
_GEMMA4_AUDIO = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "subsampling_conv_channels": [16, 8],
                 "conv_kernel_size": 3, "output_proj_dims": 48}
TOWER_CASES += [
    # Gemma 4: text only (the class defaults' form); a vision tower (head_dim 24 x 4 heads over 64
    # channels, 2 kv heads, 2 x 2 pooling); 4 x 4 pooling, 4 kv heads, with the audio tower too, untied
    composite("gemma4", "Gemma4ForConditionalGeneration", text_config=_GEMMA4),
    composite("gemma4", "Gemma4ForConditionalGeneration", text_config=_GEMMA4, vision_config=_GEMMA4_VISION),
    composite("gemma4", "Gemma4ForConditionalGeneration", text_config=_GEMMA4, tie_word_embeddings=False,
              vision_config={**_GEMMA4_VISION, "pooling_kernel_size": 4, "num_key_value_heads": 4},
              audio_config=_GEMMA4_AUDIO),
]

_UNIFIED = {"model_type": "gemma4_unified_text", "num_hidden_layers": 6, "hidden_size": 128, "intermediate_size": 256,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "global_head_dim": 64,
            "sliding_window": 32, "vocab_size": 512, "pad_token_id": 0}
TOWER_CASES += [
    # Gemma 4 unified: text only; the encoder-free embedder (8 x 2 px model patches); with the audio
    # frame embedder, untied
    composite("gemma4_unified", "Gemma4UnifiedForConditionalGeneration", text_config=_UNIFIED),
    composite("gemma4_unified", "Gemma4UnifiedForConditionalGeneration", text_config=_UNIFIED,
              vision_config={"patch_size": 8, "pooling_kernel_size": 2, "mm_embed_dim": 48, "mm_posemb_size": 16,
                             "output_proj_dims": 48, "image_size": 64}),
    composite("gemma4_unified", "Gemma4UnifiedForConditionalGeneration", text_config=_UNIFIED,
              tie_word_embeddings=False, audio_config={"audio_embed_dim": 40},
              vision_config={"patch_size": 4, "pooling_kernel_size": 2, "mm_embed_dim": 32, "mm_posemb_size": 8,
                             "output_proj_dims": 32, "image_size": 32}),
]

_PERSIMMON = {"model_type": "persimmon", "num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 256,
              "num_attention_heads": 4, "vocab_size": 512}
TOWER_CASES += [
    # Fuyu: a Linear over raw 14 px patches into the Persimmon text model; a flat save (text keys at
    # the top), tied
    composite("fuyu", "FuyuForCausalLM", text_config=_PERSIMMON, patch_size=14, image_size=56),
    composite("fuyu", "FuyuForCausalLM", **{k: v for k, v in _PERSIMMON.items() if k != "model_type"},
              patch_size=8, image_size=32, num_channels=1, tie_word_embeddings=True),
]

_AUDIO = {"num_mel_bins": 16, "encoder_layers": 2, "encoder_attention_heads": 4, "encoder_ffn_dim": 96, "d_model": 64,
          "output_dim": 256, "downsample_hidden_size": 8}
_QWEN3_VISION = {"depth": 2, "hidden_size": 64, "intermediate_size": 96, "num_heads": 4, "out_hidden_size": 256,
                 "deepstack_visual_indexes": [0], "num_position_embeddings": 64, "image_size": 128}
_QWEN3_MOE = {"num_hidden_layers": 2, "hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4,
              "num_key_value_heads": 2, "vocab_size": 1000, "moe_intermediate_size": 64, "num_experts": 4,
              "num_experts_per_tok": 2}
TOWER_CASES += [
    # Qwen2.5-Omni thinker: Qwen2 text, Qwen2.5-VL tower, Whisper-style audio encoder; tied
    composite("qwen2_5_omni_thinker", "Qwen2_5OmniThinkerForConditionalGeneration", text_config=TEXT,
              vision_config=_QWEN25, audio_config=_AUDIO),
    composite("qwen2_5_omni_thinker", "Qwen2_5OmniThinkerForConditionalGeneration", tie_word_embeddings=True,
              text_config=TEXT, vision_config={**_QWEN25, "spatial_merge_size": 1}, audio_config={**_AUDIO, "encoder_layers": 1}),
    # Qwen3-Omni thinker: Qwen3-MoE text (head_dim from hidden / heads; a dense block by mlp_only_layers),
    # Qwen3-VL tower with a deepstack merger, the Conv2d audio front end
    composite("qwen3_omni_moe_thinker", "Qwen3OmniMoeThinkerForConditionalGeneration", text_config=_QWEN3_MOE,
              vision_config=_QWEN3_VISION, audio_config=_AUDIO),
    composite("qwen3_omni_moe_thinker", "Qwen3OmniMoeThinkerForConditionalGeneration",
              text_config={**_QWEN3_MOE, "head_dim": 32, "mlp_only_layers": [0]},
              vision_config={**_QWEN3_VISION, "deepstack_visual_indexes": []}, audio_config={**_AUDIO, "num_mel_bins": 20}),
]

_HUNYUAN_VISION = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
                   "patch_size": 14, "max_image_size": 112, "image_size": 112}
TOWER_CASES += [
    # HunYuan-VL: Llama-shaped text with q/k norms, the conv patch merger with newline tokens; a flat
    # (legacy) save, its text untied on both levels, 3 x 3 merge
    composite("hunyuan_vl", "HunYuanVLForConditionalGeneration", text_config={**TEXT, "model_type": "hunyuan_vl_text"},
              vision_config=_HUNYUAN_VISION),
    composite("hunyuan_vl", "HunYuanVLForConditionalGeneration", **TEXT, tie_word_embeddings=False,
              vision_config={**_HUNYUAN_VISION, "spatial_merge_size": 3, "image_size": 84, "max_image_size": 56}),
]

TOWER_CASES += [
    # HyperCLOVA X Vision V2: HyperCLOVA X text, Qwen2.5-VL tower, linear projector; untied, a
    # 'qwen2_5_vl' vision model_type
    composite("hyperclovax_vision_v2", "HyperCLOVAXVisionV2ForConditionalGeneration",
              text_config={**TEXT, "model_type": "hyperclovax"}, vision_config={**_QWEN25, "out_hidden_size": 96}),
    composite("hyperclovax_vision_v2", "HyperCLOVAXVisionV2ForConditionalGeneration", tie_word_embeddings=False,
              text_config={**TEXT, "model_type": "hyperclovax"},
              vision_config={**_QWEN25, "model_type": "qwen2_5_vl", "spatial_merge_size": 1}),
]

_ARIA_TEXT = {**TEXT, "model_type": "aria_text", "moe_num_experts": 4, "moe_topk": 2, "moe_num_shared_experts": 1}
_IDEFICS3 = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
             "image_size": 70, "patch_size": 14, "model_type": "idefics3_vision"}
TOWER_CASES += [
    # Aria: aria_text MoE, Idefics3 tower, the learned-query cross-attention projector (25 patches ->
    # 8 queries); an image size the dict does not list (priced at its largest entry), tied
    composite("aria", "AriaForConditionalGeneration", text_config=_ARIA_TEXT, vision_config=_IDEFICS3,
              projector_patch_to_query_dict={"25": 8, "100": 16}),
    composite("aria", "AriaForConditionalGeneration", text_config=_ARIA_TEXT, tie_word_embeddings=True,
              vision_config={**_IDEFICS3, "image_size": 56}, projector_patch_to_query_dict={"25": 8, "100": 16}),
]

_JANUS_VISION = {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 64,
                 "patch_size": 16, "mlp_ratio": 1.5, "projection_dim": 256}
_VQ = {"embed_dim": 8, "num_embeddings": 64, "latent_channels": 32, "base_channels": 32,
       "channel_multiplier": [1, 2], "num_res_blocks": 1, "projection_dim": 256, "image_token_embed_dim": 256}
TOWER_CASES += [
    # Janus: Llama text, SigLIP-shaped tower + 2-layer aligner, the VQ-VAE generation path (counted);
    # no attention bias, a 3-layer aligner, doubled latent, three VQ levels, untied
    composite("janus", "JanusForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config=_JANUS_VISION, vq_config=_VQ),
    composite("janus", "JanusForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              tie_word_embeddings=False, vision_config={**_JANUS_VISION, "attention_bias": False, "depth": 3},
              vq_config={**_VQ, "double_latent": True, "channel_multiplier": [1, 1, 2], "num_res_blocks": 2,
                         "num_hidden_layers": 3}),
]
