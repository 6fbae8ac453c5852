"""What an export returns: the engine's text plus what the engine cannot express."""

from __future__ import annotations

from enum import StrEnum

from modelplan.specs.base import Spec


class Engine(StrEnum):
    """Export targets of `modelplan export --to` (ddp: plain PyTorch DDP/FSDP2 under torchrun)."""

    megatron = "megatron"
    deepspeed = "deepspeed"
    torchtitan = "torchtitan"
    ddp = "ddp"
    json = "json"


class LaunchCommand(Spec):
    """What a launcher (torchrun, srun) starts on every node, and the environment it needs."""

    program: tuple[str, ...]
    """The arguments after `torchrun <geometry>`: a script and its flags, or `-m module ...`."""
    env: tuple[tuple[str, str | None], ...] = ()
    """Environment settings before the launch, in order; None means unset the variable."""
    files: tuple[str, ...] = ()
    """Files the program reads that the export writes (`modelplan export -o`)."""


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
    engine_version: str | None = None
    """The engine release the text is written for (`modelplan.export.versions`)."""
    launch: LaunchCommand | None = None
    """What to start on each node (`modelplan launch` adds torchrun / srun around it)."""
