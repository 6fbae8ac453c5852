"""MobileNetV5 (timm 1.0 models/mobilenetv5.py, MobileNetV5Encoder; Gemma 3n's vision tower,
`mobilenetv5_300m_enc`) as the layers of a `VisionSpec.tower`, priced per image.

The arch def is timm's block strings (`_gen_mobilenet_v5`), read here as data:

- `er_k{k}_s{s}_e{e}_c{c}`: EdgeResidual: conv_exp k x k (stride s) in -> mid, RmsNorm + GELU,
  conv_pwl 1 x 1 mid -> c, RmsNorm; the residual when s = 1 and in = c (no parameters);
- `uir_a{a}_k{k}_s{s}_e{e}_c{c}`: UniversalInvertedResidual: dw_start a x a depthwise (a > 0;
  stride s when k = 0), pw_exp 1 x 1 in -> mid, dw_mid k x k depthwise (k > 0, stride s), pw_proj
  1 x 1 mid -> c, each with an RmsNorm2d, and LayerScale2d (gamma of c);
- `mqa_k{k}_h{h}_v{v}_d{d}_c{c}`: MobileAttention: RmsNorm2d, MultiQueryAttention2d (query 1 x 1
  in -> h d; key / value: a k x k depthwise down_conv of stride v with an RmsNorm2d when v > 1,
  then 1 x 1 in -> d: one shared key / value head; output 1 x 1 h d -> c), LayerScale2d;

mid = make_divisible(in x e, 8); every conv bias-free but the stem's (conv_stem: 3 x 3 stride 2,
3 -> 64, biased, RmsNorm + GELU); convs pad 'same' (Conv2dSame): side -> ceil(side / stride).
The multi-scale fusion adapter (MobileNetV5MultiScaleFusionAdapter) concatenates the last two
stages' outputs at the higher one's resolution (nearest upsampling), runs a UIR without
depthwise convs or layer scale (expansion 2, -> 2048), average-pools to
msfa_output_resolution (16) a side and applies an RmsNorm2d: 16 x 16 = 256 soft tokens.
"""

from __future__ import annotations

import re

from modelplan.errors import SpecError
from modelplan.specs.hf_davit import _conv as tower_conv
from modelplan.specs.hf_vision import _norm as tower_norm

_STAGES_300M = (
    ("er_k3_s2_e4_c128",) + ("er_k3_s1_e4_c128",) * 2,
    ("uir_a3_k5_s2_e6_c256", "uir_a5_k0_s1_e4_c256", "uir_a3_k0_s1_e4_c256", "uir_a5_k0_s1_e4_c256",
     "uir_a3_k0_s1_e4_c256"),
    ("uir_a5_k5_s2_e6_c640",) + ("uir_a5_k0_s1_e4_c640",) * 7 + ("uir_a0_k0_s1_e1_c640",)
    + ("mqa_k3_h12_v2_d64_c640", "uir_a0_k0_s1_e2_c640") * 14,
    ("uir_a5_k5_s2_e6_c1280",) + ("mqa_k3_h16_v1_d96_c1280", "uir_a0_k0_s1_e2_c1280") * 19,
)
"""mobilenetv5_300m(_enc)'s arch def (timm 1.0.31 mobilenetv5.py `_gen_mobilenet_v5`, the
non-base branch; the repeat count r1 of every string dropped, v1 written where it has none)."""
ARCHITECTURES = {"mobilenetv5_300m_enc": _STAGES_300M}
"""Gemma3nVisionConfig.architecture -> its stages (the timm encoder variant transformers builds)."""
STEM, OUT, MSFA_EXPANSION, MSFA_SIDE = 64, 2048, 2, 16
"""stem_size, MobileNetV5Encoder.num_features, the adapter's expansion_ratio and
msfa_output_resolution (timm mobilenetv5.py MobileNetV5Encoder defaults)."""


def make_divisible(v: float, divisor: int = 8) -> int:
    """timm layers/helpers.py make_divisible: round to a multiple of divisor, never 10 % below."""
    new = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new + divisor if new < 0.9 * v else new


def _conv(name: str, n_in: int, n_out: int, kernel: int, side: int, depthwise: bool = False,
          bias: bool = False) -> dict:
    return tower_conv(name, n_in, n_out, kernel, side * side, groups=n_in if depthwise else 1, bias=bias)


def _norm(name: str, width: int, side: int) -> dict:
    return {**tower_norm(name, width, "rmsnorm"), "rows": side * side}  # RmsNorm2d: weight only


