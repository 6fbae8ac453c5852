"""Small configs of the composites registered in modelplan/specs/hf_composites_more.py, each
switching an option its mapper reads (tower sub-config keys, merger placement, modes, tying)."""

from __future__ import annotations

from _hf_vision_cases import TEXT, composite

_SIGLIP = {"model_type": "siglip_vision_model", "hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2,
           "num_attention_heads": 4, "image_size": 64, "patch_size": 16}
_SAM = {"model_type": "sam_vision_model", "hidden_size": 32, "output_channels": 16, "num_hidden_layers": 3,
        "num_attention_heads": 2, "image_size": 128, "patch_size": 16, "window_size": 3, "global_attn_indexes": [1],
        "mlp_dim": 48}
_QWEN35 = {"model_type": "qwen3_5_text", **TEXT, "linear_num_key_heads": 2, "linear_num_value_heads": 4,
           "linear_key_head_dim": 16, "linear_value_head_dim": 16, "layer_types": ["linear_attention", "full_attention"]}
_MINICPM_VISION = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 2,
                   "image_size": 64, "patch_size": 8}

DEEPSEEK_VL_HYBRID_CASES = [
    # Llama text, SigLIP (pooling head on by default) and a windowed SAM with one global block; tied
    composite("deepseek_vl_hybrid", "DeepseekVLHybridForConditionalGeneration", text_config={**TEXT, "model_type": "llama"},
              vision_config=_SIGLIP, high_res_vision_config=_SAM),
    # no SigLIP head, SAM without relative positions or its absolute table, biased qkv off; untied
    composite("deepseek_vl_hybrid", "DeepseekVLHybridForConditionalGeneration", tie_word_embeddings=False,
              text_config={**TEXT, "model_type": "llama"}, vision_config={**_SIGLIP, "vision_use_head": False},
              high_res_vision_config={**_SAM, "use_rel_pos": False, "use_abs_pos": False, "qkv_bias": False,
                                      "global_attn_indexes": [0, 2]}),
]

MINICPM_V_CASES = [
    # the merger after block 1 (16x mode), one merge round; tied / untied by each class's default
    composite("minicpmv4_6", "MiniCPMV4_6ForConditionalGeneration", text_config=_QWEN35, insert_layer_id=1,
              vision_config=_MINICPM_VISION),
    composite("minicpmv4_7", "MiniCPMV4_7ForConditionalGeneration", text_config=_QWEN35, insert_layer_id=0,
              merger_times=2, vision_config=_MINICPM_VISION),
    # MiniCPM-OCR's 4x mode: the merger built but skipped; the 16x mode on it; tying off
    composite("minicpm_ocr", "MiniCPMOcrForConditionalGeneration", text_config=_QWEN35, vision_config=_MINICPM_VISION),
    composite("minicpm_ocr", "MiniCPMOcrForConditionalGeneration", text_config=_QWEN35, downsample_mode="16x",
              insert_layer_id=2, tie_word_embeddings=False, vision_config=_MINICPM_VISION),
]

_MOLMO2_TEXT = {**TEXT, "additional_vocab_size": 16}
_MOLMO2_VISION = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
                  "num_key_value_heads": 2, "head_dim": 8, "image_size": [56, 56], "patch_size": 14}
_MOLMO2_ADAPTER = {"hidden_size": 32, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8,
                   "intermediate_size": 80, "text_hidden_size": 256, "vision_feature_layer": [-1, 1]}

MOLMO2_CASES = [
    # per-head q / k norms, pre-norm blocks, two feature layers; grouped-query attention in tower and pooling
    composite("molmo2", "Molmo2ForConditionalGeneration", text_config=_MOLMO2_TEXT, vision_config=_MOLMO2_VISION,
              adapter_config=_MOLMO2_ADAPTER),
    # 'olmo' norms over the whole projection, norm_after, biased text qkv; the checkpoints' key names
    # (image_default_input_size, image_patch_size, image_num_pos, vit_layers); biases off in tower and adapter
    composite("molmo2", "Molmo2ForConditionalGeneration",
              text_config={**_MOLMO2_TEXT, "qk_norm_type": "olmo", "norm_after": True, "attention_bias": True},
              vision_config={**{k: v for k, v in _MOLMO2_VISION.items() if k not in ("image_size", "patch_size")},
                             "image_default_input_size": [70, 70], "image_patch_size": 14, "image_num_pos": 30,
                             "attention_bias": False},
              adapter_config={**{k: v for k, v in _MOLMO2_ADAPTER.items() if k != "vision_feature_layer"},
                              "vit_layers": [0], "attention_bias": False, "mlp_bias": True}),
]

