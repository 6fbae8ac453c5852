"""HF config mapper of FastVLM (Vasu et al. 2025, arXiv 2412.13303; transformers 5.24
modeling_fast_vlm.py FastVlmForConditionalGeneration): the text model by its own model_type's
mapper (Qwen2 by default), the timm FastViTHD tower (timm 1.0 models/fastvit.py `fastvit_mci3`,
reparameterised: inference_mode, its classifier removed by TimmWrapperModel) as `VisionSpec.tower`
layers priced per image, and FastVlmMultiModalProjector (linear_1 Linear(3072, text, bias), GELU,
linear_2 Linear(text, text, bias)) on every feature-map position.

FastViTHD, over an S x S image (`FASTVIT_MCI3`'s stages):

- stem: MobileOneBlocks conv 3 x 3 stride 2 (3 -> 96), depthwise 3 x 3 stride 2, conv 1 x 1, all
  biased;
- per stage: a PatchEmbed (ReparamLargeKernelConv: 7 x 7 stride 2 conv with groups = in channels,
  in -> out, biased; a biased 1 x 1 MobileOneBlock) except the first; a RepConditionalPosEnc
  (biased depthwise 7 x 7) on the attention stages; then the blocks: RepMixerBlock (biased
  depthwise 3 x 3 token mixer, ConvMlp, LayerScale2d) or AttentionBlock (LayerNorm2d, bias-free
  qkv Linear(d, 3d), heads of 32, biased proj, LayerScale2d, ConvMlp, LayerScale2d); ConvMlp: a
  bias-free depthwise 7 x 7 conv with BatchNorm2d (weight and bias), biased fc1 1 x 1 d -> 4d and
  fc2 4d -> d;
- final_conv: MobileOneBlock 3 x 3 (1536 -> 3072, groups 1536, biased) with an SE module
  (fc1 3072 -> 192, fc2 192 -> 3072, biased, on the pooled vector).

The total stride is 64; an image is priced at sqrt(image_seq_length) x 64 px a side (the config's
tokens per image; vision_config.image_size overrides it)."""

from __future__ import annotations

import math
from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import _conv as tower_conv
from modelplan.specs.hf_n18vlm_base import Mapper, _text
from modelplan.specs.hf_vision import _linear, _norm

FASTVIT_MCI3 = dict(layers=(2, 12, 24, 4, 2), dims=(96, 192, 384, 768, 1536),
                    mixers=("repmixer", "repmixer", "repmixer", "attention", "attention"))
"""fastvit_mci3 (timm 1.0.31 fastvit.py): blocks, embed_dims and token_mixers per stage (mlp_ratio
4 everywhere, a downsample before every stage but the first, positional convs on the attention stages)."""
ARCHITECTURES = {"fastvit_mci3": FASTVIT_MCI3}
HEAD_DIM, MLP_RATIO, STRIDE, SE_RATIO = 32, 4, 64, 1 / 16
"""fastvit.py Attention head_dim, mlp_ratios, the tower's total stride (stem 4, four downsamples 2)
and MobileOneBlock's SEModule rd_ratio (0.0625)."""


def _conv(name: str, n_in: int, n_out: int, kernel: int, side: int, groups: int = 1, bias: bool = True) -> dict:
    return tower_conv(name, n_in, n_out, kernel, side * side, groups, bias=bias)


def _conv_mlp(name: str, d: int, side: int) -> list[dict]:
    n = side * side
    return [_conv(f"{name}/conv", d, d, 7, side, groups=d, bias=False), {**_norm(f"{name}/bn", d), "rows": n},
            _conv(f"{name}/fc1", d, MLP_RATIO * d, 1, side), _conv(f"{name}/fc2", MLP_RATIO * d, d, 1, side)]


def _scale(name: str, d: int) -> dict:
    return dict(name=name, kind="vector", in_features=d)


