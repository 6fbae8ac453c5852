"""HF ALIGN (Jia et al. 2021; transformers 5.24 modeling_align.py AlignModel): a BERT text tower
(AlignTextModel, with its pooler) whose [CLS] token text_projection Linear(h, projection_dim)
projects, the EfficientNet vision tower (AlignVisionModel: hf_efficientnet's stem and blocks, no
top_conv, the mean over the grid) and the learned temperature (1).

The vision tower is the network stack's EfficientNet written as `VisionSpec.tower` layers
(`tower_layers`): each conv a tower conv on its output positions, each BatchNorm2d the per-channel
weight and bias of a norm; parameter-free layers (activations, pools, the squeeze-and-excitation
gate) have no tower layer.
"""

from __future__ import annotations

import math

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_efficientnet import DEFAULTS as EFFICIENTNET_DEFAULTS, efficientnet_layers
from modelplan.specs.hf_gpt import GPT_MAPPERS
from modelplan.specs.hf_vision_models import architecture
from modelplan.specs.layers import BatchNorm, Conv, Linear
from modelplan.specs.network import NetworkSpec
from modelplan.specs.network_walk import walk

HEADS = {"align": ("AlignModel",)}
_BERT_BASE = {"vocab_size": 30522, "hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
              "num_attention_heads": 12}
"""AlignTextConfig's size defaults (transformers 5.24: BERT-base's)."""


def tower_layers(layers: list[dict], input_shape: list[int]) -> tuple[list[dict], tuple[int, ...]]:
    """(VisionSpec.tower layers, output shape) of a network layer list over one image: convs on
    their output positions, BatchNorm2d as a biased norm over its channels, Linears."""
    spec = NetworkSpec.model_validate({"input_shape": input_shape, "layers": layers})
    out, shape = [], tuple(input_shape)
    for leaf in walk(spec.layers, shape):
        layer, positions = leaf.layer, math.prod(leaf.output_shape[1:]) or 1
        if isinstance(layer, Conv):
            out.append(dict(name=leaf.path, kind="conv", in_features=leaf.input_shape[0],
                            out_features=layer.out_channels, kernel=layer.kernel_size, groups=layer.groups,
                            bias=layer.bias, rows=positions))
        elif isinstance(layer, BatchNorm):
            out.append(dict(name=leaf.path, kind="layernorm", in_features=leaf.input_shape[0], bias=True,
                            rows=positions))
        elif isinstance(layer, Linear):
            out.append(dict(name=leaf.path, kind="linear", in_features=leaf.input_shape[-1],
                            out_features=layer.out_features, bias=layer.bias, rows=1))
        shape = leaf.output_shape
    return out, shape


def align(c: HFConfig) -> dict:
    """AlignModel: the text tower with text_projection, the EfficientNet tower, the temperature."""
    architecture(c, "align", HEADS)
    raw = c.data.get("text_config") or {}
    vision = c.data.get("vision_config") or {}
    if not isinstance(raw, dict) or not isinstance(vision, dict):
        raise SpecError(f"{c.source}: text_config / vision_config: expected objects")
    fields = GPT_MAPPERS["bert"](HFConfig({**_BERT_BASE, **raw}, c.source, "text_config."))
    fields.update(pooler=True, classifier={"num_labels": c.integer("projection_dim", 640)})  # text_projection
    v = HFConfig({**EFFICIENTNET_DEFAULTS["efficientnet"], **vision}, c.source, "vision_config.")
    side = v.size("image_size")
    tower, (channels, rows, _) = tower_layers(efficientnet_layers(v, top_conv=False), [v.size("num_channels"), side, side])
    fields["vision"] = dict(layers=len([t for t in tower if t["name"].endswith("project_conv")]) or 1, hidden=channels,
                            heads=1, ffn_hidden=channels, patch_size=max(1, side // rows), image_size=side,
                            channels=v.size("num_channels"), tower=tower,
                            connector=[dict(name="temperature", kind="vector", in_features=1)])
    return fields


ALIGN_MAPPERS = {"align": align}
