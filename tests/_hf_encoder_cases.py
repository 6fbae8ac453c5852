"""Small configs of the standalone image / audio encoders (modelplan/specs/hf_vision_models.py,
hf_audio.py), one per head class, and the reference runs: transformers 5.24's own module built
from the config (the class `architectures` names) is the independent source of every expected
count and FLOP figure."""

from __future__ import annotations

_VIT = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
        "image_size": 32, "patch_size": 8, "num_channels": 3, "num_labels": 5}
_SIGLIP_V = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
             "image_size": 32, "patch_size": 8}
_AUDIO = {"hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 48,
          "conv_dim": [16, 16, 24], "conv_kernel": [10, 3, 2], "conv_stride": [5, 2, 2], "num_conv_pos_embeddings": 16,
          "num_conv_pos_embedding_groups": 4, "vocab_size": 11, "classifier_proj_size": 8, "num_labels": 3}


def case(model_type: str, arch: str, **keys) -> dict:
    return {"model_type": model_type, "architectures": [arch], **keys}


IMAGE_CASES = [
    case("vit", "ViTModel", **_VIT),
    case("vit", "ViTForImageClassification", **_VIT, qkv_bias=False),
    case("vit_msn", "ViTMSNModel", **_VIT),
    case("vit_msn", "ViTMSNForImageClassification", **_VIT),
    case("deit", "DeiTModel", **_VIT, pooler_output_size=24),
    case("deit", "DeiTForImageClassification", **_VIT),
    case("deit", "DeiTForImageClassificationWithTeacher", **_VIT),
    case("dinov2", "Dinov2Model", **{k: v for k, v in _VIT.items() if k != "intermediate_size"}, mlp_ratio=3),
    case("dinov2", "Dinov2ForImageClassification", **{k: v for k, v in _VIT.items() if k != "intermediate_size"},
         use_swiglu_ffn=True),
    case("dinov2_with_registers", "Dinov2WithRegistersForImageClassification",
         **{k: v for k, v in _VIT.items() if k != "intermediate_size"}, num_register_tokens=3),
    case("dinov3_vit", "DINOv3ViTModel", **_VIT, num_register_tokens=2),
    case("dinov3_vit", "DINOv3ViTModel", **_VIT, use_gated_mlp=True, key_bias=True, mlp_bias=False, proj_bias=False),
    case("beit", "BeitModel", **_VIT),
    case("beit", "BeitForImageClassification", **_VIT, use_relative_position_bias=True, use_mean_pooling=False),
    case("beit", "BeitModel", **_VIT, use_shared_relative_position_bias=True, use_absolute_position_embeddings=True,
         use_mask_token=True, layer_scale_init_value=0.0),
    case("data2vec-vision", "Data2VecVisionModel", **_VIT, use_relative_position_bias=True),
    case("data2vec-vision", "Data2VecVisionForImageClassification", **_VIT),
    case("audio-spectrogram-transformer", "ASTForAudioClassification", **{k: v for k, v in _VIT.items() if k not in
         ("image_size", "num_channels")}, num_mel_bins=24, max_length=40, frequency_stride=6, time_stride=5),
    case("audio-spectrogram-transformer", "ASTModel", **{k: v for k, v in _VIT.items() if k not in
         ("image_size", "num_channels")}, num_mel_bins=16, max_length=33),
    case("ijepa", "IJepaModel", **_VIT),
    case("ijepa", "IJepaForImageClassification", **_VIT),
    case("clip_vision_model", "CLIPVisionModel", **_SIGLIP_V),
    case("clip_vision_model", "CLIPVisionModelWithProjection", **_SIGLIP_V, projection_dim=20),
    case("siglip_vision_model", "SiglipVisionModel", **_SIGLIP_V),
    case("siglip_vision_model", "SiglipVisionModel", **_SIGLIP_V, vision_use_head=False),
    case("siglip2_vision_model", "Siglip2VisionModel", **{k: v for k, v in _SIGLIP_V.items() if k != "image_size"},
         num_patches=16),
]
"""One small config per modelled image head class."""