def fastvit_tower(architecture: str, image_size: int, source: str) -> tuple[list[dict], int, int]:
    """(tower layers, output channels, output side) of `architecture` over one image (module docstring)."""
    arch = ARCHITECTURES.get(architecture)
    if arch is None:
        raise SpecError(f"{source}: vision_config.architecture: '{architecture}' not modelled (modelled: "
                        f"{', '.join(ARCHITECTURES)})")
    if image_size % STRIDE:
        raise SpecError(f"{source}: vision_config.image_size: {image_size} px must be a multiple of the tower's "
                        f"stride {STRIDE}")
    side, d = image_size // 2, arch["dims"][0]
    layers = [_conv("stem/0", 3, d, 3, side)]
    side //= 2
    layers += [_conv("stem/1", d, d, 3, side, groups=d), _conv("stem/2", d, d, 1, side)]
    for i, (depth, out, mixer) in enumerate(zip(arch["layers"], arch["dims"], arch["mixers"])):
        s = f"stages/{i}"
        if i:  # PatchEmbed
            side //= 2
            layers += [_conv(f"{s}/downsample/large_kernel", d, out, 7, side, groups=d),
                       _conv(f"{s}/downsample/pointwise", out, out, 1, side)]
        d, n = out, side * side
        if mixer == "attention":
            layers.append(_conv(f"{s}/pos_emb", d, d, 7, side, groups=d))
        for j in range(depth):
            b = f"{s}/blocks/{j}"
            if mixer == "repmixer":
                layers += [_conv(f"{b}/token_mixer", d, d, 3, side, groups=d), *_conv_mlp(f"{b}/mlp", d, side),
                           _scale(f"{b}/layer_scale", d)]
                continue
            layers += [{**_norm(f"{b}/norm", d), "rows": n}, {**_linear(f"{b}/qkv", d, 3 * d, False), "rows": n},
                       dict(name=f"{b}/scores", kind="attention", in_features=d, keys=n, rows=n),
                       {**_linear(f"{b}/proj", d, d, True), "rows": n}, _scale(f"{b}/layer_scale_1", d),
                       *_conv_mlp(f"{b}/mlp", d, side), _scale(f"{b}/layer_scale_2", d)]
    final, squeeze = 2 * d, int(2 * d * SE_RATIO)
    layers += [_conv("final_conv", d, final, 3, side, groups=d),
               _conv("final_conv/se/fc1", final, squeeze, 1, 1), _conv("final_conv/se/fc2", squeeze, final, 1, 1)]
    return layers, final, side


def _fast_vlm(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """FastVlmForConditionalGeneration (module docstring); untied by default."""
    fields, _ = _text(c, text_mappers, "qwen2")
    raw = c.data.get("vision_config") or {}
    if not isinstance(raw, dict):
        raise SpecError(f"{c.source}: vision_config: expected an object, got {raw!r}")
    v = HFConfig({"architecture": "fastvit_mci3", **raw}, c.source, "vision_config.")
    if (v.sub("model_args").data if v.sub("model_args") else {}).get("inference_mode", True) is not True:
        raise SpecError(f"{c.source}: vision_config.model_args.inference_mode: false is not modelled (the "
                        f"training-time MobileOne branches before reparameterisation)")
    if c.text("vision_feature_select_strategy", "full") != "full" or c.integer("vision_feature_layer", -1) != -1:
        raise SpecError(f"{c.source}: vision_feature_select_strategy / vision_feature_layer: only 'full' and -1 "
                        f"(the tower's last feature map) are modelled")
    tokens = c.size("image_seq_length")
    grid = math.isqrt(tokens)
    if grid * grid != tokens:
        raise SpecError(f"{c.source}: image_seq_length: {tokens} is not a square grid of feature-map positions")
    side = v.integer("image_size", grid * STRIDE)
    tower, width, out_side = fastvit_tower(v.text("architecture"), side, c.source)
    if v.integer("hidden_size", width) != width:  # FastVlmMultiModalProjector.linear_1 reads hidden_size features
        raise SpecError(f"{c.source}: vision_config.hidden_size: {v.integer('hidden_size')} must equal the tower's "
                        f"output width ({width})")
    t, bias, rows = fields["hidden"], c.flag("multimodal_projector_bias", True), out_side * out_side
    fields["vision"] = dict(
        layers=sum(ARCHITECTURES[v.text("architecture")]["layers"]), hidden=width, heads=1, ffn_hidden=width,
        patch_size=STRIDE, image_size=side, channels=3, tower=tower,
        connector=[{**_linear("linear_1", width, t, bias), "rows": rows}, {**_linear("linear_2", t, t, bias), "rows": rows}])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


FAST_VLM_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"fast_vlm": _fast_vlm}
