"""Small configs of the composites of modelplan/specs/hf_n18vlm.py, each switching an option the
mappers read (text model_type, tower kind and sub-config defaults, projector switches, tying)."""

from __future__ import annotations

from _hf_vision_cases import _CLIP, TEXT, composite

_SIGLIP = {"model_type": "siglip_vision_model", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
           "num_attention_heads": 4, "image_size": 56, "patch_size": 14}
_SIGLIP2 = {"model_type": "siglip2_vision_model", "hidden_size": 64, "intermediate_size": 96,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_patches": 16, "patch_size": 14}
_PIXTRAL = {"model_type": "pixtral", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
            "num_attention_heads": 4, "head_dim": 16, "image_size": 112, "patch_size": 14}
_GEMMA = {**TEXT, "model_type": "gemma"}
_GRANITE = {**TEXT, "pad_token_id": 0}
_MINIMAX = {"model_type": "minimax_m3_vl_text", "hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 32, "rotary_dim": 16, "intermediate_size": 32, "vocab_size": 1000,
            "dense_intermediate_size": 192, "shared_intermediate_size": 48, "num_local_experts": 8,
            "num_experts_per_tok": 2, "moe_layer_freq": [0, 1]}
_OVIS = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 56,
         "vocab_size": 64}
_DEEPSEEK = {"model_type": "deepseek_v3", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
             "num_key_value_heads": 4, "intermediate_size": 512, "moe_intermediate_size": 64, "n_routed_experts": 4,
             "num_experts_per_tok": 2, "n_shared_experts": 1, "first_k_dense_replace": 1, "kv_lora_rank": 32,
             "q_lora_rank": 64, "qk_nope_head_dim": 32, "qk_rope_head_dim": 16, "v_head_dim": 32, "vocab_size": 1000,
             "num_nextn_predict_layers": 0, "n_group": 1, "topk_group": 1}
_BLIP = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
         "image_size": 56, "patch_size": 14}
_QF = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4}
_COHERE2 = {**TEXT, "model_type": "cohere2", "layer_types": ["sliding_attention", "full_attention"]}

