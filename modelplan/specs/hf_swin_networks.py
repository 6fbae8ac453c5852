"""HF Swin Transformer image models (transformers 5.24 modeling_swin.py SwinModel /
SwinForImageClassification, modeling_donut_swin.py DonutSwinModel / DonutSwinForImageClassification,
modeling_swinv2.py Swinv2Model / Swinv2ForImageClassification: post-norm blocks, scaled cosine
attention, a continuous position-bias MLP, q / v biases over a bias-free k, merging that reduces
before it normalises)
as network specs (`specs.network`) on channels-first [C, H, W] maps: the patch conv
(kernel = stride = patch_size) and its LayerNorm; per stage `depths[i]` SwinLayers, each an
attention residual (layernorm_before, q / k / v as one 1x1 conv to 3C, shifted-window attention
with its relative position bias table, o_proj) and an MLP residual (layernorm_after, fc1, act,
fc2), the odd layers shifted by window_size // 2 unless the grid is no larger than the window
(SwinLayer.set_shift_and_window_size); between stages SwinPatchMerging (the 2 x 2 gather, LayerNorm(4C),
reduction 4C -> 2C without bias); SwinModel's final LayerNorm (Donut has none), the mean over the
grid (the pooler) and the classifier.

Per-token Linears are the 1x1 convs they equal; q, k and v (three Linears) are one conv of their
stacked weights (the same parameters and FLOPs). transformers pads the normalised tokens before
q / k / v, the network stack pads q / k / v: the projections run on the unpadded grid (grids a
multiple of the window, as the published configs are, price the same).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, image_input
from modelplan.specs.hf_resnet import _seq
from modelplan.specs.hf_swin import SWIN_DEFAULTS, image_sides
from modelplan.specs.hf_vision_models import architecture, labels

HEADS = {"swin": ("SwinModel", "SwinForImageClassification"),
         "donut-swin": ("DonutSwinModel", "DonutSwinForImageClassification"),
         "swinv2": ("Swinv2Model", "Swinv2ForImageClassification")}
"""model_type -> the classes whose head is modelled; the first is the base model."""


def _conv1x1(name: str, out: int, bias: bool = True) -> dict:
    return {"type": "conv2d", "name": name, "out_channels": out, "kernel_size": 1, "bias": bias}


def _norm(name: str | None = None) -> dict:
    return {"type": "layernorm2d", **({"name": name} if name else {})}


CPB_HIDDEN = 512  # Swinv2SelfAttention.continuous_position_bias_mlp: Linear(2, 512), ReLU, Linear(512, heads)


def swin_layer(dim: int, heads: int, window: int, shift: int, ffn: int, act: str, qkv_bias: bool, name: str,
               pretrained: int | None = None) -> dict:
    """One SwinLayer (pre-norm) or, `pretrained` given, Swinv2Layer (post-norm: each residual's
    LayerNorm after its branch; cosine attention with the continuous position bias normalised by
    the `pretrained` window, 0: its own, and q / v biases over a bias-free k)."""
    attend = {"type": "windowattention", "name": "attention", "heads": heads, "window_size": window, "shift": shift}
    mlp = [_conv1x1("fc1", ffn), {"type": act, "name": "act"}, _conv1x1("fc2", dim)]
    if pretrained is None:
        attention = [_norm("layernorm_before"), _conv1x1("qkv", 3 * dim, qkv_bias), attend, _conv1x1("o_proj", dim)]
        mlp = [_norm("layernorm_after"), *mlp]
    else:
        attend.update(cosine=True, bias_mlp=CPB_HIDDEN, qv_bias=qkv_bias, pretrained_window=pretrained)
        attention = [_conv1x1("qkv", 3 * dim, False), attend, _conv1x1("dense", dim), _norm("layernorm_before")]
        mlp = [*mlp, _norm("layernorm_after")]
    return _seq([{"type": "residual", "name": "attention", "main": attention},
                 {"type": "residual", "name": "mlp", "main": mlp}], name)


def _stage_window(c: HFConfig, i: int, rows: int, cols: int, window: int, v2: bool) -> tuple[int, bool]:
    """(window, whether odd layers shift): a grid no larger than the window attends whole and
    unshifted; Swin's bias table is built for window_size, so a smaller grid is refused (its bias
    does not fit the scores); Swin V2 clamps the window to the grid (square grids only here)."""
    if min(rows, cols) > window:
        return window, True
    if v2:  # Swinv2Layer._compute_window_shift: per axis, window min(r, w), a shift only where r > w
        sides, shifts = {min(rows, window), min(cols, window)}, {rows > window, cols > window}
        if len(sides) == 1 and len(shifts) == 1:
            return sides.pop(), shifts.pop()
        raise SpecError(f"{c.source}: window_size: stage {i}'s {rows} x {cols} grid gives Swin V2 a non-square window "
                        f"or a shift along one axis only (not modelled: the network stack's windows are square)")
    if min(rows, cols) < window:
        raise SpecError(f"{c.source}: window_size: stage {i}'s {rows} x {cols} grid is smaller than the {window} x "
                        f"{window} window its relative position bias table is built for (image_size / patch_size "
                        f"must leave every stage a grid of at least window_size)")
    return window, False


def swin(c: HFConfig) -> dict:
    """SwinModel / DonutSwinModel (pooled features) or ...ForImageClassification, as a network spec."""
    kind = c.text("model_type")
    name, v2 = architecture(c, kind, HEADS), kind == "swinv2"
    c = HFConfig({**SWIN_DEFAULTS, "hidden_act": "gelu", **c.data}, c.source, c.path)
    pretrained = c.ints("pretrained_window_sizes", [0] * len(c.ints("depths"))) if v2 else None
    if v2 and len(pretrained) != len(c.ints("depths")):
        raise SpecError(f"{c.source}: pretrained_window_sizes: expected one entry per stage, got {pretrained}")
    if c.flag("use_absolute_embeddings"):
        raise SpecError(f"{c.source}: use_absolute_embeddings: a learned position table added to the patch grid "
                        f"not modelled in the network stack")
    depths, heads = c.ints("depths"), c.ints("num_heads")
    if len(depths) != len(heads) or not depths or min(heads) < 1 or min(depths) < 0:
        raise SpecError(f"{c.source}: num_heads: expected one positive entry per stage ({len(depths)}), got {heads}")
    height, width = image_sides(c)
    p, dim, window = c.size("patch_size"), c.size("embed_dim"), c.size("window_size")
    if height % p or width % p:
        raise SpecError(f"{c.source}: patch_size: {p} must divide image_size {height} x {width} (the padded patch "
                        f"grid of SwinPatchEmbeddings is not modelled)")
    rows, cols, act, ratio = height // p, width // p, activation(c), c.number("mlp_ratio", positive=True)
    embeddings = _seq([_seq([{"type": "conv2d", "name": "projection", "out_channels": dim, "kernel_size": p,
                              "stride": p}], "patch_embeddings"), _norm("norm")], "embeddings")
    stages = []
    for i, (depth, n_heads) in enumerate(zip(depths, heads)):
        width_i = dim * 2 ** i
        if width_i % n_heads:
            raise SpecError(f"{c.source}: num_heads: {n_heads} must divide stage {i}'s width {width_i}")
        w, shifts = _stage_window(c, i, rows, cols, window, v2)
        blocks = [swin_layer(width_i, n_heads, w, window // 2 if shifts and j % 2 else 0, int(ratio * width_i), act,
                             c.flag("qkv_bias"), str(j), pretrained[i] if v2 else None) for j in range(depth)]
        stage = [_seq(blocks, "blocks")] if blocks else []
        if i < len(depths) - 1:  # SwinPatchMerging pads odd sides by one; Swin V2 reduces, then normalises
            merge = [_norm("norm"), _conv1x1("reduction", 2 * width_i, bias=False)]
            stage.append(_seq([{"type": "spacetodepth", "block": 2}, *(merge[::-1] if v2 else merge)], "downsample"))
            rows, cols = -(-rows // 2), -(-cols // 2)
        if stage:
            stages.append(_seq(stage, str(i)))
    layers = [embeddings, _seq([_seq(stages, "layers")], "encoder")]
    if kind != "donut-swin":
        layers.append(_norm("layernorm"))
    layers += [{"type": "adaptiveavgpool2d", "name": "pooler", "output_size": 1}, {"type": "flatten"}]
    if name.endswith("ForImageClassification"):
        layers.append({"type": "linear", "name": "classifier", "out_features": labels(c)})
    return {"kind": "network", "input_shape": image_input(c), "layers": layers}


SWIN_NETWORK_MAPPERS = {"swin": swin, "donut-swin": swin, "swinv2": swin}
