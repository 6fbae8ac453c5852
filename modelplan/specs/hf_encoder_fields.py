"""Helpers the HF encoder mappers of specs/hf_encoders_more.py, hf_encoders_layout.py and
hf_encoders_llama.py share: a config with the class defaults a mapper reads, side groups
(specs/encoder_side.py) added to mapped fields, the RoPE base, and a head hook keeping the pooler."""

from __future__ import annotations

from typing import Callable

from modelplan.specs.hf_config import HFConfig


def defaulted(c: HFConfig, **keys) -> HFConfig:
    """`c` with some keys defaulted (the config class defaults BERT's mapper would read otherwise)."""
    return HFConfig({**keys, **c.data}, c.source, c.path, c.defaults)


def with_side(fields: dict, embedding: list[dict] | None = None, block: list[dict] | None = None,
              head: list[dict] | None = None) -> dict:
    """`fields` with side groups added to its extras."""
    extras = dict(fields.get("extras") or {})
    extras["side"] = {"embedding": embedding or [], "block": block or [], "head": head or []}
    return {**fields, "extras": extras}


def rope_theta_of(c: HFConfig, default: float) -> float:
    """rope_parameters.rope_theta, else rope_theta, else the config class's default_theta."""
    nested = c.sub("rope_parameters")
    if nested is not None and nested.has("rope_theta"):
        return nested.number("rope_theta")
    return c.number("rope_theta", default)


def pooled_always(fields: dict, c: HFConfig, apply_head: Callable, architecture: Callable) -> dict:
    """BERT's heads over a body that keeps its pooler under every head (LayoutLMModel builds
    LayoutLMPooler whatever the head; so do FNet and SqueezeBERT)."""
    return {**apply_head(fields, c, architecture(c)), "pooler": True}
