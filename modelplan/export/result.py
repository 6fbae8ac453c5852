"""What an export returns: the engine's text plus what the engine cannot express."""

from __future__ import annotations

from enum import StrEnum

from modelplan.specs.base import Spec


class Engine(StrEnum):
    """Export targets of `modelplan export --to`."""

    megatron = "megatron"
    deepspeed = "deepspeed"
    torchtitan = "torchtitan"
    json = "json"


class EngineExport(Spec):
    """A ready-to-use launch config for one engine."""

    engine: Engine
    """Which engine the text is for."""
    text: str
    """The file contents: a shell snippet, ds_config.json, a torchtitan TOML or the plan JSON."""
    unsupported: tuple[str, ...] = ()
    """What the plan asks for that the engine cannot express (also stated inside `text`)."""
    filename: str
    """A conventional file name for the text (`-o` overrides it)."""
