"""The HF image classifiers built as network specs (modelplan/specs/hf_levit.py, hf_pvt.py,
hf_reduced_attention.py, hf_mobilevit.py, hf_mobilevitv2.py, hf_hgnet.py, hf_pp_lcnet.py,
hf_swiftformer.py, hf_cvt.py, hf_focalnet.py,
hf_hiera.py), one table row per model type: total parameters equal sum(p.numel()) of
transformers 5.24's own module (the class `architectures` names) for small configs and for the config
class defaults; the convolutions', linears' and attention's FLOPs of one image equal FlopCounterMode's
on that module; published sizes; `count` / `plan --gpus 8` / `verify --tp 2 --pp 2` run; bad fields are
one-line errors naming them. A new type adds a row to each table."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from _hf_n17_checks import assert_one_line_error, class_defaults
from _hf_network_checks import assert_count_plan_verify, assert_matmul_flops_equal_flop_counter, total
from _hf_reference import hf_numel


@dataclass(frozen=True)
class Row:
    """One model type: the class its defaults are built as, small configs by id, which of them go
    through the CLI (count / plan / verify) and which are skipped by the FLOP check."""

    model_type: str
    classifier: str
    small: dict[str, dict]
    verify: tuple[str, ...] = ()
    no_flops: tuple[str, ...] = field(default=())


def _arch(model_type: str, arch: str, **fields) -> dict:
    return {"model_type": model_type, "architectures": [arch], **fields}


_LEVIT = {"image_size": 64, "hidden_sizes": [32, 48, 64], "num_attention_heads": [2, 3, 4], "depths": [1, 2, 1],
          "key_dim": [8, 8, 8], "mlp_ratio": [2, 2, 2], "attention_ratio": [2, 2, 2], "num_labels": 5}
_PVT = {"image_size": 64, "num_encoder_blocks": 3, "depths": [1, 2, 1], "sequence_reduction_ratios": [4, 2, 1],
        "hidden_sizes": [8, 16, 24], "patch_sizes": [4, 2, 2], "strides": [4, 2, 2], "num_attention_heads": [1, 2, 3],
        "mlp_ratios": [4, 2, 2], "num_labels": 5}
_REDUCED = {"depths": [1, 2], "sr_ratios": [2, 1], "hidden_sizes": [8, 16], "patch_sizes": [7, 3], "strides": [4, 2],
            "num_attention_heads": [1, 2], "mlp_ratios": [4, 2], "num_encoder_blocks": 2, "num_labels": 5}
_MOBILEVIT = {"hidden_sizes": [16, 24, 32], "neck_hidden_sizes": [8, 8, 16, 16, 24, 24, 48], "num_attention_heads": 2,
              "image_size": 64, "num_labels": 5}
_HGNET = {"stem_channels": [3, 8, 12], "stage_in_channels": [12, 16], "stage_mid_channels": [8, 12],
          "stage_out_channels": [16, 24], "stage_num_blocks": [1, 2], "stage_downsample": [False, True],
          "stage_downsample_strides": [2, 2], "stage_light_block": [False, True], "stage_kernel_size": [3, 5],
          "stage_numb_of_layers": [2, 3], "hidden_sizes": [16, 24], "depths": [1, 2], "num_labels": 7, "image_size": 64}
_CVT = {"image_size": 64, "embed_dim": [16, 24, 32], "num_heads": [1, 2, 4], "depth": [1, 2, 3], "num_labels": 5}

ROWS = [
    Row("levit", "LevitForImageClassification", {
        "classifier": _arch("levit", "LevitForImageClassification", **_LEVIT),
        "model-options": _arch("levit", "LevitModel", **{**_LEVIT, "mlp_ratio": [0, 3, 1], "attention_ratio": [1, 4, 2],
                                                        "hidden_sizes": [32, 40, 48], "num_attention_heads": [4, 5, 6],
                                                        "image_size": 80})}, ("classifier",)),
    Row("pvt", "PvtForImageClassification", {
        "classifier": _arch("pvt", "PvtForImageClassification", **_PVT),
        "model-options": _arch("pvt", "PvtModel", **{**_PVT, "qkv_bias": False, "hidden_act": "relu",
                                                    "depths": [2, 0, 1]})}, ("classifier",)),
    Row("segformer", "SegformerForImageClassification", {
        "classifier": _arch("segformer", "SegformerForImageClassification", **_REDUCED, image_size=64),
        "model": _arch("segformer", "SegformerModel", **_REDUCED, image_size=32)}, ("classifier",)),
    Row("pvt_v2", "PvtV2ForImageClassification", {
        "classifier": _arch("pvt_v2", "PvtV2ForImageClassification", **_REDUCED, image_size=64),
        "model-linear": _arch("pvt_v2", "PvtV2Model", **_REDUCED, image_size=64, qkv_bias=False,
                              linear_attention=True)}, ("model-linear",)),
    Row("mobilevit", "MobileViTForImageClassification", {
        "classifier": _arch("mobilevit", "MobileViTForImageClassification", **_MOBILEVIT),
        "model-options": _arch("mobilevit", "MobileViTModel", **{
            **_MOBILEVIT, "qkv_bias": False, "expand_ratio": 2.0, "hidden_act": "gelu", "conv_kernel_size": 5,
            "image_size": 128, "patch_size": 4, "hidden_dropout_prob": 0.0})}, ("classifier",)),
    Row("mobilevitv2", "MobileViTV2ForImageClassification", {
        "classifier": _arch("mobilevitv2", "MobileViTV2ForImageClassification", image_size=64, width_multiplier=0.5,
                            num_labels=5),
        "model-options": _arch("mobilevitv2", "MobileViTV2Model", image_size=128, width_multiplier=0.75,
                               n_attn_blocks=[1, 0, 2], base_attn_unit_dims=[40, 48, 64], patch_size=4,
                               hidden_act="gelu", expand_ratio=3.0, ffn_dropout=0.1, conv_kernel_size=5,
                               ffn_multiplier=3)}, ("classifier",)),
    Row("hgnet_v2", "HGNetV2ForImageClassification", {
        "small": _arch("hgnet_v2", "HGNetV2ForImageClassification", **_HGNET),
        "small-gelu": _arch("hgnet_v2", "HGNetV2ForImageClassification", **{
            **_HGNET, "hidden_act": "gelu", "stage_downsample": [True, False], "image_size": 48})}, ("small",)),
    Row("pp_lcnet", "PPLCNetForImageClassification", {
        "small": _arch("pp_lcnet", "PPLCNetForImageClassification", scale=0.5, class_expand=64, num_labels=5,
                       image_size=64, stem_channels=16, block_configs=[
                           [[3, 16, 24, 1, False]], [[3, 24, 32, 2, True]], [[5, 32, 32, 1, False]],
                           [[3, 32, 48, 2, False]], [[5, 48, 64, 2, True], [3, 64, 64, 1, True]]])}, ("small",)),
    Row("swiftformer", "SwiftFormerForImageClassification", {
        "classifier": _arch("swiftformer", "SwiftFormerForImageClassification", image_size=64, depths=[1, 2],
                            embed_dims=[8, 16], downsamples=[True], num_labels=5),
        "model-options": _arch("swiftformer", "SwiftFormerModel", image_size=64, depths=[2, 1, 2],
                               embed_dims=[8, 8, 16], downsamples=[False, False], use_layer_scale=False,
                               hidden_act="relu", mlp_ratio=2, drop_mlp_rate=0.1, down_patch_size=2, down_pad=0)},
        ("classifier",)),
    Row("cvt", "CvtForImageClassification", {
        "classifier": _arch("cvt", "CvtForImageClassification", **_CVT),
        "classifier-mean": _arch("cvt", "CvtForImageClassification", **_CVT, cls_token=[False, False, False]),
        "model-options": _arch("cvt", "CvtModel", **{
            **_CVT, "embed_dim": [16, 32, 32], "cls_token": [False, True, True], "qkv_bias": [False, True, False],
            "mlp_ratio": [2.0, 3.0, 4.0], "stride_kv": [1, 2, 2], "kernel_qkv": [3, 3, 5], "padding_kv": [1, 1, 2],
            "padding_q": [1, 1, 2]})}, ("classifier",),
        no_flops=("classifier-mean",)),  # transformers' forward reads outputs[1], absent without a class token
    Row("focalnet", "FocalNetForImageClassification", {
        "classifier": _arch("focalnet", "FocalNetForImageClassification", image_size=64, embed_dim=8, depths=[1, 2],
                            focal_levels=[2, 1], focal_windows=[3, 1], num_labels=5),
        "model-options": _arch("focalnet", "FocalNetModel", image_size=64, embed_dim=8, depths=[1, 1, 1],
                               focal_levels=[3, 0, 1], focal_windows=[1, 3, 5], use_conv_embed=True, use_layerscale=True,
                               use_post_layernorm=True, use_post_layernorm_in_modulation=True, normalize_modulator=True,
                               hidden_act="relu", hidden_dropout_prob=0.1)}, ("classifier",)),
    Row("hiera", "HieraForImageClassification", {
        "classifier": _arch("hiera", "HieraForImageClassification", image_size=[64, 64], embed_dim=8, depths=[1, 2, 1, 1],
                            num_heads=[1, 2, 2, 4], num_labels=5),
        "model-options": _arch("hiera", "HieraModel", image_size=[32, 32], patch_size=[3, 3], patch_stride=[2, 2],
                               patch_padding=[1, 1], embed_dim=8, depths=[1, 1, 2], num_heads=[1, 2, 2],
                               masked_unit_size=[4, 4], masked_unit_attention=[True, False, False], num_query_pool=1,
                               mlp_ratio=2.0, hidden_act="relu")}, ("classifier",)),
]
SMALL = [pytest.param(data, id=f"{row.model_type}-{name}") for row in ROWS for name, data in row.small.items()]
FLOPS = [pytest.param(data, id=f"{row.model_type}-{name}") for row in ROWS for name, data in row.small.items()
         if name not in row.no_flops]
VERIFY = [pytest.param(row.small[name], id=f"{row.model_type}-{name}") for row in ROWS for name in row.verify]


@pytest.mark.torch
@pytest.mark.parametrize("data", SMALL)
def test_small_configs_equal_transformers(data):
    """Each small config counts exactly as transformers builds the class it names."""
    assert total(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.parametrize("row", ROWS, ids=[row.model_type for row in ROWS])
def test_class_defaults_equal_transformers(row):
    """Each type's config class defaults (AutoConfig.for_model) count exactly as its classifier."""
    data = {**class_defaults(row.model_type), "architectures": [row.classifier]}
    assert total(data) == hf_numel(data)