_VQ = {"embed_dim": 16, "num_embeddings": 64, "latent_channels": 32, "resolution": 32, "base_channels": 32,
       "channel_multiplier": [1, 2], "num_res_blocks": 1}

CHAMELEON_CASES = [
    # per-head LayerNorm q / k norms, MHA; a two-level VQ encoder with the mid attention only
    composite("chameleon", "ChameleonForConditionalGeneration", **TEXT, vocabulary_map={"<image>": 5},
              vq_config=_VQ),
    # swin_norm, grouped kv heads, attention blocks at the 16-pixel level, a doubled latent, two res blocks
    composite("chameleon", "ChameleonForConditionalGeneration", **TEXT, vocabulary_map={"<image>": 5}, swin_norm=True,
              vq_config={**_VQ, "attn_resolutions": [16], "double_latent": True, "num_res_blocks": 2,
                         "channel_multiplier": [1, 1, 2]}),
]

_IDEFICS_TEXT = {k: v for k, v in TEXT.items() if k not in ("num_key_value_heads", "head_dim")}
_IDEFICS_VISION = {"embed_dim": 48, "image_size": 56, "intermediate_size": 96, "patch_size": 14,
                   "num_hidden_layers": 2, "num_attention_heads": 4}

IDEFICS_CASES = [
    # a cross block after every decoder block, scalar gates, no resampler; untied
    composite("idefics", "IdeficsForVisionText2Text", **_IDEFICS_TEXT, vision_config=_IDEFICS_VISION),
    # every second block, vector gates, q / k norms, additional vocab rows, the perceiver with its q / k norms; tied
    composite("idefics", "IdeficsForVisionText2Text", **{**_IDEFICS_TEXT, "num_hidden_layers": 4},
              cross_layer_interval=2, alpha_type="vector", qk_layer_norms=True, additional_vocab_size=7,
              tie_word_embeddings=True, use_resampler=True, vision_config=_IDEFICS_VISION,
              perceiver_config={"resampler_n_latents": 5, "resampler_depth": 2, "resampler_n_heads": 2,
                                "resampler_head_dim": 8, "qk_layer_norms_perceiver": True}),
    # the bare IdeficsModel (no head)
    composite("idefics", "IdeficsModel", **_IDEFICS_TEXT, vision_config=_IDEFICS_VISION),
]

_PHI4_VISION = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4,
                "image_size": 56, "patch_size": 14, "crop_size": 56}
_PHI4_AUDIO = {"hidden_size": 32, "intermediate_size": 48, "num_blocks": 2, "num_attention_heads": 4,
               "ext_pw_out_channel": 32, "depthwise_separable_out_channel": 32, "nemo_conv_channels": 16,
               "input_size": 20}

PHI4_MULTIMODAL_CASES = [
    # Phi-3 text at the top level; a 4 x 4 patch grid (pooled 2 x 2); the Conformer with 8x time reduction
    composite("phi4_multimodal", "Phi4MultimodalForCausalLM", **TEXT, pad_token_id=0, vision_config=_PHI4_VISION,
              audio_config=_PHI4_AUDIO),
    # an odd 3 x 3 grid (reflection-padded); symmetric bias buckets, 4x reduction, depthwise multiplier 2,
    # downsample_rate 2, other conv widths; tied
    composite("phi4_multimodal", "Phi4MultimodalForCausalLM", **TEXT, pad_token_id=0, tie_word_embeddings=True,
              vision_config={**_PHI4_VISION, "image_size": 42},
              audio_config={**_PHI4_AUDIO, "bias_symmetric": True, "time_reduction": 4, "depthwise_multiplier": 2,
                            "downsample_rate": 2, "ext_pw_out_channel": 24, "depthwise_separable_out_channel": 40,
                            "kernel_size": 5, "bias_max_distance": 50}),
]

_ERNIE_TEXT = {**TEXT, "num_hidden_layers": 3, "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 128,
               "moe_intermediate_size": [64, 32], "moe_num_experts": 4, "moe_k": 2, "moe_num_shared_experts": 1}
_ERNIE_VISION = {"depth": 2, "hidden_size": 32, "num_heads": 4, "intermediate_size": 80, "patch_size": 14}

