"""HF HGNetV2 (PaddlePaddle's PP-HGNetV2; transformers 5.24 modeling_hgnet_v2.py
HGNetV2ForImageClassification) as a network spec (`specs.network`).

HGNetV2ConvLayer is Conv2d(bias=False, padding (k - 1) // 2) + BatchNorm2d + the activation (none
where transformers passes None). The stem: stem1, a bottom / right zero pad, then the stacked pair
[MaxPool2d(2, stride 1, ceil) of the padded map, stem2b(pad(stem2a(padded)))] (the `concat`
residual, the pool as its shortcut), stem3, stem4. Per stage an optional depthwise 3x3 stride
downsample (no activation), then stage_num_blocks HG blocks: layer_num conv layers in a chain
(light blocks: a 1x1 conv without activation, then a depthwise k x k), the block input and every
layer's output stacked along the channels (nested `concat` residuals: [x, f1(x), f2(f1(x)), ...]),
aggregated by a 1x1 squeeze conv to out / 2 and a 1x1 excitation conv to out, with the block
input added from the second block on. The head: the mean over the grid, Linear(hidden_sizes[-1],
num_labels).
"""

from __future__ import annotations

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_convnets import activation, image_input
from modelplan.specs.hf_resnet import IMAGE_SIZE, _conv, _seq
from modelplan.specs.hf_vision_models import architecture, labels, with_defaults

HEADS = {"hgnet_v2": ("HGNetV2ForImageClassification",)}
"""model_type -> the classes whose head is modelled (HGNetV2Backbone returns feature maps: refused)."""

DEFAULTS = {"hgnet_v2": {"num_channels": 3, "hidden_sizes": [256, 512, 1024, 2048], "hidden_act": "relu",
                         "stem_channels": [3, 32, 48], "stem_strides": [2, 1, 1, 2, 1],
                         "stage_in_channels": [48, 128, 512, 1024], "stage_mid_channels": [48, 96, 192, 384],
                         "stage_out_channels": [128, 512, 1024, 2048], "stage_num_blocks": [1, 1, 3, 1],
                         "stage_downsample": [False, True, True, True], "stage_downsample_strides": [2, 2, 2, 2],
                         "stage_light_block": [False, False, True, True], "stage_kernel_size": [3, 3, 5, 5],
                         "stage_numb_of_layers": [6, 6, 6, 6], "use_learnable_affine_block": False,
                         "image_size": IMAGE_SIZE}}
"""HGNetV2Config defaults (transformers 5.24 configuration_hgnet_v2.py); it states no image size: hf_resnet's 224."""

STAGE_KEYS = ("stage_in_channels", "stage_mid_channels", "stage_out_channels", "stage_num_blocks",
              "stage_downsample_strides", "stage_kernel_size", "stage_numb_of_layers")
FLAG_KEYS = ("stage_downsample", "stage_light_block")
PAD = {"type": "zeropad2d", "padding": [0, 1, 0, 1]}  # F.pad(x, (0, 1, 0, 1)) in HGNetV2Embeddings


def conv_layer(out: int, kernel: int, stride: int, act: str | None, name: str | None = None, groups: int = 1) -> dict:
    """HGNetV2ConvLayer: hf_resnet's conv layer with transformers' (kernel - 1) // 2 padding."""
    layer = _conv(out, kernel, stride, act, name, groups)
    layer["layers"][0]["padding"] = (kernel - 1) // 2
    return layer


def _stacked(chain: list[list[dict]]) -> dict:
    """[x, f1(x), f2(f1(x)), ...] along the channels: each conv layer's items, then the rest stacked on its output."""
    head, *rest = chain
    return {"type": "residual", "name": "layers", "combine": "concat",
            "main": [*head, *([_stacked(rest)] if rest else [])]}


