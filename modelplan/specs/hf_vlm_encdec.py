"""HF config mappers of the vision-language encoder-decoders (transformers 5.24): Florence-2 (a DaViT
tower feeding BART's encoder). The text model is mapped by its own model_type's mapper
(hf.MAPPERS); the tower and projector are a `VisionSpec` (count/vision.py), priced per image."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_davit import DAVIT_DEFAULTS, davit_tower
from modelplan.specs.hf_n18vlm_base import Mapper, _sub
from modelplan.specs.hf_vision import _linear, _norm

BART_DEFAULTS = {"vocab_size": 50265, "max_position_embeddings": 1024, "encoder_layers": 12, "encoder_ffn_dim": 4096,
                 "encoder_attention_heads": 16, "decoder_layers": 12, "decoder_ffn_dim": 4096,
                 "decoder_attention_heads": 16, "d_model": 1024}
"""BartConfig size defaults (transformers 5.24 configuration_bart.py)."""

FLORENCE2_IMAGE_SIZE = 768
"""Pixels per side of one Florence-2 image (microsoft/Florence-2-base preprocessor_config.json:
crop_size / size 768 x 768); vision_config.image_size overrides it."""


def _encoder_decoder_text(c: HFConfig, text_mappers: dict[str, Mapper], default_type: str, defaults: dict) -> dict:
    """The text_config mapped by its model_type's mapper over `defaults`; it must be an encoder-decoder."""
    kind, text = _sub(c, "text_config", default_type)
    mapper = text_mappers.get(kind)
    if mapper is None:
        raise SpecError(f"{c.source}: text_config.model_type: unsupported '{kind}'")
    fields = mapper(HFConfig({**(defaults if kind == default_type else {}), **text.data}, c.source, text.path))
    if fields.get("arch") != "encoder_decoder" or "vision" in fields:
        raise SpecError(f"{c.source}: text_config.model_type: '{kind}' is not a text encoder-decoder")
    return fields


def _florence2(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Florence-2: BART encoder-decoder (its head tied to `shared`) whose encoder reads the image
    tokens, the DaViT tower (hf_davit.py) and Florence2MultiModalProjector: a learned 2-D position
    table (row / column nn.Embedding(max_position_embeddings, d / 2) each, added to the grid), the
    grid's mean prepended (one more token), image_projection Linear(d, projection_dim, bias=False)
    and image_proj_norm LayerNorm; the 1-D temporal sinusoids are a buffer."""
    fields = _encoder_decoder_text(c, text_mappers, "bart", BART_DEFAULTS)
    _, v = _sub(c, "vision_config", "florence_vision")
    v = HFConfig({**DAVIT_DEFAULTS, **v.data}, v.source, v.path)
    image = v.integer("image_size", FLORENCE2_IMAGE_SIZE)
    tower, side, stride = davit_tower(v, image)
    d, out, rows = v.ints("embed_dim")[-1], v.integer("projection_dim"), side * side + 1
    if side > v.integer("max_position_embeddings"):
        raise SpecError(f"{c.source}: vision_config.max_position_embeddings ({v.integer('max_position_embeddings')}) "
                        f"is smaller than the {side} x {side} feature grid of a {image} px image")
    depths = v.ints("depths")
    fields["vision"] = dict(
        layers=sum(depths) or 1, hidden=d, heads=v.ints("num_heads")[-1], ffn_hidden=int(d * v.number("mlp_ratio")),
        patch_size=stride, image_size=image, channels=v.integer("in_channels"), tower=tower,
        connector=[dict(name="image_position_embed", kind="vector", in_features=v.integer("max_position_embeddings") * d),
                   {**_linear("image_projection", d, out, False), "rows": rows},
                   {**_norm("image_proj_norm", out), "rows": rows}])
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


VLM_ENCDEC_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"florence2": _florence2}
"""Composite model_types; each takes the config and the text model_type -> mapper table."""
