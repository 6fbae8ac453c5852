"""HF config mapper of Granite-Docling (transformers 5.24 modeling_granite_docling.py): a Granite
text model, a SigLIP-shaped tower and its connector (pixel shuffle + projection, fixed sine-cosine
positions, DeepStack mergers injected into the first text blocks, a coarse and a fine path)."""

from __future__ import annotations

from typing import Callable

from modelplan.errors import SpecError
from modelplan.specs.hf_config import HFConfig
from modelplan.specs.hf_n18vlm_base import _siglip
from modelplan.specs.hf_vision import _linear, _norm

Mapper = Callable[[HFConfig], dict]

_TEXT = {"vocab_size": 133800, "hidden_size": 1024, "intermediate_size": 2048, "num_hidden_layers": 28,
         "num_attention_heads": 16, "num_key_value_heads": 4, "max_position_embeddings": 32768, "rms_norm_eps": 1e-5,
         "embedding_multiplier": 12.0, "logits_scaling": 4.0, "residual_multiplier": 0.263,
         "attention_multiplier": 0.015625, "tie_word_embeddings": True}
_VISION = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12, "num_attention_heads": 12,
           "num_channels": 3, "image_size": 512, "patch_size": 16}
"""GraniteDoclingTextConfig / GraniteDoclingVisionConfig defaults (transformers 5.24)."""


def _path(name: str, h: int, out: int, scale: int, deep: int, priced: bool) -> list[dict]:
    """GraniteDoclingConnectorPath: Linear(h s^2, out, bias=False) after a pixel shuffle by s, and
    one DeepStack merger per tapped layer (LayerNorm(h s^2), linear_1 -> out, GELU, linear_2,
    biased); the sine-cosine positions are a buffer. Unpriced: the fine path, which replaces the
    coarse one on dense pages, is counted as learned vectors (no FLOPs) beside it."""
    s2 = scale ** 2
    if priced:
        layers = [_linear(f"{name}/projection", h * s2, out, False, s2)]
        if deep:
            layers += [_norm(f"{name}/deepstack/norm", h * s2, merge=s2, copies=deep),
                       _linear(f"{name}/deepstack/linear_1", h * s2, out, True, s2, deep),
                       _linear(f"{name}/deepstack/linear_2", out, out, True, s2, deep)]
        return layers

    def vector(part: str, width: int, copies: int) -> dict:
        return dict(name=f"{name}/{part}", kind="vector", in_features=width, copies=copies)

    layers = [vector("projection", out, h * s2)]  # its weight's rows
    if deep:  # norm weight + bias, linear_1 weight rows, two biases, linear_2 weight rows
        layers += [vector("deepstack/norm", h * s2, 2 * deep), vector("deepstack/linear_1", out, deep * h * s2),
                   vector("deepstack/biases", out, 2 * deep), vector("deepstack/linear_2", out, deep * out)]
    return layers


def _granite_docling(c: HFConfig, text_mappers: dict[str, Mapper]) -> dict:
    """Granite-Docling: Granite text model (multipliers, tied), GraniteDoclingVisionModel (SigLIP
    blocks, post_layernorm, no head) and GraniteDoclingConnector: ln_in, the coarse path at
    scale_factor, the fine path at scale_factor / 2 when use_fine_route, ln_mid, mlp_fc2
    (out -> out, no bias), ln_out; the optional density router (att Linear(h, 1), LayerNorm,
    fc1 / fc2 of density_router_hidden_size) pools each sample's tiles."""
    text = c.sub("text_config")
    text = HFConfig({**_TEXT, **(text.data if text is not None else {})}, c.source, "text_config.")
    fields = text_mappers["granite"](text)
    v = c.sub("vision_config", {})
    v = HFConfig({**_VISION, **v.data, "vision_use_head": False}, v.source, v.path)
    tower = _siglip(v)
    h, out = tower["hidden"], v.integer("out_hidden_size", 1024)
    scale, deep = v.integer("scale_factor", 4), len(v.ints("deepstack_visual_indexes", [3, 7, 10]))
    if out != fields["hidden"]:  # GraniteDoclingConfig.validate_architecture
        raise SpecError(f"{c.source}: vision_config.out_hidden_size: {out} must equal text_config.hidden_size "
                        f"{fields['hidden']}")
    fine = v.flag("use_fine_route", True)
    if fine and scale < 2:
        raise SpecError(f"{c.source}: vision_config.scale_factor: must be >= 2 with use_fine_route, got {scale}")
    s2 = scale ** 2
    connector = []
    router = c.integer("density_router_hidden_size", None)
    if router is not None and not fine:  # GraniteDoclingConfig.validate_architecture
        raise SpecError(f"{c.source}: density_router_hidden_size: the router needs vision_config.use_fine_route true")
    if router is not None:  # once per tile (att over its patches) and per sample (fc1 / fc2)
        connector += [_linear("density_router/att", h, 1, True), {**_norm("density_router/norm", h), "rows": 1},
                      {**_linear("density_router/fc1", h, router, True), "rows": 1},
                      {**_linear("density_router/fc2", router, 1, True), "rows": 1}]
    connector += [_norm("ln_in", h), *_path("coarse", h, out, scale, deep, True)]
    if fine:
        connector += _path("fine", h, out, scale // 2, deep, False)
    connector += [_norm("ln_mid", out, merge=s2), _linear("mlp_fc2", out, out, False, s2), _norm("ln_out", out, merge=s2)]
    tower["connector"] = connector
    fields["vision"] = tower
    fields["tied_embeddings"] = c.flag("tie_word_embeddings", True)
    return fields


DOCLING_MAPPERS: dict[str, Callable[[HFConfig, dict[str, Mapper]], dict]] = {"granite_docling": _granite_docling}
