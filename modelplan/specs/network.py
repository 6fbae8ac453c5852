"""Generic network spec for MLPs, CNNs and RNNs (filled in by the network-spec work)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from modelplan.specs.base import Spec


class NetworkSpec(Spec):
    """A feed-forward list of layers (placeholder: the full layer union lands with issue 2)."""

    kind: Literal["network"] = "network"
    """Spec discriminator."""
    name: str = "network"
    """Display name."""
    source: str = ""
    """Where the architecture comes from."""
    input_shape: list[int] = Field(default_factory=list)
    """Shape of one sample, without the batch dimension."""
    layers: list[dict] = Field(default_factory=list)
    """Layers in order."""