def hg_block(c_in: int, mid: int, out: int, layers: int, kernel: int, light: bool, residual: bool, act: str) -> dict:
    """HGNetV2BasicLayer."""
    if light:
        chain = [[_seq([conv_layer(mid, 1, 1, None, "conv1"), conv_layer(mid, kernel, 1, act, "conv2", groups=mid)])]
                 for _ in range(layers)]
    else:
        chain = [[conv_layer(mid, kernel, 1, act)] for _ in range(layers)]
    main = [_stacked(chain), _seq([conv_layer(out // 2, 1, 1, act), conv_layer(out, 1, 1, act)], "aggregation")]
    if residual:
        return {"type": "residual", "main": main}
    return _seq(main)


def hgnet_v2(c: HFConfig) -> dict:
    """HGNetV2ForImageClassification as a network spec."""
    architecture(c, "hgnet_v2", HEADS)
    c = with_defaults(c, "hgnet_v2", DEFAULTS)
    if c.flag("use_learnable_affine_block"):
        raise SpecError(f"{c.source}: use_learnable_affine_block: the scalar scale-and-bias after each activation "
                        f"(HGNetV2LearnableAffineBlock) not modelled in the network stack")
    act, stem, strides = activation(c), c.ints("stem_channels"), c.ints("stem_strides")
    if len(stem) != 3 or len(strides) != 5 or stem[0] != c.size("num_channels") or min(stem + strides) < 1:
        raise SpecError(f"{c.source}: stem_channels: {stem} and stem_strides {strides} must be 3 and 5 positive "
                        f"entries, stem_channels[0] the image's num_channels ({c.size('num_channels')})")
    lists = [c.ints(key) for key in STAGE_KEYS]
    flags = [c.data.get(key) for key in FLAG_KEYS]
    stages = len(lists[0])
    if any(len(v) != stages for v in lists) or any(not isinstance(f, list) or len(f) != stages for f in flags):
        raise SpecError(f"{c.source}: stage_in_channels: the per-stage lists must have {stages} entries each: "
                        + ", ".join(f"{k} {v}" for k, v in zip(STAGE_KEYS + FLAG_KEYS, lists + flags)))
    embedder = _seq([conv_layer(stem[1], 3, strides[0], act, "stem1"), PAD,
                     {"type": "residual", "name": "stem2", "combine": "concat",
                      "main": [conv_layer(stem[1] // 2, 2, strides[1], act, "stem2a"), PAD,
                               conv_layer(stem[1], 2, strides[2], act, "stem2b")],
                      "shortcut": [{"type": "maxpool2d", "kernel_size": 2, "stride": 1, "ceil_mode": True}]},
                     conv_layer(stem[1], 3, strides[3], act, "stem3"), conv_layer(stem[2], 1, strides[4], act, "stem4")],
                    "embedder")
    layers, width = [], stem[2]
    for i in range(stages):
        c_in, mid, out, blocks, stride, kernel, depth = (v[i] for v in lists)
        if c_in != width or min(mid, out, blocks, stride, kernel, depth) < 1:
            raise SpecError(f"{c.source}: stage_in_channels: stage {i} takes {c_in} channels, the layer before gives "
                            f"{width} (every stage size must be positive)")
        stage = [conv_layer(c_in, 3, stride, None, "downsample", groups=c_in)] if flags[0][i] else []
        stage.append(_seq([hg_block(c_in if j == 0 else out, mid, out, depth, kernel, bool(flags[1][i]), j > 0, act)
                           for j in range(blocks)], "blocks"))
        layers.append(_seq(stage, str(i)))
        width = out
    if c.ints("hidden_sizes")[-1:] != [width]:
        raise SpecError(f"{c.source}: hidden_sizes: the classifier reads hidden_sizes[-1] "
                        f"({c.ints('hidden_sizes')[-1:]}) features, the last stage gives {width}")
    return {"kind": "network", "input_shape": image_input(c),
            "layers": [embedder, _seq([_seq(layers, "stages")], "encoder"),
                       {"type": "adaptiveavgpool2d", "name": "avg_pool", "output_size": 1}, {"type": "flatten"},
                       {"type": "linear", "name": "fc", "out_features": labels(c)}]}


HGNET_MAPPERS = {"hgnet_v2": hgnet_v2}
