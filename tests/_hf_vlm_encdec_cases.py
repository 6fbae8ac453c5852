"""Small configs of the composites tests/test_hf_vlm_encdec.py checks, the name parts of their tower +
projector parameters in transformers' modules, and the reference helpers (transformers 5.24)."""

from __future__ import annotations

from _hf_reference import hf_class, hf_config, hf_model

_BART = {"model_type": "bart", "d_model": 32, "encoder_layers": 2, "decoder_layers": 3, "encoder_attention_heads": 4,
         "decoder_attention_heads": 4, "encoder_ffn_dim": 48, "decoder_ffn_dim": 48, "vocab_size": 300,
         "max_position_embeddings": 64}
_DAVIT = {"depths": [1, 2], "patch_size": [7, 3], "patch_stride": [4, 2], "patch_padding": [3, 1],
          "patch_prenorm": [False, True], "embed_dim": [16, 32], "num_heads": [2, 4], "num_groups": [2, 4],
          "window_size": 5, "projection_dim": 32, "qkv_bias": False, "image_size": 104}
"""Two DaViT stages; 104 px -> a 26 x 26 then 13 x 13 grid, padded to 30 / 15 for 5 x 5 windows."""

_VIT = {"hidden_size": 24, "intermediate_size": 40, "num_hidden_layers": 2, "num_attention_heads": 2, "image_size": 64,
        "patch_size": 16}
"""A 4 x 4-patch ViT (+ a class token: 17 tokens)."""
_BERT = {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2, "num_attention_heads": 4, "vocab_size": 300,
         "max_position_embeddings": 64}

CASES = {
    "florence2": {"model_type": "florence2", "architectures": ["Florence2ForConditionalGeneration"],
                  "text_config": _BART, "vision_config": _DAVIT},
    "blip": {"model_type": "blip", "architectures": ["BlipForConditionalGeneration"], "text_config": _BERT,
             "vision_config": _VIT},
    "git": {"model_type": "git", "architectures": ["GitForCausalLM"], **_BERT, "num_image_with_embedding": 2,
            "vision_config": _VIT},
}
_TROCR = {"model_type": "trocr", "d_model": 32, "decoder_layers": 2, "decoder_attention_heads": 4, "decoder_ffn_dim": 48,
          "vocab_size": 300, "max_position_embeddings": 64}
_DECODERS = {
    "trocr": _TROCR,  # TrOCR: widths differ -> enc_to_dec_proj
    "trocr-cross": {**_TROCR, "cross_attention_hidden_size": 24},  # k / v read the 24-wide encoder output
    "mbart": {**{k: v for k, v in _BART.items() if k != "model_type"}, "model_type": "mbart"},  # Donut's decoder
    "gpt2": {"model_type": "gpt2", "n_embd": 32, "n_layer": 2, "n_head": 4, "vocab_size": 300, "n_positions": 64,
             "add_cross_attention": True, "is_decoder": True},  # ViT-GPT2 captioning
    "bert": {**_BERT, "hidden_size": 24, "model_type": "bert", "add_cross_attention": True, "is_decoder": True},
}
CASES.update({f"vision-encoder-decoder/{name}": {
    "model_type": "vision-encoder-decoder", "architectures": ["VisionEncoderDecoderModel"],
    "encoder": {**_VIT, "model_type": "vit"}, "decoder": decoder} for name, decoder in _DECODERS.items()})
CASES["vision-encoder-decoder/deit"] = {
    "model_type": "vision-encoder-decoder", "architectures": ["VisionEncoderDecoderModel"],
    "encoder": {**_VIT, "model_type": "deit"}, "decoder": _TROCR}
"""TrOCR-small's shape: a DeiT encoder (class and distillation tokens: 18 tokens) and a TrOCR decoder."""
_SWINS = {
    # Donut: a 90 x 70 px page -> a 23 x 18 patch grid (padded), 5 x 5 windows padded, odd sides merged
    "donut-swin": {"model_type": "donut-swin", "image_size": [90, 70], "patch_size": 4, "embed_dim": 8,
                   "depths": [2, 2, 1], "num_heads": [2, 2, 4], "window_size": 5},
    # Swin with absolute positions: 16 x 16 then 8 x 8 grids in 3 x 3 windows (padded to 18 and 9)
    "swin": {"model_type": "swin", "image_size": 64, "patch_size": 4, "embed_dim": 8, "depths": [2, 1],
             "num_heads": [2, 2], "window_size": 3, "use_absolute_embeddings": True},
    # the last stage's 7 x 7 grid is one window, unshifted (set_shift_and_window_size; a smaller grid
    # makes transformers 5.24's relative-position bias mismatch the window and fail)
    "swin-one-window": {"model_type": "swin", "image_size": 56, "patch_size": 4, "embed_dim": 8, "depths": [1, 2],
                        "num_heads": [2, 2], "window_size": 7},
}
CASES.update({f"vision-encoder-decoder/{name}": {
    "model_type": "vision-encoder-decoder", "architectures": ["VisionEncoderDecoderModel"], "encoder": encoder,
    "decoder": _DECODERS["mbart"]} for name, encoder in _SWINS.items()})