PAIR_CLASSIFIERS = [
    case("clip", "CLIPForImageClassification", vision_config=_SIGLIP_V, num_labels=5),
    case("metaclip_2", "MetaClip2ForImageClassification", vision_config=_SIGLIP_V, num_labels=5),
    case("siglip", "SiglipForImageClassification", vision_config=_SIGLIP_V, num_labels=5),
    case("siglip2", "Siglip2ForImageClassification",
         vision_config={**{k: v for k, v in _SIGLIP_V.items() if k != "image_size"}, "num_patches": 16}, num_labels=5),
]
"""The image-text pairs' classifiers: their vision model alone and a classifier."""

_TEXT = {"hidden_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 40,
         "vocab_size": 99, "max_position_embeddings": 16}

PAIR_CASES = [
    case("clip", "CLIPModel", text_config=_TEXT, vision_config=_SIGLIP_V, projection_dim=20),
    case("siglip", "SiglipModel", text_config={**_TEXT, "projection_size": 20}, vision_config=_SIGLIP_V),
    case("siglip2", "Siglip2Model", text_config=_TEXT,
         vision_config={**{k: v for k, v in _SIGLIP_V.items() if k != "image_size"}, "num_patches": 16}),
    case("metaclip_2", "MetaClip2Model", text_config=_TEXT, vision_config=_SIGLIP_V, projection_dim=20),
    case("chinese_clip", "ChineseCLIPModel", text_config=_TEXT, vision_config=_SIGLIP_V, projection_dim=20),
]
"""The image-text pairs: a small text tower and vision tower each."""

AUDIO_CASES = [
    case("wav2vec2", "Wav2Vec2Model", **_AUDIO),
    case("wav2vec2", "Wav2Vec2ForCTC", **_AUDIO),
    case("wav2vec2", "Wav2Vec2ForCTC", **_AUDIO, do_stable_layer_norm=True, feat_extract_norm="layer", conv_bias=True,
         mask_time_prob=0.0),
    case("wav2vec2", "Wav2Vec2ForSequenceClassification", **_AUDIO, use_weighted_layer_sum=True),
    case("wav2vec2", "Wav2Vec2ForPreTraining", **_AUDIO, codevector_dim=12, proj_codevector_dim=10,
         num_codevectors_per_group=7),
    case("hubert", "HubertModel", **_AUDIO, feat_proj_layer_norm=False),
    case("hubert", "HubertForCTC", **{**_AUDIO, "num_conv_pos_embeddings": 15}),
    case("hubert", "HubertForSequenceClassification", **_AUDIO),
    case("unispeech", "UniSpeechForCTC", **_AUDIO),
    case("wavlm", "WavLMForCTC", **_AUDIO, num_buckets=20, max_bucket_distance=40),
    case("wavlm", "WavLMForSequenceClassification", **_AUDIO, do_stable_layer_norm=True),
    case("unispeech-sat", "UniSpeechSatForSequenceClassification", **_AUDIO, mask_time_prob=0.0),
    case("data2vec-audio", "Data2VecAudioForCTC", **{**_AUDIO, "num_conv_pos_embeddings": 3}, conv_pos_kernel_size=5),
    case("data2vec-audio", "Data2VecAudioModel", **{**_AUDIO, "num_conv_pos_embeddings": 2}, conv_pos_kernel_size=4),
]
"""One small config per modelled audio head class (an odd positional kernel once)."""

_RESNET = {"embedding_size": 8, "hidden_sizes": [16, 32], "depths": [2, 1], "num_labels": 5}
RESNET_CASES = [
    case("resnet", "ResNetForImageClassification", **_RESNET),
    case("resnet", "ResNetModel", **{**_RESNET, "hidden_sizes": [8, 24]}, layer_type="basic", downsample_in_first_stage=True),
    case("resnet", "ResNetModel", **_RESNET, downsample_in_bottleneck=True, hidden_act="gelu"),
]
"""Small ResNets (the network stack): bottleneck and basic blocks, both downsampling options."""