ERNIE4_5_VL_MOE_CASES = [
    # a dense first block then MoE blocks with text and vision experts; tied
    composite("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration", text_config=_ERNIE_TEXT,
              vision_config=_ERNIE_VISION),
    # scattered sparse blocks, biases on, no shared expert, merge 1; untied
    composite("ernie4_5_vl_moe", "Ernie4_5_VLMoeForConditionalGeneration", tie_word_embeddings=False,
              text_config={**_ERNIE_TEXT, "mlp_layer_types": ["sparse", "dense", "sparse"], "use_bias": True,
                           "moe_num_shared_experts": 0, "tie_word_embeddings": False},
              vision_config={**_ERNIE_VISION, "spatial_merge_size": 1}),
]

_PI0_VLM = {"text_config": {**TEXT, "model_type": "gemma"}, "projection_dim": 256,
            "vision_config": {**_SIGLIP, "vision_use_head": False}}
_PI0_DIT = {"hidden_size": 64, "num_hidden_layers": 2, "intermediate_size": 96, "num_attention_heads": 4,
            "num_key_value_heads": 2, "head_dim": 16}

PI0_CASES = [
    # a small PaliGemma beside a small action expert; default action / state widths
    composite("pi0", "PI0ForConditionalGeneration", vlm_config=_PI0_VLM, dit_config=_PI0_DIT),
    # biased expert attention, other action / state widths
    composite("pi0", "PI0ForConditionalGeneration", vlm_config=_PI0_VLM, max_action_dim=7, max_state_dim=5,
              dit_config={**_PI0_DIT, "attention_bias": True}),
]

_HY_TEXT = {"model_type": "hy_v4_vl_text", "num_hidden_layers": 6, "hidden_size": 128, "intermediate_size": 256,
            "moe_intermediate_size": 32, "num_attention_heads": 4, "q_lora_rank": 64, "kv_lora_rank": 32,
            "qk_nope_head_dim": 16, "qk_rope_head_dim": 8, "v_head_dim": 24, "n_routed_experts": 8,
            "num_experts_per_tok": 2, "index_n_heads": 2, "index_head_dim": 16, "index_topk": 32, "vocab_size": 1000,
            "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
            "rope_parameters": {"rope_type": "default", "rope_theta": 10000.0, "mrope_section": [2, 1, 1]}}
_HY_VISION = {"hidden_size": 32, "intermediate_size": 64, "num_attention_heads": 4, "num_hidden_layers": 2,
              "out_hidden_size": 128, "patch_size": 8, "max_image_size": 64}

HY_V4_VL_CASES = [
    # a small Hy4 text model; merge 2 into the text width; untied
    composite("hy_v4_vl", "HYV4VLForConditionalGeneration", text_config=_HY_TEXT, vision_config=_HY_VISION),
    # merge 1, another output width
    composite("hy_v4_vl", "HYV4VLForConditionalGeneration", text_config=_HY_TEXT,
              vision_config={**_HY_VISION, "spatial_merge_size": 1, "out_hidden_size": 96, "max_image_size": 48}),
]

_APERTUS_TEXT = {"model_type": "apertus1p5_text", "num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 256,
                 "num_attention_heads": 4, "vocab_size": 512, "max_position_embeddings": 256, "pad_token_id": 0}
_APERTUS_VQ = {"codebook_size": 64, "embed_dim": 16, "latent_channels": 32, "base_channels": 32,
               "channel_multiplier": [1, 2], "num_res_blocks": 1, "attn_resolutions": [16], "resolution": 32}
_WAV = {"num_filters": 8, "upsampling_ratios": [2, 3], "hidden_size": 32, "codebook_dim": 32, "codebook_size": 64,
        "num_lstm_layers": 1}

APERTUS1P5_CASES = [
    # attention at the 16-pixel level of a two-level VQ encoder; weight-normed audio convs with shortcuts
    composite("apertus1p5", "Apertus1p5ForConditionalGeneration", text_config=_APERTUS_TEXT, vision_config=_APERTUS_VQ,
              audio_config={**_WAV, "model_type": "wavtokenizer_encoder"}, image_token_offset=100,
              audio_token_offset=164),
    # no VQ attention level; GroupNorm audio convs, no shortcut, two residual layers, two LSTM layers; tied
    composite("apertus1p5", "Apertus1p5ForConditionalGeneration", text_config=_APERTUS_TEXT, tie_word_embeddings=True,
              vision_config={**_APERTUS_VQ, "attn_resolutions": [], "num_res_blocks": 2},
              audio_config={**_WAV, "model_type": "wavtokenizer_encoder", "norm_type": "time_group_norm",
                            "use_conv_shortcut": False, "num_residual_layers": 2, "num_lstm_layers": 2},
              image_token_offset=100, audio_token_offset=164),
]