@pytest.mark.torch
@pytest.mark.parametrize("data", FLOPS)
def test_flops_equal_flop_counter(data):
    """Convolutions and linears (2 x MACs, bias adds apart) equal FlopCounterMode's aten.convolution +
    aten.addmm + aten.mm on transformers' module (eager attention), the attention's q k^T and p v its
    aten.bmm."""
    assert_matmul_flops_equal_flop_counter(data)


@pytest.mark.parametrize("data", VERIFY)
def test_count_plan_verify_run(data, tmp_path):
    """`count`, `plan --gpus 8` and `verify --tp 2 --pp 2` succeed on the config.json."""
    assert_count_plan_verify(tmp_path, data)


PUBLISHED = [
    # LeViT-128S (Graham et al. 2021, Table 2: 7.8 M; facebook/levit-128S config.json: heads 4 / 6 / 8, depths
    # 2 / 3 / 4), whose count includes the distillation head beside the classifier: BatchNorm1d(384) + Linear(384, 1000)
    pytest.param(_arch("levit", "LevitForImageClassification", num_labels=1000, num_attention_heads=[4, 6, 8],
                       depths=[2, 3, 4]), 2 * 384 + 384 * 1000 + 1000, 7_750_000, 7_850_000, id="levit-128S"),
    # PVT-Tiny on ImageNet-1k (Wang et al. 2021, Table 2: 13.2 M; the class defaults are PVT-Tiny's)
    pytest.param(_arch("pvt", "PvtForImageClassification", num_labels=1000), 0, 13_150_000, 13_250_000, id="pvt-tiny"),
    # PVT v2-b0 (Wang et al. 2022, Table 1 / OpenGVLab/PVT pvt_v2_b0: 3.7 M; the class defaults are b0's)
    pytest.param(_arch("pvt_v2", "PvtV2ForImageClassification", num_labels=1000), 0, 3_650_000, 3_750_000, id="pvt_v2-b0"),
    # MobileViT-S (Mehta & Rastegari 2022, Table 1: 5.6 M; the class defaults are MobileViT-S)
    pytest.param(_arch("mobilevit", "MobileViTForImageClassification", num_labels=1000), 0, 5_550_000, 5_650_000,
                 id="mobilevit-s"),
    # MobileViTv2-1.0 (Mehta & Rastegari 2022b, Table 9 / apple/ml-cvnets: 4.9 M; the class defaults are width 1.0)
    pytest.param(_arch("mobilevitv2", "MobileViTV2ForImageClassification", num_labels=1000), 0, 4_850_000, 4_950_000,
                 id="mobilevitv2-1.0"),
    # SwiftFormer-XS (Shaker et al. 2023, Table 1: 3.5 M; the class defaults are XS's), counting head and dist_head
    pytest.param(_arch("swiftformer", "SwiftFormerForImageClassification", num_labels=1000), 0, 3_450_000, 3_550_000,
                 id="swiftformer-xs"),
    # CvT-13 (Wu et al. 2021, Table 2: 20 M; the class defaults are CvT-13's)
    pytest.param(_arch("cvt", "CvtForImageClassification", num_labels=1000), 0, 19_950_000, 20_050_000, id="cvt-13"),
    # FocalNet-T (Yang et al. 2022, Table 1: 28.4 M with small receptive fields, the class defaults; 28.6 M with
    # large ones, focal level 3)
    pytest.param(_arch("focalnet", "FocalNetForImageClassification", num_labels=1000), 0, 28_350_000, 28_450_000,
                 id="focalnet-t-srf"),
    pytest.param(_arch("focalnet", "FocalNetForImageClassification", num_labels=1000, focal_levels=[3, 3, 3, 3]), 0,
                 28_550_000, 28_650_000, id="focalnet-t-lrf"),
    # Hiera-B (Ryali et al. 2023, Table 2: 52 M; the class defaults are Hiera-B's)
    pytest.param(_arch("hiera", "HieraForImageClassification", num_labels=1000), 0, 51_500_000, 52_500_000,
                 id="hiera-b"),
]