DEFAULT_CLASSES = {
    "vit": "ViTModel", "vit_msn": "ViTMSNModel", "deit": "DeiTModel", "dinov2": "Dinov2Model", "ijepa": "IJepaModel",
    "dinov2_with_registers": "Dinov2WithRegistersModel", "dinov3_vit": "DINOv3ViTModel",
    "beit": "BeitModel", "data2vec-vision": "Data2VecVisionModel", "audio-spectrogram-transformer": "ASTModel", "clip_vision_model": "CLIPVisionModel",
    "siglip_vision_model": "SiglipVisionModel", "siglip2_vision_model": "Siglip2VisionModel", "clip": "CLIPModel",
    "siglip": "SiglipModel", "siglip2": "Siglip2Model", "metaclip_2": "MetaClip2Model", "chinese_clip": "ChineseCLIPModel", "wav2vec2": "Wav2Vec2Model", "hubert": "HubertModel",
    "resnet": "ResNetModel", "unispeech": "UniSpeechModel", "unispeech-sat": "UniSpeechSatModel", "data2vec-audio": "Data2VecAudioModel",
    "wavlm": "WavLMModel",
}
"""model_type -> its base model, the class a config without architectures counts as."""


def hf_forward_flops(data: dict, seq_len: int, part: str | None = None, samples: int | None = None) -> int:
    """FLOPs FlopCounterMode counts for one forward of transformers' module of `data` (eager
    attention, CPU, eval, no grad) on one image of the config's size, or one clip of the
    shortest length giving `seq_len` frames (or of `samples` samples); a pair's `part` ('image' / 'text') runs
    get_image_features on one image or get_text_features on one text of seq_len tokens. SigLIP 2's
    position-table resize (F.interpolate with antialias, run as an aten.mm on CPU over no weight)
    is left out."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from _hf_reference import hf_class, hf_config

    cfg = hf_config(data)
    for sub in (cfg, getattr(cfg, "text_config", None), getattr(cfg, "vision_config", None)):
        if sub is not None:
            sub._attn_implementation = "eager"
    torch.manual_seed(0)
    model = hf_class(data)._from_config(cfg).eval()
    v = getattr(cfg, "vision_config", cfg)
    if data["model_type"] in ("wav2vec2", "hubert", "unispeech", "unispeech-sat", "data2vec-audio", "wavlm"):
        from modelplan.specs.hf import from_hf_config

        samples = samples or from_hf_config(data).inputs.lengths(seq_len)[0]
        inputs = {"input_values": torch.randn(1, samples)}
    elif "siglip2" in data["model_type"]:
        n, p = v.num_patches, v.patch_size
        inputs = {"pixel_values": torch.randn(1, n, v.num_channels * p * p),
                  "pixel_attention_mask": torch.ones(1, n, dtype=torch.long),
                  "spatial_shapes": torch.tensor([[int(n ** 0.5)] * 2])}
    elif data["model_type"] == "audio-spectrogram-transformer":  # (batch, frames, mel bins)
        inputs = {"input_values": torch.randn(1, cfg.max_length, cfg.num_mel_bins)}
    else:
        inputs = {"pixel_values": torch.randn(1, v.num_channels, v.image_size, v.image_size)}
    run = model
    if part == "text":
        run, inputs = model.get_text_features, {"input_ids": torch.randint(0, cfg.text_config.vocab_size, (1, seq_len))}
    elif part == "image":
        run = model.get_image_features
    counter = FlopCounterMode(display=False)
    with torch.no_grad(), counter:
        run(**inputs)
    resize = sum(n for name, ops in counter.get_flop_counts().items() if name.endswith("embeddings")
                 for op, n in ops.items() if "siglip2" in data["model_type"] and str(op) == "aten.mm")
    return counter.get_total_flops() - resize