def _conv_norm(name: str, n_in: int, n_out: int, kernel: int, side: int, depthwise: bool = False) -> list[dict]:
    return [_conv(f"{name}/conv", n_in, n_out, kernel, side, depthwise), _norm(f"{name}/norm", n_out, side)]


def _down(side: int, stride: int) -> int:
    return -(-side // stride)  # Conv2dSame: 'same' padding, ceil(side / stride)


def _block(name: str, code: str, n_in: int, side: int) -> tuple[list[dict], int, int]:
    """(tower layers, out channels, out side) of one arch-def string (module docstring)."""
    kind, *args = code.split("_")
    a = {m.group(1): int(m.group(2)) for m in (re.fullmatch(r"([a-z])(\d+)", x) for x in args)}
    c = a["c"]
    if kind == "er":
        mid, out = make_divisible(n_in * a["e"]), _down(side, a["s"])
        return (_conv_norm(f"{name}/conv_exp", n_in, mid, a["k"], out)
                + _conv_norm(f"{name}/conv_pwl", mid, c, 1, out)), c, out
    if kind == "uir":
        layers, mid, k, s = [], make_divisible(n_in * a["e"]), a["k"], a["s"]
        if a["a"]:
            side_start = _down(side, 1 if k else s)
            layers += _conv_norm(f"{name}/dw_start", n_in, n_in, a["a"], side_start, depthwise=True)
            side = side_start
        layers += _conv_norm(f"{name}/pw_exp", n_in, mid, 1, side)
        if k:
            side = _down(side, s)
            layers += _conv_norm(f"{name}/dw_mid", mid, mid, k, side, depthwise=True)
        layers += _conv_norm(f"{name}/pw_proj", mid, c, 1, side)
        return layers + [dict(name=f"{name}/layer_scale", kind="vector", in_features=c)], c, side
    heads, d, kv_stride = a["h"], a["d"], a["v"]
    keys_side = _down(side, kv_stride)
    layers = [_norm(f"{name}/norm", n_in, side), _conv(f"{name}/attn/query", n_in, heads * d, 1, side)]
    for part in ("key", "value"):
        if kv_stride > 1:
            layers += [_conv(f"{name}/attn/{part}/down_conv", n_in, n_in, a["k"], keys_side, depthwise=True),
                       _norm(f"{name}/attn/{part}/norm", n_in, keys_side)]
        layers.append(_conv(f"{name}/attn/{part}/proj", n_in, d, 1, keys_side))
    # MultiQueryAttention2d: each of the heads x d query channels scores the one shared key head
    layers += [dict(name=f"{name}/attn/scores", kind="attention", in_features=heads * d, keys=keys_side ** 2,
                    rows=side * side),
               _conv(f"{name}/attn/output", heads * d, c, 1, side),
               dict(name=f"{name}/layer_scale", kind="vector", in_features=c)]
    return layers, c, side


def mobilenetv5_tower(architecture: str, image_size: int, source: str) -> tuple[list[dict], int]:
    """(VisionSpec.tower layers, soft tokens per image) of MobileNetV5Encoder `architecture` over
    one image_size x image_size image (module docstring)."""
    stages = ARCHITECTURES.get(architecture)
    if stages is None:
        raise SpecError(f"{source}: vision_config.architecture: '{architecture}' not modelled (modelled: "
                        f"{', '.join(ARCHITECTURES)})")
    side = _down(image_size, 2)
    layers = [_conv("conv_stem/conv", 3, STEM, 3, side, bias=True), _norm("conv_stem/norm", STEM, side)]
    channels, outputs = STEM, []
    for i, stage in enumerate(stages):
        for j, code in enumerate(stage):
            block, channels, side = _block(f"blocks/{i}/{j}", code, channels, side)
            layers += block
        outputs.append((channels, side))
    (c_hi, side_hi), (c_lo, _) = outputs[-2:]  # msfa_indices (-2, -1): upsampled to the first's side
    if side_hi % MSFA_SIDE:
        raise SpecError(f"{source}: vision_config.image_size: {image_size} px gives a {side_hi} x {side_hi} grid "
                        f"before the fusion adapter, not a multiple of its {MSFA_SIDE} x {MSFA_SIDE} output")
    mid = make_divisible((c_hi + c_lo) * MSFA_EXPANSION)
    layers += (_conv_norm("msfa/ffn/pw_exp", c_hi + c_lo, mid, 1, side_hi)
               + _conv_norm("msfa/ffn/pw_proj", mid, OUT, 1, side_hi) + [_norm("msfa/norm", OUT, MSFA_SIDE)])
    return layers, MSFA_SIDE * MSFA_SIDE