_INKLING_TEXT = {"model_type": "inkling_text", "num_hidden_layers": 2, "hidden_size": 128, "intermediate_size": 256,
                 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32, "swa_num_attention_heads": 4,
                 "swa_num_key_value_heads": 1, "swa_head_dim": 16, "vocab_size": 512, "sliding_window_size": 64,
                 "rel_extent": 100, "d_rel": 8, "layer_types": ["hybrid", "hybrid"], "mlp_layer_types": ["dense", "dense"]}

INKLING_MM_CASES = [
    # an 8-pixel, 2-frame patch over 6 layers: each layer takes its nearest scale (argmin)
    composite("inkling_mm_model", "InklingForConditionalGeneration", text_config=_INKLING_TEXT,
              vision_config={"patch_size": 8, "n_layers": 6}, audio_config={"n_mel_bins": 4, "mel_vocab_size": 16}),
    # a 12-pixel patch (factors 3, 2, 2), 1 channel, the attribute_map's num_hidden_layers
    composite("inkling_mm_model", "InklingForConditionalGeneration", text_config=_INKLING_TEXT,
              vision_config={"patch_size": 12, "num_hidden_layers": 5, "num_channels": 1}),
]

INKLING_ASSIGNMENT_CASES = [
    # 3 layers over 5 scales: the one-to-one assignment (transformers calls scipy's linear_sum_assignment)
    composite("inkling_mm_model", "InklingForConditionalGeneration", text_config=_INKLING_TEXT,
              vision_config={"patch_size": 8, "n_layers": 3}),
]

_SAPROT = {"vocab_size": 40, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
           "intermediate_size": 64, "max_position_embeddings": 66}
_EVOLLA_TEXT = {k: v for k, v in TEXT.items() if k != "head_dim"}

EVOLLA_CASES = [
    # rotary SaProt, a two-block resampler, an aligner in every block (2 blocks // 2 added layers = 1)
    composite("evolla", "EvollaForProteinText2Text", **_EVOLLA_TEXT, aligner_num_add_layers=2, resampler_depth=2,
              resampler_dim_head=8, resampler_heads=2, resampler_num_latents=4, protein_encoder_config=_SAPROT),
    # absolute SaProt positions with the LayerNorm before; one aligner (every 2nd block), its out_proj bias-free
    composite("evolla", "EvollaForProteinText2Text", **{**_EVOLLA_TEXT, "num_hidden_layers": 3}, aligner_num_add_layers=1,
              aligner_enable_bias=False, aligner_ffn_mult=2, resampler_depth=1, resampler_dim_head=8, resampler_heads=2,
              resampler_num_latents=4, resampler_ff_mult=2,
              protein_encoder_config={**_SAPROT, "position_embedding_type": "absolute", "emb_layer_norm_before": True}),
]

_GRANITE4_VISION = {"model_type": "siglip_vision_model", "hidden_size": 64, "intermediate_size": 96,
                    "num_hidden_layers": 2, "num_attention_heads": 4, "image_size": 64, "patch_size": 8}

GRANITE4_VISION_CASES = [
    # a SigLIP tower (head built), two deepstack pairs, 2x2 queries per 4x4 window, the default Q-Former
    composite("granite4_vision", "Granite4VisionForConditionalGeneration", text_config={**TEXT, "pad_token_id": 0},
              vision_config=_GRANITE4_VISION, deepstack_layer_map=[[0, 0], [1, 1]], downsample_rate="2/4"),
    # a CLIP tower, one pair, 1x1 queries per 2x2 window, a two-layer Q-Former with cross-attention every 2nd
    composite("granite4_vision", "Granite4VisionForConditionalGeneration", text_config={**TEXT, "pad_token_id": 0},
              vision_config={**{k: v for k, v in _GRANITE4_VISION.items() if k != "model_type"},
                             "model_type": "clip_vision_model"},
              deepstack_layer_map=[[1, 0]], downsample_rate="1/2",
              qformer_config={"num_hidden_layers": 2, "intermediate_size": 80, "cross_attention_frequency": 2}),
]

CASES = (DEEPSEEK_VL_HYBRID_CASES + MINICPM_V_CASES + MOLMO2_CASES + CHAMELEON_CASES + IDEFICS_CASES
         + PHI4_MULTIMODAL_CASES + ERNIE4_5_VL_MOE_CASES
         + PI0_CASES + HY_V4_VL_CASES + APERTUS1P5_CASES
         + INKLING_MM_CASES + EVOLLA_CASES + GRANITE4_VISION_CASES)
"""Small composites (fast on the meta device)."""
