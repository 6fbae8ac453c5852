"""HF config mapper of Granite 4 Vision (transformers 5.24 modeling_granite4_vision.py,
Granite4VisionForConditionalGeneration): a Granite text model (the deepstack injections add
features, no parameters), the CLIP or SigLIP tower of vision_config, an image_newline row, and
len(deepstack_layer_map) layerwise plus 4 spatial Granite4VisionWindowQFormerDownsamplers. Each:
a LayerNorm over the tower width, query_side^2 learned queries and window_side^2 learned
positions (downsample_rate 'query_side/window_side'), a BLIP-2 Q-Former of the tower's width
(Granite4VisionConfig.__post_init__: hidden_size and encoder_hidden_size = the tower's, heads =
width / 64; hf_n18qformer's layers) over each window, and out_linear to the text width (biased).
An image is one vision_config.image_size crop: (side / window_side)^2 windows of query_side^2
queries; its class defaults have no deepstack_layer_map / downsample_rate, which transformers
needs to build the model: refused."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18mllama import _vec
from modelplan.specs.hf_n18qformer import _QFORMER, _qformer
from modelplan.specs.hf_n18vlm_base import Mapper, _sub, _tower
from modelplan.specs.hf_vision import _norm

_QFORMER_INIT = {"num_hidden_layers": 1, "intermediate_size": 3072, "cross_attention_frequency": 1,
                 "max_position_embeddings": 2048, "use_qformer_text_input": False}
"""Granite4VisionConfig's qformer_config init_kwargs (transformers 5.24), used when it is absent."""
_TEXT = {"vocab_size": 32000, "hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
         "num_attention_heads": 32}
"""Granite4VisionTextConfig's size defaults (transformers 5.24)."""


def _rate(c: HFConfig) -> tuple[int, int]:
    """(query_side, window_side) of downsample_rate 'q/w'."""
    raw = c.data.get("downsample_rate")
    if raw is None:
        raise SpecError(f"{c.source}: downsample_rate: missing (no default: transformers 5.24 cannot build "
                        f"Granite4VisionModel without it either)")
    parts = str(raw).split("/")
    if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise SpecError(f"{c.source}: downsample_rate: expected 'query_side/window_side', got {raw!r}")
    return int(parts[0]), int(parts[1])


def _granite4_vision(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Granite4VisionForConditionalGeneration (module docstring)."""
    layer_map = c.data.get("deepstack_layer_map")
    if not isinstance(layer_map, list):
        raise SpecError(f"{c.source}: deepstack_layer_map: missing (no default: transformers 5.24 cannot build "
                        f"Granite4VisionModel without it either)")
    _, t = _sub(c, "text_config", "granite4_vision_text")
    fields = text_mappers["granite"](HFConfig({**_TEXT, **t.data, "model_type": "granite"}, t.source, t.path))
    tower, v = _tower(c, "clip_vision_model", kinds=("clip_vision_model", "siglip_vision_model"))
    q_side, w_side = _rate(c)
    width, side = tower["hidden"], v.size("image_size") // v.size("patch_size")
    if side % w_side or width % 64:
        raise SpecError(f"{c.source}: downsample_rate: window_side {w_side} must divide the {side}-patch grid and "
                        f"the tower width {width} be a multiple of 64 (the Q-Former's heads)")
    raw = c.data.get("qformer_config")
    q = HFConfig({**_QFORMER, **(_QFORMER_INIT if raw is None else raw), "hidden_size": width,
                  "num_attention_heads": width // 64, "encoder_hidden_size": width}, c.source, "qformer_config.")
    windows, n = (side // w_side) ** 2, len(layer_map) + 4
    layers = _qformer(q, windows * q_side * q_side, width, 0, fields["hidden"], instruct=False)
    layers[0] = _vec("qformer/query_tokens", width, q_side * q_side)  # the queries are shared by the windows
    connector = [{**layer, "name": f"downsamplers/{layer['name']}", "copies": layer.get("copies", 1) * n}
                 for layer in layers]
    connector += [{**_norm("downsamplers/norm", width, copies=n), "rows": side * side},
                  _vec("downsamplers/image_positions", width, w_side * w_side * n), _vec("image_newline", fields["hidden"])]
    tower["connector"] = connector
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", False)
    return fields


GRANITE4_VISION_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {
    "granite4_vision": _granite4_vision}