@pytest.mark.parametrize("data, added, low, high", PUBLISHED)
def test_published_size(data, added, low, high):
    """The published checkpoint's size (the source beside each row), within the table's rounding."""
    assert low <= total(data) + added < high


BAD = [
    ({"model_type": "levit", "image_size": 200}, "patch_size: the patch embedding leaves a 13 x 13 grid"),
    ({"model_type": "levit", "depths": [4, 4]}, "hidden_sizes: the per-stage lists must have 3 entries"),
    ({"model_type": "levit", "hidden_sizes": [120, 256, 384]}, "key_dim: 16 must divide hidden_sizes\\[0\\]"),
    ({"model_type": "levit", "architectures": ["LevitForImageClassificationWithTeacher"]},
     "architectures: 'LevitForImageClassificationWithTeacher'"),
    ({"model_type": "pvt", "patch_sizes": [2, 2, 2, 2], "strides": [2, 2, 2, 2]},
     "image_size: stage 1's 56 x 56 grid differs from the 28 x 28"),
    ({"model_type": "pvt", "sequence_reduction_ratios": [8, 4, 2, 2]}, "sequence_reduction_ratios: the class-token"),
    ({"model_type": "pvt", "hidden_dropout_prob": 0.1}, "hidden_dropout_prob: dropout not modelled"),
    ({"model_type": "pvt", "num_encoder_blocks": 5}, "num_encoder_blocks: 5 needs"),
    ({"model_type": "pvt", "num_attention_heads": [3, 2, 5, 8]}, "stage 0: .*num_attention_heads dividing"),
    ({"model_type": "segformer", "architectures": ["SegformerForSemanticSegmentation"]},
     "architectures: 'SegformerForSemanticSegmentation'"),
    ({"model_type": "pvt_v2", "num_encoder_blocks": 5}, "num_encoder_blocks: 5 needs"),
    ({"model_type": "segformer", "num_attention_heads": [3, 2, 5, 8]}, "num_attention_heads: 3 must divide"),
    ({"model_type": "pvt_v2", "mlp_ratios": [8, "x", 4, 4]}, "mlp_ratios: expected a list of positive numbers"),
    ({"model_type": "segformer", "sr_ratios": [0, 4, 2, 1]}, "stage 0: .*must be positive"),
    ({"model_type": "mobilevit", "image_size": 200}, "image_size: layer_3's 25 x 25 grid"),
    ({"model_type": "mobilevit", "output_stride": 16}, "output_stride: 16"),
    ({"model_type": "mobilevit", "patch_size": 0}, "patch_size: must be > 0"),  # was a ZeroDivisionError
    ({"model_type": "mobilevit", "attention_probs_dropout_prob": 0.1}, "attention_probs_dropout_prob"),
    ({"model_type": "mobilevit", "num_attention_heads": 7}, "num_attention_heads: 7 must divide"),
    ({"model_type": "mobilevit", "neck_hidden_sizes": [16, 32]}, "neck_hidden_sizes: expected 7"),
    ({"model_type": "mobilevit", "architectures": ["MobileViTForSemanticSegmentation"]},
     "architectures: 'MobileViTForSemanticSegmentation'"),
    ({"model_type": "mobilevitv2", "image_size": 200}, "image_size: layer_3's 25 x 25 grid"),
    ({"model_type": "mobilevitv2", "output_stride": 16}, "output_stride: 16"),
    ({"model_type": "mobilevitv2", "attn_dropout": 0.1}, "attn_dropout: dropout on the context scores"),
    ({"model_type": "mobilevitv2", "n_attn_blocks": [2, 4]}, "n_attn_blocks: expected 3 entries"),
    ({"model_type": "mobilevitv2", "architectures": ["MobileViTV2ForSemanticSegmentation"]},
     "architectures: 'MobileViTV2ForSemanticSegmentation'"),
    ({"model_type": "hgnet_v2", "use_learnable_affine_block": True}, "use_learnable_affine_block: the scalar"),
    ({"model_type": "hgnet_v2", "architectures": ["HGNetV2Backbone"]}, "architectures: 'HGNetV2Backbone'"),
    ({"model_type": "hgnet_v2", "stage_in_channels": [48, 64, 512, 1024]}, "stage 1 takes 64 channels"),
    ({"model_type": "hgnet_v2", "stage_kernel_size": [3, 3]}, "must have 4 entries each"),
    ({"model_type": "hgnet_v2", "hidden_sizes": [256, 512, 1024, 1000]}, "hidden_sizes: the classifier reads"),
    ({"model_type": "hgnet_v2", "stem_channels": [1, 32, 48]}, "stem_channels: \\[1, 32, 48\\]"),
    ({"model_type": "pp_lcnet", "block_configs": [[[3, 16, 32, 1, False]]]}, "block_configs: expected 5 stages"),
    ({"model_type": "pp_lcnet", "block_configs": [[[3, 16, 32, 1, False]], [[3, 48, 64, 2, False]], [[3, 64, 64, 1, False]],
                                                  [[3, 64, 64, 1, False]], [[3, 64, 64, 1, False]]]},
     "block_configs: stage 1 reads 48 channels, the layer before gives 32"),
    ({"model_type": "pp_lcnet", "hidden_act": "mish"}, "hidden_act: unsupported 'mish'"),
    ({"model_type": "pp_lcnet", "architectures": ["PPLCNetBackbone"]}, "architectures: 'PPLCNetBackbone'"),
    ({"model_type": "swiftformer", "depths": [3, 3]}, "depths: \\[3, 3\\], embed_dims \\[48, 56, 112, 220\\]"),
    ({"model_type": "swiftformer", "downsamples": True}, "downsamples True must have one entry per stage"),
    ({"model_type": "swiftformer", "hidden_act": "mish"}, "hidden_act: unsupported 'mish'"),
    ({"model_type": "cvt", "qkv_projection_method": ["dw_bn", "dw_bn", "avg"]}, "stage 2: qkv_projection_method: 'avg'"),
    ({"model_type": "cvt", "stride_q": [1, 1, 2]}, "stage 2: stride_q: 2"),
    ({"model_type": "cvt", "num_heads": [1, 3, 5]}, "stage 2: num_heads: 5 must divide embed_dim 384"),
    ({"model_type": "cvt", "depth": [1, 1, 10]}, "stage 1: depth: 1 layers"),
    ({"model_type": "cvt", "cls_token": [True, False, True]}, "stage 0: cls_token: the token is embed_dim\\[-1\\] = 384"),
    ({"model_type": "cvt", "attention_drop_rate": [0.0, 0.0, 0.1]}, "stage 2: attention_drop_rate"),
    ({"model_type": "cvt", "embed_dim": [64, 192]}, "embed_dim: every per-stage list needs 3 entries"),
    ({"model_type": "focalnet", "image_size": 226}, "image_size: 226 x 226 is not a multiple of patch_size 4"),
    ({"model_type": "focalnet", "image_size": 200}, "image_size: stage 1's 25 x 25 grid is odd"),
    ({"model_type": "focalnet", "focal_windows": [2, 2, 2, 2]}, "kernels \\[2, 4\\] .* must be odd"),
    ({"model_type": "focalnet", "focal_levels": [2, 2]}, "focal_levels: \\[2, 2\\] and focal_windows"),
    ({"model_type": "focalnet", "architectures": ["FocalNetForMaskedImageModeling"]},
     "architectures: 'FocalNetForMaskedImageModeling'"),
    ({"model_type": "hiera", "masked_unit_size": [4, 4]}, "masked_unit_size: 4 x 4 units need to equal"),
    ({"model_type": "hiera", "query_stride": [2, 1]}, "query_stride: \\[2, 1\\] \\(only square"),
    ({"model_type": "hiera", "embed_dim_multiplier": 1.0}, "stage 1 pools its queries without widening"),
    ({"model_type": "hiera", "num_heads": [1, 2, 4]}, "num_heads: \\[1, 2, 4\\] and masked_unit_attention"),
    ({"model_type": "hiera", "architectures": ["HieraForPreTraining"]}, "architectures: 'HieraForPreTraining'"),
]


