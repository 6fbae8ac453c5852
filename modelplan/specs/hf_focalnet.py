"""HF FocalNet (Yang et al. 2022, "Focal Modulation Networks"; transformers 5.24 modeling_focalnet.py
FocalNetModel / FocalNetForImageClassification) as a network spec (`specs.network`) on [C, H, W] maps.

The embedding: a patch conv (patch_size, or with use_conv_embed a 7x7 stride-4 conv), LayerNorm,
dropout; per stage i (width embed_dim x 2^i) depths[i] layers, then (but the last) a downsampling
patch embedding (a 2x2 stride-2 conv, or 3x3 stride 2 with use_conv_embed; LayerNorm). A layer:
x + gamma_1 * modulation(norm1(x)) and x + gamma_2 * mlp(norm2(x)) (use_post_layernorm: the norms
after the branches; gamma learned with use_layerscale, else 1). The modulation: projection_in (a
per-token Linear to 2 C + L + 1, here the 1x1 conv it equals), `specs.focal_modulation`, the
optional LayerNorm, projection_out, dropout. The head: LayerNorm, the mean over the tokens, the
classifier Linear. Per-token LayerNorms over the channels are layernorm2d on the map.

Not modelled: maybe_pad's right / bottom zero padding where the image (or a stage's grid) is not a
multiple of the patch (refused: a one-line error); stochastic depth (drop_path_rate, the identity at
inference).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, dropout, network, pool
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_swin import image_sides
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"focalnet": ("FocalNetModel", "FocalNetForImageClassification")}
"""model_type -> the classes modelled (FocalNetForMaskedImageModeling's decoder: refused)."""

DEFAULTS = {"focalnet": {"image_size": 224, "patch_size": 4, "num_channels": 3, "embed_dim": 96, "use_conv_embed": False,
                         "depths": [2, 2, 6, 2], "focal_levels": [2, 2, 2, 2], "focal_windows": [3, 3, 3, 3],
                         "hidden_act": "gelu", "mlp_ratio": 4.0, "hidden_dropout_prob": 0.0, "use_layerscale": False,
                         "use_post_layernorm": False, "use_post_layernorm_in_modulation": False,
                         "normalize_modulator": False, "layer_norm_eps": 1e-5}}
"""FocalNetConfig defaults (transformers 5.24 configuration_focalnet.py)."""

FOCAL_FACTOR = 2  # FocalNetModulation(focal_factor=2): FocalNetLayer never passes another


def _conv(name: str, out: int, kernel: int = 1, stride: int = 1, padding: int = 0) -> dict:
    return {"type": "conv2d", "name": name, "out_channels": out, "kernel_size": kernel, "stride": stride,
            "padding": padding}


def layer(c: HFConfig, dim: int, level: int, window: int) -> list[dict]:
    """FocalNetLayer: the modulation and MLP residuals."""
    eps, p, post = c.number("layer_norm_eps", positive=True), c.number("hidden_dropout_prob"), c.flag("use_post_layernorm")
    norm = lambda name: {"type": "layernorm2d", "name": name, "eps": eps}  # noqa: E731
    scale = lambda name: [{"type": "layerscale", "name": name}] if c.flag("use_layerscale") else []  # noqa: E731
    modulation = _seq([_conv("projection_in", 2 * dim + level + 1),
                       {"type": "focalmodulation", "name": "focal", "focal_level": level, "focal_window": window,
                        "focal_factor": FOCAL_FACTOR, "normalize_modulator": c.flag("normalize_modulator")},
                       *([norm("layernorm")] if c.flag("use_post_layernorm_in_modulation") else []),
                       _conv("projection_out", dim), *dropout(p, "projection_dropout")], "modulation")
    mlp = _seq([_conv("fc1", int(dim * c.number("mlp_ratio", positive=True))), {"type": activation(c), "name": "activation"},
                *dropout(p, "drop"), _conv("fc2", dim), *dropout(p, "drop_2")], "mlp")
    first = [modulation, norm("norm1")] if post else [norm("norm1"), modulation]
    second = [mlp, norm("norm2")] if post else [norm("norm2"), mlp]
    return [{"type": "residual", "main": [*first, *scale("gamma_1")]},
            {"type": "residual", "main": [*second, *scale("gamma_2")]}]


def _check(c: HFConfig, depths: list[int], levels: list[int], windows: list[int]) -> None:
    if len(levels) != len(depths) or len(windows) != len(depths) or min(depths + levels) < 0 or min(windows) < 1:
        raise SpecError(f"{c.source}: focal_levels: {levels} and focal_windows {windows} need one entry per stage of "
                        f"depths {depths} (levels >= 0, windows >= 1)")
    patch, sides, conv = c.divisor("patch_size"), list(image_sides(c)), c.flag("use_conv_embed")
    if any(x % patch for x in sides):
        raise SpecError(f"{c.source}: image_size: {sides[0]} x {sides[1]} is not a multiple of patch_size {patch} "
                        f"(FocalNet's maybe_pad zero padding not modelled)")
    grid = [(x + 4 - 7) // 4 + 1 for x in sides] if conv else [x // patch for x in sides]  # 7x7 stride 4 pad 2
    for i in range(len(depths) - 1):
        if any(x % 2 for x in grid):
            raise SpecError(f"{c.source}: image_size: stage {i}'s {grid[0]} x {grid[1]} grid is odd (the downsampling's "
                            f"maybe_pad zero padding not modelled)")
        grid = [x // 2 for x in grid]


def focalnet(c: HFConfig) -> dict:
    """FocalNetModel (pooled) or FocalNetForImageClassification, as a network spec."""
    name = architecture(c, "focalnet", HEADS)
    c = with_defaults(c, "focalnet", DEFAULTS)
    depths, levels, windows = c.ints("depths"), c.ints("focal_levels"), c.ints("focal_windows")
    _check(c, depths, levels, windows)
    eps, dim, conv_embed = c.number("layer_norm_eps", positive=True), c.size("embed_dim"), c.flag("use_conv_embed")
    patch = c.divisor("patch_size")
    norm = lambda name: {"type": "layernorm2d", "name": name, "eps": eps}  # noqa: E731
    stem = _conv("projection", dim, 7, 4, 2) if conv_embed else _conv("projection", dim, patch, patch)
    embeddings = [_seq([stem], "patch_embeddings"), norm("norm"), *dropout(c.number("hidden_dropout_prob"))]
    stages = []
    for i, (depth, level, window) in enumerate(zip(depths, levels, windows)):
        width = dim * 2 ** i
        items = [_seq([_seq(layer(c, width, level, window)) for _ in range(depth)], "layers")] if depth else []
        if i < len(depths) - 1:  # FocalNetPatchEmbeddings(patch_size=2, add_norm=True)
            down = _conv("projection", 2 * width, 3, 2, 1) if conv_embed else _conv("projection", 2 * width, 2, 2)
            items.append(_seq([down, norm("norm")], "downsample"))
        if items:
            stages.append(_seq(items, str(i)))
    layers = [_seq(embeddings, "embeddings"), _seq([_seq(stages, "stages")], "encoder"), norm("layernorm"), pool(),
              {"type": "flatten"}]
    if name.endswith("ForImageClassification"):
        layers.append({"type": "linear", "name": "classifier", "out_features": labels(c)})
    return network(c, layers)


FOCALNET_MAPPERS = {"focalnet": focalnet}
