"""Which release of each engine an exporter writes for (`modelplan export --engine-version`).

Each exporter emits what one named release accepts; the tests feed every golden export to that
release's own code (tests/test_export_engines.py, installed by README's test command). A new
release is one more entry here plus whatever its exporter changes.
"""

from __future__ import annotations

from modelplan.errors import ModelplanError
from modelplan.export.result import Engine
from modelplan.specs.base import Spec


class EngineRelease(Spec):
    """One release an exporter targets."""

    version: str
    """The release name as its project spells it."""
    source: str
    """Where its rules were read: repository @ commit (or the PyPI release checked in CI)."""


RELEASES: dict[Engine, tuple[EngineRelease, ...]] = {
    # Megatron-LM is not a package: its arguments.py rules are read at the tag of the
    # megatron-core release CI installs (core_v0.16.1, the last for Python 3.11).
    Engine.megatron: (
        EngineRelease(
            version="core_v0.16.1",
            source="NVIDIA/Megatron-LM megatron/training/arguments.py @ "
            "55ac7082517c3878ae653c07c09c534b8aed49f6 (tag core_v0.16.1; megatron-core 0.16.1)",
        ),
    ),
    Engine.deepspeed: (
        EngineRelease(version="0.19.8", source="deepspeed 0.19.8 (PyPI), DeepSpeedConfig"),
    ),
    Engine.torchtitan: (
        EngineRelease(
            version="0.3.0",
            source="torchtitan 0.3.0 (PyPI): Python config registry read by "
            "torchtitan.config.ConfigManager (--module/--config)",
        ),
    ),
    Engine.ddp: (
        EngineRelease(version="torch-2.13", source="torch 2.13 torchrun and DDP/FSDP2 (fully_shard)"),
    ),
}


def release(engine: Engine, version: str | None = None) -> EngineRelease:
    """The release `version` of `engine` (its newest supported one when None); an unsupported
    version is a one-line error listing the supported ones."""
    known = RELEASES.get(engine, ())
    if not known:
        raise ModelplanError(f"--engine-version: '{engine.value}' has no engine versions")
    if version is None:
        return known[-1]
    for entry in known:
        if entry.version == version:
            return entry
    choices = ", ".join(entry.version for entry in known)
    raise ModelplanError(
        f"--engine-version: {engine.value} {version} is not supported (choose {choices})"
    )