@pytest.mark.parametrize("data, message", BAD, ids=[f"{d['model_type']}-{i}" for i, (d, _) in enumerate(BAD)])
def test_bad_fields_are_one_line_errors(data, message):
    """A value the mapper cannot build is a one-line error naming the field."""
    assert_one_line_error(data, message)


def _hiera_weights(sd: dict, ours: dict) -> None:
    """transformers' HieraModel state dict copied into the network's torch modules: qkv split into query
    and key_value, per-token Linears as 1x1 convs, the (1, tokens, C) position table as a [C, H, W] map."""
    def put(name, value):
        assert ours[name].shape == value.shape, (name, ours[name].shape, value.shape)
        ours[name].data.copy_(value)

    for leaf in ("weight", "bias"):
        put(f"embeddings/patch_embeddings/projection/{leaf}", sd[f"embeddings.patch_embeddings.projection.{leaf}"])
        put(f"layernorm/{leaf}", sd[f"pooler.layernorm.{leaf}"])
    put("embeddings/position_embeddings/weight",
        sd["embeddings.position_embeddings"][0].T.reshape(ours["embeddings/position_embeddings/weight"].shape))
    for key, value in sd.items():
        parts = key.split(".")
        if parts[0] != "encoder":
            continue
        base = f"encoder/stages/{parts[2]}/layers/{parts[4]}"
        wide = f"{base}/layernorm_before/weight" in ours  # a widening layer: the norm outside the residuals
        attn, mlp, (name, leaf) = f"{base}/{1 if wide else 0}", f"{base}/{2 if wide else 1}", (".".join(parts[5:-1]),
                                                                                              parts[-1])
        conv = value[:, :, None, None] if leaf == "weight" and name != "layernorm_before" \
            and name != "layernorm_after" else value
        d = value.shape[0] // 3
        target = {"layernorm_before": [(f"{base if wide else attn}/layernorm_before", value)],
                  "attn.qkv": [(f"{attn}/attn/attention/query", conv[:d]), (f"{attn}/attn/attention/key_value", conv[d:])],
                  "attn.proj": [(f"{attn}/attn/output", conv)], "proj": [(f"{attn}/proj", conv)],
                  "layernorm_after": [(f"{mlp}/layernorm_after", value)], "mlp.fc1": [(f"{mlp}/mlp/fc1", conv)],
                  "mlp.fc2": [(f"{mlp}/mlp/fc2", conv)]}[name]
        for path, tensor in target:
            put(f"{path}/{leaf}", tensor)