"""Small configs, one per type (the name: the module transformers builds)."""

CASES["pix2struct"] = {
    "model_type": "pix2struct", "architectures": ["Pix2StructForConditionalGeneration"], "max_patches": 40,
    "text_config": {"hidden_size": 32, "d_kv": 8, "d_ff": 48, "num_layers": 2, "num_heads": 4, "vocab_size": 300},
    "vision_config": {"hidden_size": 32, "patch_embed_hidden_size": 48, "d_ff": 40, "d_kv": 6, "num_hidden_layers": 2,
                      "num_attention_heads": 3, "seq_len": 64}}
"""Pix2Struct on 40 flattened patches of 48 values; its encoder's heads x d_kv (18) narrower than its width."""
CASES["kosmos-2"] = {
    "model_type": "kosmos-2", "architectures": ["Kosmos2ForConditionalGeneration"], "latent_query_num": 8,
    "text_config": {"embed_dim": 32, "layers": 2, "ffn_dim": 48, "attention_heads": 4, "vocab_size": 300,
                    "max_position_embeddings": 64}, "vision_config": _VIT}

CASES["kosmos-2.5"] = {
    "model_type": "kosmos-2.5", "architectures": ["Kosmos2_5ForConditionalGeneration"], "latent_query_num": 8,
    "max_patches": 40, "text_config": CASES["kosmos-2"]["text_config"],
    "vision_config": {"hidden_size": 24, "patch_embed_hidden_size": 48, "intermediate_size": 40, "head_dim": 6,
                      "num_hidden_layers": 2, "num_attention_heads": 3, "max_num_patches": 64}}
