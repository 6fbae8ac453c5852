"""Small configs of the HF image classifiers mapped onto the network stack
(modelplan/specs/hf_convnets.py, hf_swin_networks.py): each head class and the options that
change the layer tree."""

from __future__ import annotations


def case(model_type: str, arch: str, **keys) -> dict:
    return {"model_type": model_type, "architectures": [arch], **keys}


_EFFICIENT = {"width_coefficient": 0.5, "depth_coefficient": 0.5, "hidden_dim": 640, "kernel_sizes": [3, 5],
              "in_channels": [32, 16], "out_channels": [16, 24], "strides": [1, 2], "num_block_repeats": [1, 3],
              "expand_ratios": [1, 6], "image_size": 64}
_CONVNEXT = {"hidden_sizes": [8, 16], "depths": [1, 2], "num_stages": 2, "image_size": 64}
_REGNET = {"hidden_sizes": [16, 32], "depths": [1, 2], "groups_width": 8, "embedding_size": 8}

CONVNET_CASES = [
    case("mobilenet_v1", "MobileNetV1ForImageClassification", depth_multiplier=0.25, image_size=64),
    case("mobilenet_v1", "MobileNetV1Model", depth_multiplier=0.5, min_depth=16, image_size=64),
    case("mobilenet_v2", "MobileNetV2ForImageClassification", depth_multiplier=0.35, image_size=64),
    case("mobilenet_v2", "MobileNetV2Model", depth_multiplier=0.5, first_layer_is_expansion=False, image_size=64,
         finegrained_output=False),
    case("regnet", "RegNetForImageClassification", **_REGNET),
    case("regnet", "RegNetModel", **_REGNET, layer_type="x", downsample_in_first_stage=False),
    case("convnext", "ConvNextForImageClassification", **_CONVNEXT),
    case("convnext", "ConvNextModel", **_CONVNEXT, layer_scale_init_value=0.0, patch_size=2),
    case("convnextv2", "ConvNextV2ForImageClassification", **_CONVNEXT),
    case("convnextv2", "ConvNextV2Model", **{**_CONVNEXT, "depths": [2, 0]}),
    case("efficientnet", "EfficientNetForImageClassification", **_EFFICIENT),
    case("efficientnet", "EfficientNetModel", **{**_EFFICIENT, "expand_ratios": [2, 1]}, hidden_act="relu"),
]
"""One small config per head class, and the options: depth multipliers, X / Y RegNet layers, no layer
scale, expansion ratios of 1 and more."""

CONVNET_DEFAULTS = {"mobilenet_v1": "MobileNetV1ForImageClassification",
                    "mobilenet_v2": "MobileNetV2ForImageClassification", "regnet": "RegNetForImageClassification",
                    "convnext": "ConvNextForImageClassification", "efficientnet": "EfficientNetForImageClassification",
                    "convnextv2": "ConvNextV2ForImageClassification", "bit": "BitForImageClassification",
                    "poolformer": "PoolFormerForImageClassification", "textnet": "TextNetForImageClassification"}
"""model_type -> the classifier class its class-defaults config is built as."""

_SWIN = {"embed_dim": 16, "depths": [2, 1], "num_heads": [2, 4], "image_size": 64, "window_size": 4}
SWIN_CASES = [
    case("swin", "SwinForImageClassification", **_SWIN),
    case("swin", "SwinModel", **{**_SWIN, "depths": [1, 3, 1], "num_heads": [1, 2, 4]}, qkv_bias=False, mlp_ratio=2.0),
    case("donut-swin", "DonutSwinModel", **_SWIN),
    case("donut-swin", "DonutSwinForImageClassification", **{**_SWIN, "image_size": [64, 96]}),
]
"""Swin / Donut-Swin: shifted and unshifted stages, a last stage whose grid equals the window (no
shift), a non-square image (Donut's [height, width]), no q / k / v bias."""

SWINV2_CASES = [
    case("swinv2", "Swinv2ForImageClassification", **_SWIN),
    case("swinv2", "Swinv2Model", **{**_SWIN, "depths": [2, 2, 1], "num_heads": [2, 2, 4], "window_size": 8},
         pretrained_window_sizes=[4, 4, 4], qkv_bias=False),
]
"""Swin V2: a stage grid smaller than the window (clamped to the grid, unshifted), pretrained windows,
no q / v bias."""

SWIN_DEFAULTS = {"swin": "SwinForImageClassification", "donut-swin": "DonutSwinForImageClassification",
                 "swinv2": "Swinv2ForImageClassification"}

_BIT = {"hidden_sizes": [32, 64], "depths": [2, 1], "num_groups": 4, "embedding_size": 16, "image_size": 64}
BIT_CASES = [
    case("bit", "BitForImageClassification", **_BIT),
    case("bit", "BitModel", **_BIT, layer_type="bottleneck"),
    case("bit", "BitModel", **{**_BIT, "depths": [1, 2]}, global_padding="SAME"),
    case("bit", "BitForImageClassification", **_BIT, global_padding="SAME", embedding_dynamic_padding=True),
]
"""BiT: pre-activation and post-activation bottlenecks, the stem pool's paddings."""

_POOL = {"hidden_sizes": [8, 16], "depths": [1, 2], "num_encoder_blocks": 2, "image_size": 64}
POOLFORMER_CASES = [
    case("poolformer", "PoolFormerForImageClassification", **_POOL),
    case("poolformer", "PoolFormerModel", **_POOL, use_layer_scale=False, pool_size=5, mlp_ratio=2.0),
]
"""PoolFormer: with and without layer scale, another pool size and MLP ratio."""

_TEXTNET = {"hidden_sizes": [8, 8, 16], "conv_layer_kernel_sizes": [[[3, 3], [1, 3]], [[3, 1], [3, 3]]],
            "conv_layer_strides": [[1, 1], [2, 1]], "stem_out_channels": 8, "image_size": 64}
TEXTNET_CASES = [
    case("textnet", "TextNetForImageClassification", **_TEXTNET),
    case("textnet", "TextNetModel", **_TEXTNET, stem_kernel_size=5, stem_stride=1),
]
"""TextNet: 3 x 3, 1 x 3 and 3 x 1 kernels (their vertical / horizontal branches), the identity branch
where channels and stride stay."""