@pytest.mark.torch
def test_hiera_map_form_equals_transformers_unrolled_forward():
    """Hiera on the spatial map (mask units as windowed attention, query pooling as a 2 x 2 max pool)
    gives transformers' own HieraModel pooled output (tokens unrolled into mask units) on the same
    weights: two mask-unit stages, a lagged mask-unit layer, global attention, three poolings."""
    import torch

    from _hf_reference import hf_class, hf_config
    from modelplan.count.network_tree import network_tree
    from modelplan.execute.oracle.torch_network import build_network
    from modelplan.specs.hf import from_hf_config

    data = _arch("hiera", "HieraModel", image_size=[64, 64], embed_dim=8, depths=[1, 2, 2, 1], num_heads=[1, 2, 2, 4])
    hf = hf_class(data)._from_config(hf_config(data), attn_implementation="eager").double().eval()
    torch.manual_seed(0)
    for p in hf.parameters():
        p.data = torch.randn_like(p) * 0.3
    root, order, _ = build_network(torch, tuple(n for unit in network_tree(from_hf_config(data)) for n in unit))
    root.double().eval()
    _hiera_weights(hf.state_dict(), {k.replace(".", "/"): v for k, v in root.named_parameters()})
    x = torch.randn(2, 3, 64, 64, dtype=torch.float64)
    with torch.no_grad():
        expected = hf(pixel_values=x).pooler_output
        for module in order:
            x = module(x)
    assert torch.allclose(x, expected, rtol=0, atol=1e-12)