N18VLM_CASES = [
    # PaliGemma: Gemma text; a sparse vision_config (SiglipVisionConfig defaults fill it: 16 px patches
    # of 224 px, the pooling head on); Gemma 2 text (PaliGemma 2); untied; projection_dim
    composite("paligemma", "PaliGemmaForConditionalGeneration", text_config=_GEMMA, projection_dim=256,
              vision_config={**_SIGLIP, "vision_use_head": False}),
    composite("paligemma", "PaliGemmaForConditionalGeneration", text_config=_GEMMA, projection_dim=256,
              vision_config={"model_type": "siglip_vision_model", "hidden_size": 64, "intermediate_size": 96,
                             "num_hidden_layers": 1, "num_attention_heads": 4}),
    composite("paligemma", "PaliGemmaForConditionalGeneration", projection_dim=256, tie_word_embeddings=False,
              text_config={**TEXT, "model_type": "gemma2"}, vision_config={**_SIGLIP, "vision_use_head": False}),
    # ShieldGemma 2: Gemma 3's modules; tied by the text_config unless both say false
    composite("shieldgemma2", "Gemma3ForConditionalGeneration", text_config={**TEXT, "model_type": "gemma3_text"},
              vision_config=_SIGLIP, mm_tokens_per_image=4),
    composite("shieldgemma2", "Gemma3ForConditionalGeneration", tie_word_embeddings=False,
              text_config={**TEXT, "model_type": "gemma3_text", "tie_word_embeddings": False},
              vision_config=_SIGLIP, mm_tokens_per_image=4),
    # Aya Vision: Cohere2 text, pixel shuffle 2 + LayerNorm + SwiGLU projector; its width defaulting
    # to the text width, or set; untied
    composite("aya_vision", "AyaVisionForConditionalGeneration", text_config=_COHERE2, vision_config=_SIGLIP),
    composite("aya_vision", "AyaVisionForConditionalGeneration", text_config=_COHERE2, tie_word_embeddings=False,
              alignment_intermediate_size=384, vision_config={**_SIGLIP, "vision_use_head": False}),
    # Command A Vision: no projector norm; SigLIP head built by default, or off
    composite("cohere2_vision", "Cohere2VisionForConditionalGeneration", text_config=_COHERE2,
              alignment_intermediate_size=192, vision_config=_SIGLIP),
    composite("cohere2_vision", "Cohere2VisionForConditionalGeneration", text_config=_COHERE2, downsample_factor=1,
              alignment_intermediate_size=128, vision_config={**_SIGLIP, "vision_use_head": False}),
    # LFM2-VL: SigLIP 2 tower; projector norm / bias off; tie_embedding false
    composite("lfm2_vl", "Lfm2VlForConditionalGeneration", projector_hidden_size=160, vision_config=_SIGLIP2,
              text_config={**TEXT, "model_type": "lfm2", "layer_types": ["conv", "full_attention"]}),
    composite("lfm2_vl", "Lfm2VlForConditionalGeneration", projector_hidden_size=160, projector_bias=False,
              projector_use_layernorm=False, tie_embedding=False, vision_config={**_SIGLIP2, "vision_use_head": False},
              text_config={**TEXT, "model_type": "lfm2", "layer_types": ["full_attention", "conv"]}),
    # LightOnOCR: Pixtral tower, Mistral 3's projector; merge 1; untied
    composite("lighton_ocr", "LightOnOcrForConditionalGeneration", text_config={**TEXT, "model_type": "qwen3"},
              vision_config=_PIXTRAL),
    composite("lighton_ocr", "LightOnOcrForConditionalGeneration", text_config={**TEXT, "model_type": "qwen3"},
              vision_config=_PIXTRAL, spatial_merge_size=1, tie_word_embeddings=False),
    # GLM-4.6V: GLM-4V's tower and text model
    composite("glm46v", "Glm46VForConditionalGeneration", text_config={**TEXT, "model_type": "glm4v_text"},
              vision_config={"depth": 2, "hidden_size": 64, "num_heads": 4, "out_hidden_size": 96,
                             "intermediate_size": 160, "image_size": 56, "patch_size": 14}),
    # Video-LLaVA: image and video CLIP towers, one or two feature layers, projector bias off
    composite("video_llava", "VideoLlavaForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config={**_CLIP, "model_type": "clip_vision_model"}),
    composite("video_llava", "VideoLlavaForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config={**_CLIP, "model_type": "clip_vision_model"}, vision_feature_layer=[-2, -1],
              multimodal_projector_bias=False),
    # DeepSeek-VL: SigLIP tower (head on by default) and a two-layer aligner; untied
    composite("deepseek_vl", "DeepseekVLForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config=_SIGLIP),
    composite("deepseek_vl", "DeepseekVLForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config={**_SIGLIP, "vision_use_head": False}, tie_word_embeddings=False),
    # Idefics2: SigLIP-shaped tower (no head), SwiGLU modality projection, perceiver resampler
    # (its width forced to the text width); a hub-style vision model_type; no resampler layers
    composite("idefics2", "Idefics2ForConditionalGeneration", text_config={**TEXT, "model_type": "mistral"},
              vision_config={k: v for k, v in _SIGLIP.items() if k != "model_type"},
              perceiver_config={"resampler_n_latents": 8, "resampler_depth": 2, "resampler_n_heads": 4,
                                "resampler_head_dim": 16, "num_key_value_heads": 2}),
    composite("idefics2", "Idefics2ForConditionalGeneration", text_config={**TEXT, "model_type": "mistral"},
              tie_word_embeddings=True, vision_config={**_SIGLIP, "model_type": "idefics2"},
              perceiver_config={"resampler_n_latents": 4, "resampler_depth": 0, "hidden_size": 32}),
    # Qianfan-OCR: InternVL's modules; attention_bias defaults to true here, or off; tied
    composite("qianfan_ocr", "QianfanOCRForConditionalGeneration", text_config={**TEXT, "model_type": "qwen3"},
              vision_config={k: v for k, v in _CLIP.items()}),
    composite("qianfan_ocr", "QianfanOCRForConditionalGeneration", text_config={**TEXT, "model_type": "qwen3"},
              tie_word_embeddings=True, vision_config={**_CLIP, "attention_bias": False, "use_qk_norm": True}),
    # PaddleOCR-VL: ERNIE 4.5 text (biases by use_bias), SigLIP-shaped tower, merged-patch projector
    composite("paddleocr_vl", "PaddleOCRVLForConditionalGeneration", text_config=TEXT,
              vision_config={k: v for k, v in _SIGLIP.items() if k != "model_type"}),
    composite("paddleocr_vl", "PaddleOCRVLForConditionalGeneration", tie_word_embeddings=False,
              text_config={**TEXT, "use_bias": True, "tie_word_embeddings": False},
              vision_config={**_SIGLIP, "spatial_merge_size": 1}),
    composite("paddleocr_vl", "PaddleOCRVLForConditionalGeneration", **TEXT, tie_word_embeddings=False,
              vision_config={**_SIGLIP, "model_type": "paddleocr_vl"}),
    # GLM-OCR: per-head q/k norms in the tower, biases by attention_bias, bias-free GLM-4 text blocks
    composite("glm_ocr", "GlmOcrForConditionalGeneration",
              text_config={k: v for k, v in TEXT.items() if k != "head_dim"},
              vision_config={"depth": 2, "hidden_size": 64, "num_heads": 4, "out_hidden_size": 96,
                             "intermediate_size": 160, "image_size": 56, "patch_size": 14}),
    composite("glm_ocr", "GlmOcrForConditionalGeneration", text_config=TEXT, tie_word_embeddings=True,
              vision_config={"depth": 1, "hidden_size": 64, "num_heads": 2, "out_hidden_size": 32,
                             "intermediate_size": 96, "image_size": 28, "attention_bias": False, "in_channels": 1}),
    # BLIP-2 / InstructBLIP(-Video): BLIP ViT (qkv_bias), Q-Former (cross-attention every
    # cross_attention_frequency layers; InstructBLIP's text embeddings and text-side MLPs), OPT or
    # Llama text tied as its own config says
    composite("blip-2", "Blip2ForConditionalGeneration", num_query_tokens=4,
              text_config={"model_type": "opt", "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
                           "ffn_dim": 96, "vocab_size": 100, "word_embed_proj_dim": 64},
              vision_config=_BLIP, qformer_config=_QF),
    composite("blip-2", "Blip2ForConditionalGeneration", num_query_tokens=3, text_config={**TEXT, "model_type": "llama"},
              vision_config={**_BLIP, "qkv_bias": False}, qformer_config={**_QF, "cross_attention_frequency": 3}),
    composite("instructblip", "InstructBlipForConditionalGeneration", num_query_tokens=4,
              text_config={**TEXT, "model_type": "llama", "tie_word_embeddings": True}, vision_config=_BLIP,
              qformer_config={**_QF, "vocab_size": 50, "max_position_embeddings": 20}),
    composite("instructblipvideo", "InstructBlipVideoForConditionalGeneration", num_query_tokens=2,
              text_config={**TEXT, "model_type": "llama"}, vision_config=_BLIP,
              qformer_config={**_QF, "vocab_size": 50, "max_position_embeddings": 20, "num_hidden_layers": 1}),
    # Granite-Docling: Granite text, coarse + fine connector paths with DeepStack mergers; a density
    # router (it needs the fine path); no fine path
    composite("granite_docling", "GraniteDoclingForConditionalGeneration", text_config=_GRANITE,
              vision_config={**_SIGLIP, "out_hidden_size": 256, "scale_factor": 2, "deepstack_visual_indexes": [0, 1]}),
    composite("granite_docling", "GraniteDoclingForConditionalGeneration", text_config=_GRANITE,
              density_router_hidden_size=16, pad_token_id=0,
              vision_config={**_SIGLIP, "out_hidden_size": 256, "scale_factor": 2, "deepstack_visual_indexes": []}),
    composite("granite_docling", "GraniteDoclingForConditionalGeneration", text_config=_GRANITE, pad_token_id=0,
              tie_word_embeddings=False, vision_config={**_SIGLIP, "out_hidden_size": 256, "scale_factor": 2,
                                                        "use_fine_route": False}),
    # VideoLLaMA 3: SigLIP blocks with rotary positions (no table), two-layer readout; tied
    composite("video_llama_3", "VideoLlama3ForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
              vision_config={k: v for k, v in _SIGLIP.items() if k not in ("model_type", "image_size")}),
    composite("video_llama_3", "VideoLlama3ForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"},
              tie_word_embeddings=True, vision_config={"hidden_size": 32, "num_attention_heads": 2,
                                                       "num_hidden_layers": 1, "intermediate_size": 64}),
    # Kimi K2.5: DeepSeek-V3 text (MLA + MoE; a 'kimi_k2' text model_type), MoonViT tower, merged projector
    composite("kimi_k25", "Kimi_K25ForConditionalGeneration", text_config=_DEEPSEEK,
              vision_config={"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "pos_emb_height": 8, "pos_emb_width": 8},
              projection_hidden_size=64),
    composite("kimi_k25", "Kimi_K25ForConditionalGeneration", text_config={**_DEEPSEEK, "model_type": "kimi_k2"},
              tie_word_embeddings=False, projection_hidden_size=32,
              vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                             "num_attention_heads": 2, "pos_emb_height": 4, "pos_emb_width": 6,
                             "merge_kernel_size": [1, 1]}),
    # MiniMax-M3-VL: its MoE text model (a dense first block), Qwen-VL-style tower with pre_layrnorm,
    # two-stage projector (per patch, then over merged patches); tied by the text_config
    composite("minimax_m3_vl", "MiniMaxM3SparseForConditionalGeneration", text_config=_MINIMAX, projector_hidden_size=96,
              vision_config={"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
                             "num_attention_heads": 4, "image_size": 56}),
    composite("minimax_m3_vl", "MiniMaxM3SparseForConditionalGeneration", projector_hidden_size=48,
              text_config={**_MINIMAX, "tie_word_embeddings": True},
              vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                             "num_attention_heads": 2, "image_size": 28, "spatial_merge_size": 1,
                             "temporal_patch_size": 1}),
    # Ovis2: RMSNorm / SwiGLU tower, visual-word head and embedding table (hidden_stride merge); an
    # untied head sized by the composite's own vocab_size / hidden_size, biased tower
    composite("ovis2", "Ovis2ForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"}, hidden_size=256,
              vision_config={**_OVIS, "hidden_stride": 2}),
    composite("ovis2", "Ovis2ForConditionalGeneration", text_config={**TEXT, "model_type": "qwen2"}, hidden_size=256,
              vocab_size=1000, tie_word_embeddings=False, vision_config={**_OVIS, "qkv_bias": True, "mlp_bias": True}),
]
"""Small composites (fast on the meta device)."""