_QWEN2 = {"model_type": "qwen2", "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
          "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 300}
_SAM = {"hidden_size": 24, "output_channels": 16, "num_hidden_layers": 3, "num_attention_heads": 2, "image_size": 80,
        "patch_size": 8, "window_size": 3, "global_attn_indexes": [1], "mlp_dim": 40}
"""A 10 x 10-patch SAM: two blocks in 3 x 3 windows (padded to 12 x 12), one global block."""
for _name in ("got_ocr2", "pp_chart2table"):
    CASES[_name] = {"model_type": _name, "architectures": ["GotOcr2ForConditionalGeneration"], "text_config": _QWEN2,
                    "vision_config": _SAM}
CASES["got_ocr2-untied"] = {**CASES["got_ocr2"], "tie_word_embeddings": False}  # the composite's flag decides
CASES["unlimited_ocr"] = {
    "model_type": "unlimited_ocr", "architectures": ["UnlimitedOcrForConditionalGeneration"],
    "text_config": {"hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 3, "num_attention_heads": 4,
                    "num_key_value_heads": 4, "vocab_size": 300, "n_routed_experts": 4, "num_experts_per_tok": 2,
                    "moe_intermediate_size": 16, "n_shared_experts": 1, "mlp_layer_types": ["dense", "sparse", "sparse"],
                    "layer_types": ["reference_sliding_attention", "full_attention", "reference_sliding_attention"]},
    "vision_config": {"sam_config": {**_SAM, "image_size": 128, "downsample_channels": [20, 32]},
                      "encoder_config": {"hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2,
                                         "num_attention_heads": 2, "image_size": 56, "patch_size": 14}}}
"""Unlimited-OCR: a 16 x 16 SAM grid -> 4 x 4 after its proj convs -> a CLIP on 17 tokens; MoE from block 1."""
CASES["deepseek_ocr2"] = {
    "model_type": "deepseek_ocr2", "architectures": ["DeepseekOcr2ForConditionalGeneration"],
    "text_config": {k: v for k, v in CASES["unlimited_ocr"]["text_config"].items() if k != "layer_types"},
    "vision_config": {"sam_config": CASES["unlimited_ocr"]["vision_config"]["sam_config"],
                      "encoder_config": {"hidden_size": 32, "intermediate_size": 40, "num_hidden_layers": 2,
                                         "num_attention_heads": 4, "num_key_value_heads": 2}}}
"""DeepSeek-OCR 2: the same SAM, then 16 patches + 144 queries through a GQA encoder."""
CASES["pp_formulanet"] = {
    "model_type": "pp_formulanet", "architectures": ["PPFormulaNetForConditionalGeneration"],
    "text_config": {"d_model": 32, "decoder_layers": 2, "decoder_attention_heads": 4, "decoder_ffn_dim": 48,
                    "vocab_size": 300, "max_position_embeddings": 64},
    "vision_config": {**_SAM, "post_conv_in_channels": 16, "post_conv_mid_channels": 20, "post_conv_out_channels": 28,
                      "decoder_hidden_size": 32}}

TOWER = {"florence2": ("vision_tower.", "multi_modal_projector."), "blip": ("vision_model.",),
         "git": ("image_encoder.", "visual_projection.", "img_temporal_embedding"),
         "vision-encoder-decoder": ("^encoder.", "^enc_to_dec_proj."), "pix2struct": ("^encoder.",),
         "kosmos-2": ("vision_model.", "image_to_text_projection."),
         "kosmos-2.5": ("vision_model.", "image_to_text_projection."),
         "got_ocr2": ("vision_tower.", "multi_modal_projector."), "pp_formulanet": ("^model.encoder.",),
         "unlimited_ocr": ("vision_tower.", "multi_modal_projector.", "view_separator", "image_newline"),
         "deepseek_ocr2": ("vision_tower.", "multi_modal_projector.", "view_separator"),
         "pp_chart2table": ("vision_tower.", "multi_modal_projector.")}
"""Name parts of each type's tower + projector parameters in transformers' module (^: a name's start)."""

IMAGE_FEATURES = {
    "florence2": lambda model, pixels: model.model.get_image_features(pixel_values=pixels),
    "blip": lambda model, pixels: model.vision_model(pixel_values=pixels),
    "git": lambda model, pixels: model.git.visual_projection(model.git.image_encoder(pixels).last_hidden_state),
    "vision-encoder-decoder": lambda model, pixels: getattr(model, "enc_to_dec_proj", lambda x: x)(
        model.encoder(pixel_values=pixels).last_hidden_state),
    "got_ocr2": lambda model, pixels: model.model.get_image_features(pixel_values=pixels),
    "pp_formulanet": lambda model, pixels: model.model.encoder(pixel_values=pixels),
    "deepseek_ocr2": lambda model, pixels: model.model.multi_modal_projector(
        model.model.vision_tower(pixel_values=pixels).last_hidden_state),
    "unlimited_ocr": lambda model, pixels: model.model.multi_modal_projector(
        model.model.vision_tower(pixel_values=pixels).last_hidden_state),
    "pp_chart2table": lambda model, pixels: model.model.get_image_features(pixel_values=pixels),
    "kosmos-2": lambda model, pixels: model.image_to_text_projection(
        model.vision_model.model.post_layernorm(model.vision_model(pixel_values=pixels)[0])),
}
"""transformers' tower + projector on one image, per type."""


def hf_counts(data: dict) -> tuple[int, int, int]:
    """(total, requires_grad, tower + projector) of transformers' module on the meta device."""
    prefixes = TOWER[data["model_type"]]
    total = trainable = tower = 0
    for name, p in hf_model(data).named_parameters():
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
        tower += p.numel() if any(name.startswith(x[1:]) if x[0] == "^" else f".{x}" in f".{name}"
                                  for x in prefixes) else 0
    return total, trainable, tower


def hf_eager(data: dict):
    """transformers' module of `data` on CPU in eval mode, eager attention on it and its sub-configs; seed 0."""
    import torch

    cfg = hf_config(data)
    vision = getattr(cfg, "vision_config", None)
    for sub in (cfg, getattr(cfg, "text_config", None), vision, getattr(vision, "sam_config", None),
                getattr(vision, "encoder_config", None)):
        if sub is not None:
            sub._attn_implementation = "eager"
            sub._experts_implementation = "eager"
    torch.manual_seed(0)
    return hf_class(data)._from_config(cfg).eval()
